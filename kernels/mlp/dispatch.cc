// The mlp dispatcher: the library's size rule (B * S <= 96: TKG), a table of the two variants and
// the entry point that validates, allocates the outputs and launches the chosen program.
#include "kernels/mlp/config.h"
#include "kernels/mlp/mlp.h"
#include "kernels/mlp/variants.h"
#include "runtime/error.h"

namespace nkisim::kernels {
namespace {

using KernelFn = void (*)(const KernelContext&, const MlpConfig&, const MlpParams&,
                          const MlpResult&);

struct VariantRow {
  MlpVariantInfo info;
  KernelFn run;
};

const VariantRow kMlpVariants[] = {
    {{MlpVariant::kTkg, "tkg",
      "decode (B*S <= 96; forced: <= 128): x_hat^T with H on the partitions, gate / up as "
      "[128 I, B*S] products (weights stationary), act * up on Scalar / Vector, down into "
      "[B*S, 512] PSUM banks; LNC 2 shards gate / up's H (fp32 partials swapped by sendrecv) and "
      "down's output H; NONE / STATIC / ROW fp8"},
     &MlpTkgKernel},
    {{MlpVariant::kCte, "cte",
      "prefill: 128-token tiles in blocks of 4, PE transpose of the normalised rows, gate / up "
      "as [128 I, 512 tokens] products, down per tile into [128, 512] banks; weights streamed "
      "once per block; LNC 2 shards the tiles, no core-to-core traffic; NONE"},
     &MlpCteKernel},
};

const VariantRow& Row(MlpVariant variant) {
  for (const VariantRow& row : kMlpVariants) {
    if (row.info.variant == variant) return row;
  }
  Raise(ErrorCode::kInternal, StrCat("mlp: no variant row for ", MlpVariantName(variant)));
}

}  // namespace

MlpDispatch DispatchMlp(const MlpParams& p) {
  const int64_t tokens = p.hidden.dim(0) * p.hidden.dim(1);
  if (p.variant != MlpVariant::kAuto) return {p.variant, "requested"};
  if (tokens > kMlpTkgMaxTokens) {
    return {MlpVariant::kCte, StrCat("B * S = ", tokens, " > ", kMlpTkgMaxTokens)};
  }
  return {MlpVariant::kTkg, StrCat("B * S = ", tokens, " <= ", kMlpTkgMaxTokens)};
}

const std::vector<MlpVariantInfo>& MlpVariants() {
  static const std::vector<MlpVariantInfo> infos = [] {
    std::vector<MlpVariantInfo> v;
    for (const VariantRow& row : kMlpVariants) v.push_back(row.info);
    return v;
  }();
  return infos;
}

MlpResult Mlp(LogicalCore& lnc, const MlpParams& params) {
  ValidateMlp(params, lnc.lnc(), lnc.profile());
  const MlpVariant variant = DispatchMlp(params).variant;
  const MlpConfig cfg = MakeMlpConfig(params, lnc.profile(), lnc.lnc(), variant);
  MlpResult result;
  result.variant = variant;
  result.output = TensorView::Create(params.hidden.shape(), cfg.io_dtype, "mlp_out");
  if (params.store_fused_hidden) {
    result.fused_hidden = TensorView::Create(params.hidden.shape(), cfg.io_dtype, "fused_hidden");
  }
  const KernelFn run = Row(variant).run;
  lnc.Launch([&](const KernelContext& ctx) { run(ctx, cfg, params, result); });
  return result;
}

}  // namespace nkisim::kernels
