// The prefill workload, one rank's part of one plan (attention_dp is 1):
//   qkv             QKV CTE with RMSNorm and fused RoPE for the rank's Q heads and KV heads over
//                   the whole prompt (LNC 2 splits S between the cores)
//   attention       causal attention CTE of those heads (LNC 2 splits the query blocks)
//   o_proj          output projection CTE (LNC 2 writes disjoint H halves; no core-to-core data)
//   all_reduce      the TP sum of the o_proj partials over the rank's TP group, or, with
//   reduce_scatter  sequence_parallel, the sum scattered over the token rows: member j keeps rows
//                   [j B S / tp, (j + 1) B S / tp) of [B * S, H].
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
#include "launcher/scenarios/workload.h"
#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {
namespace {

// Rows of the o_proj output checked at a time: [128, H] floats and doubles, 12 MiB at H 8192.
constexpr int64_t kCheckRows = 128;

}  // namespace

ScenarioFootprint RunPrefill(PlanRun& run) {
  const ResolvedScenario& sc = run.scenario;
  const ResolvedPlan& plan = run.plan;
  const proto::ModelShape& m = sc.spec.model();
  const int64_t h = m.hidden(), d = m.d_head();
  const int64_t b = sc.spec.batch(), s_len = sc.spec.seq_len();
  const int rank = run.ctx.rank();
  const int replica = plan.replica(rank);
  const int64_t hpr = plan.heads_per_rank, kvr = plan.kv_per_rank;
  const DType dt = sc.dtype;
  LogicalCore& lnc = run.ctx.lnc();
  const collectives::GroupComm& tp = run.ctx.group(kTpGroups);

  MakeSharedInputs(run, /*tokens=*/s_len, /*steps=*/1);
  SharedInputs& shared = run.shared;
  // RoPE tables of positions 0 .. S - 1 (base 10000), as the QKV kernel takes them: the angle of
  // pair k = i mod d/2 in every column i.
  TensorView cos_cache = TensorView::Create({b, s_len, d}, dt, "rope_cos");
  TensorView sin_cache = TensorView::Create({b, s_len, d}, dt, "rope_sin");
  if (Functional()) {  // timing-only: no values
    std::vector<float> c(static_cast<size_t>(b * s_len * d)), sn(c.size());
    const int64_t half = std::max<int64_t>(1, d / 2);
    for (int64_t row = 0; row < b * s_len; ++row) {
      for (int64_t i = 0; i < d; ++i) {
        const double angle = static_cast<double>(row % s_len) *
                             std::pow(10000.0, -2.0 * static_cast<double>(i % half) / static_cast<double>(d));
        c[row * d + i] = static_cast<float>(std::cos(angle));
        sn[row * d + i] = static_cast<float>(std::sin(angle));
      }
    }
    cos_cache.FromFloats(c);
    sin_cache.FromFloats(sn);
  }

  // 1. QKV CTE: [hpr + 2 kvr, B, S, d], Q and K rotated.
  kernels::QkvParams qkv = RankQkvParams(run, 0);
  qkv.fused_rope = true;
  qkv.cos_cache = cos_cache;
  qkv.sin_cache = sin_cache;
  TensorView qkv_out;
  run.runner.Run("qkv", [&] {
    qkv_out = kernels::Qkv(lnc, qkv, kernels::QkvVariant::kCte).output;
    if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
    if (shared.qkv_golden[0].empty()) shared.qkv_golden[0] = AsDoubles(reference::QkvReference(qkv).output);
    return PhaseOutput{qkv_out.ToFloats(), shared.qkv_golden[0]};
  });

  // 2. Causal attention of the rank's heads: out [B, hpr, d, S].
  const kernels::AttentionCteParams attention_params{qkv_out.slice(0, 0, hpr),
                                                     qkv_out.slice(0, hpr, hpr + kvr),
                                                     qkv_out.slice(0, hpr + kvr, hpr + 2 * kvr)};
  TensorView attention;
  run.runner.Run("attention", [&] {
    attention = kernels::AttentionCte(lnc, attention_params);
    if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
    return PhaseOutput{attention.ToFloats(),
                       reference::CausalAttentionRef(attention_params.q, attention_params.k,
                                                     attention_params.v)};
  });

  // 3. o_proj CTE: [B, S, H] partial sums of this rank's heads.
  TensorView partial;
  run.runner.Run("o_proj", [&] {
    kernels::OutputProjectionCteParams params;
    params.attention = attention;
    params.weight = shared.w_o;
    partial = kernels::OutputProjectionCte(lnc, params);
    if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
    // Checked in blocks of rows: neither the output nor the golden is held whole (at S 2048,
    // H 8192 that would be 64 MiB of floats and 128 MiB of doubles a rank).
    PhaseOutput out;
    out.check = [&](const reference::Tolerance& tolerance) {
      reference::OprojRefInputs ref;
      ref.weight = shared.w_o;
      reference::StreamingCompare compare(tolerance);
      for (int64_t bi = 0; bi < b; ++bi) {
        for (int64_t s0 = 0; s0 < s_len; s0 += kCheckRows) {
          const int64_t s1 = std::min(s_len, s0 + kCheckRows);
          // The fp32 golden as it is: StreamingCompare widens each element to double itself.
          const std::vector<float> golden = reference::OutputProjectionCteRef(
              attention.slice(0, bi, bi + 1).slice(3, s0, s1), ref);
          const std::vector<float> actual = partial.select(0, bi).slice(0, s0, s1).ToFloats();
          compare.Add((bi * s_len + s0) * h, actual.data(), golden.data(),
                      static_cast<int64_t>(golden.size()));
        }
      }
      return compare.Finish();
    };
    return out;
  });

  // 4. The TP reduction, checked block by block against a plain fp64 MPI_Reduce_scatter.
  const int64_t total_elements = b * s_len * h;
  if (!sc.spec.sequence_parallel()) {
    run.runner.Run("all_reduce", [&] {
      TensorView total = TensorView::Create(partial.shape(), dt, "o_proj_total");
      collectives::all_reduce(run.ctx, tp, partial, total);
      if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
      int64_t first = 0;
      std::vector<double> golden = ReduceScatterGolden(tp, partial, &first);
      const TensorView flat = total.reshape({total_elements});
      std::vector<float> block =
          flat.slice(0, first, first + static_cast<int64_t>(golden.size())).ToFloats();
      RecordLayerSample(run.result, plan.name, replica, 0, total_elements, first, block);
      return PhaseOutput{std::move(block), std::move(golden)};
    });
  } else {
    run.runner.Run("reduce_scatter", [&] {
      const int64_t rows = b * s_len, mine = rows / plan.tp;
      TensorView scattered = TensorView::Create({mine, h}, dt, "o_proj_scattered");
      collectives::reduce_scatter(run.ctx, tp, partial.reshape({rows, h}), scattered);
      if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
      int64_t first = 0;
      std::vector<double> golden = ReduceScatterGolden(tp, partial, &first);
      std::vector<float> block = scattered.ToFloats();
      if (block.size() != golden.size() || first != tp.position * mine * h) {
        Raise(ErrorCode::kInternal, StrCat("reduce_scatter: block of ", block.size(), " elements at ",
                                           tp.position * mine * h, "; the reference's is ",
                                           golden.size(), " at ", first));
      }
      RecordLayerSample(run.result, plan.name, replica, 0, total_elements, first, block);
      return PhaseOutput{std::move(block), std::move(golden)};
    });
  }
  ScenarioFootprint footprint;
  footprint.kv_cache_bytes = 2 * kvr * b * s_len * d * static_cast<int64_t>(SizeOf(dt));
  footprint.weight_bytes = shared.w_qkv.size_bytes() + shared.w_o.size_bytes();
  return footprint;
}

}  // namespace nkisim::launcher
