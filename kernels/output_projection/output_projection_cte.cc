#include "kernels/output_projection/output_projection_cte.h"

#include "kernels/output_projection/checks.h"
#include "kernels/output_projection/output_projection_cte_mx.h"
#include "kernels/output_projection/epilogue.h"
#include "kernels/output_projection/row_layout.h"
#include "kernels/output_projection/tiling.h"

namespace nkisim::kernels {
namespace {

constexpr const char* kKernel = "output_projection_cte";
// The reference kernel's limits (output_projection_cte_parameters.py:458-597).
constexpr int64_t kMaxRows = 131072;  // B * S
constexpr int64_t kMaxHeads = 17;
constexpr int64_t kMaxH = 20705;

void ValidateQuantization(const oproj::ParamChecker& check, const OutputProjectionCteParams& p,
                          int64_t partitions) {
  if (p.quantization == QuantizationType::kRow) {
    check.Fail(
        "quantization_type = ROW: the CTE kernel has no per-row dequantization; use STATIC, "
        "or ROW with output_projection_tkg (the public reference silently ignores "
        "weight_scales here and returns wrong results)");
  }
  if (p.quantization == QuantizationType::kStatic) {
    check.ExpectStaticScales(p.input_scale, p.weight_scale, partitions);
    check.ExpectFp8("weight", p.weight, p.quantization);
    return;
  }
  check.ExpectAbsent("input_scale", p.input_scale, p.quantization);
  check.ExpectAbsent("weight_scale", p.weight_scale, p.quantization);
  check.Require(!IsFp8(p.weight.dtype()),
                StrCat("weight dtype ", DTypeName(p.weight.dtype()),
                       ": fp8 weights need quantization_type STATIC (their scales)"));
}

}  // namespace

Shape OutputProjectionCteOutputShape(const TensorView& attention, const TensorView& weight) {
  const oproj::ParamChecker check(kKernel);
  check.ExpectRank("attention", attention, 4, "[B, N, D, S]");
  check.ExpectRank("weight", weight, 2, "[N * D, H]");
  return {attention.dim(0), attention.dim(3), weight.dim(1)};
}

void ValidateOutputProjectionCte(const OutputProjectionCteParams& p, int lnc,
                                 const HardwareProfile& profile) {
  if (oproj::IsMx(p.quantization)) {
    oproj::ValidateOutputProjectionCteMx(p, lnc, profile);
    return;
  }
  const oproj::ParamChecker check(kKernel);
  OutputProjectionCteOutputShape(p.attention, p.weight);  // the ranks, before any dim is read
  const int64_t n = p.attention.dim(1), d = p.attention.dim(2), h = p.weight.dim(1);
  check.ExpectFloat("attention", p.attention);
  check.ExpectFloat("weight", p.weight);
  check.ExpectContiguous("attention", p.attention);
  check.ExpectContiguous("weight", p.weight);
  check.ExpectShape("weight", p.weight, {n * d, h}, "[N * D, H]");
  ValidateQuantization(check, p, profile.partitions());
  check.ExpectAtMost("D", d, profile.partitions(),
                     "the head dim is the contraction on the partitions");
  check.ExpectAtMost("N", n, kMaxHeads, "the reference kernel's head limit");
  oproj::CheckCteRowsColumnsAndOutput(check, p, lnc);
}

void oproj::CheckCteRowsColumnsAndOutput(const ParamChecker& check,
                                         const OutputProjectionCteParams& p, int lnc) {
  const Shape out_shape = OutputProjectionCteOutputShape(p.attention, p.weight);
  const int64_t h = out_shape[2];
  check.ExpectAtMost("B * S", out_shape[0] * out_shape[1], kMaxRows,
                     "the reference kernel's row limit");
  check.ExpectAtMost("H", h, kMaxH, "the reference kernel's hidden-size limit");
  check.ExpectHShardable(h, lnc);
  if (p.bias.valid()) {
    check.ExpectShape("bias", p.bias, {1, h}, "[1, H]");
    check.ExpectFloat("bias", p.bias);
  }
  check.ExpectShape("out", p.out, out_shape, "[B, S, H]");
  check.ExpectFloat("out", p.out);
}

void OutputProjectionCteKernel(const KernelContext& ctx, const OutputProjectionCteParams& p) {
  using namespace oproj;
  if (IsMx(p.quantization)) {
    OutputProjectionCteMxKernel(ctx, p);
    return;
  }
  NeuronCore& core = ctx.core;
  const HardwareProfile& prof = core.profile();
  const int64_t batches = p.attention.dim(0), s = p.attention.dim(3), h = p.weight.dim(1);
  const HeadPacking pack =
      PackHeads(p.attention.dim(1), p.attention.dim(2), prof.partitions(), true);
  const bool quantized = p.quantization == QuantizationType::kStatic;
  const DType operand = p.weight.dtype();
  const StaticScales scales =
      quantized ? LoadStaticScales(core, p.input_scale, p.weight_scale) : StaticScales{};

  const TensorView attention = p.attention.reshape({batches, pack.heads, pack.head_dim, s});
  const std::vector<Range> s_tiles = Split(0, s, prof.pe_max_moving_free());
  const auto row_steps = static_cast<int64_t>(s_tiles.size()) * batches;
  auto batch_of = [&](int64_t step) { return step / static_cast<int64_t>(s_tiles.size()); };
  auto s_tile_of = [&](int64_t step) {
    return s_tiles[step % static_cast<int64_t>(s_tiles.size())];
  };

  auto load_attention = [&](int64_t step) {
    const Range st = s_tile_of(step);
    const PiecedTile raw = PiecedTile::Load(
        core, "oproj_attention",
        attention.select(0, batch_of(step)).slice(2, st.begin, st.end()).permute({1, 0, 2}),
        quantized ? p.attention.dtype() : operand, prof.pe_cols(), quantized ? 2 : 1);
    if (!quantized) return raw;
    return raw.Map([&](const Tile& t) { return Quantize(t, scales.inverse_input, operand); });
  };
  auto out_rows = [&](int64_t step) {
    const Range st = s_tile_of(step);
    return p.out.select(0, batch_of(step)).slice(0, st.begin, st.end());
  };
  const int64_t shard = h / ctx.n_prgs;
  const RowBlockSource source{p.weight.reshape({pack.heads, pack.head_dim, h}),
                              p.bias,
                              TensorView(),
                              scales.dequant,
                              prof.pe_cols(),
                              quantized};
  RunRowLayout(core, source, {ctx.prg_id * shard, shard}, row_steps, load_attention, out_rows);
}

TensorView OutputProjectionCte(LogicalCore& lnc, OutputProjectionCteParams params,
                               std::optional<DType> output_dtype) {
  const DType default_dtype =
      oproj::IsMx(params.quantization) ? DType::kBFloat16 : params.attention.dtype();
  params.out = TensorView::Create(OutputProjectionCteOutputShape(params.attention, params.weight),
                                  output_dtype.value_or(default_dtype), "oproj_cte_out");
  ValidateOutputProjectionCte(params, lnc.lnc(), lnc.profile());
  lnc.Launch([&](const KernelContext& ctx) { OutputProjectionCteKernel(ctx, params); });
  return params.out;
}

}  // namespace nkisim::kernels
