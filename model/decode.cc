// The decode workload, one rank's part of one plan: for each of `steps` steps (the caches grow by
// one token a step) and each of `layers` decoder layers (layer i's output is layer i + 1's
// input), the rows of kDecodePhases in order:
//   qkv             QKV TKG with the layer's input norm for the rank's Q heads and its KV heads
//                   (LNC 2 reduces over H with sendrecv)
//   batch_shard     (attention_dp G > 1) attn_q_batch_shard over the G ranks of the rank's
//                   attention-DP group: TP -> TP/G x DP G (G x its heads for B / G rows); when the
//                   group's Q heads use KV heads the rank does not hold, their new K / V rows move
//                   the same way
//   attention       decode attention per KV head against the rank's cache of the layer, this
//                   step's K / V written at the cache's next position
//   unshard         (G > 1) all_to_all inside the group: back to the rank's heads for all B rows
//   o_proj          output projection TKG (LNC 2 writes disjoint H halves)
//   all_reduce      the TP sum of the o_proj partials over the rank's TP group
//   mlp             the MLP TKG: residual add (layer input + attention) stored as the residual
//                   stream, the layer's second norm, gate / up / down over the rank's I / tp
//   mlp_all_reduce  the TP sum of the MLP partials
//   residual        the layer's output: the residual stream + the MLP's sum
// (the last three not with attention_only). Phases are named "qkv", "qkv.L2" (layer 2 of
// several), "qkv[3]" (step 3 of several), "qkv.L2[3]". Each is checked twice: against its plain
// reference applied to that phase's inputs (the data movements against raw MPI calls), and
// against the golden of the whole chain (golden_chain.h): the reference applied to the goldens
// the phases before it handed on, from the step's original input through every earlier layer.
#include <algorithm>
#include <cstring>
#include <tuple>
#include <vector>

#include "collectives/batch_shard.h"
#include "collectives/collectives.h"
#include "kernels/attention/attention_tkg.h"
#include "kernels/output_projection/output_projection_tkg.h"
#include "kernels/qkv/qkv.h"
#include "kernels/reference/attention_ref.h"
#include "kernels/reference/output_projection_ref.h"
#include "kernels/reference/qkv_ref.h"
#include "model/workload.h"
#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {
namespace {

using collectives::GroupComm;

// What every phase of this rank's plan needs, worked out once.
struct DecodeRank {
  PlanRun& run;
  int64_t h = 0, nkv = 0, d = 0, b = 0, cached = 0, capacity = 0;
  int steps = 1, layers = 1, rank = 0, replica = 0;
  int64_t hpr = 0, kvr = 0, qpk = 0, kv0 = 0, g = 1, rows = 0;
  bool dp = false, mlp = true;
  DType dt = DType::kBFloat16;
  const GroupComm* dpg = nullptr;
  int64_t gpos = 0, row0 = 0, cache_rows = 0;
  int group_first = 0;
  int64_t att_q0 = 0, att_nq = 0;  // the Q heads the rank attends: its group's
  std::vector<int> kv_heads;       // ... and their KV heads
  bool exchange_kv = false;        // does the group attend KV heads the rank does not hold?
  TensorView iota;
  std::vector<std::vector<TensorView>> k_cache, v_cache;  // [layer][kv_heads index]
  // The golden K / V rows the steps appended, fp32: K [rows, d, steps], V [rows, steps, d].
  std::vector<std::vector<TensorView>> golden_k, golden_v;  // [layer][kv_heads index]

  LogicalCore& lnc() const { return run.ctx.lnc(); }
};

// One layer of one step: what the phases hand on to each other.
struct DecodeState {
  int layer = 0, step = 0;
  int64_t t_now = 0;  // tokens attended this step, its own included
  TensorView x;       // the layer's input [B, 1, H]
  bool corrupted = false;  // x is the CORRUPT_INPUT fault's copy
  TensorView qkv_out, q, kv_part, q_att, kv_att, attention, heads_rows, partial;
  TensorView attention_sum, fused_hidden, mlp_partial, mlp_sum, out;
  struct Golden {  // the chain's golden of the same (fp32 tensors; the TP-replicated ones fp64)
    GroupGolden x;
    TensorView qkv_out, q, kv_part, q_att, kv_att, attention, heads_rows;
    GroupGolden attention_sum, out;
  } g;
  MlpLayerOut mlp;  // the MLP's outputs and goldens (its residual stream and TP sum)
};

bool Always(const DecodeRank&) { return true; }
bool BatchSharded(const DecodeRank& r) { return r.dp; }
bool WithMlp(const DecodeRank& r) { return r.mlp; }

// 1. QKV: [hpr + 2 kvr, B, 1, d] = the Q heads, then K and V of the KV heads (NBSd).
PhaseOutput QkvPhase(DecodeRank& r, DecodeState& st) {
  const kernels::QkvParams qkv = RankQkvParams(r.run, st.layer, st.x);
  st.qkv_out = kernels::Qkv(r.lnc(), qkv).output;
  st.q = st.qkv_out.slice(0, 0, r.hpr);
  st.kv_part = st.qkv_out.slice(0, r.hpr, r.hpr + 2 * r.kvr);
  st.q_att = st.q.reshape({r.hpr, r.b, r.d});
  if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
  // Layer 0's golden is the same in every plan of the TP split: made once a step.
  TensorView* cached = st.layer == 0 ? &r.run.shared.qkv_golden[st.step] : nullptr;
  if (cached != nullptr && cached->valid()) {
    st.g.qkv_out = *cached;
  } else {
    st.g.qkv_out = QkvGolden(r.run, st.layer, st.g.x, r.b, 1);
    if (cached != nullptr) *cached = st.g.qkv_out;
  }
  st.g.q = st.g.qkv_out.slice(0, 0, r.hpr);
  st.g.kv_part = st.g.qkv_out.slice(0, r.hpr, r.hpr + 2 * r.kvr);
  st.g.q_att = st.g.q.reshape({r.hpr, r.b, r.d});
  // Layer 0's own input is the chain's (unless the test fault replaced it): one golden serves both.
  return QkvOutput(st.qkv_out, st.g.qkv_out, st.layer == 0 && !st.corrupted, qkv);
}

// What attn_q_batch_shard leaves on this rank of the group's [G][heads][B][d] `all`: G x heads
// heads for its B / G rows.
std::vector<float> ShardedRows(const DecodeRank& r, const std::vector<std::byte>& all, DType dtype,
                               int64_t heads) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(r.g * heads * r.rows * r.d));
  for (int64_t j = 0; j < r.g * heads; ++j) {
    for (int64_t i = 0; i < r.rows * r.d; ++i) out.push_back(ElementAt(all, dtype, (j * r.b + r.row0) * r.d + i));
  }
  return out;
}

// 2. TP -> TP/G x DP G: G x hpr heads for B / G rows (and the new K / V rows it lacks).
PhaseOutput BatchShardPhase(DecodeRank& r, DecodeState& st) {
  std::vector<float> actual, moved, golden;
  auto shard = [&](const TensorView& input, const TensorView& golden_input, int64_t heads,
                   const char* name, TensorView* golden_out) {
    TensorView gathered = TensorView::Create({r.g, heads, r.b, 1, r.d}, r.dt, name);
    TensorView result = collectives::attn_q_batch_shard(r.run.ctx, input, r.iota, gathered,
                                                        static_cast<int>(r.g), *r.dpg)
                            .reshape({r.g * heads, r.rows, r.d});
    if (!Functional()) return result;  // timing-only: nothing to check
    const std::vector<float> a = result.ToFloats();
    const std::vector<float> m = ShardedRows(r, RawGather(*r.dpg, input), r.dt, heads);
    const std::vector<float> g = ShardedRows(r, RawGather(*r.dpg, golden_input), DType::kFloat32, heads);
    *golden_out = GoldenTensor({r.g * heads, r.rows, r.d}, g, StrCat(name, "_golden"));
    actual.insert(actual.end(), a.begin(), a.end());
    moved.insert(moved.end(), m.begin(), m.end());
    golden.insert(golden.end(), g.begin(), g.end());
    return result;
  };
  st.q_att = shard(st.q, st.g.q, r.hpr, "gathered_q", &st.g.q_att);
  if (r.exchange_kv) st.kv_att = shard(st.kv_part, st.g.kv_part, 2 * r.kvr, "gathered_kv", &st.g.kv_att);
  if (!Functional()) return PhaseOutput{};
  return MovementOutput(std::move(actual), std::move(moved), AsDoubles(golden));
}

// This step's K and V rows [cache_rows, d] of KV head kv in `kv_part` (the rank's own) or, for a
// KV head another member of the group holds (G > 1), in `kv_att` (what the batch shard brought).
std::pair<TensorView, TensorView> NewKv(const DecodeRank& r, const TensorView& kv_part,
                                        const TensorView& kv_att, int64_t kv) {
  if (kv >= r.kv0 && kv < r.kv0 + r.kvr) {
    auto row = [&](int64_t head) {
      return kv_part.select(0, head).select(1, 0).slice(0, r.row0, r.row0 + r.cache_rows);
    };
    return {row(kv - r.kv0), row(r.kvr + kv - r.kv0)};
  }
  const ResolvedPlan& plan = r.run.plan;
  int64_t j = 0;  // the group member holding kv
  while (plan.first_kv_head(r.group_first + static_cast<int>(j)) + r.kvr <= kv) ++j;
  const int64_t base = j * 2 * r.kvr + (kv - plan.first_kv_head(r.group_first + static_cast<int>(j)));
  return {kv_att.select(0, base), kv_att.select(0, base + r.kvr)};
}

// The append is a copy: position t_now - 1 of both caches must now hold this step's rows bit for
// bit (the golden reads the caches the next steps read).
void CheckAppend(const TensorView& k_now, const TensorView& v_now, const TensorView& new_k,
                 const TensorView& new_v, int64_t kv, int64_t position) {
  for (const auto& [cached, fresh, what] :
       {std::tuple{k_now, new_k, "K"}, std::tuple{v_now, new_v, "V"}}) {
    const std::vector<float> a = cached.ToFloats(), e = fresh.ToFloats();
    for (size_t j = 0; j < e.size(); ++j) {
      if (std::memcmp(&a[j], &e[j], sizeof(float)) != 0) {
        Raise(ErrorCode::kInternal,
              StrCat("attention: KV head ", kv, ": the kernel's append left ", a[j], " at element ",
                     j, " of ", what, " cache position ", position, " where this step's row holds ",
                     e[j]));
      }
    }
  }
}

// Rows of a batch block whose golden attention is worked out at a time: their golden caches
// ([rows, d, T] and [rows, T, d] fp32) take 2 x 4 MiB at T 1025, d 128.
constexpr int64_t kGoldenAttentionRows = 8;

// The golden attention of KV head index i (KV head kv) for Q heads [lo, hi) of the rank's
// attended heads: the reference over the golden caches, which hold the cache's original
// positions and, after them, the golden rows steps 0 .. step appended.
void GoldenAttention(DecodeRank& r, DecodeState& st, size_t i, int64_t kv, int64_t lo, int64_t hi) {
  const auto [new_k, new_v] = NewKv(r, st.g.kv_part, st.g.kv_att, kv);
  TensorView& gk = r.golden_k[st.layer][i];
  TensorView& gv = r.golden_v[st.layer][i];
  gk.select(2, st.step).FromFloats(new_k.ToFloats());
  gv.select(1, st.step).FromFloats(new_v.ToFloats());
  const int64_t appended = st.step + 1;
  for (int64_t b0 = 0; b0 < r.cache_rows; b0 += kGoldenAttentionRows) {
    const int64_t b1 = std::min(r.cache_rows, b0 + kGoldenAttentionRows), nb = b1 - b0;
    TensorView k = TensorView::Create({nb, r.d, st.t_now}, DType::kFloat32, "k_golden");
    TensorView v = TensorView::Create({nb, st.t_now, r.d}, DType::kFloat32, "v_golden");
    k.slice(2, 0, r.cached).FromFloats(r.k_cache[st.layer][i].slice(0, b0, b1).slice(2, 0, r.cached).ToFloats());
    v.slice(1, 0, r.cached).FromFloats(r.v_cache[st.layer][i].slice(0, b0, b1).slice(1, 0, r.cached).ToFloats());
    k.slice(2, r.cached, st.t_now).FromFloats(gk.slice(0, b0, b1).slice(2, 0, appended).ToFloats());
    v.slice(1, r.cached, st.t_now).FromFloats(gv.slice(0, b0, b1).slice(1, 0, appended).ToFloats());
    const std::vector<double> ref =
        reference::AttentionTkgRef(st.g.q_att.slice(0, lo, hi).slice(1, b0, b1), k, v);
    st.g.attention.slice(0, lo, hi).slice(1, b0, b1).FromFloats(std::vector<float>(ref.begin(), ref.end()));
  }
}

// 3. Attention per KV head; the kernel appends this step's K / V rows at position t_now - 1.
PhaseOutput AttentionPhase(DecodeRank& r, DecodeState& st) {
  st.attention = TensorView::Create({r.att_nq, r.cache_rows, r.d}, r.dt, "attention_out");
  if (Functional()) {
    st.g.attention = TensorView::Create({r.att_nq, r.cache_rows, r.d}, DType::kFloat32, "attention_golden");
  }
  std::vector<TensorView>& k_cache = r.k_cache[st.layer];
  std::vector<TensorView>& v_cache = r.v_cache[st.layer];
  std::vector<double> golden;
  for (size_t i = 0; i < r.kv_heads.size(); ++i) {
    const int64_t kv = r.kv_heads[i];
    const auto [new_k, new_v] = NewKv(r, st.kv_part, st.kv_att, kv);
    const int64_t lo = std::max(r.att_q0, kv * r.qpk) - r.att_q0;
    const int64_t hi = std::min(r.att_q0 + r.att_nq, (kv + 1) * r.qpk) - r.att_q0;
    const kernels::AttentionTkgParams params{st.q_att.slice(0, lo, hi),
                                             k_cache[i].slice(2, 0, st.t_now),
                                             v_cache[i].slice(1, 0, st.t_now), new_k, new_v};
    kernels::AttentionTkgInto(r.lnc(), params, st.attention.slice(0, lo, hi));
    if (!Functional()) continue;  // timing-only: nothing to check
    CheckAppend(k_cache[i].select(2, st.t_now - 1), v_cache[i].select(1, st.t_now - 1), new_k,
                new_v, kv, st.t_now - 1);
    const std::vector<double> ref = reference::AttentionTkgRef(params.q, params.k_cache, params.v_cache);
    golden.insert(golden.end(), ref.begin(), ref.end());
    GoldenAttention(r, st, i, kv, lo, hi);
  }
  st.heads_rows = st.attention;  // G = 1: already [hpr, B, d]
  st.g.heads_rows = st.g.attention;
  if (!Functional()) return PhaseOutput{};
  std::vector<float> actual = st.attention.ToFloats();
  return PhaseOutput{actual, std::move(golden), {}, ChainCheck(actual, AsDoubles(st.g.attention.ToFloats()))};
}

// What the all_to_all leaves on this rank of the group's [member][G hpr][rows][d] `all`: its heads
// for every row block, [G (row blocks), hpr, rows, d].
std::vector<float> UnshardedRows(const DecodeRank& r, const std::vector<std::byte>& all, DType dtype) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(r.g * r.hpr * r.rows * r.d));
  for (int64_t i = 0; i < r.g; ++i) {
    for (int64_t k = 0; k < r.hpr * r.rows * r.d; ++k) {
      out.push_back(ElementAt(all, dtype, (i * r.g * r.hpr + r.gpos * r.hpr) * r.rows * r.d + k));
    }
  }
  return out;
}

// 4. TP/G x DP G -> TP: the rank's heads for all B rows, [G (row blocks), hpr, rows, d].
PhaseOutput UnshardPhase(DecodeRank& r, DecodeState& st) {
  st.heads_rows = TensorView::Create({r.g, r.hpr * r.rows * r.d}, r.dt, "unshard_out");
  collectives::all_to_all(r.run.ctx, *r.dpg, st.attention.reshape({r.g, r.hpr * r.rows * r.d}),
                          st.heads_rows);
  if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
  std::vector<float> golden = UnshardedRows(r, RawGather(*r.dpg, st.g.attention), DType::kFloat32);
  st.g.heads_rows = GoldenTensor({r.g, r.hpr * r.rows * r.d}, golden, "unshard_golden");
  return MovementOutput(st.heads_rows.ToFloats(), UnshardedRows(r, RawGather(*r.dpg, st.attention), r.dt),
                        AsDoubles(golden));
}

// The o_proj kernel's input [D, B, N = hpr, S = 1] of the rank's heads for all rows `heads_rows`
// (G = 1: [hpr, B, d]; G > 1: [G, hpr, rows, d]), into `dbns` by `copy`.
template <typename Copy>
void ToDbns(const DecodeRank& r, const TensorView& dbns, const TensorView& heads_rows, Copy copy) {
  if (r.dp) {
    copy(dbns.reshape({r.d, r.g, r.rows, r.hpr}),
         heads_rows.reshape({r.g, r.hpr, r.rows, r.d}).permute({3, 0, 2, 1}));
  } else {
    copy(dbns.reshape({r.d, r.b, r.hpr}), heads_rows.permute({2, 1, 0}));
  }
}

// 5. o_proj TKG: attention [D, B, N = hpr, S = 1] @ the W_o rows of the heads -> [B, H]; its
// golden partials summed over the TP group into the all-reduce's golden.
PhaseOutput OprojPhase(DecodeRank& r, DecodeState& st) {
  TensorView attention_dbns = TensorView::Create({r.d, r.b, r.hpr, 1}, r.dt, "attention_dbns");
  ToDbns(r, attention_dbns, st.heads_rows,
         [&](const TensorView& dst, const TensorView& src) { DmaOnCore0(r.lnc(), dst, src); });
  kernels::OutputProjectionTkgParams params;
  params.attention = attention_dbns;
  params.weight = r.run.shared.layers[st.layer].w_o;
  st.partial = kernels::OutputProjectionTkg(r.lnc(), params);
  if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
  TensorView golden_dbns = TensorView::Create({r.d, r.b, r.hpr, 1}, DType::kFloat32, "attention_dbns_golden");
  ToDbns(r, golden_dbns, st.g.heads_rows,
         [](const TensorView& dst, const TensorView& src) { dst.FromFloats(src.ToFloats()); });
  reference::OprojRefInputs ref;
  ref.weight = params.weight;
  std::vector<double> golden = AsDoubles(reference::OutputProjectionTkgRef(golden_dbns, ref));
  st.g.attention_sum = GroupGolden(r.run.ctx.group(kTpGroups), r.b, r.h);
  st.g.attention_sum.AddGroupSum(0, r.b, golden);
  std::vector<float> actual = st.partial.ToFloats();
  return PhaseOutput{actual, AsDoubles(reference::OutputProjectionTkgRef(attention_dbns, ref)), {},
                     ChainCheck(actual, std::move(golden))};
}

bool LastLayer(const DecodeRank& r, const DecodeState& st) { return st.layer + 1 == r.layers; }

// 6. The TP sum of the o_proj partials; with attention_only it is the layer's output.
PhaseOutput AllReducePhase(DecodeRank& r, DecodeState& st) {
  CheckedSum sum = TpAllReduce(r.run, st.partial, st.g.attention_sum, "o_proj_total",
                               !r.mlp && LastLayer(r, st), st.step);
  st.attention_sum = sum.total.reshape({r.b, 1, r.h});
  st.out = st.attention_sum;
  st.g.out = st.g.attention_sum;
  return std::move(sum.output);
}

// 7. MLP TKG: x + attention stored as the residual stream, norm, gate / up / down -> [B, 1, H].
PhaseOutput MlpPhase(DecodeRank& r, DecodeState& st) {
  PhaseOutput phase = MlpLayerPhase(r.run, st.layer, st.attention_sum, st.x, st.g.attention_sum,
                                    st.g.x, &st.mlp);
  st.mlp_partial = st.mlp.partial;
  st.fused_hidden = st.mlp.fused_hidden;
  return phase;
}

// 8. The TP sum of the MLP partials.
PhaseOutput MlpAllReducePhase(DecodeRank& r, DecodeState& st) {
  CheckedSum sum = TpAllReduce(r.run, st.mlp_partial, st.mlp.golden_sum, "mlp_total", false, st.step);
  st.mlp_sum = sum.total;
  return std::move(sum.output);
}

// 9. The layer's output: residual stream + MLP sum, on the rank's core (every rank holds it).
PhaseOutput ResidualPhase(DecodeRank& r, DecodeState& st) {
  std::function<void(int64_t, const std::vector<float>&)> sample;
  if (LastLayer(r, st)) {
    sample = [&r, step = st.step](int64_t first, const std::vector<float>& values) {
      RecordLayerSample(r.run.result, r.run.plan.name, r.replica, step, r.b * r.h, first, values);
    };
  }
  return ResidualLayerPhase(r.run, st.fused_hidden, st.mlp_sum, st.mlp.golden_fused, st.mlp.golden_sum,
                            &st.out, &st.g.out, sample);
}

struct DecodePhase {
  const char* name;
  bool (*applies)(const DecodeRank&);
  PhaseOutput (*run)(DecodeRank&, DecodeState&);
};

constexpr DecodePhase kDecodePhases[] = {
    {"qkv", Always, QkvPhase},
    {"batch_shard", BatchSharded, BatchShardPhase},
    {"attention", Always, AttentionPhase},
    {"unshard", BatchSharded, UnshardPhase},
    {"o_proj", Always, OprojPhase},
    {"all_reduce", Always, AllReducePhase},
    {"mlp", WithMlp, MlpPhase},
    {"mlp_all_reduce", WithMlp, MlpAllReducePhase},
    {"residual", WithMlp, ResidualPhase},
};

DecodeRank Prepare(PlanRun& run) {
  const ResolvedScenario& sc = run.scenario;
  const ResolvedPlan& plan = run.plan;
  const proto::ModelShape& m = sc.spec.model();
  DecodeRank r{run};
  r.h = m.hidden();
  r.nkv = m.n_kv_heads();
  r.d = m.d_head();
  r.b = sc.spec.batch();
  r.cached = sc.spec.kv_length();
  r.steps = static_cast<int>(sc.spec.steps());
  r.layers = static_cast<int>(std::max(1u, sc.spec.layers()));
  r.capacity = r.cached + r.steps;
  r.rank = run.ctx.rank();
  r.replica = plan.replica(r.rank);
  r.hpr = plan.heads_per_rank;
  r.kvr = plan.kv_per_rank;
  r.qpk = plan.q_per_kv;
  r.kv0 = plan.first_kv_head(r.rank);
  r.g = plan.attention_dp;
  r.rows = r.b / r.g;
  r.dp = r.g > 1;
  r.mlp = !sc.spec.attention_only();
  r.dt = sc.dtype;
  r.dpg = r.dp ? &run.ctx.group(kAttentionDpGroups) : nullptr;
  r.gpos = r.dp ? r.dpg->position : 0;
  r.row0 = r.gpos * r.rows;
  r.cache_rows = r.dp ? r.rows : r.b;
  r.group_first = r.rank - static_cast<int>(r.gpos);
  r.att_q0 = plan.first_q_head(r.group_first);
  r.att_nq = r.g * r.hpr;
  r.kv_heads = plan.group_kv_heads(r.rank);
  r.exchange_kv = std::any_of(r.kv_heads.begin(), r.kv_heads.end(),
                              [&](int kv) { return kv < r.kv0 || kv >= r.kv0 + r.kvr; });
  if (r.dp) {
    r.iota = TensorView::Create({1, run.ctx.world_size()}, DType::kInt32, "iota_workers");
    for (int k = 0; k < run.ctx.world_size(); ++k) {
      r.iota.set({0, k}, static_cast<float>(plan.topology.iota_workers[k]));
    }
  }
  return r;
}

// The caches of the KV heads this rank attends, for its rows, one pair per layer: K [rows, d, T]
// with the head dim on the partitions, V [rows, T, d] (kernels/attention/attention_tkg.h). Their
// values are those of one global [replica, B, n_kv, kv_length, d] cache per layer; position
// kv_length + s is written by step s.
int64_t MakeCaches(DecodeRank& r) {
  const uint64_t seed = r.run.scenario.spec.seed();
  int64_t bytes = 0;
  r.k_cache.resize(static_cast<size_t>(r.layers));
  r.v_cache.resize(static_cast<size_t>(r.layers));
  r.golden_k.resize(static_cast<size_t>(r.layers));
  r.golden_v.resize(static_cast<size_t>(r.layers));
  for (int l = 0; l < r.layers; ++l) {
    for (int kv : r.kv_heads) {
      auto global = [&](int64_t row, int64_t t, int64_t k) {
        return ((((r.replica * r.b) + r.row0 + row) * r.nkv + kv) * r.cached + t) * r.d + k;
      };
      // K: row q of the [rows x d, T] view is (batch row q / d, head dim q % d); V: row q of the
      // [rows x T, d] view is (batch row q / T, token q % T).
      r.k_cache[l].push_back(Slice(LayerTensorName("k_cache", l), {r.cache_rows, r.d, r.capacity},
                                   r.dt, seed, -1, 1,
                                   [&](int64_t q, int64_t t) { return global(q / r.d, t, q % r.d); }));
      r.v_cache[l].push_back(Slice(LayerTensorName("v_cache", l), {r.cache_rows, r.capacity, r.d},
                                   r.dt, seed, -1, 1, [&](int64_t q, int64_t k) {
                                     return global(q / r.capacity, q % r.capacity, k);
                                   }));
      bytes += r.k_cache[l].back().size_bytes() + r.v_cache[l].back().size_bytes();
      if (!Functional()) continue;  // no goldens
      r.golden_k[l].push_back(TensorView::Create({r.cache_rows, r.d, r.steps}, DType::kFloat32, "k_golden_rows"));
      r.golden_v[l].push_back(TensorView::Create({r.cache_rows, r.steps, r.d}, DType::kFloat32, "v_golden_rows"));
    }
  }
  return bytes;
}

}  // namespace

ScenarioFootprint RunDecode(PlanRun& run) {
  DecodeRank r = Prepare(run);
  MakeSharedInputs(run, /*tokens=*/1, r.steps);
  ScenarioFootprint footprint;
  footprint.kv_cache_bytes = MakeCaches(r);
  for (const LayerWeights& w : run.shared.layers) footprint.weight_bytes += w.bytes();
  for (int s = 0; s < r.steps; ++s) {
    TensorView x = run.shared.x[static_cast<size_t>(s)];
    GroupGolden golden_x;  // the layer input's golden: the step's input, then each layer's output
    if (Functional()) golden_x = GroupGolden::FromLocal(run.ctx.group(kTpGroups), x);
    for (int l = 0; l < r.layers; ++l) {
      DecodeState st;
      st.layer = l;
      st.step = s;
      st.t_now = r.cached + s + 1;
      st.x = x;
      st.corrupted = Functional() && run.runner.CorruptsInput(PhaseName("qkv", l, r.layers, s, r.steps));
      if (st.corrupted) st.x = CorruptedInput(x);
      st.g.x = golden_x;
      for (const DecodePhase& phase : kDecodePhases) {
        if (!phase.applies(r)) continue;
        run.runner.Run(PhaseName(phase.name, l, r.layers, s, r.steps),
                       [&] { return phase.run(r, st); });
      }
      x = st.out;  // layer l's output is layer l + 1's input
      golden_x = st.g.out;
    }
  }
  return footprint;
}

}  // namespace nkisim::launcher
