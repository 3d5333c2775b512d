// Internal to kernels/qkv: the sizes and dtypes one qkv call derives from its parameters, shared by
// validation, dispatch and the two variants. Callers outside kernels/qkv include qkv.h only.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/common/front_end.h"
#include "kernels/qkv/qkv.h"
#include "runtime/dtype.h"
#include "runtime/hardware_profile.h"

namespace nkisim::kernels {

// The front ends' fields (lnc, tokens, h, norm, quant, eps, hidden_actual, dtypes, partitions,
// bank_cols, the MX helpers) come from FrontEndConfig, so a QkvConfig is what they take.
struct QkvConfig : FrontEndConfig {
  QkvVariant variant = QkvVariant::kTkg;
  int64_t b = 0, s = 0, i = 0;
  // Head geometry; 0 when not given (CTE infers d = I / (n_q + 2 n_kv) from the head counts).
  int64_t d = 0, n_q = 0, n_kv = 0;
  int64_t q_dim = 0, kv_dim = 0;  // n_q * d and n_kv * d when all three are known
  DType out_dtype = DType::kBFloat16;
  QkvWeightLayout weight_layout = QkvWeightLayout::kContiguous;
  bool h_transposed = false;  // is_h_dim_4h_transposed

  bool quantized() const {
    return quant == QuantizationType::kStatic || quant == QuantizationType::kRow;
  }
  bool has_heads() const { return q_dim > 0; }
  // The dtype the weights take in SBUF: fp8 as stored when quantized, else the compute dtype.
  DType matmul_weight_dtype() const {
    return quantized() || mx() ? weight_dtype : compute_dtype;
  }
};

// The front ends' tensors of a qkv call: the input, mlp_prev and attention_prev (with
// fused_residual_add), gamma, the LayerNorm bias and STATIC's input scale.
FrontEndInputs QkvFrontEndInputs(const QkvParams& params);

// REQUIRES: input is [B, S, H] and fused_qkv_weights [H', I] (ValidateQkv checks this first).
QkvConfig MakeQkvConfig(const QkvParams& params, const HardwareProfile& profile, int lnc,
                        QkvVariant variant);

// The output tensor's shape for cfg's layout: BSD [B, S, I] or NBSd [I / d, B, S, d].
Shape QkvOutputShape(const QkvConfig& cfg, QkvOutputLayout layout);

}  // namespace nkisim::kernels
