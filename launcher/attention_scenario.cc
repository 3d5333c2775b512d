#include "launcher/attention_scenario.h"

#include <mpi.h>

#include <cstring>
#include <vector>

#include "collectives/batch_shard.h"
#include "collectives/collectives.h"
#include "kernels/attention/attention_tkg.h"
#include "kernels/output_projection/output_projection_tkg.h"
#include "kernels/qkv/qkv.h"
#include "kernels/reference/attention_ref.h"
#include "kernels/reference/output_projection_ref.h"
#include "kernels/reference/qkv_ref.h"
#include "runtime/error.h"
#include "runtime/nisa/dma.h"
#include "runtime/rng.h"

namespace nkisim::launcher {
namespace {

using collectives::GroupComm;
using collectives::RankContext;

std::vector<double> AsDoubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The rank's slice of a global tensor of the counter-based RNG: element i of `shape` takes the
// value of global flat index global_index(i).
template <typename GlobalIndex>
TensorView Slice(const std::string& name, const Shape& shape, DType dtype, uint64_t seed, float lo,
                 float hi, GlobalIndex global_index) {
  TensorView t = TensorView::Create(shape, dtype, name);
  const CounterRng rng(seed, TensorIdFromName(name));
  std::vector<float> values(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = rng.Uniform(global_index(static_cast<int64_t>(i)), lo, hi);
  t.FromFloats(values);
  return t;
}

// Gathers `bytes` of every member of the group with a plain MPI_Allgather: the data movements'
// independent reference.
std::vector<std::byte> RawGather(const GroupComm& group, const TensorView& t) {
  const int bytes = static_cast<int>(t.size_bytes());
  std::vector<std::byte> all(static_cast<size_t>(bytes) * group.size());
  collectives::CheckMpi(MPI_Allgather(t.buffer().data() + t.offset() * SizeOf(t.dtype()), bytes,
                                      MPI_BYTE, all.data(), bytes, MPI_BYTE, group.comm),
                        "reference gather");
  return all;
}

float ElementAt(const std::vector<std::byte>& raw, DType dtype, int64_t index) {
  return ToFloat(dtype, raw.data() + index * static_cast<int64_t>(SizeOf(dtype)));
}

// A DMA on the rank's core 0 between HBM views (appending to the cache, re-laying out activations).
void DmaOnCore0(LogicalCore& lnc, const TensorView& dst, const TensorView& src) {
  ScopedCurrentCore on_core(lnc.core(0));
  nisa::dma_copy(dst, src);
}

}  // namespace

ScenarioFootprint RunAttentionDecode(const ResolvedScenario& sc, RankContext& ctx,
                                     PhaseRunner& runner, bool tp_only, SharedInputs& shared) {
  const proto::ModelShape& m = sc.spec.model();
  const int64_t h = m.hidden(), nq = m.n_q_heads(), nkv = m.n_kv_heads(), d = m.d_head();
  const int64_t b = sc.spec.batch(), cached = sc.spec.kv_length(), g = sc.gqa_group_size;
  const int rank = ctx.rank(), kv = sc.kv_head_of(rank);
  const uint64_t seed = sc.spec.seed();
  const DType dt = sc.dtype;
  LogicalCore& lnc = ctx.lnc();
  const GroupComm& gqa = ctx.group("gqa");
  const GroupComm& tp = ctx.group("tp");
  const int64_t position = gqa.position;
  const int64_t rows = tp_only ? b : b / g, row0 = tp_only ? 0 : position * rows;

  // Inputs: the hidden state, the norm weight, this rank's columns of the fused QKV weight (its Q
  // head, then K and V of its KV head), its rows of W_o, and its part of the KV cache.
  const int64_t fused = (nq + 2 * nkv) * d;
  if (!shared.x.valid()) {
    shared.x = Slice("x", {b, 1, h}, dt, seed, -1, 1, [](int64_t i) { return i; });
    shared.gamma = Slice("gamma", {1, h}, dt, seed, 0.5f, 1.5f, [](int64_t i) { return i; });
    shared.w_qkv = Slice("w_qkv", {h, 3 * d}, dt, seed, -0.02f, 0.02f, [&](int64_t i) {
      const int64_t row = i / (3 * d), j = i % (3 * d), part = j / d, k = j % d;
      const int64_t col = part == 0 ? rank * d + k : part == 1 ? nq * d + kv * d + k
                                                               : (nq + nkv) * d + kv * d + k;
      return row * fused + col;
    });
    shared.w_o = Slice("w_o", {d, h}, dt, seed, -0.02f, 0.02f,
                       [&](int64_t i) { return rank * d * h + i; });
  }
  const TensorView &x = shared.x, &gamma = shared.gamma, &w_qkv = shared.w_qkv, &w_o = shared.w_o;
  // The decode kernel's layouts (kernels/attention/attention_tkg.h): K with the head dim on the
  // partitions [rows, d, T], V with the tokens [rows, T, d]; the values are those of one global
  // [B, n_kv, T, d] cache either way (position `cached` is overwritten by this step's row).
  auto global = [&](int64_t row, int64_t t, int64_t k) {
    return (((row0 + row) * nkv + kv) * cached + t) * d + k;
  };
  const TensorView k_cache =
      Slice("k_cache", {rows, d, cached + 1}, dt, seed, -1, 1, [&](int64_t i) {
        return global(i / (d * (cached + 1)), i % (cached + 1), (i / (cached + 1)) % d);
      });
  const TensorView v_cache =
      Slice("v_cache", {rows, cached + 1, d}, dt, seed, -1, 1, [&](int64_t i) {
        return global(i / ((cached + 1) * d), (i / d) % (cached + 1), i % d);
      });
  ScenarioFootprint footprint;
  footprint.kv_cache_bytes = k_cache.size_bytes() + v_cache.size_bytes();
  footprint.weight_bytes = w_qkv.size_bytes() + w_o.size_bytes();

  // 1. QKV: [3, B, 1, d] = Q head, K and V of the KV head (NBSd).
  kernels::QkvParams qkv;
  qkv.input = x;
  qkv.fused_qkv_weights = w_qkv;
  qkv.output_layout = kernels::QkvOutputLayout::kNBSd;
  qkv.fused_norm_type = kernels::NormType::kRmsNorm;
  qkv.gamma_norm_weights = gamma;
  qkv.norm_eps = m.rms_eps();
  qkv.d_head = d;
  qkv.num_q_heads = 1;
  qkv.num_kv_heads = 1;
  TensorView qkv_out;
  runner.Run("qkv", [&] {
    qkv_out = kernels::Qkv(lnc, qkv).output;
    if (shared.qkv_golden.empty()) shared.qkv_golden = AsDoubles(reference::QkvReference(qkv).output);
    return PhaseOutput{qkv_out.ToFloats(), shared.qkv_golden};
  });
  const TensorView q = qkv_out.slice(0, 0, 1);  // [1, B, 1, d]

  // 2. TP -> TP x DP: G heads for B / G rows.
  TensorView q_heads = q.reshape({1, b, d});
  if (!tp_only) {
    runner.Run("batch_shard", [&] {
      TensorView iota = TensorView::Create({1, ctx.world_size()}, DType::kInt32, "iota_workers");
      for (int r = 0; r < ctx.world_size(); ++r) iota.set({0, r}, static_cast<float>(sc.topology.iota_workers[r]));
      TensorView gathered = TensorView::Create({g, 1, b, 1, d}, dt, "gathered_buf");
      q_heads = collectives::attn_q_batch_shard(ctx, q, iota, gathered, static_cast<int>(g), gqa)
                    .reshape({g, rows, d});
      const std::vector<std::byte> all = RawGather(gqa, q);  // [G][B][d]
      std::vector<double> golden;
      for (int64_t j = 0; j < g; ++j) {
        for (int64_t i = 0; i < rows * d; ++i) golden.push_back(ElementAt(all, dt, j * b * d + row0 * d + i));
      }
      return PhaseOutput{q_heads.ToFloats(), golden};
    });
  }

  // 3. Attention over the cache with this step's K and V appended at position `cached`.
  TensorView attention;
  runner.Run("attention", [&] {
    const auto new_row = [&](int part) {
      return qkv_out.select(0, part).select(1, 0).slice(0, row0, row0 + rows);  // [rows, d]
    };
    DmaOnCore0(lnc, k_cache.select(2, cached), new_row(1));
    DmaOnCore0(lnc, v_cache.select(1, cached), new_row(2));
    attention = kernels::AttentionTkg(lnc, {q_heads, k_cache, v_cache});
    return PhaseOutput{attention.ToFloats(), reference::AttentionTkgRef(q_heads, k_cache, v_cache)};
  });

  // 4. TP x DP -> TP: this rank's head for all B rows, [B, d].
  TensorView head_rows = attention.reshape({b, d});  // TP: already one head, all rows
  if (!tp_only) {
    runner.Run("unshard", [&] {
      TensorView gathered = TensorView::Create({g, rows * d}, dt, "unshard_out");
      collectives::all_to_all(ctx, gqa, attention.reshape({g, rows * d}), gathered);
      head_rows = gathered.reshape({b, d});
      const std::vector<std::byte> all = RawGather(gqa, attention);  // [member][G][rows][d]
      std::vector<double> golden;
      for (int64_t i = 0; i < g; ++i) {
        for (int64_t k = 0; k < rows * d; ++k) {
          golden.push_back(ElementAt(all, dt, (i * g + position) * rows * d + k));
        }
      }
      return PhaseOutput{head_rows.ToFloats(), golden};
    });
  }

  // 5. o_proj TKG: attention [D, B, N = 1, S = 1] @ W_o rows of this head -> partial [B, H].
  TensorView partial;
  runner.Run("o_proj", [&] {
    TensorView attention_dbns = TensorView::Create({d, b, 1, 1}, dt, "attention_dbns");
    DmaOnCore0(lnc, attention_dbns.reshape({d, b}), head_rows.permute({1, 0}));
    kernels::OutputProjectionTkgParams params;
    params.attention = attention_dbns;
    params.weight = w_o;
    partial = kernels::OutputProjectionTkg(lnc, params);
    reference::OprojRefInputs ref;
    ref.weight = w_o;
    return PhaseOutput{partial.ToFloats(),
                       AsDoubles(reference::OutputProjectionTkgRef(attention_dbns, ref))};
  });

  // 6. The TP sum over every rank. Each rank checks its block of rows against a plain
  //    MPI_Reduce_scatter of the partials in fp64, so the ranks together check every element.
  runner.Run("all_reduce", [&] {
    TensorView total = TensorView::Create(partial.shape(), dt, "o_proj_total");
    collectives::all_reduce(ctx, tp, partial, total);
    const std::vector<float> sum = total.ToFloats();
    const std::vector<double> mine = AsDoubles(partial.ToFloats());
    std::vector<int> counts(tp.size(), 0);
    for (int i = 0; i < tp.size(); ++i) {
      counts[i] = static_cast<int>(mine.size() / tp.size() + (i < static_cast<int>(mine.size() % tp.size())));
    }
    int64_t first = 0;
    for (int i = 0; i < tp.position; ++i) first += counts[i];
    std::vector<double> golden(static_cast<size_t>(counts[tp.position]));
    collectives::CheckMpi(MPI_Reduce_scatter(mine.data(), golden.data(), counts.data(), MPI_DOUBLE,
                                             MPI_SUM, tp.comm),
                          "reference reduce_scatter");
    return PhaseOutput{std::vector<float>(sum.begin() + first, sum.begin() + first + counts[tp.position]),
                       golden};
  });
  return footprint;
}

}  // namespace nkisim::launcher
