// The qkv dispatcher: the reference's size rule (qkv.py:235-257), a table of the two variants and
// the entry point that validates, allocates the outputs and launches the chosen program.
#include "kernels/qkv/config.h"
#include "kernels/qkv/qkv.h"
#include "kernels/qkv/variants.h"
#include "runtime/error.h"

namespace nkisim::kernels {
namespace {

using KernelFn = void (*)(const KernelContext&, const QkvConfig&, const QkvParams&,
                          const QkvResult&);

struct VariantRow {
  QkvVariantInfo info;
  KernelFn run;
};

const VariantRow kQkvVariants[] = {
    {{QkvVariant::kTkg, "tkg",
      "decode (B*S <= 128): H on the partitions in 128-row subtiles, one fused matmul per "
      "512-column "
      "PSUM bank, LNC = 2 shards H and adds the partials after a sendrecv; RMS / LayerNorm, fused "
      "residual add, NONE / STATIC / ROW"},
     &QkvTkgKernel},
    {{QkvVariant::kCte, "cte",
      "prefill: the sequence in 128-row tiles, PE transpose of the normalised input, LNC = 2 "
      "shards the sequence; bias at PSUM eviction, fused half-sin RoPE on Q and K, BSD / NBSd, "
      "NONE / STATIC (fp8 double-row)"},
     &QkvCteKernel},
};

const VariantRow& Row(QkvVariant variant) {
  for (const VariantRow& row : kQkvVariants) {
    if (row.info.variant == variant) return row;
  }
  Raise(ErrorCode::kInternal, StrCat("qkv: no variant row for ", QkvVariantName(variant)));
}

}  // namespace

QkvDispatch DispatchQkv(const QkvParams& p, const HardwareProfile& profile) {
  const int64_t b = p.input.dim(0), s = p.input.dim(1), pmax = profile.partitions();
  if (p.fused_rope) return {QkvVariant::kCte, "fused_rope = true"};
  if (s > kSeqlenThresholdForQkvCte) {
    return {QkvVariant::kCte, StrCat("S = ", s, " > ", kSeqlenThresholdForQkvCte)};
  }
  if (b * s > pmax) return {QkvVariant::kCte, StrCat("B * S = ", b * s, " > ", pmax)};
  return {QkvVariant::kTkg, StrCat("S = ", s, " <= ", kSeqlenThresholdForQkvCte,
                                   " and B * S = ", b * s, " <= ", pmax)};
}

const std::vector<QkvVariantInfo>& QkvVariants() {
  static const std::vector<QkvVariantInfo> infos = [] {
    std::vector<QkvVariantInfo> v;
    for (const VariantRow& row : kQkvVariants) v.push_back(row.info);
    return v;
  }();
  return infos;
}

QkvResult Qkv(LogicalCore& lnc, const QkvParams& params, QkvVariant variant) {
  const HardwareProfile& profile = lnc.profile();
  ValidateQkv(params, lnc.lnc(), variant, profile);
  if (variant == QkvVariant::kAuto) variant = DispatchQkv(params, profile).variant;
  const QkvConfig cfg = MakeQkvConfig(params, profile, lnc.lnc(), variant);
  QkvResult result{
      variant,
      TensorView::Create(QkvOutputShape(cfg, params.output_layout), cfg.out_dtype, "qkv_out"),
      {}};
  if (variant == QkvVariant::kTkg && params.fused_residual_add) {
    result.fused_hidden = TensorView::Create(params.input.shape(), cfg.io_dtype, "fused_hidden");
  }
  const KernelFn run = Row(variant).run;
  lnc.Launch([&](const KernelContext& ctx) { run(ctx, cfg, params, result); });
  return result;
}

}  // namespace nkisim::kernels
