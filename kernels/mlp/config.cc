#include "kernels/mlp/config.h"

namespace nkisim::kernels {

const char* MlpActivationName(MlpActivation act) {
  switch (act) {
    case MlpActivation::kSilu:
      return "silu";
    case MlpActivation::kGelu:
      return "gelu";
    case MlpActivation::kRelu:
      return "relu";
  }
  return "?";
}

const char* MlpVariantName(MlpVariant variant) {
  switch (variant) {
    case MlpVariant::kAuto:
      return "auto";
    case MlpVariant::kTkg:
      return "tkg";
    case MlpVariant::kCte:
      return "cte";
  }
  return "?";
}

MlpConfig MakeMlpConfig(const MlpParams& p, const HardwareProfile& profile, int lnc,
                        MlpVariant variant) {
  MlpConfig c;
  c.variant = variant;
  c.lnc = lnc;
  c.b = p.hidden.dim(0);
  c.s = p.hidden.dim(1);
  c.h = p.hidden.dim(2);
  c.i = p.gate_w.dim(1);
  c.tokens = c.b * c.s;
  c.norm = p.norm_type;
  c.quant = p.quantization;
  c.act = p.activation;
  c.eps = p.eps;
  c.io_dtype = p.hidden.dtype();
  c.compute_dtype = c.io_dtype == DType::kFloat32 ? DType::kBFloat16 : c.io_dtype;
  c.weight_dtype = p.gate_w.dtype();
  c.partitions = profile.partitions();
  c.bank_cols = profile.pe_max_moving_free();
  return c;
}

FrontEndConfig FrontEnd(const MlpConfig& m) {
  FrontEndConfig c;
  c.lnc = m.lnc;
  c.tokens = m.tokens;
  c.h = m.h;
  c.norm = m.norm;
  c.eps = m.eps;
  c.hidden_actual = static_cast<double>(m.h);
  c.io_dtype = m.io_dtype;
  c.compute_dtype = m.compute_dtype;
  c.weight_dtype = m.compute_dtype;
  c.partitions = m.partitions;
  c.bank_cols = m.bank_cols;
  c.short_tkg_front_end = true;  // see front_end.h; CTE's front end does not read it
  return c;
}

FrontEndInputs FrontEndInputsOf(const MlpParams& p) {
  FrontEndInputs in;
  in.input = p.hidden;
  in.residual = p.residual;
  in.gamma = p.gamma;
  in.beta = p.beta;
  return in;
}

}  // namespace nkisim::kernels
