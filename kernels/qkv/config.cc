#include "kernels/qkv/config.h"

namespace nkisim::kernels {

const char* QkvOutputLayoutName(QkvOutputLayout layout) {
  switch (layout) {
    case QkvOutputLayout::kBSD:
      return "BSD";
    case QkvOutputLayout::kNBSd:
      return "NBSd";
    case QkvOutputLayout::kNBdS:
      return "NBdS";
  }
  return "?";
}

const char* QkvVariantName(QkvVariant variant) {
  switch (variant) {
    case QkvVariant::kAuto:
      return "auto";
    case QkvVariant::kTkg:
      return "tkg";
    case QkvVariant::kCte:
      return "cte";
  }
  return "?";
}

const char* QkvWeightLayoutName(QkvWeightLayout layout) {
  switch (layout) {
    case QkvWeightLayout::kContiguous:
      return "CONTIGUOUS";
    case QkvWeightLayout::kMxContiguous:
      return "MX_CONTIGUOUS";
    case QkvWeightLayout::kMxInterleaved:
      return "MX_INTERLEAVED";
  }
  return "?";
}

QkvConfig MakeQkvConfig(const QkvParams& p, const HardwareProfile& profile, int lnc,
                        QkvVariant variant) {
  QkvConfig c;
  c.variant = variant;
  c.lnc = lnc;
  c.b = p.input.dim(0);
  c.s = p.input.dim(1);
  c.h = p.input.dim(2);
  c.i = p.fused_qkv_weights.dim(1);
  c.tokens = c.b * c.s;
  c.n_q = p.num_q_heads.value_or(0);
  c.n_kv = p.num_kv_heads.value_or(0);
  c.d = p.d_head.value_or(0);
  const int64_t heads = c.n_q + 2 * c.n_kv;
  // CTE infers d from the head counts (qkv_cte_utils.py:803-808); TKG never does.
  if (c.d == 0 && variant == QkvVariant::kCte && c.n_q > 0 && c.n_kv > 0 && c.i % heads == 0) {
    c.d = c.i / heads;
  }
  if (c.d > 0 && c.n_q > 0 && c.n_kv > 0) {
    c.q_dim = c.n_q * c.d;
    c.kv_dim = c.n_kv * c.d;
  }
  c.norm = p.fused_norm_type;
  c.quant = p.quantization_type;
  c.eps = p.norm_eps.value_or(0.0);
  c.hidden_actual = static_cast<double>(p.hidden_actual.value_or(c.h));
  c.io_dtype = p.input.dtype();
  c.compute_dtype = c.io_dtype == DType::kFloat32 ? DType::kBFloat16 : c.io_dtype;
  c.weight_dtype = p.fused_qkv_weights.dtype();
  c.weight_layout = p.weight_layout;
  c.h_transposed = p.is_h_dim_4h_transposed;
  c.mx_interleaved = c.weight_layout == QkvWeightLayout::kMxInterleaved && !c.h_transposed;
  c.out_dtype = variant == QkvVariant::kCte && c.quant == QuantizationType::kStatic
                    ? DType::kBFloat16
                    : c.io_dtype;
  c.partitions = profile.partitions();
  c.bank_cols = profile.pe_max_moving_free();
  return c;
}

FrontEndInputs QkvFrontEndInputs(const QkvParams& p) {
  FrontEndInputs in;
  in.input = p.input;
  if (p.fused_residual_add) {
    in.residual = p.mlp_prev;
    in.residual2 = p.attention_prev;
  }
  in.gamma = p.gamma_norm_weights;
  in.beta = p.layer_norm_bias;
  in.in_scale = p.qkv_in_scale;
  return in;
}

Shape QkvOutputShape(const QkvConfig& cfg, QkvOutputLayout layout) {
  if (layout == QkvOutputLayout::kNBSd) return {cfg.i / cfg.d, cfg.b, cfg.s, cfg.d};
  return {cfg.b, cfg.s, cfg.i};
}

}  // namespace nkisim::kernels
