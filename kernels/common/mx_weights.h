// MX weight packing, shared by the MX paths of qkv and o_proj and by `nkisim pack-weights`: a
// [K, N] weight (K the contraction axis: H for qkv, N*D for o_proj) becomes x4 data [K/4, N] and
// E8M0 scales [K/32, N], the layout nc_matmul_mx consumes once K/4 is on the partitions.
//
// Packed row r holds 4 source rows, value j from row MxSourceRow(layout, K, r, j):
//   kContiguous:  4 r + j                                   (QKVWeightLayout.MX_CONTIGUOUS)
//   kInterleaved: h_idx[4 r + j], h_idx = arange(K).reshape(2, K/4, 2).transpose(1, 0, 2).flatten()
//                 i.e. rows {2 r, 2 r + 1, K/2 + 2 r, K/2 + 2 r + 1}   (MX_INTERLEAVED)
// Scale row g covers packed rows [8 g, 8 g + 8) of its column: one MX block of 32 values, scaled
// by mx::BlockScale exactly as nisa::quantize_mx scales activations (runtime/mx.h).
//
// Host-side library calls: no simulated cost. Errors: Error(kInvalidArgument) naming the tensor,
// its shape or dtype and the rule; nothing is returned half-made.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/dtype.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

enum class MxWeightLayout { kContiguous, kInterleaved };
const char* MxWeightLayoutName(MxWeightLayout layout);  // "MX_CONTIGUOUS", "MX_INTERLEAVED"
// Accepts the names above (and "contiguous" / "interleaved"); throws kInvalidArgument otherwise.
MxWeightLayout ParseMxWeightLayout(const std::string& name);

// The source row of packed value (packed_row, j). REQUIRES: k % 4 == 0, packed_row < k / 4, j < 4.
int64_t MxSourceRow(MxWeightLayout layout, int64_t k, int64_t packed_row, int j);

struct MxPackedWeights {
  TensorView data;    // [K/4, N], an x4 dtype
  TensorView scales;  // [K/32, N] uint8 (E8M0); all mx::kNeutralScale for per-tensor packing
};

// Quantizes w [K, N] (any float dtype) per 32-value block into `x4` (fp8_e4m3fn_x4, fp8_e5m2_x4 or
// fp4_e2m1fn_x4). REQUIRES: K % 32 == 0 (and K even for kInterleaved, implied).
MxPackedWeights PackMxWeights(const TensorView& w, MxWeightLayout layout, DType x4,
                              const std::string& name);

// Already-quantized fp8_e4m3fn weights [K, N] (per-tensor or per-column scaled, STATIC_MX and
// ROW_MX) repacked code for code into fp8_e4m3fn_x4 with neutral scales. REQUIRES: K % 32 == 0.
MxPackedWeights PackFp8WeightsX4(const TensorView& w_fp8, MxWeightLayout layout,
                                 const std::string& name);

// The dequantized weights [K, N] fp32 in source row order: value * 2^(scale - 127).
// REQUIRES: data [K/4, N] x4 and scales [K/32, N] uint8.
TensorView UnpackMxWeights(const MxPackedWeights& packed, MxWeightLayout layout,
                           const std::string& name);

}  // namespace nkisim::kernels
