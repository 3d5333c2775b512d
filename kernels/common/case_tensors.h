// Seeded test tensors the kernels' case builders share (qkv_case, mlp_case): values drawn from the
// counter-based RNG keyed by (seed, tensor name), so a case is the same in every process and on
// every run (up to the last bit of the C library's log, cos, sin). Host code only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

// Stores values into t in its dtype. fp8 e4m3 goes through a table indexed by each value's bf16
// bits: any fp8 value is valid test data, and a lookup is far cheaper than a full conversion for
// 10^8 weights. REQUIRES: v.size() == t.numel(), t contiguous.
void StoreValues(const std::vector<float>& v, const TensorView& t);

// N(0, 1) * scale values, then clipped to [-clip, clip] when clip > 0, stored in `dtype`.
// Box-Muller in fp32 on two 24-bit uniforms cut from one 64-bit draw gives a pair per draw.
TensorView GaussianTensor(uint64_t seed, const std::string& name, const Shape& shape, DType dtype,
                          float clip = 0.0f, float scale = 1.0f);

// `row` repeated on `rows` rows, fp32 [rows, row.size()].
TensorView RepeatedRows(const std::string& name, const std::vector<float>& row, int64_t rows);

// ROW quantisation of w [h, i] (row-major): s[c] = max_k |w[k, c]| / max(fp8) (1 for a zero
// column), weights w / s stored in fp8 [h, i], s as fp32 [scale_rows, i] with identical rows.
struct RowQuantized {
  TensorView weights;
  TensorView scale;
};
RowQuantized RowQuantize(const std::vector<float>& w, int64_t h, int64_t i, DType fp8,
                         const std::string& name, const std::string& scale_name,
                         int64_t scale_rows);

}  // namespace nkisim::kernels
