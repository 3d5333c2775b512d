#include "kernels/common/tkg_prologue.h"

#include <algorithm>
#include <vector>

#include "kernels/common/tiling.h"
#include "kernels/common/transposed_load.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

using nisa::AluOp;

// A [B, S, H] tensor as [P, B*S, L, H1s]; a [1, H] row as [P, L, H1s]. MX: as
// [P', B*S, L, Q, 4] and [P', L, Q, 4] with element (p, t, c, q, j) = x[t, c*H/L + q*4P' + 4p + j]
// (P' = FrontEndConfig::mx_tkg_partitions, P unless the shard is smaller):
// each run of 4 is one x4 element of chunk q (the input's H already in packed order).
TensorView PartitionMajor(const TensorView& t, const FrontEndConfig& cfg) {
  if (cfg.mx()) {
    return t.reshape({cfg.tokens, cfg.lnc, cfg.mx_tkg_chunks(), cfg.mx_tkg_partitions(), 4})
        .permute({3, 0, 1, 2, 4});
  }
  return t.reshape({cfg.tokens, cfg.lnc, cfg.partitions, cfg.shard_subtiles()})
      .permute({2, 0, 1, 3});
}
TensorView PartitionMajorRow(const TensorView& row, const FrontEndConfig& cfg) {
  if (cfg.mx()) {
    return row.reshape({cfg.lnc, cfg.mx_tkg_chunks(), cfg.mx_tkg_partitions(), 4})
        .permute({2, 0, 1, 3});
  }
  return row.reshape({cfg.lnc, cfg.partitions, cfg.shard_subtiles()}).permute({1, 0, 2});
}

// The shape of one core's matmul input: [P, B*S, H1s], or [P, B*S, Q, 4] for MX.
Shape ShardShape(const FrontEndConfig& cfg) {
  if (cfg.mx()) return {cfg.mx_tkg_partitions(), cfg.tokens, cfg.mx_tkg_chunks(), 4};
  return {cfg.partitions, cfg.tokens, cfg.shard_subtiles()};
}

// The tokens [t0, t1) and H chunks [c0, c1) one core loads.
struct Slab {
  int64_t t0, t1, c0, c1;
  TensorView Of(const TensorView& t, const FrontEndConfig& cfg) const {
    return PartitionMajor(t, cfg).slice(1, t0, t1).slice(2, c0, c1);
  }
};

// MX: the slab of `t` into dst [P', Tn, Lc, Q, 4] without the element-permuted view (one 8-byte
// descriptor per x4 element, docs/dma.md). Each token's Lc x Q rows of 4P' values are contiguous
// in HBM: they load with a row a partition (tokens side by side, up to 128 rows a staging tile;
// one DMA a tile when the slab holds every chunk, so the rows of consecutive tokens are one
// run, else one a token), every tile's loads issued before the first transpose. The PE then
// transposes each staging tile into H-major order, one transpose per value j of the x4
// elements (the columns 4p + j), and one copy moves the PSUM result into dst.
void LoadMxRows(NeuronCore& core, const FrontEndConfig& cfg, const Tile& dst, const TensorView& t,
                const Slab& slab) {
  const int64_t np = cfg.mx_tkg_partitions(), q = cfg.mx_tkg_chunks(), lc = slab.c1 - slab.c0;
  const int64_t rows = lc * q, group = std::max<int64_t>(1, cfg.partitions / rows);
  const int64_t tokens = t.numel() / cfg.h;  // a [B, S, H] tensor, or 1 for a [1, H] row
  const TensorView src = t.reshape({tokens, cfg.lnc * q, 4 * np});
  const bool whole = lc == cfg.lnc;  // a token's rows follow the previous token's
  std::vector<Tile> stages;
  for (int64_t t0 = slab.t0; t0 < slab.t1; t0 += group) {
    const int64_t g = std::min(group, slab.t1 - t0);
    stages.push_back(core.AllocateSbuf("mx_rows", {g * rows, 4 * np}, dst.dtype()));
    if (whole) {
      nisa::dma_copy(stages.back(),
                     t.reshape({tokens * cfg.lnc * q, 4 * np}).slice(0, t0 * rows, (t0 + g) * rows));
      continue;
    }
    for (int64_t tt = 0; tt < g; ++tt) {
      nisa::dma_copy(stages.back().slice(0, tt * rows, (tt + 1) * rows),
                     src.select(0, t0 + tt).slice(0, slab.c0 * q, slab.c1 * q));
    }
  }
  Tile psum[2] = {core.AllocatePsum("mx_rows_t", {np, group * rows, 4}, dst.dtype()),
                  core.AllocatePsum("mx_rows_t", {np, group * rows, 4}, dst.dtype())};
  for (size_t i = 0; i < stages.size(); ++i) {
    const int64_t t0 = slab.t0 + static_cast<int64_t>(i) * group, n = stages[i].partitions();
    const Tile out = psum[i % 2].slice(1, 0, n);
    for (int64_t j = 0; j < 4; ++j) {
      nisa::nc_transpose(out.select(2, j), stages[i].slice(1, j, j + 4 * (np - 1) + 1, 4),
                         Engine::kPE);
    }
    nisa::tensor_copy(dst.slice(1, t0 - slab.t0, t0 - slab.t0 + n / rows),
                      out.reshape({n / rows, lc, q, 4}));
  }
}

// A [1, H] row as [P, L, H1s], or for MX [P', L, Q, 4] (PartitionMajorRow), in its own dtype.
Tile LoadRow(NeuronCore& core, const FrontEndConfig& cfg, const char* name, const TensorView& row) {
  const TensorView view = PartitionMajorRow(row, cfg);
  Tile t = core.AllocateSbuf(name, view.shape(), row.dtype());
  if (cfg.mx()) {
    LoadMxRows(core, cfg, t.reshape({1, cfg.lnc, cfg.mx_tkg_chunks(), 4}), row,
               Slab{0, 1, 0, cfg.lnc});
  } else {
    nisa::dma_copy(t, view);
  }
  return t;
}

// Loads the slab in the input dtype (a casting DMA would move the wider dtype's bytes), adds the
// residuals in fp32 with one rounding into the input dtype, and stores this core's part of
// fused_hidden: chunk s of every token, or every chunk of its tokens when the norm splits them.
Tile LoadHidden(NeuronCore& core, const FrontEndConfig& cfg, const FrontEndInputs& p, const Slab& slab, int s,
                bool split, const TensorView& fused_hidden) {
  const TensorView view = slab.Of(p.input, cfg);
  // The MLP's front end loads whole rows and transposes on the PE (kernels/common/transposed_load.h).
  const bool by_transpose = cfg.short_tkg_front_end && !cfg.mx() &&
                            (slab.c1 - slab.c0) * (slab.t1 - slab.t0) <= cfg.partitions;
  auto load = [&](const std::string& name, const TensorView& tensor) {
    if (by_transpose) {
      return LoadPartitionMajorByTranspose(core, cfg, name, tensor, slab.t0, slab.t1, slab.c0,
                                           slab.c1);
    }
    Tile t = core.AllocateSbuf(name, view.shape(), cfg.io_dtype);
    if (cfg.mx()) {
      LoadMxRows(core, cfg, t, tensor, slab);  // contiguous rows, PE-transposed
    } else {
      DmaInPieces(t, slab.Of(tensor, cfg), 1);
    }
    return t;
  };
  if (by_transpose && p.residual_add() && !p.residual2.valid()) {
    // The MLP's one residual: added on the rows (one rounding, as below), fused_hidden stored
    // from them in whole rows (from the transposed layout each run is H1s elements, one DMA
    // descriptor), and the sum alone transposed.
    const int64_t nt = slab.t1 - slab.t0, nc = slab.c1 - slab.c0, shard = cfg.h / cfg.lnc;
    Tile xr = LoadTokenRows(core, cfg, "hidden", p.input, slab.t0, slab.t1, slab.c0, slab.c1);
    const Tile rr =
        LoadTokenRows(core, cfg, "residual", p.residual, slab.t0, slab.t1, slab.c0, slab.c1);
    nisa::tensor_tensor(xr, xr, rr, AluOp::kAdd);
    if (fused_hidden.valid()) {
      const int64_t k0 = split ? slab.c0 : s, k1 = split ? slab.c1 : s + 1;
      const TensorView rows = fused_hidden.reshape({cfg.tokens, cfg.h}).slice(0, slab.t0, slab.t1);
      for (int64_t k = k0; k < k1; ++k) {
        nisa::dma_copy(rows.slice(1, k * shard, (k + 1) * shard),
                       xr.slice(0, (k - slab.c0) * nt, (k - slab.c0 + 1) * nt));
      }
    }
    return TransposeTokenRows(core, cfg, "hidden", xr, nt, nc);
  }
  Tile x = load("hidden", p.input);
  if (!p.residual_add()) return x;
  Tile r = load("residual", p.residual);
  if (p.residual2.valid()) {
    Tile sum = core.AllocateSbuf("residual_sum", view.shape(), DType::kFloat32);
    nisa::tensor_tensor(sum, x, r, AluOp::kAdd);
    if (cfg.mx()) {
      LoadMxRows(core, cfg, r, p.residual2, slab);
    } else {
      DmaInPieces(r, slab.Of(p.residual2, cfg), 1);
    }
    nisa::tensor_tensor(x, sum, r, AluOp::kAdd);
  } else {  // one residual (the MLP's): one add
    nisa::tensor_tensor(x, x, r, AluOp::kAdd);
  }
  if (!fused_hidden.valid()) return x;  // the MLP without store_fused_hidden
  const int64_t k0 = split ? slab.c0 : s, k1 = split ? slab.c1 : s + 1;
  const TensorView dst =
      PartitionMajor(fused_hidden, cfg).slice(1, slab.t0, slab.t1).slice(2, k0, k1);
  nisa::dma_copy(dst, x.slice(2, k0 - slab.c0, k1 - slab.c0));
  return x;
}

// [P, T] per-token column viewed across the F free elements of each token.
Tile PerToken(const Tile& column, int64_t f) {
  return column.reshape({column.free_size(), 1}).broadcast(2, f);
}

// Sums over H of [P, T, F] tiles: a free-axis reduce per partition, then a matmul with an all-ones
// [P, P] stationary that sums across the partitions and broadcasts the total to every partition.
class SumOverH {
 public:
  SumOverH(NeuronCore& core, const FrontEndConfig& cfg, int64_t np, int64_t nt)
      : ones_(core.AllocateSbuf("ones", {np, np}, DType::kFloat32)),
        eps_(core.AllocateSbuf("eps", {np, 1}, DType::kFloat32)),
        partial_(core.AllocateSbuf("partition_sums", {np, nt}, DType::kFloat32)),
        total_(core.AllocatePsum("h_sums", {np, nt})) {
    nisa::memset(ones_, 1.0f, Engine::kGpSimd);
    nisa::memset(eps_, static_cast<float>(cfg.eps), Engine::kGpSimd);
  }
  // The [P, T] PSUM totals of src (valid until the next call).
  const Tile& operator()(const Tile& src) {
    nisa::tensor_reduce(partial_, AluOp::kAdd, src, {2});
    nisa::nc_matmul(total_, ones_, partial_);
    return total_;
  }
  const Tile& eps() const { return eps_; }

 private:
  Tile ones_, eps_, partial_, total_;
};

// RMS / LayerNorm of x [P, T, L, H1s] over all of H; returns [P, T, L, H1s] in the
// compute dtype.
Tile Normalize(NeuronCore& core, const FrontEndConfig& cfg, const FrontEndInputs& p, const Tile& x) {
  // x's partitions: all of them, or for MX with a small H shard the ones it fills.
  const int64_t np = x.partitions(), nt = x.free_shape()[0], f = cfg.h / np;
  const Tile xf = x.reshape({nt, f});
  SumOverH sum_over_h(core, cfg, np, nt);
  Tile centered = xf;
  const bool layer_norm = cfg.norm == NormType::kLayerNorm;
  if (layer_norm) {
    Tile mean = core.AllocateSbuf("mean", {np, nt}, DType::kFloat32);
    nisa::tensor_scalar(mean, sum_over_h(xf),
                        {.op0 = AluOp::kMultiply, .operand0 = 1.0f / cfg.h});
    centered = core.AllocateSbuf("centered", {np, nt, f}, DType::kFloat32);
    nisa::tensor_tensor(centered, xf, PerToken(mean, f), AluOp::kSubtract);
  }
  Tile tmp = core.AllocateSbuf("norm_tmp", {np, nt, f}, DType::kFloat32);
  nisa::tensor_tensor(tmp, centered, centered, AluOp::kMultiply);
  // LayerNorm ignores hidden_actual (reference and golden alike); RMS divides by it.
  const double divisor = layer_norm ? static_cast<double>(cfg.h) : cfg.hidden_actual;
  Tile rstd = core.AllocateSbuf("rstd", {np, nt}, DType::kFloat32);
  ReciprocalStd(rstd, sum_over_h(tmp), static_cast<float>(1.0 / divisor), sum_over_h.eps());
  nisa::tensor_tensor(tmp, centered, PerToken(rstd, f), AluOp::kMultiply);

  const Tile gamma = LoadRow(core, cfg, "gamma", p.gamma);
  Tile normed = core.AllocateSbuf("normed", x.shape(), cfg.compute_dtype);
  const Tile out = normed.reshape({nt, f});
  const Tile g = gamma.reshape({1, f}).broadcast(1, nt);
  if (!p.beta.valid()) {
    nisa::tensor_tensor(out, tmp, g, AluOp::kMultiply);
    return normed;
  }
  const Tile beta = LoadRow(core, cfg, "beta", p.beta);
  nisa::tensor_tensor(tmp, tmp, g, AluOp::kMultiply);
  nisa::tensor_tensor(out, tmp, beta.reshape({1, f}).broadcast(1, nt), AluOp::kAdd);
  return normed;
}

// FrontEndConfig::short_tkg_front_end with RMSNorm (x [P, T, L, H1s], every H chunk of the slab's
// tokens): x * gamma runs on GpSimd beside the statistics (Vector, PE, Scalar), so one multiply
// by 1 / rms per H shard follows them. Split tokens: the other core's shard first, sent as soon as
// it is ready, then this core's own straight into the result (no copy); not split: this core's
// shard only. The same values as Normalize's but for the order of two fp32 multiplies.
Tile ShortRmsNorm(NeuronCore& core, const FrontEndConfig& cfg, const FrontEndInputs& in,
                  const Tile& x, int s, bool split, const Slab& slab) {
  const int64_t np = x.partitions(), nt = x.free_shape()[0], f = cfg.h / np;
  const int64_t h1s = cfg.shard_subtiles();
  SumOverH sum_over_h(core, cfg, np, nt);
  const Tile gamma = LoadRow(core, cfg, "gamma", in.gamma);
  Tile x_gamma = core.AllocateSbuf("x_gamma", {np, nt, cfg.lnc, h1s}, DType::kFloat32);
  nisa::tensor_tensor(x_gamma.reshape({nt, f}), x.reshape({nt, f}),
                      gamma.reshape({1, f}).broadcast(1, nt), AluOp::kMultiply, Engine::kGpSimd);
  Tile squares = core.AllocateSbuf("norm_tmp", {np, nt, f}, DType::kFloat32);
  nisa::tensor_tensor(squares, x.reshape({nt, f}), x.reshape({nt, f}), AluOp::kMultiply);
  Tile rstd = core.AllocateSbuf("rstd", {np, nt}, DType::kFloat32);
  ReciprocalStd(rstd, sum_over_h(squares), static_cast<float>(1.0 / cfg.hidden_actual),
                sum_over_h.eps());
  auto scale = [&](const Tile& dst, int c) {
    nisa::tensor_tensor(dst, x_gamma.select(2, c), PerToken(rstd, h1s), AluOp::kMultiply);
  };
  Tile x_in = core.AllocateSbuf("x_in", ShardShape(cfg), cfg.compute_dtype);
  if (!split) {
    scale(x_in, s);
    return x_in;
  }
  Tile peer_shard = core.AllocateSbuf("normed_peer_shard", {np, nt, h1s}, cfg.compute_dtype);
  scale(peer_shard, 1 - s);
  const int64_t half = cfg.tokens / 2, p0 = s == 0 ? half : 0, p1 = s == 0 ? cfg.tokens : half;
  nisa::sendrecv(peer_shard, x_in.slice(1, p0, p1));
  scale(x_in.slice(1, slab.t0, slab.t1), s);  // after the sendrecv: it does not wait for this write
  return x_in;
}

}  // namespace

Tile TkgPrologue(const KernelContext& ctx, const FrontEndConfig& cfg, const FrontEndInputs& in,
                 const TensorView& fused_hidden) {
  const int s = ctx.prg_id;
  const bool norm = cfg.norm != NormType::kNoNorm, split = TkgSplitsNormTokens(cfg);
  const int64_t tokens = cfg.tokens, half = tokens / 2;
  const Slab slab{split && s == 1 ? half : 0, split && s == 0 ? half : tokens, norm ? 0 : s,
                  norm ? cfg.lnc : s + 1};
  NeuronCore& core = ctx.core;
  const Tile x = LoadHidden(core, cfg, in, slab, s, split, fused_hidden);
  if (cfg.short_tkg_front_end && cfg.norm == NormType::kRmsNorm && !cfg.mx()) {
    return ShortRmsNorm(core, cfg, in, x, s, split, slab);
  }
  if (norm && !split) return Normalize(core, cfg, in, x).select(2, s);
  if (!norm && cfg.io_dtype == cfg.compute_dtype) return x.select(2, 0);
  Tile x_in = core.AllocateSbuf("x_in", ShardShape(cfg), cfg.compute_dtype);
  if (!norm) {
    nisa::tensor_copy(x_in, x.select(2, 0));
    return x_in;
  }
  // Each core normalised half the tokens over all of H; swap the halves of each other's shard.
  const Tile normed = Normalize(core, cfg, in, x);
  nisa::tensor_copy(x_in.slice(1, slab.t0, slab.t1), normed.select(2, s));
  const int64_t p0 = s == 0 ? half : 0, p1 = s == 0 ? tokens : half;
  nisa::sendrecv(normed.select(2, 1 - s), x_in.slice(1, p0, p1));
  return x_in;
}

}  // namespace nkisim::kernels
