// Golden references of the output projection kernels (CTE and TKG), as the reference suites'
// torch goldens compute them, with fp64 accumulation over the stored input values:
//   NONE    y = A @ W + bias
//   STATIC  y = (clip(A / s_in, +-fp8_max) @ W) * (s_w * s_in) + bias  (s_in, s_w: row 0 of (P, 1))
//   ROW     y = (A @ W) * s_w[h] + bias                              (s_w: row 0 of (P, H))
// and the MX modes of the CTE kernel, whose weight is x4-packed along the contraction
// (MX_CONTIGUOUS: packed row r holds contraction rows 4 r .. 4 r + 3, kernels/common/mx_weights.h)
// and is dequantized by kernels/reference/mx_ref.h (MxUnpackWeightsRef):
//   MX        y = MXQ(A) @ deq(W_fp4, E8M0 weight_scale) + bias
//   STATIC_MX y = (fp8(clip(A / s_in, +-448)) @ deq(W_fp8x4)) * (s_w * s_in) + bias
//   ROW_MX    y = (MXQ(A) @ deq(W_fp8x4)) * s_w[h] + bias             (s_w: row 0 of (P, H))
// where MXQ is the MX fp8_e4m3fn round trip of every 32 consecutive contraction values of a row
// (MxQuantizeDequantizeRef), fp8() the fp8_e4m3fn rounding (MxEncodeRef, saturating at 448), and
// deq(W_fp8x4) the fp8 codes under the neutral scale 127 (x 1).
// A [B*S, N*D] is the attention with row b*S + s and column n*D + k. fp8_max is the largest
// finite value of the weight's fp8 dtype (240 for trn2 e4m3). fp64, BLAS dgemm over row blocks:
// kRowBlock (256, blas.h) rows of A at a time are read from HBM and quantized in fp64, then one
// cblas_dgemm with the fp64 weights (converted once per call); peak extra memory is the fp64
// weights plus O(kRowBlock x (N*D + H)), besides the result. No tiles, no ISA, no kernel code. Also
// the reference suites' tolerances.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/reference/compare.h"
#include "runtime/tensor_view.h"

namespace nkisim::reference {

enum class OprojKernel { kCte, kTkg };
enum class OprojQuant { kNone, kStatic, kRow, kMx, kStaticMx, kRowMx };
// kMx, kStaticMx, kRowMx.
bool IsMxQuant(OprojQuant quant);

struct OprojRefInputs {
  TensorView weight;  // [N*D, H]; MX modes: x4 [N*D/4, H] (fp4_e2m1fn_x4 MX, fp8_e4m3fn_x4 else)
  TensorView bias;    // [1, H] or invalid
  OprojQuant quant = OprojQuant::kNone;
  TensorView input_scale;   // STATIC, STATIC_MX (P, 1)
  TensorView weight_scale;  // STATIC, STATIC_MX (P, 1); ROW, ROW_MX (P, H); MX uint8 [N*D/32, H]
  // STATIC: round the quantized activation to the weight's fp8 dtype, as the kernel stores it.
  // The reference goldens do not (their tolerances absorb it); tighter checks do. (The MX modes
  // always model their quantization exactly.)
  bool round_quantized_input = false;
};

// CTE: attention [B, N, D, S] -> y [B, S, H] row-major as fp32 (every mode).
std::vector<float> OutputProjectionCteRef(const TensorView& attention, const OprojRefInputs& in);
// TKG: attention [D, B, N, S] -> y [B*S, H] row-major as fp32 (NONE, STATIC, ROW).
std::vector<float> OutputProjectionTkgRef(const TensorView& attention, const OprojRefInputs& in);
// OutputProjectionCteRef or OutputProjectionTkgRef.
std::vector<float> OutputProjectionRef(OprojKernel kernel, const TensorView& attention,
                                       const OprojRefInputs& in);

// The TKG transposed-output layout of y [rows, H]: out [P, lnc, H / (P lnc), rows] with
// out[h1, c, h2, r] = y[r, c*(H/lnc) + h1*(H/(P lnc)) + h2]. REQUIRES: H % (P lnc) == 0.
// TransposedOutIndex is the flat index in out of y[r, col].
int64_t TransposedOutIndex(int64_t r, int64_t col, int64_t rows, int64_t h, int lnc,
                           int64_t partitions);
std::vector<float> TransposedOutLayout(const std::vector<float>& y, int64_t rows, int64_t h,
                                       int lnc, int64_t partitions);

// Tolerances of the reference suites (test_output_proj_cte.py, test_output_proj_tkg.py).
inline constexpr Tolerance kOprojCteTolerance{1e-5, 2e-2};  // bf16
inline constexpr Tolerance kOprojCteStaticTolerance{1e-5, 0.036};
inline constexpr Tolerance kOprojTkgTolerance{1e-5, 2e-2};       // NONE
inline constexpr Tolerance kOprojTkgQuantTolerance{1e-5, 5e-2};  // STATIC, ROW
// CTE MX (test_output_proj_cte.py:538) and STATIC_MX (:689). ROW_MX, which the snapshot's suite
// does not have, takes MX's.
inline constexpr Tolerance kOprojCteMxTolerance{1e-5, 5e-2};
inline constexpr Tolerance kOprojCteStaticMxTolerance{1e-5, 0.036};
// The tolerance the reference suite of `kernel` uses for `quant`.
Tolerance OprojTolerance(OprojKernel kernel, OprojQuant quant);

}  // namespace nkisim::reference
