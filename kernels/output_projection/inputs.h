// Seeded inputs of one output-projection case, drawn as the reference suites draw theirs
// (test_output_proj_cte.py:49-89, test_output_proj_tkg.py:70-128), from the counter-based RNG so
// a (seed, case) pair always gives the same tensors:
//   CTE  attention and weight U[0, 1); STATIC: weight U[-240, 240) in fp8, input and weight scale
//        one U[0, 1) / 256 value repeated over (P, 1).
//   TKG  NONE: attention and weight N(0, 1). STATIC / ROW: attention U[-1, 1), real weights
//        U[-1, 1) quantized to fp8 by s_w = max|W| / 240 (ROW: per column, repeated over (P, H)),
//        s_in = max|A| / 240 * U(0.995, 1.005).
//   bias N(0, 100^2) in the attention dtype.
// Used by the tests and by `nkisim kernel oproj`.
#pragma once

#include <cstdint>

#include "kernels/output_projection/output_projection.h"
#include "kernels/reference/output_projection_ref.h"
#include "runtime/dtype.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

struct OprojCase {
  int64_t b = 1, n = 1, d = 128, s = 1, h = 512;
  QuantizationType quantization = QuantizationType::kNone;
  bool bias = true;
  DType dtype = DType::kBFloat16;     // attention, bias and non-quantized weight
  DType fp8_dtype = DType::kFp8E4M3;  // the weight dtype of STATIC / ROW
};

// partitions: P of the scale tensors (the profile's partitions). The quantization is c's.
OutputProjectionInputs MakeCteInputs(const OprojCase& c, uint64_t seed, int64_t partitions);
OutputProjectionInputs MakeTkgInputs(const OprojCase& c, uint64_t seed, int64_t partitions);

// The golden's view of these inputs; rounded: model the kernel's fp8 rounding of the quantized
// attention (see reference::OprojRefInputs). REQUIRES: quantization is NONE, STATIC or ROW.
reference::OprojRefInputs ReferenceInputs(const OutputProjectionInputs& in, bool rounded = false);

}  // namespace nkisim::kernels
