#include "kernels/common/cte_prologue.h"

#include <algorithm>

#include "kernels/common/tiling.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

using nisa::AluOp;

// Columns per residual-add and sum-of-squares instruction: bounds their scratch tiles.
constexpr int64_t kColumnChunk = 2048;

// A [1, H] row as [P, H / P]: element (p, j) is row[j * P + p] (HOrder::kBlocked: row[p H / P + j],
// a plain reshape, one contiguous run a partition), the value of partition p in transposed
// subtile j. MX (subtile j = 4 c + v of chunk c, value v): row[4 (c P + p) + v], or
// for MX_INTERLEAVED input row[(v / 2) H / 2 + 2 (c P + p) + v % 2].
Tile LoadTransposedRow(NeuronCore& core, const char* name, const TensorView& row,
                       const FrontEndConfig& cfg, DType dtype, HOrder order) {
  const int64_t np = cfg.partitions, h1 = row.dim(1) / np;
  Tile t = core.AllocateSbuf(name, {np, h1}, dtype);
  if (!cfg.mx() && (order == HOrder::kBlocked || cfg.h_blocked)) {
    nisa::dma_copy(t, row.reshape({np, h1}));  // element (p, j) = column p * h1 + j
  } else if (!cfg.mx()) {
    nisa::dma_copy(t, row.reshape({h1, np}).permute({1, 0}));
  } else if (!cfg.mx_interleaved_input()) {
    nisa::dma_copy(t.reshape({cfg.mx_chunks(), 4}),
                   row.reshape({cfg.mx_chunks(), np, 4}).permute({1, 0, 2}));
  } else {
    nisa::dma_copy(t.reshape({cfg.mx_chunks(), 2, 2}),
                   row.reshape({2, cfg.mx_chunks(), np, 2}).permute({2, 1, 0, 3}));
  }
  return t;
}

}  // namespace

CtePrologue::CtePrologue(NeuronCore& core, const FrontEndConfig& cfg, const FrontEndInputs& in,
                         int buffers, HOrder h_order)
    : cfg_(cfg), in_(in), h_order_(cfg.h_blocked ? HOrder::kBlocked : h_order), r0_(buffers, 0), n_(buffers, 0) {
  const int64_t np = cfg.partitions, h1 = cfg.h / np;
  const int64_t chunk = std::min(cfg.h, kColumnChunk);
  for (int i = 0; i < buffers; ++i) {
    rows_.push_back(core.AllocateSbuf("rows", {np, cfg.h}, cfg.compute_dtype));
  }
  if (in.residual_add()) {
    for (Tile& r : residual_) r = core.AllocateSbuf("residual", {np, chunk}, cfg.compute_dtype);
  }
  const bool is_static = cfg.quant == QuantizationType::kStatic;
  if (in.gamma.valid()) {
    gamma_t_ = LoadTransposedRow(core, "gamma_t", in.gamma, cfg, cfg.compute_dtype, h_order);
  } else if (is_static) {
    gamma_t_ = core.AllocateSbuf("gamma_t", {np, h1}, cfg.compute_dtype);
    nisa::memset(gamma_t_, 1.0f, Engine::kGpSimd);
  }
  if (in.beta.valid()) {
    beta_t_ = LoadTransposedRow(core, "beta_t", in.beta, cfg, cfg.compute_dtype, h_order);
  }
  if (is_static) {  // (x * gamma + beta) / s_in = x * (gamma / s_in) + beta / s_in
    const Tile inv = LoadInverseInputScale(core, in.in_scale, np);
    nisa::tensor_scalar(gamma_t_, gamma_t_, {.op0 = AluOp::kMultiply, .operand0 = inv});
    if (beta_t_.valid()) {
      nisa::tensor_scalar(beta_t_, beta_t_, {.op0 = AluOp::kMultiply, .operand0 = inv});
    }
    fp8_max_ = static_cast<float>(MaxValue(cfg.weight_dtype));
  }
  if (cfg.norm != NormType::kNoNorm) {
    eps_ = core.AllocateSbuf("eps", {np, 1}, cfg.compute_dtype);
    nisa::memset(eps_, static_cast<float>(cfg.eps), Engine::kGpSimd);
    squares_ = core.AllocateSbuf("squares", {np, chunk}, DType::kFloat32);
    const int64_t groups =
        std::max((cfg.h + chunk - 1) / chunk, 6 * ((cfg.h + cfg.bank_cols - 1) / cfg.bank_cols));
    stats_ = core.AllocateSbuf("norm_stats", {np, groups}, DType::kFloat32);
    mean_var_ = core.AllocateSbuf("mean_var", {np, 2}, DType::kFloat32);
    rstd_ = core.AllocateSbuf("rstd", {np, 1}, DType::kFloat32);
  }
  const HardwareProfile& prof = core.profile();
  const int64_t bank_bytes = prof.psum_bytes_per_partition() / prof.psum_banks();
  group_ = std::min<int64_t>(h1, bank_bytes / (np * SizeOf(cfg.compute_dtype)));
  if (cfg.mx()) {
    group_ = std::max<int64_t>(4, group_ / 4 * 4);  // whole chunks of 4 subtiles
    for (Tile& t : transposed_)
      t = core.AllocatePsum("x_t_psum", {np, group_ / 4, np, 4}, cfg.compute_dtype);
    mx_stage_ = core.AllocateSbuf("x_t_mx_stage", {np, group_ / 4, np, 4}, cfg.compute_dtype);
    if (beta_t_.valid()) {
      scaled_ = core.AllocateSbuf("x_t_scaled", {np, group_ / 4, np, 4}, DType::kFloat32);
    }
    return;
  }
  for (Tile& t : transposed_)
    t = core.AllocatePsum("x_t_psum", {np, group_, np}, cfg.compute_dtype);
  if (is_static || beta_t_.valid()) {
    scaled_ = core.AllocateSbuf("x_t_scaled", {np, group_, np}, DType::kFloat32);
  }
}

void CtePrologue::Load(int slot, int64_t r0, int64_t n) {
  r0_[slot] = r0;
  n_[slot] = n;
  const TensorView rows = in_.input.reshape({cfg_.tokens, cfg_.h}).slice(0, r0, r0 + n);
  DmaInPieces(rows_[slot].slice(0, 0, n), rows, 1);
}

void CtePrologue::Prepare(int slot) {
  const Tile x = rows_[slot].slice(0, 0, n_[slot]);
  if (in_.residual_add()) ResidualAdd(x, r0_[slot]);
  if (fused_hidden_.valid()) {
    const TensorView rows = fused_hidden_.reshape({cfg_.tokens, cfg_.h});
    nisa::dma_copy(rows.slice(0, r0_[slot], r0_[slot] + x.partitions()), x);
  }
  if (cfg_.norm != NormType::kNoNorm) Normalize(x);
}

void CtePrologue::ResidualAdd(const Tile& x, int64_t r0) {
  const int64_t n = x.partitions(), chunk = residual_[0].free_size();
  const TensorView* sources[2] = {&in_.residual, &in_.residual2};
  for (int64_t c0 = 0; c0 < cfg_.h; c0 += chunk) {
    const int64_t c1 = std::min(cfg_.h, c0 + chunk);
    for (int i = 0; i < 2; ++i) {
      if (!sources[i]->valid()) continue;  // the MLP has one residual
      const Tile r = residual_[i].slice(0, 0, n).slice(1, 0, c1 - c0);
      DmaInPieces(
          r, sources[i]->reshape({cfg_.tokens, cfg_.h}).slice(0, r0, r0 + n).slice(1, c0, c1), 1);
      nisa::tensor_tensor(x.slice(1, c0, c1), x.slice(1, c0, c1), r, AluOp::kAdd);
    }
  }
}

void CtePrologue::Normalize(const Tile& x) {
  const int64_t n = x.partitions();
  const Tile rstd = rstd_.slice(0, 0, n), stats = stats_.slice(0, 0, n);
  if (cfg_.norm == NormType::kLayerNorm) {
    const int64_t w = cfg_.bank_cols;  // bn_stats takes at most one bank's worth of columns
    int64_t groups = 0;
    for (int64_t c0 = 0; c0 < cfg_.h; c0 += w, ++groups) {
      nisa::bn_stats(stats.slice(1, 6 * groups, 6 * groups + 6),
                     x.slice(1, c0, std::min(cfg_.h, c0 + w)));
    }
    const Tile mv = mean_var_.slice(0, 0, n);
    nisa::bn_aggr(mv, stats.slice(1, 0, 6 * groups));
    ReciprocalStd(rstd, mv.slice(1, 1, 2), 1.0f, eps_.slice(0, 0, n));
    nisa::tensor_scalar(x, x,
                        {.op0 = AluOp::kSubtract,
                         .operand0 = mv.slice(1, 0, 1),
                         .op1 = AluOp::kMultiply,
                         .operand1 = rstd});
    return;
  }
  const int64_t chunk = squares_.free_size();
  int64_t chunks = 0;
  for (int64_t c0 = 0; c0 < cfg_.h; c0 += chunk, ++chunks) {
    const int64_t c1 = std::min(cfg_.h, c0 + chunk);
    nisa::ActivationOptions sum_of_squares;
    sum_of_squares.reduce_op = AluOp::kAdd;
    sum_of_squares.reduce_res = stats.slice(1, chunks, chunks + 1);
    nisa::activation(squares_.slice(0, 0, n).slice(1, 0, c1 - c0), nisa::ActFn::kSquare,
                     x.slice(1, c0, c1), sum_of_squares);
  }
  const Tile sum = mean_var_.slice(0, 0, n).slice(1, 0, 1);
  nisa::tensor_reduce(sum, AluOp::kAdd, stats.slice(1, 0, chunks), {1});
  ReciprocalStd(rstd, sum, static_cast<float>(1.0 / cfg_.hidden_actual), eps_.slice(0, 0, n));
  nisa::tensor_scalar(x, x, {.op0 = AluOp::kMultiply, .operand0 = rstd});
}

void CtePrologue::Transpose(int slot, const Tile& x_t) {
  const Tile x = rows_[slot].slice(0, 0, n_[slot]);
  const int64_t n = x.partitions(), np = cfg_.partitions, h1 = cfg_.h / np;
  for (int64_t j0 = 0; j0 < h1; j0 += group_) {
    const int64_t g = std::min(group_, h1 - j0);
    const Tile bank = transposed_[turn_++ % 2];
    for (int64_t jj = 0; jj < g; ++jj) {
      const int64_t j = j0 + jj;
      // Subtile j's P columns: [j P, (j + 1) P), or for kBlocked every (H / P)-th from column j.
      const Tile cols = h_order_ == HOrder::kBlocked ? x.slice(1, j, j + h1 * (np - 1) + 1, h1)
                                                     : x.slice(1, j * np, (j + 1) * np);
      nisa::nc_transpose(bank.select(1, jj).slice(1, 0, n), cols, Engine::kPE);
    }
    EvictTransposed(x_t.slice(1, j0, j0 + g).slice(2, 0, n), bank.slice(1, 0, g).slice(2, 0, n),
                    j0);
  }
}

int64_t CtePrologue::MxColumn(int64_t j) const {
  const int64_t c = j / 4, v = j % 4, np = cfg_.partitions;
  if (!cfg_.mx_interleaved_input()) return c * 4 * np + v;
  return (v / 2) * (cfg_.h / 2) + 2 * c * np + v % 2;
}

void CtePrologue::TransposeMx(int slot, const Tile& x4_t, const Tile& xs_t) {
  const Tile x = rows_[slot].slice(0, 0, n_[slot]);
  const int64_t n = x.partitions(), np = cfg_.partitions, h1 = cfg_.h / np, step = MxStride();
  for (int64_t j0 = 0; j0 < h1; j0 += group_) {
    const int64_t g = std::min(group_, h1 - j0), gc = g / 4, c0 = j0 / 4;
    const Tile bank = transposed_[turn_++ % 2];
    for (int64_t jj = 0; jj < g; ++jj) {
      const int64_t col = MxColumn(j0 + jj);
      nisa::nc_transpose(bank.select(1, jj / 4).slice(1, 0, n).select(2, jj % 4),
                         x.slice(1, col, col + step * (np - 1) + 1, step), Engine::kPE);
    }
    const Tile stage = mx_stage_.slice(1, 0, gc).slice(2, 0, n);
    EvictTransposed(stage, bank.slice(1, 0, gc).slice(2, 0, n), j0);
    for (int64_t c = 0; c < gc; ++c) {
      nisa::quantize_mx(x4_t.select(1, c0 + c).slice(1, 0, n), stage.select(1, c),
                        xs_t.select(1, c0 + c).slice(1, 0, n));
    }
  }
}

void CtePrologue::EvictTransposed(const Tile& dst, const Tile& src, int64_t j0) {
  if (!gamma_t_.valid()) {
    nisa::tensor_copy(dst, src);
    return;
  }
  const int64_t g = src.free_shape()[0], n = src.free_shape()[1];
  // gamma / beta of the subtiles [j0, j0 + g) broadcast over the n rows: [P, g, n], or for MX
  // (src [P, g chunks, n, 4]) [P, g, n, 4].
  auto per_row = [&](const Tile& t) {
    if (cfg_.mx()) return t.slice(1, j0, j0 + 4 * g).reshape({g, 1, 4}).broadcast(2, n);
    return t.slice(1, j0, j0 + g).reshape({g, 1}).broadcast(2, n);
  };
  const bool is_static = cfg_.quant == QuantizationType::kStatic;
  if (!beta_t_.valid() && !is_static) {
    nisa::tensor_tensor(dst, src, per_row(gamma_t_), AluOp::kMultiply);
    return;
  }
  const Tile t = scaled_.slice(1, 0, g).slice(2, 0, n);  // MX: [P, g, n, 4]
  nisa::tensor_tensor(t, src, per_row(gamma_t_), AluOp::kMultiply);
  if (beta_t_.valid()) nisa::tensor_tensor(is_static ? t : dst, t, per_row(beta_t_), AluOp::kAdd);
  if (is_static) {
    nisa::tensor_scalar(
        dst, t,
        {.op0 = AluOp::kMin, .operand0 = fp8_max_, .op1 = AluOp::kMax, .operand1 = -fp8_max_});
  }
}

}  // namespace nkisim::kernels
