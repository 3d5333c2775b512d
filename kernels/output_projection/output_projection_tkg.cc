#include "kernels/output_projection/output_projection_tkg.h"

#include <algorithm>

#include "kernels/output_projection/checks.h"
#include "kernels/output_projection/epilogue.h"
#include "kernels/output_projection/row_layout.h"
#include "kernels/output_projection/tiling.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

using namespace oproj;

constexpr const char* kKernel = "output_projection_tkg";
// The reference kernel's limits on the transposed output (output_projection_tkg.py:329-511).
constexpr int64_t kMaxTransposedNH = 163840;
constexpr int64_t kMaxTransposedNHFp32 = 81920;
// Heads are packed only when D is a multiple of this (output_projection_tkg.py:458-461).
constexpr int64_t kPackingDimMultiple = 32;

void ValidateQuantization(const ParamChecker& check, const OutputProjectionTkgParams& p,
                          int64_t partitions, int64_t h) {
  check.ExpectNotMx(p.quantization, "TKG",
                    "the reference accepts only NONE, STATIC and ROW, "
                    "output_projection_tkg.py:388-393; the MX modes run in output_projection_cte");
  switch (p.quantization) {
    case QuantizationType::kStatic:
      check.ExpectStaticScales(p.input_scale, p.weight_scale, partitions);
      check.ExpectFp8("weight", p.weight, p.quantization);
      return;
    case QuantizationType::kRow:
      check.ExpectShape("weight_scale", p.weight_scale, {partitions, h}, "(partitions, H) for ROW");
      check.ExpectFloat("weight_scale", p.weight_scale);
      check.ExpectAbsent("input_scale", p.input_scale, p.quantization);
      check.ExpectFp8("weight", p.weight, p.quantization);
      return;
    default:
      check.ExpectAbsent("input_scale", p.input_scale, p.quantization);
      check.ExpectAbsent("weight_scale", p.weight_scale, p.quantization);
      check.Require(!IsFp8(p.weight.dtype()),
                    StrCat("weight dtype ", DTypeName(p.weight.dtype()),
                           ": fp8 weights need quantization_type STATIC or ROW (their scales)"));
  }
}

void ValidateTransposedOut(const ParamChecker& check, const OutputProjectionTkgParams& p, int lnc,
                           int64_t partitions, int64_t n, int64_t h) {
  check.Require(h % (partitions * lnc) == 0,
                StrCat("H = ", h, ": transpose_out needs H divisible by ", partitions,
                       " * LNC = ", partitions * lnc, " (out is [", partitions, ", LNC, H / (",
                       partitions, " LNC), B*S])"));
  const bool fp32 = p.weight.dtype() == DType::kFloat32;
  check.ExpectAtMost("N * H", n * h, fp32 ? kMaxTransposedNHFp32 : kMaxTransposedNH,
                     fp32 ? "the reference kernel's transpose_out limit for fp32 weights"
                          : "the reference kernel's transpose_out limit");
}

// Output rows r = b*S + s of one block: whole batches when S fits in max_rows, else a part of
// one batch's sequence. Either way the rows are contiguous in y.
struct BatchRows {
  Range b;
  Range s;
  int64_t seq = 0;  // S
  int64_t first_row() const { return b.begin * seq + s.begin; }
  int64_t rows() const { return b.size * s.size; }
};

std::vector<BatchRows> SplitBatchRows(int64_t batches, int64_t seq, int64_t max_rows) {
  std::vector<BatchRows> blocks;
  if (seq <= max_rows) {
    for (const Range& b : Split(0, batches, max_rows / seq)) blocks.push_back({b, {0, seq}, seq});
    return blocks;
  }
  for (int64_t b = 0; b < batches; ++b) {
    for (const Range& s : Split(0, seq, max_rows)) blocks.push_back({{b, 1}, s, seq});
  }
  return blocks;
}

struct Plan {
  HeadPacking pack;
  bool quantized = false;  // STATIC
  bool row = false;        // ROW
  DType load_dtype;        // the attention tile as loaded (NONE: cast to the weight dtype)
  DType operand;           // the attention operand of the matmul
  StaticScales scales;
  Range shard;  // this core's columns of y
  std::vector<BatchRows> row_blocks;
};

Plan MakePlan(const KernelContext& ctx, const OutputProjectionTkgParams& p, int64_t max_rows) {
  const HardwareProfile& prof = ctx.core.profile();
  const int64_t d = p.attention.dim(0), n = p.attention.dim(2);
  Plan plan;
  plan.pack = PackHeads(n, d, prof.partitions(), d % kPackingDimMultiple == 0);
  plan.quantized = p.quantization == QuantizationType::kStatic;
  plan.row = p.quantization == QuantizationType::kRow;
  const bool keep_attention_dtype = plan.quantized || plan.row;
  plan.load_dtype = keep_attention_dtype ? p.attention.dtype() : p.weight.dtype();
  plan.operand = plan.row ? p.attention.dtype() : p.weight.dtype();
  if (plan.quantized) plan.scales = LoadStaticScales(ctx.core, p.input_scale, p.weight_scale);
  const int64_t shard = p.weight.dim(1) / ctx.n_prgs;
  plan.shard = {ctx.prg_id * shard, shard};
  // Rows per block: the matmul's limit, and the attention tile's SBUF budget.
  const int64_t row_bytes = plan.pack.heads * static_cast<int64_t>(std::max(SizeOf(plan.load_dtype),
                                                                            SizeOf(plan.operand)));
  const int64_t budget_rows = std::max<int64_t>(1, AttentionTileBudget(prof) / row_bytes);
  plan.row_blocks =
      SplitBatchRows(p.attention.dim(1), p.attention.dim(3), std::min(max_rows, budget_rows));
  return plan;
}

// attention rows of `block` as [D', N', R] in the operand dtype: packed head n' takes heads
// n'*g + j at partitions [j*D, (j+1)*D). [D, B, N, S] holds each d's (b, n, s) values as one
// contiguous run, so each partition group j loads the block's rows of every head in one DMA
// (a view of one head alone is one descriptor per S elements: 2 B at decode, which cost every
// DMA engine 7 us a head; docs/dma.md), and a compute-engine copy a head picks its heads into
// [D', N', B, S] order (casting to the load dtype).
Tile LoadAttention(NeuronCore& core, const TensorView& attention, const Plan& plan,
                   const BatchRows& block) {
  const int64_t d = attention.dim(0), n = attention.dim(2);
  const HeadPacking& pack = plan.pack;
  Tile raw = core.AllocateSbuf(
      "oproj_attention", {pack.head_dim, pack.heads, block.b.size, block.s.size}, plan.load_dtype);
  Tile stage = core.AllocateSbuf("oproj_attention_rows",
                                 {pack.head_dim, block.b.size, n, block.s.size}, attention.dtype());
  const TensorView rows =
      attention.slice(1, block.b.begin, block.b.end()).slice(3, block.s.begin, block.s.end());
  for (int64_t j = 0; j < pack.group; ++j) {
    nisa::dma_copy(stage.slice(0, j * d, (j + 1) * d), rows);
  }
  for (int64_t h = 0; h < pack.heads; ++h) {
    for (int64_t j = 0; j < pack.group; ++j) {
      nisa::tensor_copy(raw.slice(0, j * d, (j + 1) * d).select(1, h),
                        stage.slice(0, j * d, (j + 1) * d).select(2, h * pack.group + j));
    }
  }
  Tile flat = raw.reshape({pack.heads, block.rows()});
  return plan.quantized ? Quantize(flat, plan.scales.inverse_input, plan.operand) : flat;
}

void RunRows(const KernelContext& ctx, const OutputProjectionTkgParams& p, const Plan& plan) {
  int64_t rows = 0;
  for (const BatchRows& b : plan.row_blocks) rows = std::max(rows, b.rows());
  const RowBlockSource source{
      p.weight.reshape({plan.pack.heads, plan.pack.head_dim, p.weight.dim(1)}),
      p.bias,
      plan.row ? p.weight_scale : TensorView(),
      plan.scales.dequant,
      rows,
      plan.quantized};
  RunRowLayout(
      ctx.core, source, plan.shard, static_cast<int64_t>(plan.row_blocks.size()),
      [&](int64_t i) {
        return PiecedTile(LoadAttention(ctx.core, p.attention, plan, plan.row_blocks[i]));
      },
      [&](int64_t i) {
        const BatchRows& b = plan.row_blocks[i];
        return p.out.slice(0, b.first_row(), b.first_row() + b.rows());
      });
}

// The transposed layout's SBUF block over h2 = columns {h1 * H2 + h2 : h1 < 128} of the shard.
struct TransposedBlock {
  Range h2;
  PiecedTile weight;  // [D', N', 128, len], pieces of whole h2
  Tile bias;          // [128, len] or invalid
  Tile scale;         // ROW: [128, len] or invalid
};

class TransposedProjection {
 public:
  TransposedProjection(const KernelContext& ctx, const OutputProjectionTkgParams& p,
                       const Plan& plan)
      : ctx_(ctx),
        p_(p),
        plan_(plan),
        parts_(ctx.core.profile().partitions()),
        h2_(plan.shard.size / parts_) {
    const int64_t h = p.weight.dim(1);
    const HeadPacking& pack = plan.pack;
    // weight[n'*D' + k, shard + h1*H2 + h2] viewed [N', D', 128, H2].
    weights_ = p.weight.ap(
        {p.weight.offset() + plan.shard.begin,
         {{pack.head_dim * h, pack.heads}, {h, pack.head_dim}, {h2_, parts_}, {1, h2_}}});
    auto by_partition = [&](const TensorView& t) {
      return t.select(0, 0).slice(0, plan.shard.begin, plan.shard.end()).reshape({parts_, h2_});
    };
    if (p.bias.valid()) bias_ = by_partition(p.bias);
    if (plan.row) scale_ = by_partition(p.weight_scale);
  }

  void Run() {
    const int64_t bytes_per_h2 =
        plan_.pack.heads * parts_ * static_cast<int64_t>(SizeOf(p_.weight.dtype())) +
        (bias_.valid() ? static_cast<int64_t>(SizeOf(bias_.dtype())) : 0) +
        (scale_.valid() ? static_cast<int64_t>(SizeOf(DType::kFloat32)) : 0);
    const std::vector<Range> blocks =
        Split(0, h2_, BlockColumns(h2_, 1, bytes_per_h2, WeightBlockBudget(ctx_.core.profile())));
    RunBlockPipeline<TransposedBlock, Tile>(
        blocks.size(), plan_.row_blocks.size(), [&](size_t block) { return Load(blocks[block]); },
        [&](size_t step) {
          return LoadAttention(ctx_.core, p_.attention, plan_, plan_.row_blocks[step]);
        },
        [&](const TransposedBlock& block, const Tile& attention, size_t step) {
          Compute(block, attention, plan_.row_blocks[step]);
        });
  }

 private:
  // The bias and ROW-scale columns of the block (one small DMA each), then its weights in pieces
  // of whole h2, piece-major (the order the groups consume them).
  TransposedBlock Load(const Range& h2) {
    NeuronCore& core = ctx_.core;
    TransposedBlock block{h2, PiecedTile(), Tile(), Tile()};
    auto load_columns = [&](const char* name, const TensorView& src, DType dtype) {
      Tile t = core.AllocateSbuf(name, {parts_, h2.size}, dtype);
      nisa::dma_copy(t, src.slice(1, h2.begin, h2.end()));
      return t;
    };
    if (bias_.valid()) block.bias = load_columns("oproj_bias", bias_, bias_.dtype());
    if (scale_.valid()) block.scale = load_columns("oproj_row_scale", scale_, DType::kFloat32);
    block.weight = PiecedTile::Load(core, "oproj_weight",
                                    weights_.slice(3, h2.begin, h2.end()).permute({1, 0, 2, 3}),
                                    p_.weight.dtype(), 1, plan_.quantized ? 2 : 1);
    return block;
  }

  // One PSUM group per h2: out[:, p, h2, rows] = (W[:, cols(h2)]^T @ A[:, rows]) -> [128, R].
  // Groups are staged in SBUF and written in DMAs of about DmaChunkBytes.
  void Compute(const TransposedBlock& block, const Tile& attention, const BatchRows& rows) {
    NeuronCore& core = ctx_.core;
    const int64_t r = rows.rows();
    const int64_t group_bytes = parts_ * r * static_cast<int64_t>(SizeOf(p_.out.dtype()));
    const int64_t per_write =
        std::clamp<int64_t>(DmaChunkBytes(core.profile()) / group_bytes + 1, 1, block.h2.size);
    const TensorView out = p_.out.select(1, ctx_.prg_id);  // [128, H2, B*S]
    for (const Range& g : Split(0, block.h2.size, per_write)) {
      Tile stage = core.AllocateSbuf("oproj_result", {parts_, g.size, r}, p_.out.dtype());
      for (int64_t j = g.begin; j < g.end(); ++j) {
        Tile psum = core.AllocatePsum("oproj_psum", {parts_, r});
        AccumulateHeads(
            psum, plan_.pack.heads, plan_.quantized,
            [&](int64_t n, int64_t count) {
              return SelectLast(block.weight.Heads({j, 1}, n, count), 0);
            },
            [&](int64_t n, int64_t count) { return Heads(attention, n, count); });
        EvictionTerms terms;
        terms.scale_column = plan_.quantized ? plan_.scales.dequant
                             : plan_.row     ? block.scale.slice(1, j, j + 1)
                                             : Tile();
        if (block.bias.valid()) terms.bias_column = block.bias.slice(1, j, j + 1);
        Evict(stage.select(1, j - g.begin), psum, terms, engines_.Next());
      }
      const int64_t h2 = block.h2.begin + g.begin;
      nisa::dma_copy(out.slice(1, h2, h2 + g.size).slice(2, rows.first_row(), rows.first_row() + r),
                    stage);
    }
  }

  const KernelContext& ctx_;
  const OutputProjectionTkgParams& p_;
  const Plan& plan_;
  const int64_t parts_;
  const int64_t h2_;
  TensorView weights_;
  TensorView bias_;
  TensorView scale_;
  EvictionEngines engines_;
};

}  // namespace

Shape OutputProjectionTkgOutputShape(const TensorView& attention, const TensorView& weight,
                                     bool transpose_out, int lnc, int64_t partitions) {
  const ParamChecker check(kKernel);
  check.ExpectRank("attention", attention, 4, "[D, B, N, S]");
  check.ExpectRank("weight", weight, 2, "[N * D, H]");
  const int64_t rows = attention.dim(1) * attention.dim(3), h = weight.dim(1);
  if (!transpose_out) return {rows, h};
  return {partitions, lnc, h / (partitions * lnc), rows};
}

void ValidateOutputProjectionTkg(const OutputProjectionTkgParams& p, int lnc,
                                 const HardwareProfile& profile) {
  const ParamChecker check(kKernel);
  const int64_t parts = profile.partitions();
  const Shape out_shape =
      OutputProjectionTkgOutputShape(p.attention, p.weight, p.transpose_out, lnc, parts);
  const int64_t d = p.attention.dim(0), n = p.attention.dim(2), h = p.weight.dim(1);
  check.ExpectFloat("attention", p.attention);
  check.ExpectFloat("weight", p.weight);
  check.ExpectContiguous("attention", p.attention);
  check.ExpectContiguous("weight", p.weight);
  check.ExpectShape("weight", p.weight, {n * d, h}, "[N * D, H]");
  ValidateQuantization(check, p, parts, h);
  if (p.bias.valid()) {
    check.ExpectShape("bias", p.bias, {1, h}, "[1, H]");
    check.ExpectFloat("bias", p.bias);
  }
  check.ExpectHShardable(h, lnc);
  check.ExpectAtMost("D", d, parts, "the head dim is the contraction on the partitions");
  if (p.transpose_out) ValidateTransposedOut(check, p, lnc, parts, n, h);
  check.ExpectShape("out", p.out, out_shape,
                    p.transpose_out ? "[128, LNC, H / (128 LNC), B*S]" : "[B*S, H]");
  check.Require(p.out.dtype() == p.attention.dtype(),
                StrCat("out dtype ", DTypeName(p.out.dtype()), ": must be the attention dtype ",
                       DTypeName(p.attention.dtype())));
}

void OutputProjectionTkgKernel(const KernelContext& ctx, const OutputProjectionTkgParams& p) {
  const HardwareProfile& prof = ctx.core.profile();
  if (p.transpose_out) {
    const Plan plan = MakePlan(ctx, p, prof.pe_max_moving_free());
    TransposedProjection(ctx, p, plan).Run();
  } else {
    RunRows(ctx, p, MakePlan(ctx, p, prof.pe_cols()));
  }
}

TensorView OutputProjectionTkg(LogicalCore& lnc, OutputProjectionTkgParams params) {
  params.out = TensorView::Create(
      OutputProjectionTkgOutputShape(params.attention, params.weight, params.transpose_out,
                                     lnc.lnc(), lnc.profile().partitions()),
      params.attention.dtype(), "oproj_tkg_out");
  ValidateOutputProjectionTkg(params, lnc.lnc(), lnc.profile());
  lnc.Launch([&](const KernelContext& ctx) { OutputProjectionTkgKernel(ctx, params); });
  return params.out;
}

}  // namespace nkisim::kernels
