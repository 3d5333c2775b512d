// Workload "moe": one mixture-of-experts layer over moe_ep x moe_tp ranks (the plan's layout:
// model/moe_config.h). Every rank of EP position q, TP position p:
//   router              the router logits kernel on its EP position's tokens (x [T, H] @
//                       w_router [H, E], the same weights on every rank), the skew's bias added,
//                       the family's top-k (SelectExperts); checked against the fp64 logits and
//                       the fp64 rule's choices (RouteRef), except at near ties (below)
//   dispatch            the rows into per-expert blocks, experts in EP-rank order (DispatchKernel)
//   dispatch_all_to_all all_to_all_v over its "ep" group (the rank's TP position in every EP
//                       rank); the per-expert counts and the rows' token ids travel beside it by
//                       plain MPI (metadata, not priced)
//   experts             the received rows regrouped by local expert, then each local expert's
//                       MLP on its I / moe_tp columns (ExpertMlpKernel): a TP partial
//   expert_all_reduce   the partials summed over the "tp" group (all_reduce)
//   combine_all_to_all  the expert outputs back in the order they came, all_to_all_v back
//   combine             CombineKernel: out [T, H] = sum_j weight(t, j) * y(t, j)
// Each phase is checked against its plain reference on its own inputs (the data movements: bit
// for bit against plain MPI_Alltoallv / fp64 MPI_Allreduce calls) and against the chain's golden
// (the token rows regenerated from the RNG; the expert outputs with the full-I weights; the layer
// output against reference::MoeLayerRef of the whole layer on the regenerated inputs, with the
// golden's own routing).
// Near ties: where the kernel's fp32 logits and the fp64 ones order two experts differently
// within kMoeRouterTie of the k-th logit, either choice is right; the golden then takes the kernel's
// experts, weighted by the fp64 rule. A choice that differs elsewhere fails the router phase.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "collectives/all_to_all_v.h"
#include "collectives/collectives.h"
#include "kernels/moe/moe.h"
#include "kernels/reference/moe_ref.h"
#include "model/moe_config.h"
#include "model/moe_layer.h"
#include "model/workload.h"
#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

namespace moe = kernels::moe;
using collectives::CheckMpi;
using collectives::GroupComm;


struct MoeDims {
  int64_t h, e, k, inter, t, ep, tp, q, p, local, cols;
  int64_t first_expert() const { return q * local; }
};

MoeDims DimsOf(const PlanRun& run) {
  const proto::Scenario& s = run.scenario.spec;
  const proto::MoeShape& m = s.moe();
  MoeDims d{};
  d.h = s.model().hidden();
  d.e = m.experts();
  d.k = m.top_k();
  d.inter = m.intermediate();
  d.t = m.tokens();
  d.ep = run.plan.moe_ep;
  d.tp = run.plan.moe_tp;
  d.q = run.ctx.rank() / d.tp;
  d.p = run.ctx.rank() % d.tp;
  d.local = d.e / d.ep;
  d.cols = d.inter / d.tp;
  return d;
}

// The global tensors (counter-based RNG): x [EP, T, H] in [-1, 1); w_router [H, E], wg / wu
// [E, H, I] in +-sqrt(3 / H), wd [E, I, H] in +-sqrt(3 / I) (unit-variance activations).
struct ExpertWeights {
  TensorView wg, wu, wd;
};

TensorView TokenRows(const PlanRun& run, const MoeDims& d, int64_t first_token, int64_t n) {
  return Slice("moe_x", {n, d.h}, run.scenario.dtype, run.scenario.spec.seed(), -1, 1,
               [&](int64_t r, int64_t c) { return (first_token + r) * d.h + c; });
}

TensorView RouterWeights(const PlanRun& run, const MoeDims& d) {
  const float a = std::sqrt(3.0f / static_cast<float>(d.h));
  return Slice("moe_w_router", {d.h, d.e}, run.scenario.dtype, run.scenario.spec.seed(), -a, a,
               [&](int64_t r, int64_t c) { return r * d.e + c; });
}

// Expert e's weights, columns [col0, col0 + cols) of I (the rank's TP slice, or all of I).
ExpertWeights ExpertSlice(const PlanRun& run, const MoeDims& d, int64_t e, int64_t col0, int64_t cols) {
  const uint64_t seed = run.scenario.spec.seed();
  const DType dt = run.scenario.dtype;
  const float a = std::sqrt(3.0f / static_cast<float>(d.h)), b = std::sqrt(3.0f / static_cast<float>(d.inter));
  const int64_t base = e * d.h * d.inter;
  auto hi = [&](int64_t r, int64_t c) { return base + r * d.inter + col0 + c; };
  return {Slice("moe_wg", {d.h, cols}, dt, seed, -a, a, hi), Slice("moe_wu", {d.h, cols}, dt, seed, -a, a, hi),
          Slice("moe_wd", {cols, d.h}, dt, seed, -b, b,
                [&](int64_t r, int64_t c) { return base + (col0 + r) * d.h + c; })};
}

struct FloatWeights {
  std::vector<float> wg, wu, wd;
  reference::ExpertWeightsRef ref() const { return {&wg, &wu, &wd}; }
};
FloatWeights Floats(const ExpertWeights& w) { return {w.wg.ToFloats(), w.wu.ToFloats(), w.wd.ToFloats()}; }

// The family's weights of `experts` from the fp64 logits row (the golden's rule on a given
// selection): softmax over the selection (qwen3's renormalised softmax is the same), llama4 the
// sigmoid.
std::vector<double> RuleWeights(const double* row, const std::vector<int>& experts,
                                reference::RouterFamily family) {
  std::vector<double> w(experts.size());
  if (family == reference::RouterFamily::kLlama4) {
    for (size_t j = 0; j < w.size(); ++j) w[j] = 1.0 / (1.0 + std::exp(-row[experts[j]]));
    return w;
  }
  double mx = -1e300, z = 0;
  for (int e : experts) mx = std::max(mx, row[e]);
  for (size_t j = 0; j < w.size(); ++j) z += w[j] = std::exp(row[experts[j]] - mx);
  for (double& v : w) v /= z;
  return w;
}

}  // namespace

int64_t ReconcileRouting(const std::vector<double>& ref, int64_t experts, const moe::Routing& kernel,
                         const reference::RoutingRef& rule, reference::RouterFamily family,
                         reference::RoutingRef* golden) {
  *golden = rule;
  const int64_t k = rule.top_k;
  int64_t wrong = 0;
  for (int64_t t = 0; t < rule.tokens; ++t) {
    const auto first = static_cast<size_t>(t * k);
    std::vector<int> ks(kernel.expert.begin() + first, kernel.expert.begin() + first + k);
    std::vector<int> gs(rule.expert.begin() + first, rule.expert.begin() + first + k);
    std::set<int> kset(ks.begin(), ks.end()), gset(gs.begin(), gs.end());
    if (kset == gset) continue;
    const double* row = ref.data() + t * experts;
    const double kth = row[gs.back()];  // the golden's k-th largest
    bool tie = true;
    for (int e : ks) tie = tie && (gset.contains(e) || std::abs(row[e] - kth) <= kMoeRouterTie);
    for (int e : gs) tie = tie && (kset.contains(e) || std::abs(row[e] - kth) <= kMoeRouterTie);
    if (!tie) {
      ++wrong;
      continue;
    }
    const std::vector<double> w = RuleWeights(row, ks, family);
    for (int64_t j = 0; j < k; ++j) {
      golden->expert[first + j] = ks[j];
      golden->weight[first + j] = w[j];
    }
  }
  return wrong;
}

namespace {

// The router's checks: the logits (fp32 vs fp64, the phase's tolerance) and the choices (one per
// token: ReconcileRouting); fills *golden with the routing the layer golden uses.
reference::Comparison RouterCheck(const std::vector<float>& logits, const std::vector<double>& ref,
                                  const moe::Routing& kernel, const reference::RoutingRef& rule,
                                  const MoeDims& d, reference::RouterFamily family,
                                  const reference::Tolerance& tol, reference::RoutingRef* golden) {
  reference::Comparison c = reference::Compare(logits, ref, tol);
  c.elements += d.t;  // one choice check per token
  c.failures += ReconcileRouting(ref, d.e, kernel, rule, family, golden);
  return c;
}

// Rows of `t` (contiguous [rows, H]) moved by one plain MPI_Alltoallv of bytes over `g`: the
// data movement's reference. Returns the received rows as floats.
std::vector<float> RawAllToAllV(const GroupComm& g, const TensorView& t, const std::vector<int64_t>& send,
                                const std::vector<int64_t>& recv) {
  const int n = g.size();
  const int64_t row_bytes = t.shape().back() * static_cast<int64_t>(SizeOf(t.dtype()));
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  int64_t s_off = 0, r_off = 0;
  for (int i = 0; i < n; ++i) {
    sc[i] = static_cast<int>(send[i] * row_bytes);
    rc[i] = static_cast<int>(recv[i] * row_bytes);
    sd[i] = static_cast<int>(s_off);
    rd[i] = static_cast<int>(r_off);
    s_off += sc[i];
    r_off += rc[i];
  }
  std::vector<std::byte> out(static_cast<size_t>(std::max<int64_t>(r_off, 1)));
  const std::byte* src = t.buffer().data() + t.offset() * static_cast<int64_t>(SizeOf(t.dtype()));
  CheckMpi(MPI_Alltoallv(src, sc.data(), sd.data(), MPI_BYTE, out.data(), rc.data(), rd.data(),
                         MPI_BYTE, g.comm),
           "reference all_to_all_v");
  std::vector<float> values(static_cast<size_t>(r_off / static_cast<int64_t>(SizeOf(t.dtype()))));
  ToFloat(t.dtype(), out.data(), values.data(), values.size());
  return values;
}

// int64 values, `send[i]` for member i, by plain MPI_Alltoallv; the received ones in member order.
std::vector<int64_t> ExchangeInts(const GroupComm& g, const std::vector<int64_t>& values,
                                  const std::vector<int64_t>& send, const std::vector<int64_t>& recv) {
  const int n = g.size();
  std::vector<int> sc(n), sd(n), rc(n), rd(n);
  int so = 0, ro = 0;
  for (int i = 0; i < n; ++i) {
    sc[i] = static_cast<int>(send[i]);
    rc[i] = static_cast<int>(recv[i]);
    sd[i] = so;
    rd[i] = ro;
    so += sc[i];
    ro += rc[i];
  }
  std::vector<int64_t> out(static_cast<size_t>(std::max(ro, 1)));
  CheckMpi(MPI_Alltoallv(values.data(), sc.data(), sd.data(), MPI_INT64_T, out.data(), rc.data(),
                         rd.data(), MPI_INT64_T, g.comm),
           "moe metadata");
  out.resize(static_cast<size_t>(ro));
  return out;
}

std::vector<float> Rows(const TensorView& t, int64_t n) {
  return n == 0 ? std::vector<float>() : t.slice(0, 0, n).ToFloats();
}

// Everything the phases hand on.
struct MoeState {
  TensorView x, logits, x_perm, recv, x_local, y_local, y_sum, y_src, y_back, weights, out;
  moe::Routing routing;
  moe::DispatchPlan plan;      // this rank's tokens into per-expert blocks
  moe::DispatchPlan regroup;   // received rows (by source) into local-expert blocks
  moe::DispatchPlan ungroup;   // local-expert blocks back to source order
  reference::RoutingRef golden_routing;
  std::vector<int64_t> send_rows, recv_rows;
  std::vector<int64_t> recv_tokens;  // the global token of every received row (source order)
  std::vector<float> all_x;          // the golden x of every token of the EP group [EP T, H]
  std::vector<ExpertWeights> local;  // this rank's slices of its experts
  int64_t received = 0;
};

// The received rows (by source i, within it by local expert) regrouped into local-expert blocks
// (expert le's rows from source 0, then 1, ...): s->regroup gathers them, s->ungroup puts the
// expert outputs back in arrival order. counts[i * local + le]: rows source i sent expert le.
void RegroupPlans(const std::vector<int64_t>& counts, const MoeDims& d, MoeState* s) {
  s->regroup.experts = d.local;
  s->regroup.offset.assign(static_cast<size_t>(d.local) + 1, 0);
  for (int64_t le = 0; le < d.local; ++le) {
    int64_t n = 0;
    for (int64_t i = 0; i < d.ep; ++i) n += counts[i * d.local + le];
    s->regroup.offset[le + 1] = s->regroup.offset[le] + n;
  }
  s->regroup.row_token.assign(static_cast<size_t>(s->received), 0);
  s->ungroup.experts = 1;
  s->ungroup.offset = {0, s->received};
  s->ungroup.row_token.assign(static_cast<size_t>(s->received), 0);
  std::vector<int64_t> next(s->regroup.offset.begin(), s->regroup.offset.end() - 1);
  int64_t src_row = 0;
  for (int64_t i = 0; i < d.ep; ++i) {
    for (int64_t le = 0; le < d.local; ++le) {
      for (int64_t n = 0; n < counts[i * d.local + le]; ++n, ++src_row) {
        s->regroup.row_token[next[le]] = src_row;
        s->ungroup.row_token[src_row] = next[le]++;
      }
    }
  }
}

// One rank's MoE layer: the plan's shapes and groups, the state the phases hand on, one method
// per phase (the table in RunMoe runs them in order).
struct MoeLayer {
  explicit MoeLayer(PlanRun& r)
      : run(r), d(DimsOf(r)), family(reference::ParseRouterFamily(r.scenario.spec.moe().router())),
        lnc(r.ctx.lnc()), ep(r.ctx.group(kEpGroups)), tp(r.ctx.group(kTpGroups)), dt(r.scenario.dtype) {
    s.x = TokenRows(run, d, d.q * d.t, d.t);
    w_router = RouterWeights(run, d);
    for (int64_t le = 0; le < d.local; ++le) {
      s.local.push_back(ExpertSlice(run, d, d.first_expert() + le, d.p * d.cols, d.cols));
    }
  }
  PhaseOutput Router();
  PhaseOutput Dispatch();
  PhaseOutput DispatchAllToAll();
  PhaseOutput Experts();
  PhaseOutput ExpertAllReduce();
  PhaseOutput CombineAllToAll();
  PhaseOutput Combine();

  PlanRun& run;
  const MoeDims d;
  const reference::RouterFamily family;
  LogicalCore& lnc;
  const GroupComm& ep;
  const GroupComm& tp;
  const DType dt;
  TensorView w_router;
  MoeState s;
};

PhaseOutput MoeLayer::Router() {
  s.logits = TensorView::Create({d.t, d.e}, DType::kFloat32, "moe_logits");
  lnc.Launch([&](const KernelContext& c) { moe::RouterLogitsKernel(c, s.x, w_router, s.logits); });
  std::vector<float> biased = s.logits.ToFloats();
  for (int64_t i = 0; i < d.t * d.e; ++i) {
    biased[static_cast<size_t>(i)] += static_cast<float>(MoeRouterBias(run.scenario.spec.moe(), static_cast<int>(i % d.e)));
  }
  TensorView biased_view = TensorView::Create({d.t, d.e}, DType::kFloat32, "moe_logits_biased");
  biased_view.FromFloats(biased);
  s.routing = moe::SelectExperts(biased_view, d.k, family);
  // The golden: fp64 logits of the stored inputs, the same bias, the fp64 rule.
  std::vector<double> ref = reference::RouterLogitsRef(s.x.ToFloats(), w_router.ToFloats(), d.t, d.h, d.e);
  for (int64_t i = 0; i < d.t * d.e; ++i) ref[static_cast<size_t>(i)] += MoeRouterBias(run.scenario.spec.moe(), static_cast<int>(i % d.e));
  const reference::RoutingRef rule = reference::RouteRef(ref, d.t, d.e, d.k, family);
  PhaseOutput out;
  out.check = [this, biased, ref, rule](const reference::Tolerance& tol) {
    return RouterCheck(biased, ref, s.routing, rule, d, family, tol, &s.golden_routing);
  };
  out.chain = out.check;  // the layer's own input: its chain golden is the same
  return out;
}

PhaseOutput MoeLayer::Dispatch() {
  s.plan = moe::PlanDispatch(s.routing, d.e, -1);
  s.x_perm = TensorView::Create({std::max<int64_t>(s.plan.rows(), 1), d.h}, dt, "moe_x_perm");
  lnc.Launch([&](const KernelContext& c) {
    moe::DispatchKernel(c, s.plan, s.x, s.x_perm.slice(0, 0, s.plan.rows()));
  });
  s.send_rows.assign(static_cast<size_t>(d.ep), 0);
  for (int64_t j = 0; j < d.ep; ++j) {
    s.send_rows[j] = s.plan.offset[(j + 1) * d.local] - s.plan.offset[j * d.local];
  }
  const std::vector<float> x = s.x.ToFloats();
  std::vector<float> moved;
  for (int64_t r = 0; r < s.plan.rows(); ++r) {
    const auto t = static_cast<size_t>(s.plan.row_token[r]);
    moved.insert(moved.end(), x.begin() + t * d.h, x.begin() + (t + 1) * d.h);
  }
  std::vector<float> actual = Rows(s.x_perm, s.plan.rows());
  return MovementOutput(std::move(actual), moved, AsDoubles(moved));
}

PhaseOutput MoeLayer::DispatchAllToAll() {
  // Metadata (plain MPI, not priced): rows per (peer, local expert) and their global tokens.
  std::vector<int64_t> per_expert(static_cast<size_t>(d.e));
  for (int64_t e = 0; e < d.e; ++e) per_expert[e] = s.plan.offset[e + 1] - s.plan.offset[e];
  std::vector<int64_t> counts_in(static_cast<size_t>(d.e));
  CheckMpi(MPI_Alltoall(per_expert.data(), static_cast<int>(d.local), MPI_INT64_T, counts_in.data(),
                        static_cast<int>(d.local), MPI_INT64_T, ep.comm),
           "moe counts");
  s.recv_rows.assign(static_cast<size_t>(d.ep), 0);
  for (int64_t i = 0; i < d.ep; ++i) {
    for (int64_t le = 0; le < d.local; ++le) s.recv_rows[i] += counts_in[i * d.local + le];
    s.received += s.recv_rows[i];
  }
  std::vector<int64_t> tokens(static_cast<size_t>(s.plan.rows()));
  for (int64_t r = 0; r < s.plan.rows(); ++r) tokens[r] = d.q * d.t + s.plan.row_token[r];
  s.recv_tokens = ExchangeInts(ep, tokens, s.send_rows, s.recv_rows);
  RegroupPlans(counts_in, d, &s);
  s.recv = TensorView::Create({std::max<int64_t>(s.received, 1), d.h}, dt, "moe_recv");
  const collectives::AllToAllVResult sent =
      collectives::all_to_all_v(run.ctx, ep, s.x_perm.slice(0, 0, s.plan.rows()), s.send_rows, s.recv);
  if (sent.recv_rows != s.recv_rows) {
    Raise(ErrorCode::kInternal, "moe dispatch: all_to_all_v received other row counts than the "
                                "per-expert counts announced");
  }
  std::vector<float> moved = RawAllToAllV(ep, s.x_perm, s.send_rows, s.recv_rows);
  // The chain: every received row is its token's row of the regenerated input.
  TensorView group_x = TokenRows(run, d, 0, d.ep * d.t);
  s.all_x = group_x.ToFloats();
  std::vector<double> golden;
  golden.reserve(moved.size());
  for (int64_t tok : s.recv_tokens) {
    golden.insert(golden.end(), s.all_x.begin() + tok * d.h, s.all_x.begin() + (tok + 1) * d.h);
  }
  return MovementOutput(Rows(s.recv, s.received), std::move(moved), std::move(golden));
}

PhaseOutput MoeLayer::Experts() {
  const int64_t rows = std::max<int64_t>(s.received, 1);
  s.x_local = TensorView::Create({rows, d.h}, dt, "moe_x_local");
  s.y_local = TensorView::Create({rows, d.h}, dt, "moe_y_partial");
  if (s.received > 0) {
    lnc.Launch([&](const KernelContext& c) {
      moe::DispatchKernel(c, s.regroup, s.recv.slice(0, 0, s.received), s.x_local.slice(0, 0, s.received));
    });
  }
  std::vector<double> golden;
  for (int64_t le = 0; le < d.local; ++le) {
    const int64_t r0 = s.regroup.offset[le], r1 = s.regroup.offset[le + 1];
    if (r1 == r0) continue;
    const ExpertWeights& w = s.local[le];
    lnc.Launch([&](const KernelContext& c) {
      moe::ExpertMlpKernel(c, s.x_local.slice(0, r0, r1), w.wg, w.wu, w.wd, s.y_local.slice(0, r0, r1));
    });
    const FloatWeights f = Floats(w);
    const std::vector<double> y =
        reference::ExpertMlpRef(s.x_local.slice(0, r0, r1).ToFloats(), r1 - r0, d.h, d.cols, f.wg, f.wu, f.wd);
    golden.insert(golden.end(), y.begin(), y.end());
  }
  std::vector<float> actual = Rows(s.y_local, s.received);
  return PhaseOutput{actual, golden, {}, ChainCheck(actual, golden), {}};
}

PhaseOutput MoeLayer::ExpertAllReduce() {
  const int64_t rows = std::max<int64_t>(s.received, 1);
  // Both members of a TP group hold the same tokens, so the same rows (or none); moe_tp 1 has
  // nothing to reduce.
  if (d.tp == 1) {
    s.y_sum = s.y_local;
  } else {
    s.y_sum = TensorView::Create({rows, d.h}, dt, "moe_y_sum");
    if (s.received > 0) {
      collectives::all_reduce(run.ctx, tp, s.y_local.slice(0, 0, s.received), s.y_sum.slice(0, 0, s.received));
    }
  }
  const std::vector<float> partial = Rows(s.y_local, s.received);
  std::vector<double> sent(partial.begin(), partial.end()), local(partial.size());
  CheckMpi(MPI_Allreduce(sent.data(), local.data(), static_cast<int>(sent.size()), MPI_DOUBLE, MPI_SUM,
                         tp.comm),
           "reference all_reduce");
  // The chain: each local expert's whole MLP (all of I) on its rows of the regenerated input.
  std::vector<double> chain;
  chain.reserve(partial.size());
  for (int64_t le = 0; le < d.local; ++le) {
    const int64_t r0 = s.regroup.offset[le], r1 = s.regroup.offset[le + 1];
    if (r1 == r0) continue;
    std::vector<float> x;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t tok = s.recv_tokens[static_cast<size_t>(s.regroup.row_token[r])];
      x.insert(x.end(), s.all_x.begin() + tok * d.h, s.all_x.begin() + (tok + 1) * d.h);
    }
    const FloatWeights f = Floats(ExpertSlice(run, d, d.first_expert() + le, 0, d.inter));
    const std::vector<double> y = reference::ExpertMlpRef(x, r1 - r0, d.h, d.inter, f.wg, f.wu, f.wd);
    chain.insert(chain.end(), y.begin(), y.end());
  }
  std::vector<float> actual = Rows(s.y_sum, s.received);
  return PhaseOutput{actual, std::move(local), {}, ChainCheck(actual, std::move(chain)), {}};
}

PhaseOutput MoeLayer::CombineAllToAll() {
  const int64_t rows = std::max<int64_t>(s.received, 1);
  s.y_src = TensorView::Create({rows, d.h}, dt, "moe_y_src");
  if (s.received > 0) {
    lnc.Launch([&](const KernelContext& c) {
      moe::DispatchKernel(c, s.ungroup, s.y_sum.slice(0, 0, s.received), s.y_src.slice(0, 0, s.received));
    });
  }
  s.y_back = TensorView::Create({std::max<int64_t>(s.plan.rows(), 1), d.h}, dt, "moe_y_back");
  const collectives::AllToAllVResult back =
      collectives::all_to_all_v(run.ctx, ep, s.y_src.slice(0, 0, s.received), s.recv_rows, s.y_back);
  if (back.recv_rows != s.send_rows) {
    Raise(ErrorCode::kInternal, "moe combine: all_to_all_v returned other row counts than were sent");
  }
  std::vector<float> moved = RawAllToAllV(ep, s.y_src, s.recv_rows, s.send_rows);
  return MovementOutput(Rows(s.y_back, s.plan.rows()), moved, AsDoubles(moved));
}

PhaseOutput MoeLayer::Combine() {
  s.weights = TensorView::Create({d.t, d.k}, DType::kFloat32, "moe_weights");
  s.weights.FromFloats(s.routing.weight);
  s.out = TensorView::Create({d.t, d.h}, dt, "moe_out");
  lnc.Launch([&](const KernelContext& c) {
    moe::CombineKernel(c, s.plan, s.weights, s.y_back.slice(0, 0, s.plan.rows()), nullptr, s.out);
  });
  // Its own inputs: the fp64 weighted sum of the returned rows.
  const std::vector<float> y = Rows(s.y_back, s.plan.rows());
  std::vector<double> local(static_cast<size_t>(d.t * d.h), 0.0);
  for (int64_t t = 0; t < d.t; ++t) {
    for (int64_t j = 0; j < d.k; ++j) {
      const int64_t row = s.plan.slot_row[t * d.k + j];
      const double w = s.routing.weight[t * d.k + j];
      for (int64_t c = 0; c < d.h; ++c) local[t * d.h + c] += w * y[row * d.h + c];
    }
  }
  // The chain: the whole layer's fp64 golden on the regenerated inputs, the golden's routing,
  // every expert's full weights.
  std::vector<FloatWeights> all;
  std::vector<reference::ExpertWeightsRef> refs;
  all.reserve(static_cast<size_t>(d.e));
  std::set<int> used(s.golden_routing.expert.begin(), s.golden_routing.expert.end());
  for (int64_t e = 0; e < d.e; ++e) {
    all.push_back(used.contains(static_cast<int>(e)) ? Floats(ExpertSlice(run, d, e, 0, d.inter))
                                                    : FloatWeights{});
  }
  for (const FloatWeights& f : all) refs.push_back(f.ref());
  const std::vector<float> x(s.all_x.begin() + d.q * d.t * d.h, s.all_x.begin() + (d.q + 1) * d.t * d.h);
  std::vector<double> chain =
      reference::MoeLayerRef(x, d.t, d.h, d.inter, s.golden_routing, refs, -1, nullptr, 0);
  std::vector<float> actual = s.out.ToFloats();
  // The layer output at global indices (token q T + t): the plans of a job compare the tokens
  // they share. One member of each TP group records (they hold the same rows).
  if (d.p == 0) {
    RecordLayerSample(run.result, run.plan.name, 0, 0, d.ep * d.t * d.h, d.q * d.t * d.h, actual);
  }
  return PhaseOutput{actual, std::move(local), {}, ChainCheck(actual, std::move(chain)), {}};
}

}  // namespace

ScenarioFootprint RunMoe(PlanRun& run) {
  if (!Functional()) {
    Raise(ErrorCode::kInvalidArgument, "workload moe: --timing-only is not supported yet (the token "
                                       "counts come from the values); run it functional");
  }
  static const struct {
    const char* name;
    PhaseOutput (MoeLayer::*body)();
  } kPhases[] = {{"router", &MoeLayer::Router},
                 {"dispatch", &MoeLayer::Dispatch},
                 {"dispatch_all_to_all", &MoeLayer::DispatchAllToAll},
                 {"experts", &MoeLayer::Experts},
                 {"expert_all_reduce", &MoeLayer::ExpertAllReduce},
                 {"combine_all_to_all", &MoeLayer::CombineAllToAll},
                 {"combine", &MoeLayer::Combine}};
  MoeLayer layer(run);
  for (const auto& phase : kPhases) run.runner.Run(phase.name, [&] { return (layer.*phase.body)(); });
  (*run.result.mutable_expert_rows())[run.plan.name] = layer.s.received;
  ScenarioFootprint footprint;
  footprint.weight_bytes = layer.w_router.size_bytes();
  for (const ExpertWeights& w : layer.s.local) footprint.weight_bytes += w.wg.size_bytes() * 3;
  return footprint;
}

}  // namespace nkisim::launcher
