// Seeded inputs of one output-projection case, drawn as the reference suites draw theirs
// (test_output_proj_cte.py:49-89, test_output_proj_tkg.py:70-128), from the counter-based RNG so
// a (seed, case) pair always gives the same tensors:
//   CTE  attention and weight U[0, 1); STATIC: weight U[-240, 240) in fp8, input and weight scale
//        one U[0, 1) / 256 value repeated over (P, 1).
//   TKG  NONE: attention and weight N(0, 1). STATIC / ROW: attention U[-1, 1), real weights
//        U[-1, 1) quantized to fp8 by s_w = max|W| / 240 (ROW: per column, repeated over (P, H)),
//        s_in = max|A| / 240 * U(0.995, 1.005).
//   CTE MX modes (weights x4-packed MX_CONTIGUOUS along K = N*D, kernels/common/mx_weights.h):
//        attention U[0, 1) as above;
//        MX: weight U[0, 1) packed by PackMxWeights into fp4_e2m1fn_x4 [N*D/4, H] with its E8M0
//            scales as weight_scale uint8 [N*D/32, H];
//        STATIC_MX: weight U[-448, 448) in fp8_e4m3fn (the STATIC draw at the e4m3fn max),
//            repacked by PackFp8WeightsX4; input and weight scale as STATIC;
//        ROW_MX: real weights U[-1, 1) quantized per column by s_w[h] = max_k |W[k, h]| / 448 into
//            fp8_e4m3fn (the TKG ROW draw), repacked by PackFp8WeightsX4; weight_scale (P, H).
//        When N*D is not a multiple of 32 (the kernel refuses it) the weight (and MX scale) are
//        zero-filled x4 tensors of [N*D/4, H] ([N*D/32, H]), rounded down, so the kernel's own
//        rule is what a caller sees.
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
  DType fp8_dtype = DType::kFp8E4M3;  // the weight dtype of STATIC / ROW (MX modes: e4m3fn)
};

// partitions: P of the scale tensors (the profile's partitions). The quantization is c's.
OutputProjectionInputs MakeCteInputs(const OprojCase& c, uint64_t seed, int64_t partitions);
OutputProjectionInputs MakeTkgInputs(const OprojCase& c, uint64_t seed, int64_t partitions);

// The golden's view of these inputs; rounded: model the kernel's fp8 rounding of the STATIC
// quantized attention (see reference::OprojRefInputs; the MX modes' goldens always model theirs).
reference::OprojRefInputs ReferenceInputs(const OutputProjectionInputs& in, bool rounded = false);

}  // namespace nkisim::kernels
