// The workloads of `nkisim run`, one row each: a function that runs one plan's phases on one rank.
// Every workload
//   * makes exactly this rank's slice of the global inputs with the counter-based RNG (so a plan
//     changes what a rank holds, never the values of the layer);
//   * runs each phase through the PhaseRunner, which checks it against the golden of the whole
//     layer chain (model/golden_chain.h: each phase's plain reference applied to the
//     goldens of the phases before it; the data movements also bit for bit against raw MPI calls);
//   * records samples of the layer output at fixed global indices, so the launcher can check that
//     every plan of a job computes the same layer (the plan changes cost, not results).
// Rows: decode (model/decode.cc), prefill (model/prefill.cc), moe (model/moe_layer.cc: one
// mixture-of-experts layer; its samples are indexed by global token, so plans of different moe_ep
// compare the tokens they share).
#pragma once

#include <algorithm>
#include <functional>
#include <cstdint>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "kernels/mlp/mlp.h"
#include "kernels/qkv/qkv.h"
#include "model/golden_chain.h"
#include "model/phase_runner.h"
#include "model/scenario_config.h"
#include "proto/control.pb.h"
#include "runtime/rng.h"
#include "runtime/sim_mode.h"
#include "runtime/tensor_view.h"

namespace nkisim::launcher {

// One decoder layer's weights on this rank: the attention block's (the input norm's gamma, the
// rank's fused QKV columns and W_o rows) and the MLP's (its norm's gamma, the rank's gate / up
// columns and down rows of I / tp; absent with attention_only).
struct LayerWeights {
  TensorView gamma, w_qkv, w_o;
  TensorView b_qkv;  // model.qkv_bias: [1, local QKV columns], the rank's heads' biases; else invalid
  TensorView mlp_gamma, w_gate, w_up, w_down;
  int64_t bytes() const;
};

// What the plans of one rank can share: inputs that depend only on the TP split (tp), made once.
struct SharedInputs {
  int tp = 0;  // the TP degree they were made for; 0: none yet
  std::vector<LayerWeights> layers;             // per decoder layer
  std::vector<TensorView> x;                    // layer 0's input, per step (decode) or one (prefill)
  std::vector<TensorView> qkv_golden;           // layer 0's QKV golden (fp32), per step
};

struct ScenarioFootprint {
  int64_t kv_cache_bytes = 0;  // this rank's K and V caches, every layer
  int64_t weight_bytes = 0;    // this rank's weights, every layer
};

struct PlanRun {
  const ResolvedScenario& scenario;
  const ResolvedPlan& plan;
  collectives::RankContext& ctx;
  PhaseRunner& runner;
  SharedInputs& shared;
  proto::RankResult& result;  // receives the layer samples
};

using WorkloadFn = ScenarioFootprint (*)(PlanRun& run);

struct WorkloadInfo {
  Workload kind;
  const char* name;
  WorkloadFn run;
  const char* summary;
};

ScenarioFootprint RunDecode(PlanRun& run);
ScenarioFootprint RunPrefill(PlanRun& run);
ScenarioFootprint RunMoe(PlanRun& run);  // model/moe_layer.cc

// The table (every Workload has a row).
const std::vector<WorkloadInfo>& Workloads();
const WorkloadInfo& FindWorkload(Workload kind);

// --- Helpers the workloads share (model/workload.cc) ---

// Fills run.shared for this rank unless it already holds this TP split's inputs: per step the
// hidden state x [B, tokens, H] (of a global [replica, step, B, tokens, H]), and per layer its
// weights (LayerWeights: layer 0's tensors keep the names of a one-layer job, layer l's are named
// "<name>@L<l + 1>", so every layer draws its own values), and one empty QKV golden per step.
void MakeSharedInputs(PlanRun& run, int64_t tokens, int steps);
// The QKV parameters both workloads use for layer `layer` on `input`: the model's norm, NBSd
// output, the rank's heads.
kernels::QkvParams RankQkvParams(const PlanRun& run, int layer, const TensorView& input);
// The MLP parameters of layer `layer`: hidden = the attention block's TP sum, residual = the
// layer's input (their sum stored: the residual stream), the model's norm and activation, the
// rank's I / tp columns.
kernels::MlpParams RankMlpParams(const PlanRun& run, int layer, const TensorView& attention_sum,
                                 const TensorView& layer_input);

// What the MLP phase hands on, simulated and golden.
struct MlpLayerOut {
  TensorView partial;       // the rank's partial output
  TensorView fused_hidden;  // the residual stream: layer input + the attention block's sum
  GroupGolden golden_fused;    // its golden
  GroupGolden golden_sum;      // the golden TP sum of the partials (the MLP all-reduce's golden)
};
// The MLP phase of layer `layer`: the MLP kernel on the attention block's TP sum and the layer's
// input. Checked a block of token rows at a time against the fp64 reference (reference/mlp_ref.h)
// applied to those inputs, and (chain) applied to the goldens of the attention sum and of the
// layer input; the chain check also sums the golden partials over the TP group into
// out->golden_sum (collective: every member's check runs it in the same order).
PhaseOutput MlpLayerPhase(PlanRun& run, int layer, const TensorView& attention_sum,
                          const TensorView& layer_input, const GroupGolden& golden_attention_sum,
                          const GroupGolden& golden_input, MlpLayerOut* out);
// The residual phase: *out = fused_hidden + mlp_sum (a new tensor of their shape) on the rank's
// core; *golden_out = the sum of their goldens; every row of *out checked against the fp64 sum of
// the two and (chain) against *golden_out, a block of token rows at a time; `sample`, when given, sees each checked block (its first flat index and
// values) to record the layer output.
PhaseOutput ResidualLayerPhase(
    PlanRun& run, const TensorView& fused_hidden, const TensorView& mlp_sum,
    const GroupGolden& golden_fused, const GroupGolden& golden_mlp_sum, TensorView* out,
    GroupGolden* golden_out,
    const std::function<void(int64_t, const std::vector<float>&)>& sample = nullptr);

// The golden of the QKV phase of layer `layer` on the golden layer input `x` ([B S, H] rows of a
// [B, S, H] input): the plain reference applied a block of token rows at a time (with the rows'
// RoPE tables when given), an fp32 [heads, B, S, d] tensor (NBSd).
TensorView QkvGolden(const PlanRun& run, int layer, const GroupGolden& x, int64_t b, int64_t s,
                     const TensorView& cos_cache = TensorView(),
                     const TensorView& sin_cache = TensorView());

// A chain check of `actual` against `golden` (flattened alike): PhaseOutput::chain.
using ComparisonFn = std::function<reference::Comparison(const reference::Tolerance&)>;
ComparisonFn ChainCheck(std::vector<float> actual, std::vector<double> golden);

// The QKV phase's checks of `output`: against the reference on `params` (its own input) and
// against `chain_golden`; `same_input` (the input is the chain's own, layer 0): one golden for both.
PhaseOutput QkvOutput(const TensorView& output, const TensorView& chain_golden, bool same_input,
                      const kernels::QkvParams& params);

// A data movement's checks: `actual` against `moved` (what the plain MPI call moves of the
// simulated input; exact by default), and against `golden` (the same movement of the chain's
// golden).
PhaseOutput MovementOutput(std::vector<float> actual, std::vector<float> moved,
                           std::vector<double> golden);

// A copy of the layer input `x` ([B, S, H]) with token row 0 negated (the CORRUPT_INPUT test
// fault: a wrong hand-off into the layer).
TensorView CorruptedInput(const TensorView& x);

// "w_qkv" for layer 0, "w_qkv@L2" for layer 1, ...
std::string LayerTensorName(const char* name, int layer);

// The TP sum of `partial` over the rank's TP group into a new tensor; this member's block of it
// checked against the fp64 MPI_Reduce_scatter of the simulated partials (ReduceScatterGolden) and
// against its block of `golden` (the chain's golden sum, which the phase that made the partials
// filled); `record` keeps the block as the layer output sample.
struct CheckedSum {
  TensorView total;
  PhaseOutput output;
};
CheckedSum TpAllReduce(PlanRun& run, const TensorView& partial, const GroupGolden& golden,
                       const char* name, bool record, int step);

// The rank's slice of a global tensor of the counter-based RNG. Seen as rows of its last dim
// ([numel / shape.back(), shape.back()]), element (row, col) takes the value of global flat index
// global_index(row, col): the row's part is worked out once per row, not per element (no integer
// division per element). Timing-only: left unfilled (no values are used).
template <typename GlobalIndex>
TensorView Slice(const std::string& name, const Shape& shape, DType dtype, uint64_t seed, float lo,
                 float hi, GlobalIndex global_index) {
  TensorView t = TensorView::Create(shape, dtype, name);
  if (!Functional() || t.numel() == 0) return t;
  const CounterRng rng(seed, TensorIdFromName(name));
  const int64_t cols = shape.back(), rows = t.numel() / cols;
  // A block of rows at a time, so no fp32 copy of the whole tensor is ever held.
  const int64_t block = std::max<int64_t>(1, (int64_t{1} << 16) / cols);
  const TensorView flat = t.reshape({rows, cols});
  std::vector<float> values;
  std::vector<uint64_t> indices;
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t r1 = std::min(rows, r0 + block);
    values.resize(static_cast<size_t>((r1 - r0) * cols));
    indices.resize(values.size());
    uint64_t* out = indices.data();
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < cols; ++c) *out++ = static_cast<uint64_t>(global_index(r, c));
    }
    rng.UniformMany(indices.data(), static_cast<int64_t>(values.size()), lo, hi, values.data());
    flat.slice(0, r0, r1).FromFloats(values);
  }
  return t;
}

// Every member's bytes of `t` gathered with a plain MPI_Allgather (the data movements' reference).
std::vector<std::byte> RawGather(const collectives::GroupComm& group, const TensorView& t);
float ElementAt(const std::vector<std::byte>& raw, DType dtype, int64_t index);
std::vector<double> AsDoubles(const std::vector<float>& v);
// A DMA on the rank's core 0 between HBM views (appending to a cache, re-laying out activations).
void DmaOnCore0(LogicalCore& lnc, const TensorView& dst, const TensorView& src);

// The TP reduction's check: this member's block of the elementwise sum of every member's
// `partial` over `group`, by plain MPI_Reduce_scatter calls in fp64. Blocks split the flat tensor
// as evenly as possible, earlier members one element more (GroupGolden's blocks); `first`
// receives the block's first index. The blocks are reduced a slice at a time (at most 1 Mi fp64
// values sent per call), so no rank holds an fp64 copy of its whole partial.
// REQUIRES: partial contiguous.
std::vector<double> ReduceScatterGolden(const collectives::GroupComm& group,
                                        const TensorView& partial, int64_t* first);

// Records the layer output's values at global indices k * stride (stride chosen so at most
// about 65536 samples cover an output of `total` elements) that fall in
// [first, first + values.size()), for replica `replica` and step `step`.
void RecordLayerSample(proto::RankResult& result, const std::string& plan, int replica, int step,
                       int64_t total, int64_t first, const std::vector<float>& values);

}  // namespace nkisim::launcher
