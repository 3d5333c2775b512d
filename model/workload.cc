#include "model/workload.h"

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "collectives/collectives.h"
#include "kernels/common/residual_add.h"
#include "kernels/reference/mlp_ref.h"
#include "kernels/reference/qkv_ref.h"
#include "runtime/error.h"
#include "runtime/nisa/dma.h"

namespace nkisim::launcher {

const std::vector<WorkloadInfo>& Workloads() {
  static const std::vector<WorkloadInfo> table = {
      {Workload::kDecode, "decode", RunDecode,
       "qkv (TKG) -> [batch_shard] -> attention (TKG) -> [unshard] -> o_proj (TKG) -> all_reduce, "
       "per step"},
      {Workload::kPrefill, "prefill", RunPrefill,
       "qkv (CTE, RoPE) -> causal attention (CTE) -> o_proj (CTE) -> all_reduce or reduce_scatter"},
      {Workload::kMoe, "moe", RunMoe,
       "router -> dispatch -> all_to_all_v (EP) -> experts (I / moe_tp) -> all_reduce (TP) -> "
       "all_to_all_v back -> combine"},
  };
  return table;
}

const WorkloadInfo& FindWorkload(Workload kind) {
  for (const WorkloadInfo& w : Workloads()) {
    if (w.kind == kind) return w;
  }
  Raise(ErrorCode::kInternal, "workload without a row in the table");
}

int64_t LayerWeights::bytes() const {
  int64_t total = 0;
  for (const TensorView* t : {&gamma, &w_qkv, &b_qkv, &w_o, &mlp_gamma, &w_gate, &w_up, &w_down}) {
    if (t->valid()) total += t->size_bytes();
  }
  return total;
}

std::string LayerTensorName(const char* name, int layer) {
  return layer == 0 ? std::string(name) : StrCat(name, "@L", layer + 1);
}

namespace {

// This rank's slices of layer `layer`'s weights (global tensors of the counter-based RNG).
LayerWeights MakeLayerWeights(const PlanRun& run, int layer) {
  const proto::Scenario& spec = run.scenario.spec;
  const proto::ModelShape& m = spec.model();
  const ResolvedPlan& plan = run.plan;
  const int64_t h = m.hidden(), nq = m.n_q_heads(), nkv = m.n_kv_heads(), d = m.d_head();
  const int rank = run.ctx.rank();
  const int64_t hpr = plan.heads_per_rank, kvr = plan.kv_per_rank;
  const int64_t q0 = plan.first_q_head(rank), kv0 = plan.first_kv_head(rank);
  const uint64_t seed = spec.seed();
  const DType dt = run.scenario.dtype;
  auto name = [&](const char* n) { return LayerTensorName(n, layer); };
  LayerWeights w;
  w.gamma = Slice(name("gamma"), {1, h}, dt, seed, 0.5f, 1.5f, [](int64_t, int64_t c) { return c; });
  const int64_t fused = (nq + 2 * nkv) * d, local = (hpr + 2 * kvr) * d;
  // Local column j of the rank's Q, K, V heads in the fused [.., (nq + 2 nkv) d] layout.
  auto fused_col = [&](int64_t j) {
    return j < hpr * d           ? q0 * d + j
           : j < (hpr + kvr) * d ? nq * d + kv0 * d + (j - hpr * d)
                                 : (nq + nkv) * d + kv0 * d + (j - (hpr + kvr) * d);
  };
  w.w_qkv = Slice(name("w_qkv"), {h, local}, dt, seed, -0.02f, 0.02f,
                  [&](int64_t row, int64_t j) { return row * fused + fused_col(j); });
  if (m.qkv_bias()) {
    w.b_qkv = Slice(name("b_qkv"), {1, local}, dt, seed, -0.5f, 0.5f, [&](int64_t, int64_t j) { return fused_col(j); });
  }
  w.w_o = Slice(name("w_o"), {hpr * d, h}, dt, seed, -0.02f, 0.02f,
                [&](int64_t r, int64_t c) { return q0 * d * h + r * h + c; });
  if (spec.attention_only()) return w;
  const int64_t inter = m.intermediate(), ir = inter / plan.tp, i0 = plan.tp_position(rank) * ir;
  w.mlp_gamma = Slice(name("mlp_gamma"), {1, h}, dt, seed, 0.5f, 1.5f, [](int64_t, int64_t c) { return c; });
  // Gate and up: columns [i0, i0 + I / tp) of [H, I]; down: the same rows of [I, H].
  w.w_gate = Slice(name("w_gate"), {h, ir}, dt, seed, -0.02f, 0.02f,
                   [&](int64_t r, int64_t c) { return r * inter + i0 + c; });
  w.w_up = Slice(name("w_up"), {h, ir}, dt, seed, -0.02f, 0.02f,
                 [&](int64_t r, int64_t c) { return r * inter + i0 + c; });
  w.w_down = Slice(name("w_down"), {ir, h}, dt, seed, -0.02f, 0.02f,
                   [&](int64_t r, int64_t c) { return (i0 + r) * h + c; });
  return w;
}

kernels::NormType ModelNorm(const proto::ModelShape& m) {
  return m.norm() == "layer" ? kernels::NormType::kLayerNorm : kernels::NormType::kRmsNorm;
}

}  // namespace

void MakeSharedInputs(PlanRun& run, int64_t tokens, int steps) {
  const ResolvedPlan& plan = run.plan;
  SharedInputs& shared = run.shared;
  const int layers = static_cast<int>(std::max(1u, run.scenario.spec.layers()));
  if (shared.tp == plan.tp && shared.x.size() == static_cast<size_t>(steps) &&
      (steps == 0 || shared.x[0].dim(1) == tokens)) {
    return;
  }
  const proto::ModelShape& m = run.scenario.spec.model();
  const int64_t h = m.hidden();
  const int64_t b = run.scenario.spec.batch();
  const int64_t replica = plan.replica(run.ctx.rank());
  const uint64_t seed = run.scenario.spec.seed();
  const DType dt = run.scenario.dtype;
  shared = SharedInputs();
  shared.tp = plan.tp;
  for (int s = 0; s < steps; ++s) {
    const int64_t base = (replica * steps + s) * b * tokens * h;
    shared.x.push_back(Slice("x", {b, tokens, h}, dt, seed, -1, 1,
                             [&](int64_t r, int64_t c) { return base + r * h + c; }));
  }
  shared.qkv_golden.resize(static_cast<size_t>(steps));
  for (int l = 0; l < layers; ++l) shared.layers.push_back(MakeLayerWeights(run, l));
}

kernels::QkvParams RankQkvParams(const PlanRun& run, int layer, const TensorView& input) {
  const proto::ModelShape& m = run.scenario.spec.model();
  kernels::QkvParams qkv;
  qkv.input = input;
  qkv.fused_qkv_weights = run.shared.layers[static_cast<size_t>(layer)].w_qkv;
  qkv.bias = run.shared.layers[static_cast<size_t>(layer)].b_qkv;  // invalid: no bias
  qkv.output_layout = kernels::QkvOutputLayout::kNBSd;
  qkv.fused_norm_type = ModelNorm(m);
  qkv.gamma_norm_weights = run.shared.layers[static_cast<size_t>(layer)].gamma;
  qkv.norm_eps = m.rms_eps();
  qkv.d_head = m.d_head();
  qkv.num_q_heads = run.plan.heads_per_rank;
  qkv.num_kv_heads = run.plan.kv_per_rank;
  return qkv;
}

kernels::MlpParams RankMlpParams(const PlanRun& run, int layer, const TensorView& attention_sum,
                                 const TensorView& layer_input) {
  const proto::ModelShape& m = run.scenario.spec.model();
  const LayerWeights& w = run.shared.layers[static_cast<size_t>(layer)];
  kernels::MlpParams p;
  p.hidden = attention_sum;
  p.residual = layer_input;
  p.store_fused_hidden = true;
  p.norm_type = ModelNorm(m);
  p.gamma = w.mlp_gamma;
  p.eps = m.rms_eps();
  p.gate_w = w.w_gate;
  p.up_w = w.w_up;
  p.down_w = w.w_down;
  p.activation = m.activation() == "gelu"   ? kernels::MlpActivation::kGelu
                 : m.activation() == "relu" ? kernels::MlpActivation::kRelu
                                            : kernels::MlpActivation::kSilu;
  return p;
}

namespace {

// Token rows checked at a time: [128, H] of floats and doubles, 12 MiB at H 8192, so a 2048-token
// prefill never holds its output and golden whole (64 + 128 MiB a rank).
constexpr int64_t kCheckRows = 128;

// Rows [r0, r1) of a [.., H] tensor as [1, r1 - r0, H].
TensorView RowsOf(const TensorView& t, int64_t r0, int64_t r1) {
  const int64_t h = t.shape().back();
  return t.reshape({t.numel() / h, h}).slice(0, r0, r1).reshape({1, r1 - r0, h});
}

// fp64 sum of two tensors' stored values, element by element.
std::vector<double> StoredSum(const TensorView& a, const TensorView& b) {
  const std::vector<float> x = a.ToFloats(), y = b.ToFloats();
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(x[i]) + y[i];
  return out;
}

// One phase's two comparisons as one: counts added, the worst of each maximum (the bound shown is
// the larger; each part was held to its own).
reference::Comparison Merged(const reference::Comparison& a, const reference::Comparison& b) {
  reference::Comparison c = a;
  c.elements += b.elements;
  c.failures += b.failures;
  if (b.max_abs_error > a.max_abs_error) {
    c.max_abs_error = b.max_abs_error;
    c.worst_index = b.worst_index < 0 ? -1 : a.elements + b.worst_index;
  }
  c.max_rel_error = std::max(a.max_rel_error, b.max_rel_error);
  c.bound = std::max(a.bound, b.bound);
  return c;
}

}  // namespace

TensorView QkvGolden(const PlanRun& run, int layer, const GroupGolden& x, int64_t b, int64_t s,
                     const TensorView& cos_cache, const TensorView& sin_cache) {
  const int64_t h = x.h(), heads = run.plan.heads_per_rank + 2 * run.plan.kv_per_rank;
  const int64_t d = run.scenario.spec.model().d_head();
  TensorView golden = TensorView::Create({heads, b, s, d}, DType::kFloat32, "qkv_golden");
  ForRowBlocks(b, s, kCheckRows, [&](int64_t b0, int64_t b1, int64_t s0, int64_t s1) {
    const TensorView input =
        x.RowsTensor(b0 * s + s0, (b1 - 1) * s + s1, {b1 - b0, s1 - s0, h}, "qkv_golden_input");
    kernels::QkvParams params = RankQkvParams(run, layer, input);
    if (cos_cache.valid()) {
      params.fused_rope = true;
      params.cos_cache = cos_cache.slice(0, b0, b1).slice(1, s0, s1);
      params.sin_cache = sin_cache.slice(0, b0, b1).slice(1, s0, s1);
    }
    golden.slice(1, b0, b1).slice(2, s0, s1).FromFloats(reference::QkvReference(params).output);
  });
  return golden;
}

ComparisonFn ChainCheck(std::vector<float> actual, std::vector<double> golden) {
  return [actual = std::move(actual), golden = std::move(golden)](const reference::Tolerance& tol) {
    return reference::Compare(actual, golden, tol);
  };
}

PhaseOutput QkvOutput(const TensorView& output, const TensorView& chain_golden, bool same_input,
                      const kernels::QkvParams& params) {
  std::vector<double> chain = AsDoubles(chain_golden.ToFloats());
  std::vector<double> local = same_input ? chain : AsDoubles(reference::QkvReference(params).output);
  std::vector<float> actual = output.ToFloats();
  return PhaseOutput{actual, std::move(local), {}, ChainCheck(actual, std::move(chain))};
}

PhaseOutput MovementOutput(std::vector<float> actual, std::vector<float> moved,
                           std::vector<double> golden) {
  PhaseOutput out;
  out.chain = ChainCheck(actual, std::move(golden));
  out.golden = AsDoubles(moved);
  out.actual = std::move(actual);
  return out;
}

PhaseOutput MlpLayerPhase(PlanRun& run, int layer, const TensorView& attention_sum,
                          const TensorView& layer_input, const GroupGolden& golden_attention_sum,
                          const GroupGolden& golden_input, MlpLayerOut* out) {
  const kernels::MlpParams params = RankMlpParams(run, layer, attention_sum, layer_input);
  const kernels::MlpResult result = kernels::Mlp(run.ctx.lnc(), params);
  out->partial = result.output;
  out->fused_hidden = result.fused_hidden;
  if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
  out->golden_fused = SumOf(golden_input, golden_attention_sum);
  out->golden_sum = GroupGolden(run.ctx.group(kTpGroups), golden_input.rows(), golden_input.h());
  // The output, and the residual stream, a block of token rows at a time (the MLP is row-wise, so
  // a block's golden needs only its rows). Each block's reference runs once, on the block's
  // simulated rows and its golden rows stacked ([2n, H]): the weights are converted once.
  PhaseOutput phase;
  phase.both = [params, out, &golden_attention_sum, &golden_input](const reference::Tolerance& tol,
                                                                    const reference::Tolerance& chain_tol) {
    const int64_t h = out->partial.shape().back(), rows = out->partial.numel() / h;
    reference::StreamingCompare output(tol), fused(tol), chain_output(chain_tol), chain_fused(chain_tol);
    for (int64_t r0 = 0; r0 < rows; r0 += kCheckRows) {
      const int64_t r1 = std::min(rows, r0 + kCheckRows), n = r1 - r0;
      kernels::MlpParams block = params;
      block.hidden = TensorView::Create({1, 2 * n, h}, DType::kFloat32, "mlp_check_hidden");
      block.residual = TensorView::Create({1, 2 * n, h}, DType::kFloat32, "mlp_check_residual");
      block.hidden.slice(1, 0, n).FromFloats(RowsOf(params.hidden, r0, r1).ToFloats());
      block.residual.slice(1, 0, n).FromFloats(RowsOf(params.residual, r0, r1).ToFloats());
      const std::vector<double> hidden = golden_attention_sum.Rows(r0, r1), input = golden_input.Rows(r0, r1);
      block.hidden.slice(1, n, 2 * n).FromFloats(std::vector<float>(hidden.begin(), hidden.end()));
      block.residual.slice(1, n, 2 * n).FromFloats(std::vector<float>(input.begin(), input.end()));
      const reference::MlpGolden golden = reference::MlpReference(block);
      const std::vector<float> actual = RowsOf(out->partial, r0, r1).ToFloats();
      const std::vector<float> stream = RowsOf(out->fused_hidden, r0, r1).ToFloats();
      const int64_t count = n * h;
      output.Add(r0 * h, actual.data(), golden.output.data(), count);
      fused.Add(r0 * h, stream.data(), golden.fused_hidden.data(), count);
      chain_output.Add(r0 * h, actual.data(), golden.output.data() + count, count);
      chain_fused.Add(r0 * h, stream.data(), golden.fused_hidden.data() + count, count);
      out->golden_sum.AddGroupSum(
          r0, r1, std::vector<double>(golden.output.begin() + count, golden.output.end()));
    }
    return std::pair{Merged(output.Finish(), fused.Finish()),
                     Merged(chain_output.Finish(), chain_fused.Finish())};
  };
  return phase;
}

PhaseOutput ResidualLayerPhase(PlanRun& run, const TensorView& fused_hidden,
                               const TensorView& mlp_sum, const GroupGolden& golden_fused,
                               const GroupGolden& golden_mlp_sum, TensorView* out,
                               GroupGolden* golden_out,
                               const std::function<void(int64_t, const std::vector<float>&)>& sample) {
  const int64_t h = fused_hidden.shape().back(), rows = fused_hidden.numel() / h;
  *out = TensorView::Create(fused_hidden.shape(), fused_hidden.dtype(), "layer_out");
  kernels::ResidualAdd(run.ctx.lnc(), fused_hidden.reshape({rows, h}), mlp_sum.reshape({rows, h}),
                       out->reshape({rows, h}));
  if (!Functional()) return PhaseOutput{};  // timing-only: nothing to check
  *golden_out = SumOf(golden_fused, golden_mlp_sum);
  PhaseOutput check;
  check.both = [fused_hidden, mlp_sum, golden_out, result = *out, sample, rows, h](
                   const reference::Tolerance& tol, const reference::Tolerance& chain_tol) {
    reference::StreamingCompare compare(tol), chain(chain_tol);
    for (int64_t r0 = 0; r0 < rows; r0 += kCheckRows) {
      const int64_t r1 = std::min(rows, r0 + kCheckRows);
      const std::vector<float> actual = RowsOf(result, r0, r1).ToFloats();
      const int64_t n = static_cast<int64_t>(actual.size());
      compare.Add(r0 * h, actual.data(), StoredSum(RowsOf(fused_hidden, r0, r1), RowsOf(mlp_sum, r0, r1)).data(), n);
      chain.Add(r0 * h, actual.data(), golden_out->Rows(r0, r1).data(), n);
      if (sample) sample(r0 * h, actual);
    }
    return std::pair{compare.Finish(), chain.Finish()};
  };
  return check;
}

CheckedSum TpAllReduce(PlanRun& run, const TensorView& partial, const GroupGolden& golden,
                       const char* name, bool record, int step) {
  const collectives::GroupComm& tp = run.ctx.group(kTpGroups);
  CheckedSum out;
  out.total = TensorView::Create(partial.shape(), partial.dtype(), name);
  collectives::all_reduce(run.ctx, tp, partial, out.total);
  if (!Functional()) return out;  // timing-only: nothing to check
  int64_t first = 0;
  std::vector<double> local = ReduceScatterGolden(tp, partial, &first);
  const int64_t n = partial.numel();
  if (first != golden.first() || local.size() != golden.block().size()) {
    Raise(ErrorCode::kInternal, StrCat(name, ": the reference's block [", first, ", +", local.size(),
                                       ") is not the chain golden's [", golden.first(), ", +",
                                       golden.block().size(), ")"));
  }
  std::vector<float> block =  // only this member's block of the sum
      out.total.reshape({n}).slice(0, first, first + static_cast<int64_t>(local.size())).ToFloats();
  if (record) {
    RecordLayerSample(run.result, run.plan.name, run.plan.replica(run.ctx.rank()), step, n, first,
                      block);
  }
  out.output = PhaseOutput{block, std::move(local), {}, ChainCheck(block, golden.block())};
  return out;
}

TensorView CorruptedInput(const TensorView& x) {
  TensorView copy = TensorView::Create(x.shape(), x.dtype(), x.name() + "_corrupted");
  std::vector<float> values = x.ToFloats();
  for (int64_t c = 0; c < x.shape().back(); ++c) values[static_cast<size_t>(c)] = -values[static_cast<size_t>(c)];
  copy.FromFloats(values);
  return copy;
}

std::vector<std::byte> RawGather(const collectives::GroupComm& group, const TensorView& t) {
  const int bytes = static_cast<int>(t.size_bytes());
  std::vector<std::byte> all(static_cast<size_t>(bytes) * group.size());
  TensorView dense = t;
  if (!t.is_contiguous()) {
    dense = TensorView::Create(t.shape(), t.dtype(), "gather_src");
    dense.FromFloats(t.ToFloats());
  }
  collectives::CheckMpi(MPI_Allgather(dense.buffer().data() + dense.offset() * SizeOf(dense.dtype()),
                                      bytes, MPI_BYTE, all.data(), bytes, MPI_BYTE, group.comm),
                        "reference gather");
  return all;
}

float ElementAt(const std::vector<std::byte>& raw, DType dtype, int64_t index) {
  return ToFloat(dtype, raw.data() + index * static_cast<int64_t>(SizeOf(dtype)));
}

std::vector<double> AsDoubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

void DmaOnCore0(LogicalCore& lnc, const TensorView& dst, const TensorView& src) {
  ScopedCurrentCore on_core(lnc.core(0));
  nisa::dma_copy(dst, src);
}

std::vector<double> ReduceScatterGolden(const collectives::GroupComm& group,
                                        const TensorView& partial, int64_t* first) {
  constexpr int64_t kMaxSendElements = int64_t{1} << 20;
  const int n = group.size();
  const int64_t total = partial.numel();
  std::vector<int64_t> counts(static_cast<size_t>(n)), offsets(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    counts[i] = total / n + (i < total % n ? 1 : 0);
    if (i > 0) offsets[i] = offsets[i - 1] + counts[i - 1];
  }
  *first = offsets[group.position];
  std::vector<double> golden(static_cast<size_t>(counts[group.position]));
  const TensorView flat = partial.reshape({total});
  const int64_t step = std::max<int64_t>(1, kMaxSendElements / n);
  std::vector<double> send;
  std::vector<int> piece(static_cast<size_t>(n));
  // Slice j of every block at once: every member makes the same calls (counts[0] is the largest).
  for (int64_t j = 0; j < counts[0]; j += step) {
    send.clear();
    for (int q = 0; q < n; ++q) {
      const int64_t len = std::clamp<int64_t>(counts[q] - j, 0, step);
      piece[q] = static_cast<int>(len);
      const std::vector<float> part = flat.slice(0, offsets[q] + j, offsets[q] + j + len).ToFloats();
      send.insert(send.end(), part.begin(), part.end());
    }
    collectives::CheckMpi(MPI_Reduce_scatter(send.data(), golden.data() + j, piece.data(),
                                             MPI_DOUBLE, MPI_SUM, group.comm),
                          "reference reduce_scatter");
  }
  return golden;
}

void RecordLayerSample(proto::RankResult& result, const std::string& plan, int replica, int step,
                       int64_t total, int64_t first, const std::vector<float>& values) {
  const int64_t stride = std::max<int64_t>(1, total / 65536);
  proto::LayerSample& s = *result.add_layer_samples();
  s.set_scenario(plan);
  s.set_replica(static_cast<uint32_t>(replica));
  s.set_step(static_cast<uint32_t>(step));
  const int64_t end = first + static_cast<int64_t>(values.size());
  for (int64_t i = (first + stride - 1) / stride * stride; i < end; i += stride) {
    s.add_index(i);
    s.add_value(values[static_cast<size_t>(i - first)]);
  }
}

}  // namespace nkisim::launcher
