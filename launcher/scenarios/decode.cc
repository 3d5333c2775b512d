// The decode workload, one rank's part of one plan, for each of `steps` steps (the cache grows by
// one token a step; step k's phases are named "qkv[k]" ... when steps > 1):
//   qkv          QKV TKG with RMSNorm for the rank's Q heads and its KV heads (LNC 2 reduces over
//                H with sendrecv)
//   batch_shard  (attention_dp G > 1) attn_q_batch_shard over the G ranks of the rank's
//                attention-DP group: TP -> TP/G x DP G (G x its heads for B / G rows); when the
//                group's Q heads use KV heads the rank does not hold, their new K / V rows move
//                the same way
//   attention    decode attention per KV head against the rank's cache, this step's K / V
//                written at the cache's next position
//   unshard      (G > 1) all_to_all inside the group: back to the rank's heads for all B rows
//   o_proj       output projection TKG (LNC 2 writes disjoint H halves)
//   all_reduce   the TP sum of the o_proj partials over the rank's TP group
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
#include "launcher/scenarios/workload.h"
#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {
namespace {

using collectives::GroupComm;

std::string StepPhase(const char* phase, int step, int steps) {
  return steps == 1 ? std::string(phase) : StrCat(phase, "[", step + 1, "]");
}

}  // namespace

ScenarioFootprint RunDecode(PlanRun& run) {
  const ResolvedScenario& sc = run.scenario;
  const ResolvedPlan& plan = run.plan;
  const proto::ModelShape& m = sc.spec.model();
  const int64_t h = m.hidden(), nkv = m.n_kv_heads(), d = m.d_head();
  const int64_t b = sc.spec.batch(), cached = sc.spec.kv_length();
  const int steps = static_cast<int>(sc.spec.steps());
  const int64_t capacity = cached + steps;
  const int rank = run.ctx.rank();
  const int replica = plan.replica(rank);
  const int64_t hpr = plan.heads_per_rank, kvr = plan.kv_per_rank, qpk = plan.q_per_kv;
  const int64_t kv0 = plan.first_kv_head(rank);
  const int64_t g = plan.attention_dp, rows = b / g;
  const bool dp = g > 1;
  const uint64_t seed = sc.spec.seed();
  const DType dt = sc.dtype;
  LogicalCore& lnc = run.ctx.lnc();
  const GroupComm& tp = run.ctx.group(kTpGroups);
  const GroupComm* dpg = dp ? &run.ctx.group(kAttentionDpGroups) : nullptr;
  const int64_t gpos = dp ? dpg->position : 0;
  const int64_t row0 = gpos * rows, cache_rows = dp ? rows : b;
  const int group_first = rank - static_cast<int>(gpos);
  // The Q heads this rank attends ([att_q0, att_q0 + att_nq): its group's) and their KV heads.
  const int64_t att_q0 = plan.first_q_head(group_first), att_nq = g * hpr;
  const std::vector<int> kv_heads = plan.group_kv_heads(rank);

  MakeSharedInputs(run, /*tokens=*/1, steps);
  SharedInputs& shared = run.shared;
  // The caches of the KV heads this rank attends, for its rows: K [rows, d, T] with the head dim
  // on the partitions, V [rows, T, d] (kernels/attention/attention_tkg.h). Their values are those
  // of one global [replica, B, n_kv, kv_length, d] cache; position kv_length + s is written by
  // step s.
  auto global = [&](int64_t row, int64_t kv, int64_t t, int64_t k) {
    return ((((replica * b) + row0 + row) * nkv + kv) * cached + t) * d + k;
  };
  std::vector<TensorView> k_cache, v_cache;
  ScenarioFootprint footprint;
  for (int kv : kv_heads) {
    // K [rows, d, T]: row r of the [rows x d, T] view is (batch row r / d, head dim r % d).
    k_cache.push_back(Slice("k_cache", {cache_rows, d, capacity}, dt, seed, -1, 1,
                            [&](int64_t r, int64_t t) { return global(r / d, kv, t, r % d); }));
    // V [rows, T, d]: row r of the [rows x T, d] view is (batch row r / T, token r % T).
    v_cache.push_back(Slice("v_cache", {cache_rows, capacity, d}, dt, seed, -1, 1,
                            [&](int64_t r, int64_t k) { return global(r / capacity, kv, r % capacity, k); }));
    footprint.kv_cache_bytes += k_cache.back().size_bytes() + v_cache.back().size_bytes();
  }
  footprint.weight_bytes = shared.w_qkv.size_bytes() + shared.w_o.size_bytes();

  TensorView iota;
  if (dp) {
    iota = TensorView::Create({1, run.ctx.world_size()}, DType::kInt32, "iota_workers");
    for (int r = 0; r < run.ctx.world_size(); ++r) {
      iota.set({0, r}, static_cast<float>(plan.topology.iota_workers[r]));
    }
  }
  // Does the group attend KV heads this rank does not hold? Then their new rows are batch-sharded.
  const bool exchange_kv = std::any_of(kv_heads.begin(), kv_heads.end(),
                                       [&](int kv) { return kv < kv0 || kv >= kv0 + kvr; });

  for (int s = 0; s < steps; ++s) {
    const int64_t t_now = cached + s + 1;  // tokens attended this step, its own included
    // 1. QKV: [hpr + 2 kvr, B, 1, d] = the Q heads, then K and V of the KV heads (NBSd).
    const kernels::QkvParams qkv = RankQkvParams(run, s);
    TensorView qkv_out;
    run.runner.Run(StepPhase("qkv", s, steps), [&] {
      qkv_out = kernels::Qkv(lnc, qkv).output;
      if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
      if (shared.qkv_golden[s].empty()) {
        shared.qkv_golden[s] = AsDoubles(reference::QkvReference(qkv).output);
      }
      return PhaseOutput{qkv_out.ToFloats(), shared.qkv_golden[s]};
    });
    const TensorView q = qkv_out.slice(0, 0, hpr);              // [hpr, B, 1, d]
    const TensorView kv_part = qkv_out.slice(0, hpr, hpr + 2 * kvr);  // [2 kvr, B, 1, d]

    // 2. TP -> TP/G x DP G: G x hpr heads for B / G rows (and the new K / V rows it lacks).
    TensorView q_att = q.reshape({hpr, b, d}), kv_att;
    if (dp) {
      run.runner.Run(StepPhase("batch_shard", s, steps), [&] {
        PhaseOutput out;
        auto shard = [&](const TensorView& input, int64_t heads, const char* name) {
          TensorView gathered = TensorView::Create({g, heads, b, 1, d}, dt, name);
          TensorView result = collectives::attn_q_batch_shard(run.ctx, input, iota, gathered,
                                                              static_cast<int>(g), *dpg)
                                  .reshape({g * heads, rows, d});
        if (!Functional()) return result;  // timing-only: nothing to check
          const std::vector<std::byte> all = RawGather(*dpg, input);  // [G][heads][B][d]
          for (int64_t j = 0; j < g * heads; ++j) {
            for (int64_t i = 0; i < rows * d; ++i) {
              out.golden.push_back(ElementAt(all, dt, (j * b + row0) * d + i));
            }
          }
          const std::vector<float> actual = result.ToFloats();
          out.actual.insert(out.actual.end(), actual.begin(), actual.end());
          return result;
        };
        q_att = shard(q, hpr, "gathered_q");
        if (exchange_kv) kv_att = shard(kv_part, 2 * kvr, "gathered_kv");
        return out;
      });
    }

    // 3. Attention per KV head; the kernel appends this step's K / V rows at position t_now - 1.
    TensorView attention = TensorView::Create({att_nq, cache_rows, d}, dt, "attention_out");
    run.runner.Run(StepPhase("attention", s, steps), [&] {
      std::vector<double> golden;
      for (size_t i = 0; i < kv_heads.size(); ++i) {
        const int64_t kv = kv_heads[i];
        TensorView new_k, new_v;  // [cache_rows, d]
        if (kv >= kv0 && kv < kv0 + kvr) {
          new_k = kv_part.select(0, kv - kv0).select(1, 0).slice(0, row0, row0 + cache_rows);
          new_v = kv_part.select(0, kvr + kv - kv0).select(1, 0).slice(0, row0, row0 + cache_rows);
        } else {
          int64_t j = 0;  // the group member holding kv
          while (plan.first_kv_head(group_first + static_cast<int>(j)) + kvr <= kv) ++j;
          const int64_t base = j * 2 * kvr + (kv - plan.first_kv_head(group_first + static_cast<int>(j)));
          new_k = kv_att.select(0, base);
          new_v = kv_att.select(0, base + kvr);
        }
        const int64_t lo = std::max(att_q0, kv * qpk) - att_q0;
        const int64_t hi = std::min(att_q0 + att_nq, (kv + 1) * qpk) - att_q0;
        // The kernel reads this step's token from new_k / new_v and appends them to the caches.
        const kernels::AttentionTkgParams params{q_att.slice(0, lo, hi),
                                                 k_cache[i].slice(2, 0, t_now),
                                                 v_cache[i].slice(1, 0, t_now), new_k, new_v};
        kernels::AttentionTkgInto(lnc, params, attention.slice(0, lo, hi));
        if (!Functional()) continue;  // timing-only: nothing to check
        // The append is a copy: position t_now - 1 of both caches must now hold this step's
        // rows bit for bit (the golden below reads the caches the next steps read).
        for (const auto& [cached, fresh, what] :
             {std::tuple{k_cache[i].select(2, t_now - 1), new_k, "K"},
              std::tuple{v_cache[i].select(1, t_now - 1), new_v, "V"}}) {
          const std::vector<float> a = cached.ToFloats(), e = fresh.ToFloats();
          for (size_t j = 0; j < e.size(); ++j) {
            if (std::memcmp(&a[j], &e[j], sizeof(float)) != 0) {
              Raise(ErrorCode::kInternal,
                    StrCat("attention: KV head ", kv, ": the kernel's append left ", a[j],
                           " at element ", j, " of ", what, " cache position ", t_now - 1,
                           " where this step's row holds ", e[j]));
            }
          }
        }
        const std::vector<double> ref = reference::AttentionTkgRef(params.q, params.k_cache, params.v_cache);
        golden.insert(golden.end(), ref.begin(), ref.end());
      }
      if (!Functional()) return PhaseOutput{};
      return PhaseOutput{attention.ToFloats(), golden};
    });

    // 4. TP/G x DP G -> TP: the rank's heads for all B rows, [G (row blocks), hpr, rows, d].
    TensorView heads_rows = attention;  // G = 1: already [hpr, B, d]
    if (dp) {
      run.runner.Run(StepPhase("unshard", s, steps), [&] {
        heads_rows = TensorView::Create({g, hpr * rows * d}, dt, "unshard_out");
        collectives::all_to_all(run.ctx, *dpg, attention.reshape({g, hpr * rows * d}), heads_rows);
        if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
        const std::vector<std::byte> all = RawGather(*dpg, attention);  // [member][G hpr][rows][d]
        std::vector<double> golden;
        for (int64_t i = 0; i < g; ++i) {
          for (int64_t k = 0; k < hpr * rows * d; ++k) {
            golden.push_back(ElementAt(all, dt, (i * g * hpr + gpos * hpr) * rows * d + k));
          }
        }
        return PhaseOutput{heads_rows.ToFloats(), golden};
      });
    }

    // 5. o_proj TKG: attention [D, B, N = hpr, S = 1] @ the W_o rows of the heads -> [B, H].
    TensorView partial;
    run.runner.Run(StepPhase("o_proj", s, steps), [&] {
      TensorView attention_dbns = TensorView::Create({d, b, hpr, 1}, dt, "attention_dbns");
      if (dp) {
        DmaOnCore0(lnc, attention_dbns.reshape({d, g, rows, hpr}),
                   heads_rows.reshape({g, hpr, rows, d}).permute({3, 0, 2, 1}));
      } else {
        DmaOnCore0(lnc, attention_dbns.reshape({d, b, hpr}), heads_rows.permute({2, 1, 0}));
      }
      kernels::OutputProjectionTkgParams params;
      params.attention = attention_dbns;
      params.weight = shared.w_o;
      partial = kernels::OutputProjectionTkg(lnc, params);
      if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
      reference::OprojRefInputs ref;
      ref.weight = shared.w_o;
      return PhaseOutput{partial.ToFloats(),
                         AsDoubles(reference::OutputProjectionTkgRef(attention_dbns, ref))};
    });

    // 6. The TP sum over the TP group. Each rank checks its block against a plain fp64
    //    MPI_Reduce_scatter of the partials, so the ranks together check every element.
    run.runner.Run(StepPhase("all_reduce", s, steps), [&] {
      TensorView total = TensorView::Create(partial.shape(), dt, "o_proj_total");
      collectives::all_reduce(run.ctx, tp, partial, total);
      if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
      int64_t first = 0;
      std::vector<double> golden = ReduceScatterGolden(tp, partial, &first);
      std::vector<float> block =  // only this member's block of the sum
          total.reshape({b * h}).slice(0, first, first + static_cast<int64_t>(golden.size())).ToFloats();
      RecordLayerSample(run.result, plan.name, replica, s, b * h, first, block);
      return PhaseOutput{std::move(block), std::move(golden)};
    });
  }
  return footprint;
}

}  // namespace nkisim::launcher
