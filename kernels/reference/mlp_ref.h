// Golden model of the MLP block: fp64 over the stored input values, the products by BLAS dgemm
// over whole token rows (the weights converted to fp64 a column piece at a time). No tiles, no
// ISA and none of the kernels' code (it shares only the parameter struct of kernels/mlp/mlp.h).
// Per token row of H values:
//   1. x = hidden + residual (when given); that sum is fused_hidden;
//   2. RMS: x * gamma / sqrt(sum(x^2) / H + eps); LayerNorm: (x - mean) / sqrt(var + eps) * gamma
//      [+ beta], population statistics over H; NO_NORM: x;
//   3. STATIC: x = fp8(clip(x / s_in_gate_up, +-max)) in the weights' fp8 type, x first rounded to
//      the compute dtype (bf16 for fp32 I/O), where the kernel holds it;
//   4. g = x Wg, u = x Wu; STATIC: times s_w * s_in; ROW: column i times s_w[i]; + biases;
//   5. h = act(g) * u (SiLU x / (1 + e^-x), GELU 0.5 x (1 + erf(x / sqrt 2)), ReLU);
//      STATIC: h = fp8(clip(h / s_in_down, +-max));
//   6. out = h Wd; STATIC: times s_w * s_in; ROW: column c times s_w[c]; + down bias.
// Results are fp32 values not rounded to the output dtype. Scales are read from row 0.
// Memory: x, g, u [T, H | I] in fp64 plus one weight piece (<= 2^20 elements) at a time.
#pragma once

#include <vector>

#include "kernels/mlp/mlp.h"
#include "kernels/reference/compare.h"

namespace nkisim::reference {

struct MlpGolden {
  std::vector<float> output;        // [B, S, H]
  std::vector<float> fused_hidden;  // [B, S, H] when a residual is given, else empty
};

// REQUIRES: params accepted by kernels::ValidateMlp (the golden does not re-check them).
MlpGolden MlpReference(const kernels::MlpParams& params);

// Tolerances (the reference rule |a - g| <= atol + rtol * max|g|): the QKV and o_proj TKG suites'
// bf16 pair for NONE (the matmul operands are bf16 for every I/O dtype, two products chained),
// and the o_proj TKG quantized pair for STATIC and ROW.
inline constexpr Tolerance kMlpTolerance{1e-5, 2e-2};
inline constexpr Tolerance kMlpQuantTolerance{1e-5, 5e-2};
Tolerance MlpTolerance(kernels::QuantizationType quant);

}  // namespace nkisim::reference
