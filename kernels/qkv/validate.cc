// ValidateQkv: every reject of the public reference (qkv_tkg.py:417-657, qkv_cte_utils.py:306-625)
// that applies to the parameters modelled here, plus the few checks the reference leaves to a
// crash or a silent wrong result (marked "added"; docs/qkv.md lists them).
#include "kernels/qkv/config.h"
#include "kernels/qkv/qkv.h"
#include "runtime/error.h"

namespace nkisim::kernels {
namespace {

// The CTE kernel's size limits (qkv_cte_utils.py:332-350) and its NBSd head size (366-374).
constexpr int64_t kCteMaxHidden = 24576;
constexpr int64_t kCteMaxFusedColumns = 4096;
constexpr int64_t kCteNbsdHeadDim = 128;

[[noreturn]] void Reject(const std::string& what, const std::string& rule) {
  Raise(ErrorCode::kInvalidArgument, StrCat("qkv: ", what, ": ", rule));
}

std::string Describe(const TensorView& t) {
  return StrCat(ShapeString(t.shape()), " ", DTypeName(t.dtype()));
}

// Rejects a tensor that is given with the wrong shape; `shape_text` names the rule's symbols.
void CheckShape(const char* name, const TensorView& t, const Shape& want,
                const std::string& shape_text) {
  if (t.valid() && t.shape() != want) {
    Reject(StrCat(name, " = ", Describe(t)),
           StrCat("must be ", shape_text, " = ", ShapeString(want)));
  }
}

void CheckStructure(const QkvParams& p) {
  if (!p.input.valid()) Reject("input", "is required");
  if (p.input.rank() != 3 || p.input.numel() == 0) {
    Reject(StrCat("input = ", Describe(p.input)), "must be a non-empty 3-D [B, S, H] tensor");
  }
  const DType dt = p.input.dtype();
  if (dt != DType::kBFloat16 && dt != DType::kFloat16 && dt != DType::kFloat32) {
    Reject(StrCat("input dtype = ", DTypeName(dt)), "must be bf16, fp16 or fp32");
  }
  if (!p.fused_qkv_weights.valid()) Reject("fused_qkv_weights", "is required");
  if (p.fused_qkv_weights.rank() != 2 || p.fused_qkv_weights.numel() == 0) {
    Reject(StrCat("fused_qkv_weights = ", Describe(p.fused_qkv_weights)),
           "must be a non-empty 2-D [H, I] tensor");
  }
}

void CheckSizes(const QkvParams& p, const QkvConfig& c) {
  if (c.h % c.partitions != 0) {
    Reject(StrCat("H = ", c.h),
           StrCat("must be a multiple of ", c.partitions, " (the partitions)"));
  }
  if (!c.mx() && p.fused_qkv_weights.dim(0) != c.h) {
    Reject(StrCat("fused_qkv_weights = ", Describe(p.fused_qkv_weights)),
           StrCat("its rows must equal H = ", c.h));
  }
  CheckShape("bias", p.bias, {1, c.i}, "[1, I]");
  if (c.n_q > 0 && c.n_kv > 0 && c.d > 0 && (c.n_q + 2 * c.n_kv) * c.d != c.i) {
    Reject(StrCat("(num_q_heads + 2 * num_kv_heads) * d_head = (", c.n_q, " + 2 * ", c.n_kv, ") * ",
                  c.d, " = ", (c.n_q + 2 * c.n_kv) * c.d),
           StrCat("must equal I = ", c.i));
  }
  for (const auto& [name, value] : {std::pair{"d_head", p.d_head},
                                    {"num_q_heads", p.num_q_heads},
                                    {"num_kv_heads", p.num_kv_heads}}) {
    if (value && *value <= 0) Reject(StrCat(name, " = ", *value), "must be positive");  // added
  }
}

// MX (qkv_cte_utils.py:522-583, qkv_tkg_mx_impl.py:381): the NeuronCore-v4 path. Runs before
// CheckSizes, whose "weight rows == H" is "weight rows == H / 4" here.
void CheckMx(const QkvParams& p, const QkvConfig& c, const std::string& why,
             const HardwareProfile& profile) {
  const char* q = QuantizationTypeName(c.quant);
  if (!(profile.pe_mx_speedup() > 0)) {
    Raise(ErrorCode::kNotSupported,
          StrCat("qkv: quantization_type = ", q, ": hardware profile '", profile.name(),
                 "' has no MX path (pe_mx_speedup = ", profile.pe_mx_speedup(),
                 "); MX runs on NeuronCore-v4 profiles such as configs/hardware/trn3.textproto"));
  }
  const DType w = c.weight_dtype;
  if (w != DType::kFp8E4M3FNx4 && w != DType::kFp8E5M2x4) {
    Reject(StrCat("fused_qkv_weights dtype = ", DTypeName(w)),
           "quantization_type MX needs x4-packed fp8 weights (fp8_e4m3fn_x4 or fp8_e5m2_x4; "
           "`nkisim pack-weights` makes them)");
  }
  if (c.h % c.mx_chunk() != 0) {
    Reject(StrCat("H = ", c.h), StrCat("MX needs H % ", c.mx_chunk(),
                                       " == 0 (one nc_matmul_mx contracts 4 x ", c.partitions,
                                       " rows)"));
  }
  if (p.fused_qkv_weights.dim(0) * 4 != c.h) {
    Reject(StrCat("fused_qkv_weights = ", Describe(p.fused_qkv_weights)),
           StrCat("MX needs [H / 4, I] = [", c.h / 4, ", ", c.i, "] (4 rows of H per x4 element)"));
  }
  if (c.weight_layout == QkvWeightLayout::kContiguous) {
    Reject("weight_layout = CONTIGUOUS", "MX needs MX_CONTIGUOUS or MX_INTERLEAVED weights");
  }
  if (p.qkv_w_scale.valid() &&
      (p.qkv_w_scale.dtype() != DType::kUInt8 || p.qkv_w_scale.shape() != Shape{c.h / 32, c.i})) {
    Reject(StrCat("qkv_w_scale = ", Describe(p.qkv_w_scale)),
           StrCat("MX needs the E8M0 block scales uint8 [H / 32, I] = [", c.h / 32, ", ", c.i,
                  "] (or none: the neutral scale 127)"));
  }
  if (p.qkv_in_scale.valid()) {
    Reject("qkv_in_scale", "given with MX, which quantizes the input per block (no input scale)");
  }
  if (c.variant == QkvVariant::kTkg) {
    // Each core's H / (4 LNC) rows of x4 elements fill whole 128-partition chunks, or one chunk
    // of a multiple of 32 partitions (MX blocks and scale quadrants are 8 and 32 partitions).
    const int64_t rows = c.h / (4 * c.lnc);
    if (c.h % (4 * c.lnc) != 0 || (rows >= c.partitions ? rows % c.partitions != 0 : rows % 32 != 0)) {
      Reject(StrCat("H = ", c.h),
             StrCat("the TKG variant's MX path (", why, ") gives each core H / (4 LNC) = ", rows,
                    " rows of x4 elements; they must fill whole chunks of ", c.partitions,
                    " partitions, or a multiple of 32 below that"));
    }
  }
  if (c.variant == QkvVariant::kTkg && !c.h_transposed) {
    Reject("is_h_dim_4h_transposed = false",
           StrCat("the TKG variant's MX path (", why, ") needs the input's H already in the ",
                  "packed weights' row order (is_h_dim_4h_transposed = true)"));
  }
  if (c.variant == QkvVariant::kCte) {
    if (c.h_transposed && (c.norm != NormType::kNoNorm || p.fused_residual_add)) {
      Reject("is_h_dim_4h_transposed = true",
             StrCat("the CTE variant (", why, ") takes a swizzled input only without a norm ",
                    "or fused residual add"));
    }
    if (c.s % c.lnc != 0 || (c.s / c.lnc) % 2 != 0) {
      Reject(StrCat("S = ", c.s), StrCat("the CTE variant's MX path (", why, ") needs S / LNC = ",
                                         c.s, " / ", c.lnc, " to be an even integer"));
    }
  }
}

void CheckQuantization(const QkvParams& p, const QkvConfig& c, const std::string& why,
                       const HardwareProfile& profile) {
  const char* q = QuantizationTypeName(c.quant);
  if (c.quant == QuantizationType::kStaticMx || c.quant == QuantizationType::kRowMx) {
    Raise(ErrorCode::kNotSupported,
          StrCat("qkv: quantization_type = ", q, ": the qkv kernels' MX path is MX (per-block "
                 "scales); STATIC_MX and ROW_MX are output-projection modes"));
  }
  if (c.mx()) {
    CheckMx(p, c, why, profile);
    return;
  }
  if (c.weight_layout != QkvWeightLayout::kContiguous) {
    Reject(StrCat("weight_layout = ", QkvWeightLayoutName(c.weight_layout)),
           StrCat("quantization_type ", q, " needs CONTIGUOUS [H, I] weights (the MX layouts ",
                  "pack x4 elements for MX only)"));
  }
  if (c.h_transposed) {
    Reject("is_h_dim_4h_transposed = true",
           StrCat("a swizzled input is for MX only (quantization_type is ", q, ")"));
  }
  const DType w = c.weight_dtype;
  if (c.quant == QuantizationType::kNone && (!IsFloat(w) || IsFp8(w))) {  // added
    Reject(StrCat("fused_qkv_weights dtype = ", DTypeName(w)),
           "quantization_type NONE needs bf16, fp16 or fp32 weights");
  }
  if (c.quant == QuantizationType::kNone) return;
  if (c.quant == QuantizationType::kRow && c.variant == QkvVariant::kCte) {
    Reject(StrCat("quantization_type = ", q),
           StrCat("the CTE variant (", why, ") supports NONE and STATIC only"));
  }
  if (!IsFp8(w)) {
    Reject(StrCat("fused_qkv_weights dtype = ", DTypeName(w)),
           StrCat("quantization_type ", q, " needs fp8 weights"));
  }
  if (!p.qkv_w_scale.valid()) Reject("qkv_w_scale", StrCat("quantization_type ", q, " needs it"));
  const int64_t cols = c.quant == QuantizationType::kStatic ? 3 : c.i;
  const Shape& ws = p.qkv_w_scale.shape();
  if (ws.size() != 2 || (ws[0] != 1 && ws[0] != c.partitions) || ws[1] != cols) {
    Reject(StrCat("qkv_w_scale = ", Describe(p.qkv_w_scale)),
           StrCat(q, " needs [1, ", cols, "] or [", c.partitions, ", ", cols, "]",
                  c.quant == QuantizationType::kRow ? " (one scale per column of I)"
                                                    : " (the Q, K and V scales)"));
  }
  if (c.quant == QuantizationType::kRow) return;
  if (!p.qkv_in_scale.valid()) Reject("qkv_in_scale", "quantization_type STATIC needs it");
  const Shape& is = p.qkv_in_scale.shape();
  if (is.size() != 2 || (is[0] != 1 && is[0] != c.partitions) || is[1] != 1) {
    Reject(StrCat("qkv_in_scale = ", Describe(p.qkv_in_scale)),
           StrCat("STATIC needs [1, 1] or [", c.partitions, ", 1]"));
  }
  if (!c.has_heads()) {
    Reject("num_q_heads / num_kv_heads / d_head",
           StrCat("quantization_type STATIC needs the head counts",
                  c.variant == QkvVariant::kTkg ? " and d_head" : "",
                  " to find the Q, K and V column segments"));
  }
}

void CheckNorm(const QkvParams& p, const QkvConfig& c, const std::string& why) {
  const char* n = NormTypeName(c.norm);
  if (c.norm == NormType::kRmsNormSkipGamma && c.variant == QkvVariant::kTkg) {
    Reject(StrCat("fused_norm_type = ", n),
           StrCat("not supported by the TKG variant (", why, "); use RMS_NORM with gamma"));
  }
  const bool takes_gamma = c.norm == NormType::kRmsNorm || c.norm == NormType::kLayerNorm;
  if (takes_gamma && !p.gamma_norm_weights.valid()) {
    Reject("gamma_norm_weights", StrCat(n, " needs it, shaped [1, H] = [1, ", c.h, "]"));
  }
  if (!takes_gamma && p.gamma_norm_weights.valid()) {
    Reject("gamma_norm_weights", StrCat("given with fused_norm_type ", n, ", which applies none"));
  }
  CheckShape("gamma_norm_weights", p.gamma_norm_weights, {1, c.h}, "[1, H]");
  if (p.layer_norm_bias.valid() && c.norm != NormType::kLayerNorm) {
    Reject("layer_norm_bias",
           StrCat("given with fused_norm_type ", n, "; only LAYER_NORM takes it"));
  }
  CheckShape("layer_norm_bias", p.layer_norm_bias, {1, c.h}, "[1, H]");
  if (c.norm != NormType::kNoNorm && !p.norm_eps) Reject("norm_eps", StrCat(n, " needs it"));
  if (p.hidden_actual && (*p.hidden_actual < 1 || *p.hidden_actual > c.h)) {
    Reject(StrCat("hidden_actual = ", *p.hidden_actual), StrCat("must be in [1, H = ", c.h, "]"));
  }
}

void CheckResidual(const QkvParams& p, const QkvConfig& c) {
  const Shape& x = p.input.shape();
  for (const auto& [name, t] : {std::pair<const char*, const TensorView&>{"mlp_prev", p.mlp_prev},
                                {"attention_prev", p.attention_prev}}) {
    if (!p.fused_residual_add && t.valid()) Reject(name, "given without fused_residual_add");
    if (p.fused_residual_add && !t.valid()) {
      Reject("fused_residual_add = true",
             StrCat("needs both mlp_prev and attention_prev; ", name, " is missing"));
    }
    CheckShape(name, t, x, "the input's [B, S, H]");
  }
  if (p.fused_residual_add && c.variant == QkvVariant::kTkg && TkgSplitsNormTokens(c) &&
      c.tokens % 2 != 0) {
    Reject(
        StrCat("B * S = ", c.tokens),
        StrCat("with fused_residual_add, ", NormTypeName(c.norm),
               " and LNC = 2 the TKG variant "
               "splits the tokens (B * S > ",
               c.norm == NormType::kLayerNorm ? kTkgLayerNormSplitTokens : kTkgRmsNormSplitTokens,
               ") between the cores, so B * S must be even"));
  }
}

void CheckLayout(const QkvParams& p, const QkvConfig& c, const std::string& why) {
  const char* l = QkvOutputLayoutName(p.output_layout);
  if (p.output_layout == QkvOutputLayout::kNBdS) {
    Reject(StrCat("output_layout = ", l), "no qkv kernel supports it; use BSD or NBSd");
  }
  if (p.output_layout != QkvOutputLayout::kNBSd) return;
  if (c.d == 0) {
    Reject(StrCat("output_layout = ", l),
           c.variant == QkvVariant::kCte
               ? "needs d_head (or num_q_heads and num_kv_heads to infer it)"
               : "needs d_head");
  }
  if (c.variant == QkvVariant::kCte && c.d != kCteNbsdHeadDim) {
    Reject(StrCat("d_head = ", c.d),
           StrCat("the CTE variant (", why, ") writes NBSd only for d_head = ", kCteNbsdHeadDim));
  }
  if (c.i % c.d != 0)
    Reject(StrCat("I = ", c.i), StrCat("NBSd needs I % d_head == 0 (d_head = ", c.d, ")"));
}

void CheckRope(const QkvParams& p, const QkvConfig& c) {
  for (const auto& [name, t] : {std::pair<const char*, const TensorView&>{"cos_cache", p.cos_cache},
                                {"sin_cache", p.sin_cache}}) {
    if (!p.fused_rope && t.valid()) Reject(name, "given without fused_rope");
  }
  if (!p.fused_rope) return;
  if (c.variant == QkvVariant::kTkg) {
    Reject("fused_rope = true", "the TKG variant cannot fuse RoPE; the dispatcher sends it to CTE");
  }
  const char* missing = !p.cos_cache.valid()   ? "cos_cache"
                        : !p.sin_cache.valid() ? "sin_cache"
                        : !p.num_q_heads       ? "num_q_heads"
                        : !p.num_kv_heads      ? "num_kv_heads"
                                               : nullptr;
  if (missing != nullptr) {
    Reject("fused_rope = true", StrCat("needs cos_cache, sin_cache, num_q_heads and num_kv_heads; ",
                                       missing, " is missing"));
  }
  if (c.d == 0)
    Reject("fused_rope = true", StrCat("I = ", c.i,
                                       " is not (num_q_heads + 2 * "
                                       "num_kv_heads) * d_head for any d_head"));
  if (c.d % 2 != 0 || c.d > c.bank_cols) {  // added: RoPE rotates the two halves of a head
    Reject(StrCat("d_head = ", c.d),
           StrCat("fused RoPE needs an even d_head <= ", c.bank_cols, " (one PSUM bank)"));
  }
  CheckShape("cos_cache", p.cos_cache, {c.b, c.s, c.d}, "[B, S, d_head]");
  CheckShape("sin_cache", p.sin_cache, {c.b, c.s, c.d}, "[B, S, d_head]");
}

void CheckVariantLimits(const QkvConfig& c, const std::string& why) {
  if (c.variant == QkvVariant::kTkg) {
    if (c.tokens > c.partitions) {  // added: the dispatcher guarantees it, the kernel needs it
      Reject(StrCat("B * S = ", c.tokens),
             StrCat("the TKG variant (", why, ") keeps the tokens on the partitions, so B * S ",
                    "must be <= ", c.partitions));
    }
    if ((c.h / c.partitions) % c.lnc != 0) {
      Reject(StrCat("H = ", c.h), StrCat("(H / ", c.partitions, ") = ", c.h / c.partitions,
                                         " must be divisible by LNC = ", c.lnc));
    }
    return;
  }
  if (c.h > kCteMaxHidden) {
    Reject(StrCat("H = ", c.h), StrCat("the CTE variant (", why, ") needs H <= ", kCteMaxHidden));
  }
  if (c.i > kCteMaxFusedColumns) {
    Reject(StrCat("I = ", c.i),
           StrCat("the CTE variant (", why, ") needs I <= ", kCteMaxFusedColumns));
  }
}

}  // namespace

void ValidateQkv(const QkvParams& p, int lnc, QkvVariant variant, const HardwareProfile& profile) {
  CheckStructure(p);
  const QkvDispatch auto_choice = DispatchQkv(p, profile);
  if (variant == QkvVariant::kAuto) variant = auto_choice.variant;
  const std::string why =
      auto_choice.variant == variant
          ? StrCat("chosen because ", auto_choice.reason)
          : StrCat("requested instead of ", QkvVariantName(auto_choice.variant));
  const QkvConfig c = MakeQkvConfig(p, profile, lnc, variant);
  CheckQuantization(p, c, why, profile);
  CheckSizes(p, c);
  CheckVariantLimits(c, why);
  CheckLayout(p, c, why);
  CheckNorm(p, c, why);
  CheckResidual(p, c);
  CheckRope(p, c);
}

}  // namespace nkisim::kernels
