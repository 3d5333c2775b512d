// The prefill workload, one rank's part of one plan (attention_dp is 1), for each of `layers`
// decoder layers (layer i's output is layer i + 1's input), the rows of kPrefillPhases:
//   qkv                 QKV CTE with the layer's input norm and fused RoPE for the rank's Q heads
//                       and KV heads over the whole prompt (LNC 2 splits S between the cores)
//   attention           causal attention CTE of those heads (LNC 2 splits the query blocks)
//   o_proj              output projection CTE (LNC 2 writes disjoint H halves)
//   all_reduce          the TP sum of the o_proj partials over the rank's TP group, or, with
//   reduce_scatter      sequence_parallel, the sum scattered over the token rows: member j keeps
//                       rows [j B S / tp, (j + 1) B S / tp) of [B * S, H]
//   all_gather          (sequence_parallel, with the MLP) the rows gathered back for the MLP
//   mlp                 the MLP CTE: residual add stored as the residual stream, norm, gate / up /
//                       down over the rank's I / tp columns
//   mlp_all_reduce      the TP sum of the MLP partials, or with sequence_parallel
//   mlp_reduce_scatter  its scatter over the rows and
//   mlp_all_gather      the rows gathered back
//   residual            the layer's output: the residual stream + the MLP's sum
// (the MLP rows not with attention_only). Each phase is checked twice: against its plain reference
// applied to that phase's inputs (the gathers bit for bit against a plain MPI_Allgather), and
// against the golden of the whole chain (golden_chain.h): the reference applied to the goldens
// the phases before it handed on, from the prompt through every earlier layer.
#include <algorithm>
#include <cmath>
#include <vector>

#include "collectives/collectives.h"
#include "kernels/attention/attention_cte.h"
#include "kernels/output_projection/output_projection_cte.h"
#include "kernels/qkv/qkv.h"
#include "kernels/reference/causal_attention_ref.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/output_projection_ref.h"
#include "kernels/reference/qkv_ref.h"
#include "model/workload.h"
#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {
namespace {

// Rows of the o_proj output checked at a time: [128, H] floats and doubles, 12 MiB at H 8192.
constexpr int64_t kCheckRows = 128;

struct PrefillRank {
  PlanRun& run;
  int64_t h = 0, d = 0, b = 0, s_len = 0, hpr = 0, kvr = 0;
  int layers = 1, replica = 0;
  bool mlp = true, sp = false;
  DType dt = DType::kBFloat16;
  TensorView cos_cache, sin_cache;

  LogicalCore& lnc() const { return run.ctx.lnc(); }
  const collectives::GroupComm& tp() const { return run.ctx.group(kTpGroups); }
  int64_t tokens() const { return b * s_len; }
};

struct PrefillState {
  int layer = 0;
  TensorView x;  // the layer's input [B, S, H]
  bool corrupted = false;  // x is the CORRUPT_INPUT fault's copy
  TensorView qkv_out, attention, partial, attention_sum, scattered, fused_hidden, mlp_partial;
  TensorView mlp_sum, out;
  struct Golden {  // the chain's golden of the same (fp32 tensors; the TP-replicated ones fp64)
    GroupGolden x;
    TensorView qkv_out, attention;
    GroupGolden attention_sum, out;
  } g;
  MlpLayerOut mlp;  // the MLP's outputs and goldens (its residual stream and TP sum)
};

bool Always(const PrefillRank&) { return true; }
bool WithMlp(const PrefillRank& r) { return r.mlp; }
bool Reduced(const PrefillRank& r) { return !r.sp; }
bool Scattered(const PrefillRank& r) { return r.sp; }
bool ScatteredMlp(const PrefillRank& r) { return r.sp && r.mlp; }
bool ReducedMlp(const PrefillRank& r) { return !r.sp && r.mlp; }
bool LastLayer(const PrefillRank& r, const PrefillState& st) { return st.layer + 1 == r.layers; }

// RoPE tables of positions 0 .. S - 1 (base 10000), as the QKV kernel takes them: the angle of
// pair k = i mod d/2 in every column i.
void MakeRopeTables(PrefillRank& r) {
  r.cos_cache = TensorView::Create({r.b, r.s_len, r.d}, r.dt, "rope_cos");
  r.sin_cache = TensorView::Create({r.b, r.s_len, r.d}, r.dt, "rope_sin");
  if (!Functional()) return;  // timing-only: no values
  std::vector<float> c(static_cast<size_t>(r.tokens() * r.d)), sn(c.size());
  const int64_t half = std::max<int64_t>(1, r.d / 2);
  for (int64_t row = 0; row < r.tokens(); ++row) {
    for (int64_t i = 0; i < r.d; ++i) {
      const double angle = static_cast<double>(row % r.s_len) *
                           std::pow(10000.0, -2.0 * static_cast<double>(i % half) / static_cast<double>(r.d));
      c[row * r.d + i] = static_cast<float>(std::cos(angle));
      sn[row * r.d + i] = static_cast<float>(std::sin(angle));
    }
  }
  r.cos_cache.FromFloats(c);
  r.sin_cache.FromFloats(sn);
}

// 1. QKV CTE: [hpr + 2 kvr, B, S, d], Q and K rotated.
PhaseOutput QkvPhase(PrefillRank& r, PrefillState& st) {
  kernels::QkvParams qkv = RankQkvParams(r.run, st.layer, st.x);
  qkv.fused_rope = true;
  qkv.cos_cache = r.cos_cache;
  qkv.sin_cache = r.sin_cache;
  st.qkv_out = kernels::Qkv(r.lnc(), qkv, kernels::QkvVariant::kCte).output;
  if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
  // Layer 0's golden is the same in every plan of the TP split: made once.
  TensorView* cached = st.layer == 0 ? &r.run.shared.qkv_golden[0] : nullptr;
  if (cached != nullptr && cached->valid()) {
    st.g.qkv_out = *cached;
  } else {
    st.g.qkv_out = QkvGolden(r.run, st.layer, st.g.x, r.b, r.s_len, r.cos_cache, r.sin_cache);
    if (cached != nullptr) *cached = st.g.qkv_out;
  }
  // Layer 0's own input is the chain's (unless the test fault replaced it): one golden serves both.
  return QkvOutput(st.qkv_out, st.g.qkv_out, st.layer == 0 && !st.corrupted, qkv);
}

// 2. Causal attention of the rank's heads: out [B, hpr, d, S].
PhaseOutput AttentionPhase(PrefillRank& r, PrefillState& st) {
  const kernels::AttentionCteParams params{st.qkv_out.slice(0, 0, r.hpr),
                                           st.qkv_out.slice(0, r.hpr, r.hpr + r.kvr),
                                           st.qkv_out.slice(0, r.hpr + r.kvr, r.hpr + 2 * r.kvr)};
  st.attention = kernels::AttentionCte(r.lnc(), params);
  if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
  const TensorView& g = st.g.qkv_out;
  std::vector<double> golden = reference::CausalAttentionRef(
      g.slice(0, 0, r.hpr), g.slice(0, r.hpr, r.hpr + r.kvr), g.slice(0, r.hpr + r.kvr, r.hpr + 2 * r.kvr));
  st.g.attention = GoldenTensor(st.attention.shape(), golden, "attention_golden");
  std::vector<float> actual = st.attention.ToFloats();
  return PhaseOutput{actual, reference::CausalAttentionRef(params.q, params.k, params.v), {},
                     ChainCheck(actual, std::move(golden))};
}

// 3. o_proj CTE: [B, S, H] partial sums of this rank's heads, checked in blocks of rows (neither
// the output nor the golden is held whole: at S 2048, H 8192 that would be 64 MiB of floats and
// 128 MiB of doubles a rank); each block's golden partials are summed over the TP group into the
// all-reduce's golden (collective: every member's check runs the blocks in the same order).
PhaseOutput OprojPhase(PrefillRank& r, PrefillState& st) {
  kernels::OutputProjectionCteParams params;
  params.attention = st.attention;
  params.weight = r.run.shared.layers[st.layer].w_o;
  st.partial = kernels::OutputProjectionCte(r.lnc(), params);
  if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
  st.g.attention_sum = GroupGolden(r.tp(), r.tokens(), r.h);
  PhaseOutput out;
  out.both = [&r, &st, weight = params.weight](const reference::Tolerance& tolerance,
                                                 const reference::Tolerance& chain_tolerance) {
    reference::OprojRefInputs ref;
    ref.weight = weight;
    reference::StreamingCompare compare(tolerance), chain(chain_tolerance);
    for (int64_t bi = 0; bi < r.b; ++bi) {
      for (int64_t s0 = 0; s0 < r.s_len; s0 += kCheckRows) {
        const int64_t s1 = std::min(r.s_len, s0 + kCheckRows), first = (bi * r.s_len + s0) * r.h;
        const std::vector<float> actual = st.partial.select(0, bi).slice(0, s0, s1).ToFloats();
        const std::vector<float> local = reference::OutputProjectionCteRef(
            st.attention.slice(0, bi, bi + 1).slice(3, s0, s1), ref);
        const std::vector<float> golden = reference::OutputProjectionCteRef(
            st.g.attention.slice(0, bi, bi + 1).slice(3, s0, s1), ref);
        compare.Add(first, actual.data(), local.data(), static_cast<int64_t>(local.size()));
        chain.Add(first, actual.data(), golden.data(), static_cast<int64_t>(golden.size()));
        st.g.attention_sum.AddGroupSum(bi * r.s_len + s0, bi * r.s_len + s1, AsDoubles(golden));
      }
    }
    return std::pair{compare.Finish(), chain.Finish()};
  };
  return out;
}

// 4. The TP sum of the o_proj partials; with attention_only it is the layer's output.
PhaseOutput AllReducePhase(PrefillRank& r, PrefillState& st) {
  CheckedSum sum = TpAllReduce(r.run, st.partial, st.g.attention_sum, "o_proj_total",
                               !r.mlp && LastLayer(r, st), 0);
  st.attention_sum = sum.total;
  st.out = sum.total;
  st.g.out = st.g.attention_sum;
  st.partial = TensorView();  // summed and checked: its 32 MiB a rank (S 2048, H 8192) go back
  return std::move(sum.output);
}

// The sum of `partial` scattered over the token rows, checked against this member's rows of
// `golden` (the rows are split evenly, so its block of the flat tensor is exactly its rows).
PhaseOutput ScatterRows(PrefillRank& r, const TensorView& partial, const GroupGolden& golden,
                        const char* name, bool record, TensorView* scattered) {
  const int64_t rows = r.tokens(), mine = rows / r.run.plan.tp;
  const collectives::GroupComm& tp = r.tp();
  *scattered = TensorView::Create({mine, r.h}, r.dt, name);
  collectives::reduce_scatter(r.run.ctx, tp, partial.reshape({rows, r.h}), *scattered);
  if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
  int64_t first = 0;
  std::vector<double> local = ReduceScatterGolden(tp, partial, &first);
  std::vector<float> block = scattered->ToFloats();
  if (block.size() != local.size() || first != tp.position * mine * r.h ||
      golden.first() != first || golden.block().size() != local.size()) {
    Raise(ErrorCode::kInternal, StrCat(name, ": block of ", block.size(), " elements at ",
                                       tp.position * mine * r.h, "; the reference's is ", local.size(),
                                       " at ", first, ", the chain golden's ", golden.block().size(),
                                       " at ", golden.first()));
  }
  if (record) RecordLayerSample(r.run.result, r.run.plan.name, r.replica, 0, rows * r.h, first, block);
  return PhaseOutput{block, std::move(local), {}, ChainCheck(block, golden.block())};
}

// The scattered rows gathered back into [B, S, H]: bit for bit what a plain MPI_Allgather of
// them moves, and within the tolerance of `golden` (the gathered tensor's golden, whole).
PhaseOutput GatherRows(PrefillRank& r, const TensorView& scattered, const GroupGolden& golden,
                       TensorView* gathered) {
  *gathered = TensorView::Create({r.b, r.s_len, r.h}, r.dt, "gathered_rows");
  collectives::all_gather(r.run.ctx, r.tp(), scattered, gathered->reshape({r.tokens(), r.h}));
  if (!Functional()) return PhaseOutput{};
  const std::vector<std::byte> all = RawGather(r.tp(), scattered);
  std::vector<float> moved(static_cast<size_t>(r.tokens() * r.h));
  for (size_t i = 0; i < moved.size(); ++i) moved[i] = ElementAt(all, r.dt, static_cast<int64_t>(i));
  return MovementOutput(gathered->ToFloats(), std::move(moved), golden.Rows(0, r.tokens()));
}

PhaseOutput ReduceScatterPhase(PrefillRank& r, PrefillState& st) {
  PhaseOutput out = ScatterRows(r, st.partial, st.g.attention_sum, "o_proj_scattered",
                                !r.mlp && LastLayer(r, st), &st.scattered);
  st.g.out = st.g.attention_sum;
  st.partial = TensorView();
  return out;
}
PhaseOutput AllGatherPhase(PrefillRank& r, PrefillState& st) {
  return GatherRows(r, st.scattered, st.g.attention_sum, &st.attention_sum);
}

// 5. MLP CTE: x + attention stored as the residual stream, norm, gate / up / down -> [B, S, H].
PhaseOutput MlpPhase(PrefillRank& r, PrefillState& st) {
  PhaseOutput phase = MlpLayerPhase(r.run, st.layer, st.attention_sum, st.x, st.g.attention_sum,
                                    st.g.x, &st.mlp);
  st.mlp_partial = st.mlp.partial;
  st.fused_hidden = st.mlp.fused_hidden;
  return phase;
}

PhaseOutput MlpAllReducePhase(PrefillRank& r, PrefillState& st) {
  CheckedSum sum = TpAllReduce(r.run, st.mlp_partial, st.mlp.golden_sum, "mlp_total", false, 0);
  st.mlp_sum = sum.total;
  st.mlp_partial = st.mlp.partial = st.attention_sum = TensorView();  // no later phase reads them
  return std::move(sum.output);
}
PhaseOutput MlpReduceScatterPhase(PrefillRank& r, PrefillState& st) {
  PhaseOutput out = ScatterRows(r, st.mlp_partial, st.mlp.golden_sum, "mlp_scattered", false, &st.scattered);
  st.mlp_partial = st.mlp.partial = st.attention_sum = TensorView();
  return out;
}
PhaseOutput MlpAllGatherPhase(PrefillRank& r, PrefillState& st) {
  return GatherRows(r, st.scattered, st.mlp.golden_sum, &st.mlp_sum);
}

// 6. The layer's output: residual stream + MLP sum. Every rank holds the whole output: each
// records the samples of its 1 / tp of the rows.
PhaseOutput ResidualPhase(PrefillRank& r, PrefillState& st) {
  std::function<void(int64_t, const std::vector<float>&)> sample;
  if (LastLayer(r, st)) {
    const int64_t n = r.tokens() * r.h, per = n / r.run.plan.tp, mine = r.tp().position * per;
    sample = [&r, n, per, mine](int64_t first, const std::vector<float>& values) {
      const int64_t lo = std::max(first, mine), hi = std::min<int64_t>(first + values.size(), mine + per);
      if (lo >= hi) return;
      RecordLayerSample(r.run.result, r.run.plan.name, r.replica, 0, n, lo,
                        std::vector<float>(values.begin() + (lo - first), values.begin() + (hi - first)));
    };
  }
  return ResidualLayerPhase(r.run, st.fused_hidden, st.mlp_sum, st.mlp.golden_fused,
                            st.mlp.golden_sum, &st.out, &st.g.out, sample);
}

struct PrefillPhase {
  const char* name;
  bool (*applies)(const PrefillRank&);
  PhaseOutput (*run)(PrefillRank&, PrefillState&);
};

constexpr PrefillPhase kPrefillPhases[] = {
    {"qkv", Always, QkvPhase},
    {"attention", Always, AttentionPhase},
    {"o_proj", Always, OprojPhase},
    {"all_reduce", Reduced, AllReducePhase},
    {"reduce_scatter", Scattered, ReduceScatterPhase},
    {"all_gather", ScatteredMlp, AllGatherPhase},
    {"mlp", WithMlp, MlpPhase},
    {"mlp_all_reduce", ReducedMlp, MlpAllReducePhase},
    {"mlp_reduce_scatter", ScatteredMlp, MlpReduceScatterPhase},
    {"mlp_all_gather", ScatteredMlp, MlpAllGatherPhase},
    {"residual", WithMlp, ResidualPhase},
};

}  // namespace

ScenarioFootprint RunPrefill(PlanRun& run) {
  const ResolvedScenario& sc = run.scenario;
  const proto::ModelShape& m = sc.spec.model();
  PrefillRank r{run};
  r.h = m.hidden();
  r.d = m.d_head();
  r.b = sc.spec.batch();
  r.s_len = sc.spec.seq_len();
  r.hpr = run.plan.heads_per_rank;
  r.kvr = run.plan.kv_per_rank;
  r.layers = static_cast<int>(std::max(1u, sc.spec.layers()));
  r.replica = run.plan.replica(run.ctx.rank());
  r.mlp = !sc.spec.attention_only();
  r.sp = sc.spec.sequence_parallel();
  r.dt = sc.dtype;
  MakeSharedInputs(run, /*tokens=*/r.s_len, /*steps=*/1);
  MakeRopeTables(r);
  TensorView x = run.shared.x[0];
  GroupGolden golden_x;  // the layer input's golden: the prompt, then each layer's output
  if (Functional()) golden_x = GroupGolden::FromLocal(r.tp(), x);
  for (int l = 0; l < r.layers; ++l) {
    PrefillState st;
    st.layer = l;
    st.x = x;
    st.corrupted = Functional() && run.runner.CorruptsInput(PhaseName("qkv", l, r.layers, 0, 1));
    if (st.corrupted) st.x = CorruptedInput(x);
    st.g.x = golden_x;
    for (const PrefillPhase& phase : kPrefillPhases) {
      if (!phase.applies(r)) continue;
      run.runner.Run(PhaseName(phase.name, l, r.layers, 0, 1), [&] { return phase.run(r, st); });
    }
    // Layer l's output is layer l + 1's input (attention_only with sequence_parallel: the rows
    // are scattered, so layers > 1 need the MLP's gather or attention_only without it).
    x = st.out;
    golden_x = st.g.out;
  }
  ScenarioFootprint footprint;
  footprint.kv_cache_bytes = 2 * r.kvr * r.tokens() * r.d * static_cast<int64_t>(SizeOf(r.dt)) * r.layers;
  for (const LayerWeights& w : run.shared.layers) footprint.weight_bytes += w.bytes();
  return footprint;
}

}  // namespace nkisim::launcher
