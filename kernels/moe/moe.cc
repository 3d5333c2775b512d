#include "kernels/moe/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "runtime/error.h"
#include "runtime/nisa/dma_indirect.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels::moe {
namespace {

using namespace nisa;
constexpr int64_t kP = 128, kBank = 512;

[[noreturn]] void Fail(const char* op, const std::string& rule) {
  Raise(ErrorCode::kInvalidArgument, StrCat(op, ": ", rule));
}

void RequireLnc1(const KernelContext& ctx, const char* op) {
  if (ctx.n_prgs != 1) Fail(op, StrCat("lnc = ", ctx.n_prgs, "; the rule is lnc = 1 (so far)"));
}

void Require2D(const char* op, const char* name, const TensorView& t, int64_t rows, int64_t cols) {
  if (t.rank() != 2 || t.dim(0) != rows || t.dim(1) != cols) {
    Fail(op, StrCat(name, " is ", ShapeString(t.shape()), "; the rule is [", rows, ", ", cols, "]"));
  }
}

// x rows [r0, r0 + rb) transposed into SBUF tiles [kk, rb], one per 128-row K tile of H.
std::vector<Tile> TransposedRows(NeuronCore& core, const TensorView& x, int64_t r0, int64_t rb) {
  const int64_t h = x.dim(1);
  std::vector<Tile> xt;
  for (int64_t k0 = 0; k0 < h; k0 += kP) {
    const int64_t kk = std::min(kP, h - k0);
    Tile blk = core.AllocateSbuf("x_block", {rb, kk}, x.dtype());
    dma_copy(blk, x.slice(0, r0, r0 + rb).slice(1, k0, k0 + kk));
    Tile t = core.AllocatePsum("x_t_psum", {kk, rb}, x.dtype());
    nc_transpose(t, blk, Engine::kPE);
    Tile s = core.AllocateSbuf("x_t", {kk, rb}, x.dtype());
    tensor_copy(s, t, Engine::kVector);
    xt.push_back(s);
  }
  return xt;
}

// Index arrays in HBM the way the gathers read them: a [128, tiles] int32 tensor whose column c
// holds the indices of rows [c * 128, c * 128 + 128) of `values` (partition p: row c * 128 + p;
// past the end: index 0, never read). One contiguous run of 4 x tiles bytes a partition, so one
// DMA loads the indices of up to kIndexColumns gathers.
constexpr int64_t kIndexColumns = 512;

TensorView IndexColumns(const std::vector<int64_t>& values, int64_t tiles) {
  const TensorView t = TensorView::Create({kP, std::max<int64_t>(tiles, 1)}, DType::kInt32, "gather_index");
  std::vector<float> v(static_cast<size_t>(kP * std::max<int64_t>(tiles, 1)), 0.0f);
  for (int64_t c = 0; c < tiles; ++c) {
    for (int64_t p = 0; p < kP; ++p) {
      const int64_t i = c * kP + p;
      if (i < static_cast<int64_t>(values.size())) v[p * tiles + c] = static_cast<float>(values[i]);
    }
  }
  t.FromFloats(v);
  return t;
}

// Index values pass through fp32 (TensorView::FromFloats, Tile::get): exact below 2^24.
constexpr int64_t kMaxIndex = int64_t{1} << 24;

// The HBM side of an indirect DMA over the rows of a 2-D view: partition p addresses row idx[p].
IndirectRows IndirectRowsOf(const TensorView& rows, const Tile& idx) {
  AccessPattern ap;
  ap.offset = rows.offset();
  ap.dims = {{0, idx.partitions()}, {rows.strides()[1], rows.dim(1)}};
  return IndirectRows{rows.ap(ap), idx, rows.strides()[0], false};
}

}  // namespace

void RouterLogitsKernel(const KernelContext& ctx, const TensorView& x, const TensorView& w,
                        const TensorView& logits) {
  constexpr const char* kOp = "moe router";
  RequireLnc1(ctx, kOp);
  if (x.rank() != 2) Fail(kOp, StrCat("x is ", ShapeString(x.shape()), "; the rule is [T, H]"));
  const int64_t t = x.dim(0), h = x.dim(1);
  if (w.rank() != 2) Fail(kOp, StrCat("w is ", ShapeString(w.shape()), "; the rule is [H, E]"));
  const int64_t e = w.dim(1);
  Require2D(kOp, "w", w, h, e);
  Require2D(kOp, "logits", logits, t, e);
  if (w.dtype() != x.dtype()) Fail(kOp, "w's dtype must be x's");
  NeuronCore& core = ctx.core;
  for (int64_t r0 = 0; r0 < t; r0 += kP) {
    const int64_t rb = std::min(kP, t - r0);
    const std::vector<Tile> xt = TransposedRows(core, x, r0, rb);
    for (int64_t e0 = 0; e0 < e; e0 += kBank) {
      const int64_t ew = std::min(kBank, e - e0);
      Tile acc = core.AllocatePsum("logits_psum", {rb, ew});
      for (size_t kt = 0; kt < xt.size(); ++kt) {
        const int64_t k0 = static_cast<int64_t>(kt) * kP, kk = xt[kt].partitions();
        Tile wt = core.AllocateSbuf("w_router", {kk, ew}, w.dtype());
        dma_copy(wt, w.slice(0, k0, k0 + kk).slice(1, e0, e0 + ew));
        nc_matmul(acc, xt[kt], wt, {.accumulate = kt > 0});
      }
      Tile out = core.AllocateSbuf("logits", {rb, ew}, DType::kFloat32);
      tensor_copy(out, acc, Engine::kVector);
      dma_copy(logits.slice(0, r0, r0 + rb).slice(1, e0, e0 + ew), out);
    }
  }
}

Routing SelectExperts(const TensorView& logits, int64_t top_k, RouterFamily family) {
  const int64_t t = logits.dim(0), e = logits.dim(1);
  if (top_k < 1 || top_k > e) {
    Fail("moe router", StrCat("top_k = ", top_k, "; the rule is 1 <= top_k <= experts (", e, ")"));
  }
  if (family == RouterFamily::kLlama4 && top_k != 1) {
    Fail("moe router",
         StrCat("top_k = ", top_k, "; the rule for llama4 (sigmoid top-1) is top_k = 1"));
  }
  const std::vector<float> all = logits.ToFloats();
  Routing r;
  r.tokens = t;
  r.top_k = top_k;
  std::vector<int> idx(static_cast<size_t>(e));
  for (int64_t i = 0; i < t; ++i) {
    const float* row = all.data() + i * e;
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + top_k, idx.end(), [&](int a, int b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    const float mx = row[idx[0]];
    float denom = 0;
    if (family == RouterFamily::kQwen3) {  // softmax over all, then renormalise the k
      for (int64_t j = 0; j < top_k; ++j) denom += std::exp(row[idx[j]] - mx);
    } else if (family != RouterFamily::kLlama4) {
      for (int64_t j = 0; j < top_k; ++j) denom += std::exp(row[idx[j]] - mx);
    }
    // Qwen3's renormalised softmax equals the softmax over the k selected (the full softmax's
    // denominator cancels), so both rules compute exp(l - max) / sum over the k.
    for (int64_t j = 0; j < top_k; ++j) {
      r.expert.push_back(idx[j]);
      r.weight.push_back(family == RouterFamily::kLlama4
                             ? 1.0f / (1.0f + std::exp(-row[idx[j]]))
                             : std::exp(row[idx[j]] - mx) / denom);
    }
  }
  return r;
}

Routing SkewedRouting(int64_t tokens, int64_t experts, int64_t top_k, const RouterSkew& skew,
                      uint32_t seed) {
  constexpr const char* kOp = "router skew";
  if (top_k < 1 || top_k > experts) {
    Fail(kOp, StrCat("top_k = ", top_k, "; the rule is 1 <= top_k <= experts (", experts, ")"));
  }
  std::mt19937 rng(seed);
  Routing r;
  r.tokens = tokens;
  r.top_k = top_k;
  if (skew.kind == RouterSkew::Kind::kCounts) {
    const auto& c = skew.counts;
    if (static_cast<int64_t>(c.size()) != experts) {
      Fail(kOp, StrCat("counts has ", c.size(), " entries; the rule is one per expert (", experts,
                       ")"));
    }
    int64_t sum = 0;
    for (size_t e = 0; e < c.size(); ++e) {
      if (c[e] < 0 || c[e] > tokens) {
        Fail(kOp, StrCat("counts[", e, "] = ", c[e], "; the rule is 0 <= count <= tokens (",
                         tokens, "): an expert gets a token at most once"));
      }
      sum += c[e];
    }
    if (sum != tokens * top_k) {
      Fail(kOp, StrCat("counts sum to ", sum, "; the rule is tokens x top_k = ", tokens, " x ",
                       top_k, " = ", tokens * top_k));
    }
    // Each token takes the k experts with the most rows still to fill (always feasible when
    // every count <= tokens and they sum to tokens x k).
    std::vector<int64_t> left = c;
    std::vector<int> order(static_cast<size_t>(experts));
    for (int64_t t = 0; t < tokens; ++t) {
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return left[a] > left[b]; });
      for (int64_t j = 0; j < top_k; ++j) {
        r.expert.push_back(order[j]);
        --left[order[j]];
      }
    }
  } else {
    std::vector<double> p(static_cast<size_t>(experts), 1.0);
    if (skew.kind == RouterSkew::Kind::kZipf) {
      if (!(skew.zipf_s >= 0)) Fail(kOp, StrCat("zipf_s = ", skew.zipf_s, "; the rule is s >= 0"));
      for (int64_t e = 0; e < experts; ++e) p[e] = 1.0 / std::pow(e + 1.0, skew.zipf_s);
    }
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<double> q = p;
      for (int64_t j = 0; j < top_k; ++j) {  // k draws without replacement
        std::discrete_distribution<int> d(q.begin(), q.end());
        const int e = d(rng);
        r.expert.push_back(e);
        q[e] = 0;
      }
    }
  }
  std::normal_distribution<float> n01(0.f, 1.f);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<float> l(static_cast<size_t>(top_k));
    float mx = -1e30f, z = 0;
    for (float& v : l) mx = std::max(mx, v = n01(rng));
    for (float& v : l) z += v = std::exp(v - mx);
    for (float v : l) r.weight.push_back(v / z);
  }
  return r;
}

DispatchPlan PlanDispatch(const Routing& routing, int64_t experts, int64_t capacity) {
  DispatchPlan p;
  p.experts = experts;
  p.capacity = capacity;
  const int64_t slots = routing.tokens * routing.top_k;
  std::vector<int64_t> count(static_cast<size_t>(experts), 0);
  std::vector<char> kept(static_cast<size_t>(slots), 0);
  for (int64_t s = 0; s < slots; ++s) {
    const int e = routing.expert[static_cast<size_t>(s)];
    if (e < 0 || e >= experts) {
      Fail("moe dispatch", StrCat("expert[", s, "] = ", e, "; the rule is 0 <= expert < ", experts));
    }
    if (capacity < 0 || count[e] < capacity) {
      ++count[e];
      kept[s] = 1;
    } else {
      ++p.dropped;
    }
  }
  p.offset.assign(static_cast<size_t>(experts) + 1, 0);
  for (int64_t e = 0; e < experts; ++e) p.offset[e + 1] = p.offset[e] + count[e];
  p.row_token.assign(static_cast<size_t>(p.rows()), 0);
  p.slot_row.assign(static_cast<size_t>(slots), -1);
  std::vector<int64_t> next(p.offset.begin(), p.offset.end() - 1);
  for (int64_t s = 0; s < slots; ++s) {  // token order inside each expert's block
    if (!kept[s]) continue;
    const int e = routing.expert[static_cast<size_t>(s)];
    p.slot_row[s] = next[e];
    p.row_token[next[e]++] = s / routing.top_k;
  }
  return p;
}

void DispatchKernel(const KernelContext& ctx, const DispatchPlan& plan, const TensorView& x,
                    const TensorView& x_perm) {
  constexpr const char* kOp = "moe dispatch";
  RequireLnc1(ctx, kOp);
  if (x.rank() != 2) Fail(kOp, StrCat("x is ", ShapeString(x.shape()), "; the rule is [T, H]"));
  const int64_t h = x.dim(1), rows = plan.rows();
  Require2D(kOp, "x_perm", x_perm, rows, h);
  if (static_cast<int64_t>(plan.row_token.size()) != rows) {
    Fail(kOp, StrCat("the plan has ", plan.row_token.size(), " row tokens; the rule is one per row (",
                     rows, ")"));
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = plan.row_token[r];
    if (t < 0 || t >= x.dim(0)) {
      Fail(kOp, StrCat("row_token[", r, "] = ", t, "; the rule is 0 <= token < ", x.dim(0)));
    }
  }
  if (x.dim(0) > kMaxIndex) {
    Fail(kOp, StrCat("x has ", x.dim(0), " token rows; the rule is at most 2^24 (the indices' range)"));
  }
  if (rows == 0) return;
  NeuronCore& core = ctx.core;
  const int64_t tiles = (rows + kP - 1) / kP;
  const TensorView index = IndexColumns(plan.row_token, tiles);
  for (int64_t c0 = 0; c0 < tiles; c0 += kIndexColumns) {
    const int64_t cols = std::min(kIndexColumns, tiles - c0);
    Tile idx = core.AllocateSbuf("dispatch_index", {kP, cols}, DType::kInt32);
    dma_copy(idx, index.slice(1, c0, c0 + cols));
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t r0 = (c0 + c) * kP, rb = std::min(kP, rows - r0);
      Tile blk = core.AllocateSbuf("dispatch_rows", {rb, h}, x.dtype());
      dma_copy_indirect(blk, IndirectRowsOf(x, idx.slice(0, 0, rb).slice(1, c, c + 1)));
      dma_copy(x_perm.slice(0, r0, r0 + rb), blk);
    }
  }
}

void ExpertMlpKernel(const KernelContext& ctx, const TensorView& x, const TensorView& wg,
                     const TensorView& wu, const TensorView& wd, const TensorView& y) {
  constexpr const char* kOp = "moe expert mlp";
  RequireLnc1(ctx, kOp);
  const int64_t n = x.dim(0), h = x.dim(1), inter = wg.dim(1);
  Require2D(kOp, "wg", wg, h, inter);
  Require2D(kOp, "wu", wu, h, inter);
  Require2D(kOp, "wd", wd, inter, h);
  Require2D(kOp, "y", y, n, h);
  if (wg.dtype() != x.dtype() || wu.dtype() != x.dtype() || wd.dtype() != x.dtype()) {
    Fail(kOp, "wg, wu and wd must have x's dtype");
  }
  NeuronCore& core = ctx.core;
  const DType dt = x.dtype();
  for (int64_t r0 = 0; r0 < n; r0 += kP) {
    const int64_t rb = std::min(kP, n - r0);
    const std::vector<Tile> xt = TransposedRows(core, x, r0, rb);
    // act^T [I tile, rb] = silu(Wg^T x^T) * (Wu^T x^T): weights stationary, tokens moving.
    std::vector<Tile> act;
    for (int64_t i0 = 0; i0 < inter; i0 += kP) {
      const int64_t ii = std::min(kP, inter - i0);
      Tile g = core.AllocatePsum("gate_psum", {ii, rb});
      Tile u = core.AllocatePsum("up_psum", {ii, rb});
      for (size_t kt = 0; kt < xt.size(); ++kt) {
        const int64_t k0 = static_cast<int64_t>(kt) * kP, kk = xt[kt].partitions();
        Tile wgt = core.AllocateSbuf("wg", {kk, ii}, dt);
        dma_copy(wgt, wg.slice(0, k0, k0 + kk).slice(1, i0, i0 + ii));
        nc_matmul(g, wgt, xt[kt], {.accumulate = kt > 0});
        Tile wut = core.AllocateSbuf("wu", {kk, ii}, dt);
        dma_copy(wut, wu.slice(0, k0, k0 + kk).slice(1, i0, i0 + ii));
        nc_matmul(u, wut, xt[kt], {.accumulate = kt > 0});
      }
      Tile sg = core.AllocateSbuf("silu_gate", {ii, rb}, DType::kFloat32);
      activation(sg, ActFn::kSilu, g);
      Tile a = core.AllocateSbuf("act_t", {ii, rb}, dt);
      tensor_tensor(a, sg, u, AluOp::kMultiply, Engine::kVector);
      act.push_back(a);
    }
    // y [rb, H bank] = act Wd: act^T stationary, Wd moving.
    int eviction = 0;
    for (int64_t h0 = 0; h0 < h; h0 += kBank) {
      const int64_t hw = std::min(kBank, h - h0);
      Tile acc = core.AllocatePsum("down_psum", {rb, hw});
      for (size_t it = 0; it < act.size(); ++it) {
        const int64_t i0 = static_cast<int64_t>(it) * kP, ii = act[it].partitions();
        Tile wdt = core.AllocateSbuf("wd", {ii, hw}, dt);
        dma_copy(wdt, wd.slice(0, i0, i0 + ii).slice(1, h0, h0 + hw));
        nc_matmul(acc, act[it], wdt, {.accumulate = it > 0});
      }
      Tile out = core.AllocateSbuf("y", {rb, hw}, y.dtype());
      tensor_copy(out, acc, eviction++ % 2 == 0 ? Engine::kVector : Engine::kScalar);
      dma_copy(y.slice(0, r0, r0 + rb).slice(1, h0, h0 + hw), out);
    }
  }
}

void CombineKernel(const KernelContext& ctx, const DispatchPlan& plan, const TensorView& weights,
                   const TensorView& y_perm, const TensorView* shared, const TensorView& out) {
  constexpr const char* kOp = "moe combine";
  RequireLnc1(ctx, kOp);
  const int64_t t = out.dim(0), h = out.dim(1), k = weights.dim(1);
  Require2D(kOp, "weights", weights, t, k);
  if (weights.dtype() != DType::kFloat32) Fail(kOp, "weights must be fp32");
  Require2D(kOp, "y_perm", y_perm, plan.rows(), h);
  if (static_cast<int64_t>(plan.slot_row.size()) != t * k) {
    Fail(kOp, StrCat("the plan has ", plan.slot_row.size(), " slots; the rule is T x k = ", t * k));
  }
  if (shared != nullptr) Require2D(kOp, "shared", *shared, t, h);
  NeuronCore& core = ctx.core;
  // slot_row as the router's top-k leaves it in HBM, [T, k] int32; a dropped choice (-1) points
  // past y_perm's buffer, so the gather skips it (oob skip) and its zeroed row adds nothing.
  const int64_t past_end =
      static_cast<int64_t>(y_perm.buffer().size_bytes() / SizeOf(y_perm.dtype())) /
          std::max<int64_t>(y_perm.strides()[0], 1) + 1;
  if (past_end > kMaxIndex) {
    Fail(kOp, StrCat("y_perm's buffer holds ", past_end - 1, " rows; the rule is fewer than 2^24 (the indices' range)"));
  }
  const TensorView slots = TensorView::Create({t, k}, DType::kInt32, "combine_slot_row");
  {
    std::vector<float> v(plan.slot_row.size());
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] = static_cast<float>(plan.slot_row[i] < 0 ? past_end : plan.slot_row[i]);
    }
    slots.FromFloats(v);
  }
  for (int64_t t0 = 0; t0 < t; t0 += kP) {
    const int64_t tb = std::min(kP, t - t0);
    Tile acc = core.AllocateSbuf("combine_acc", {tb, h}, DType::kFloat32);
    if (shared != nullptr) {
      Tile s = core.AllocateSbuf("shared", {tb, h}, shared->dtype());
      dma_copy(s, shared->slice(0, t0, t0 + tb));
      tensor_copy(acc, s, Engine::kVector);
    } else {
      memset(acc, 0.0f);
    }
    Tile w = core.AllocateSbuf("weights", {tb, k}, DType::kFloat32);
    dma_copy(w, weights.slice(0, t0, t0 + tb));
    Tile idx = core.AllocateSbuf("combine_index", {tb, k}, DType::kInt32);
    dma_copy(idx, slots.slice(0, t0, t0 + tb));
    for (int64_t j = 0; j < k; ++j) {
      Tile g = core.AllocateSbuf("expert_rows", {tb, h}, y_perm.dtype());
      bool any_dropped = false;
      for (int64_t p = 0; p < tb; ++p) any_dropped |= plan.slot_row[(t0 + p) * k + j] < 0;
      if (any_dropped) memset(g, 0.0f);  // a dropped choice adds nothing
      IndirectRows rows = IndirectRowsOf(y_perm, idx.slice(1, j, j + 1));
      rows.skip_out_of_bounds = any_dropped;
      dma_copy_indirect(g, rows);
      scalar_tensor_tensor(acc, g, AluOp::kMultiply, Scalar(w.slice(1, j, j + 1)), AluOp::kAdd, acc);
    }
    Tile o = core.AllocateSbuf("combined", {tb, h}, out.dtype());
    tensor_copy(o, acc, Engine::kScalar);
    dma_copy(out.slice(0, t0, t0 + tb), o);
  }
}

}  // namespace nkisim::kernels::moe
