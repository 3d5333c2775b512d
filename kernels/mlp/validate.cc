// ValidateMlp: the library's documented rules (nki/library/api/mlp.rst: the dtypes, fp8 in TKG
// only, the scale shapes) and what this implementation needs (H a multiple of the partitions,
// each core's whole H subtiles in TKG), each reject naming the operand and the rule.
#include <utility>

#include "kernels/mlp/config.h"
#include "runtime/error.h"

namespace nkisim::kernels {
namespace {

[[noreturn]] void Reject(const std::string& what, const std::string& rule) {
  Raise(ErrorCode::kInvalidArgument, StrCat("mlp: ", what, ": ", rule));
}

std::string Describe(const TensorView& t) {
  return StrCat(ShapeString(t.shape()), " ", DTypeName(t.dtype()));
}

void CheckShape(const char* name, const TensorView& t, const Shape& want, const char* text) {
  if (t.valid() && t.shape() != want) {
    Reject(StrCat(name, " = ", Describe(t)), StrCat("must be ", text, " = ", ShapeString(want)));
  }
}

void CheckStructure(const MlpParams& p, int lnc) {
  if (lnc != 1 && lnc != 2) Reject(StrCat("LNC = ", lnc), "must be 1 or 2");
  if (!p.hidden.valid()) Reject("hidden", "is required");
  if (p.hidden.rank() != 3 || p.hidden.numel() == 0) {
    Reject(StrCat("hidden = ", Describe(p.hidden)), "must be a non-empty 3-D [B, S, H] tensor");
  }
  const DType dt = p.hidden.dtype();
  if (dt != DType::kBFloat16 && dt != DType::kFloat16 && dt != DType::kFloat32) {
    Reject(StrCat("hidden dtype = ", DTypeName(dt)), "must be bf16, fp16 or fp32");
  }
  for (const auto& [name, t] : {std::pair<const char*, const TensorView&>{"gate_w", p.gate_w},
                                {"up_w", p.up_w},
                                {"down_w", p.down_w}}) {
    if (!t.valid()) Reject(name, "is required");
    if (t.rank() != 2 || t.numel() == 0) {
      Reject(StrCat(name, " = ", Describe(t)), "must be a non-empty 2-D tensor");
    }
  }
}

void CheckSizes(const MlpParams& p, const MlpConfig& c) {
  if (c.h % c.partitions != 0) {
    Reject(StrCat("H = ", c.h),
           StrCat("must be a multiple of ", c.partitions, " (the partitions)"));
  }
  CheckShape("gate_w", p.gate_w, {c.h, c.i}, "[H, I]");
  CheckShape("up_w", p.up_w, {c.h, c.i}, "gate_w's [H, I]");
  CheckShape("down_w", p.down_w, {c.i, c.h}, "[I, H]");
  for (const TensorView* t : {&p.up_w, &p.down_w}) {
    if (t->dtype() != c.weight_dtype) {
      Reject(StrCat(t == &p.up_w ? "up_w" : "down_w", " dtype = ", DTypeName(t->dtype())),
             StrCat("must equal gate_w's ", DTypeName(c.weight_dtype)));
    }
  }
  CheckShape("gate_bias", p.gate_bias, {1, c.i}, "[1, I]");
  CheckShape("up_bias", p.up_bias, {1, c.i}, "[1, I]");
  CheckShape("down_bias", p.down_bias, {1, c.h}, "[1, H]");
  for (const TensorView* t : {&p.gate_bias, &p.up_bias, &p.down_bias}) {
    if (t->valid() && (!IsFloat(t->dtype()) || IsFp8(t->dtype()))) {
      Reject(StrCat("bias dtype = ", DTypeName(t->dtype())), "must be bf16, fp16 or fp32");
    }
  }
}

void CheckNormAndResidual(const MlpParams& p, const MlpConfig& c) {
  const char* n = NormTypeName(c.norm);
  if (c.norm == NormType::kRmsNormSkipGamma) {
    Reject(StrCat("norm_type = ", n), "the MLP takes NO_NORM, RMS_NORM or LAYER_NORM");
  }
  const bool norm = c.norm != NormType::kNoNorm;
  if (norm && !p.gamma.valid()) Reject("gamma", StrCat(n, " needs it, shaped [1, H]"));
  if (!norm && p.gamma.valid()) Reject("gamma", "given with norm_type NO_NORM");
  CheckShape("gamma", p.gamma, {1, c.h}, "[1, H]");
  if (p.beta.valid() && c.norm != NormType::kLayerNorm) {
    Reject("beta", StrCat("given with norm_type ", n, "; only LAYER_NORM takes it"));
  }
  CheckShape("beta", p.beta, {1, c.h}, "[1, H]");
  if (norm && !(p.eps > 0)) Reject(StrCat("eps = ", p.eps), StrCat(n, " needs eps > 0"));
  CheckShape("residual", p.residual, p.hidden.shape(), "hidden's [B, S, H]");
  if (p.residual.valid() && p.residual.dtype() != c.io_dtype) {
    Reject(StrCat("residual dtype = ", DTypeName(p.residual.dtype())),
           StrCat("must equal hidden's ", DTypeName(c.io_dtype)));
  }
  if (p.store_fused_hidden && !p.residual.valid()) {
    Reject("store_fused_hidden = true", "needs residual (the fused sum it stores)");
  }
  if (p.residual.valid() && c.variant == MlpVariant::kTkg && TkgSplitsNormTokens(FrontEnd(c)) &&
      c.tokens % 2 != 0) {
    Reject(StrCat("B * S = ", c.tokens),
           StrCat("with residual, ", n,
                  " and LNC = 2 the TKG variant splits the tokens between "
                  "the cores for the norm, so B * S must be even"));
  }
}

// One scale tensor: [1 | partitions, cols] fp32-convertible float.
void CheckScale(const char* name, const TensorView& t, int64_t cols, int64_t partitions,
                const char* q) {
  if (!t.valid()) Reject(name, StrCat("quantization ", q, " needs it"));
  const Shape& s = t.shape();
  if (s.size() != 2 || (s[0] != 1 && s[0] != partitions) || s[1] != cols || !IsFloat(t.dtype())) {
    Reject(StrCat(name, " = ", Describe(t)),
           StrCat(q, " needs a float [1, ", cols, "] or [", partitions, ", ", cols, "]"));
  }
}

void CheckQuantization(const MlpParams& p, const MlpConfig& c, const std::string& why) {
  const char* q = QuantizationTypeName(c.quant);
  const DType w = c.weight_dtype;
  const TensorView* scales[5] = {&p.gate_w_scale, &p.up_w_scale, &p.down_w_scale,
                                 &p.gate_up_in_scale, &p.down_in_scale};
  const char* names[5] = {"gate_w_scale", "up_w_scale", "down_w_scale", "gate_up_in_scale",
                          "down_in_scale"};
  if (c.quant == QuantizationType::kNone) {
    if (!IsFloat(w) || IsFp8(w)) {
      Reject(StrCat("gate_w dtype = ", DTypeName(w)),
             "quantization NONE needs bf16, fp16 or fp32 weights");
    }
    for (int k = 0; k < 5; ++k) {
      if (scales[k]->valid()) Reject(names[k], "given with quantization NONE");
    }
    return;
  }
  if (!c.quantized()) {
    Reject(StrCat("quantization = ", q), "the MLP supports NONE, STATIC and ROW");
  }
  if (c.variant != MlpVariant::kTkg) {
    Reject(StrCat("quantization = ", q),
           StrCat("fp8 weights run in the TKG variant only; this call runs CTE (", why, ")"));
  }
  if (!IsFp8(w)) Reject(StrCat("gate_w dtype = ", DTypeName(w)), StrCat(q, " needs fp8 weights"));
  const int64_t cols[3] = {c.is_row() ? c.i : 1, c.is_row() ? c.i : 1, c.is_row() ? c.h : 1};
  for (int k = 0; k < 3; ++k) CheckScale(names[k], *scales[k], cols[k], c.partitions, q);
  for (int k = 3; k < 5; ++k) {
    if (c.is_static()) {
      CheckScale(names[k], *scales[k], 1, c.partitions, q);
    } else if (scales[k]->valid()) {
      Reject(names[k], "given with ROW, which keeps the inputs unquantized");
    }
  }
}

void CheckVariantLimits(const MlpConfig& c, const std::string& why) {
  if (c.variant != MlpVariant::kTkg) return;
  if (c.tokens > c.partitions) {
    Reject(StrCat("B * S = ", c.tokens),
           StrCat("the TKG variant (", why,
                  ") keeps the tokens on the partitions, so B * S must "
                  "be <= ",
                  c.partitions));
  }
  if ((c.h / c.partitions) % c.lnc != 0) {
    Reject(StrCat("H = ", c.h),
           StrCat("the TKG variant shards H / ", c.partitions, " = ", c.h / c.partitions,
                  " subtiles over LNC = ", c.lnc, ": must divide evenly"));
  }
}

}  // namespace

void ValidateMlp(const MlpParams& p, int lnc, const HardwareProfile& profile) {
  CheckStructure(p, lnc);
  const MlpDispatch choice = DispatchMlp(p);
  MlpParams by_size;
  by_size.hidden = p.hidden;
  const MlpDispatch auto_choice = DispatchMlp(by_size);
  const std::string why =
      choice.variant == auto_choice.variant
          ? choice.reason
          : StrCat("requested instead of ", MlpVariantName(auto_choice.variant));
  const MlpConfig c = MakeMlpConfig(p, profile, lnc, choice.variant);
  CheckSizes(p, c);
  CheckQuantization(p, c, why);
  CheckNormAndResidual(p, c);
  CheckVariantLimits(c, why);
}

}  // namespace nkisim::kernels
