// Seeded random cases of the mlp kernel for the CLI, the tests and the benchmark. Every tensor is
// Gaussian in the I/O dtype, scaled so the activations stay O(1): hidden, residual, gamma, beta
// and the biases N(0, 1) (gamma 1 + 0.1 N(0, 1)), gate_w and up_w N(0, 1 / H), down_w N(0, 1 / I).
// Quantized cases (fp8 e4m3, trn2's, max 240):
//   STATIC: weights N(0, 1) clipped to [-4, 4] in fp8 with w_scale 1 / sqrt(fan in), so the
//           dequantized weights match the float case's; gate_up_in_scale 1 / 32 and
//           down_in_scale 1 / 32 (x_hat and h stay far inside 240 s);
//   ROW:    float weights as above, quantized per column (kernels/common/case_tensors.h); down's
//           scale is per output column of H.
// Scales come as [128, n] with identical rows. A value depends only on (seed, tensor name, index).
#pragma once

#include <cstdint>

#include "kernels/mlp/mlp.h"
#include "runtime/dtype.h"

namespace nkisim::kernels {

struct MlpCaseOptions {
  int64_t b = 1, s = 1, h = 128, i = 128;
  DType dtype = DType::kBFloat16;
  NormType norm = NormType::kRmsNorm;
  MlpActivation act = MlpActivation::kSilu;
  QuantizationType quant = QuantizationType::kNone;
  bool residual = false;
  bool store_fused_hidden = false;
  bool bias = false;       // gate, up and down biases
  bool norm_bias = false;  // LayerNorm beta
  double eps = 1e-6;
  MlpVariant variant = MlpVariant::kAuto;
  uint64_t seed = 0;
};

MlpParams MakeMlpCase(const MlpCaseOptions& options);

}  // namespace nkisim::kernels
