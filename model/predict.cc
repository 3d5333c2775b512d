#include "model/predict.h"

#include <google/protobuf/text_format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "kernels/attention/attention_cte.h"
#include "kernels/reference/moe_ref.h"
#include "model/timing_job.h"
#include "model/scenario_config.h"
#include "runtime/cost_model.h"
#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

// The o_proj CTE's limit on B x S of one prefill (scenario_config.cc).
constexpr int64_t kMaxPrefillRows = 131072;
// The decode kernels' batch limit (scenario_config.cc).
constexpr int kMaxDecodeBatch = 128;

int ParseCount(const std::string& text, const std::string& key, const std::string& where) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v <= 0 || v > 65536) {
    Raise(ErrorCode::kBadConfig, StrCat("--plan ", where, ": ", key, ": '", text,
                                        "': must be an integer in [1, 65536]"));
  }
  return static_cast<int>(v);
}

}  // namespace

ResolvedScenario Resolve(const proto::Scenario& s, const std::string& source) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(s, &text);
  return ResolveScenario(text, source);
}

LayerTimes Layers(const proto::ScenarioSummary& s) {
  LayerTimes t;
  const bool two = s.layers() >= 2;
  for (const proto::PhaseSummary& p : s.phases()) {
    const std::string& name = p.phase();
    const size_t dot = name.rfind(".L");
    const std::string layer = dot == std::string::npos ? ".L1" : name.substr(dot);
    if (layer == ".L1") t.first_ns += p.sim_ns();
    if (layer == ".L2") t.steady_ns += p.sim_ns();
    if (layer == (two ? ".L2" : ".L1")) t.phases.push_back({name.substr(0, dot), p.sim_ns() / 1000.0});
  }
  if (!two) t.steady_ns = t.first_ns;
  return t;
}

// The vocab-parallel LM head of `rows` rows (each rank multiplies [rows, H] by its [H, V / tp]
// columns) as a roofline of the logical core (weights read from HBM vs bf16 matmul peak), then
// the cross-rank argmax of on-device sampling: one in-graph collective of a few bytes a rank
// (its fixed cost plus a step per doubling of the group).
double LmHeadNs(const PredictRequest& r, const PredictPlan& plan, const HardwareProfile& hw, int rows) {
  const double cols = std::ceil(static_cast<double>(r.model.vocab) / plan.tp);
  const double bytes = 2.0 * r.model.hidden * cols;
  const double flops = 2.0 * rows * r.model.hidden * cols;
  const double memory_ns = bytes / (hw.hbm_gbps_per_core() * plan.lnc);
  const double compute_ns = flops / (PeakBf16Tflops(hw) * plan.lnc * 1e3);
  const double argmax_ns = CollectiveInGraphFixedNs(hw) +
                           hw.collective_step_latency_ns() * std::ceil(std::log2(std::max(2, plan.tp)));
  return std::max(memory_ns, compute_ns) + argmax_ns;
}

namespace {

// Problems of the request that the layer scenarios do not see (the layers' own rules come from
// ResolveScenario, named by plan).
void BucketProblems(const PredictRequest& r, std::vector<std::string>& p) {
  for (const auto& [field, buckets] : {std::pair<const char*, const std::vector<int>&>{
                                           "--context-encoding-buckets", r.context_encoding_buckets},
                                       {"--token-generation-buckets", r.token_generation_buckets}}) {
    for (size_t i = 0; i < buckets.size(); ++i) {
      if (buckets[i] < 1 || (i > 0 && buckets[i] <= buckets[i - 1])) {
        p.push_back(StrCat(field, ": ", buckets[i], ": must be >= 1 and strictly ascending"));
      }
    }
  }
  const std::vector<int>& cte = r.context_encoding_buckets;
  if (!cte.empty() && r.input_tokens > cte.back()) {
    p.push_back(StrCat("--input-tokens: ", r.input_tokens, ": longer than the largest --context-encoding-buckets ",
                       "bucket (", cte.back(), "): no compiled context encoding holds the prompt"));
  }
  const std::vector<int>& tkg = r.token_generation_buckets;
  const int64_t last_kv = int64_t{r.input_tokens} + r.output_tokens - 1;
  if (!tkg.empty() && last_kv > tkg.back()) {
    p.push_back(StrCat("--input-tokens + --output-tokens - 1: ", last_kv,
                       ": the last step's KV length exceeds the largest --token-generation-buckets bucket (",
                       tkg.back(), "): no compiled token generation holds it"));
  }
}

std::vector<std::string> RequestProblems(const PredictRequest& r) {
  std::vector<std::string> p;
  if (r.plans.empty()) p.push_back("--tp / --plan: none given: at least one plan is needed");
  if (r.batch <= 0) p.push_back(StrCat("--batch: ", r.batch, ": must be >= 1"));
  if (r.input_tokens <= 0) p.push_back(StrCat("--input-tokens: ", r.input_tokens, ": must be >= 1"));
  if (r.output_tokens <= 0) p.push_back(StrCat("--output-tokens: ", r.output_tokens, ": must be >= 1"));
  if (r.instances <= 0) p.push_back(StrCat("--instances: ", r.instances, ": must be >= 1"));
  if (r.decode_samples < 2) p.push_back(StrCat("--decode-samples: ", r.decode_samples, ": must be >= 2"));
  if (r.max_prefill_chunk < 1) {
    p.push_back(StrCat("--max-prefill-chunk: ", r.max_prefill_chunk, ": must be >= 1"));
  }
  BucketProblems(r, p);
  const int64_t context = int64_t{r.input_tokens} + r.output_tokens;
  if (r.model.max_positions > 0 && context > r.model.max_positions) {
    p.push_back(StrCat("--input-tokens + --output-tokens: ", context, ": must be <= the model's ",
                       "max_position_embeddings (", r.model.max_positions, ")"));
  }
  if (r.model.moe) {
    for (std::string& q : RouterSkewProblems(r.skew, r.skew_sample_tokens, MoeShapeOf(r.model), r.skew_text)) {
      p.push_back(q);
    }
  } else if (r.skew.kind != kernels::moe::RouterSkew::Kind::kUniform) {
    p.push_back(StrCat(r.skew_text, ": given for ", r.model.architecture,
                       ", a dense model: only a mixture-of-experts model has a router"));
  }
  for (const PredictPlan& plan : r.plans) {
    if (plan.tp <= 0) p.push_back(StrCat("plan '", plan.name, "': tp: ", plan.tp, ": must be >= 1"));
    if (plan.lnc != 1 && plan.lnc != 2) {
      p.push_back(StrCat("plan '", plan.name, "': lnc: ", plan.lnc, ": must be 1 or 2"));
    }
    if (plan.replicas < 1) p.push_back(StrCat("plan '", plan.name, "': replicas: ", plan.replicas, ": must be >= 1"));
    if (plan.tp <= 0) continue;
    if (r.model.head_dim > 128 && r.model.n_kv_heads % plan.tp != 0) {
      p.push_back(StrCat("plan '", plan.name, "': tp: ", plan.tp, ": must divide num_key_value_heads (",
                         r.model.n_kv_heads, ") at head_dim ", r.model.head_dim, ": a head is priced as ",
                         r.model.head_dim / 128, " heads of 128, which a TP above the KV heads would split over ranks "
                         "(not modeled)"));
    }
    if (r.model.moe) {
      for (std::string& q : MoePlanProblems(MoeShapeOf(r.model), MoePlanOf(plan), plan.name)) p.push_back(q);
    } else if (plan.moe_ep > 0 || plan.moe_tp > 0) {
      p.push_back(StrCat("plan '", plan.name, "': moe_ep / moe_tp: given for ", r.model.architecture,
                         ", a dense model: only a mixture-of-experts model has experts to spread"));
    }
  }
  return p;
}

}  // namespace

Chunks PrefillChunks(const PredictRequest& r) {
  const HardwareProfile hw = r.profile_path.empty() ? Trn2Profile() : LoadHardwareProfile(r.profile_path);
  // The chunk's B x C rows within the o_proj CTE's limit too.
  const int64_t max_s = std::min<int64_t>({r.max_prefill_chunk, kernels::AttentionCteMaxSeqLen(hw, DType::kBFloat16),
                                           kMaxPrefillRows / std::max(1, r.batch)});
  const int s = PaddedToBucket(r.context_encoding_buckets, r.input_tokens);
  Chunks c;
  c.count = static_cast<int>((s + max_s - 1) / max_s);
  c.tokens = (s + c.count - 1) / c.count;
  return c;
}

namespace {

struct PlanScenarios {
  Chunks chunks;
  ResolvedScenario prefill;  // one chunk
  std::vector<ResolvedScenario> decode;  // one per sampled KV length
};

// R replicas take tp x R ranks; the layer scenario (one replica) checks tp against the instances,
// this checks the replicas' ranks.
void CheckReplicaRanks(const PredictRequest& r, const PredictPlan& plan, const HardwareProfile& hw) {
  if (plan.replicas <= 1 || plan.lnc < 1) return;
  const int64_t per_instance = int64_t{hw.physical_cores_per_chip()} / plan.lnc * hw.chips_per_instance();
  const int64_t ranks = int64_t{plan.tp} * plan.replicas;
  if (ranks > per_instance * r.instances) {
    Raise(ErrorCode::kBadConfig,
          StrCat("predict: 1 problem:\n  plan '", plan.name, "': replicas: ", plan.replicas, " x tp ", plan.tp, " = ",
                 ranks, " ranks: more than ", r.instances, r.instances == 1 ? " instance holds (" : " instances hold (",
                 per_instance, " ranks each at LNC ", plan.lnc, "; --instances / instances)"));
  }
}

PlanScenarios ResolvePlan(const PredictRequest& r, const PredictPlan& plan) {
  const Chunks chunks = PrefillChunks(r);
  // The prefill's layers take identical times (no phase overlaps the layer before it, unlike the
  // decode's QKV), so one is simulated: tests/launcher/predict_e2e_test.cc checks L x one against
  // a `layers: L` run.
  PlanScenarios s{chunks, Resolve(LayerScenario(r, plan, true, chunks.tokens, 1), r.model.source + " (prefill)"),
                  {}};
  CheckReplicaRanks(r, plan, s.prefill.profile);
  // The first sampled length with two layers (first and steady layer), the others with one: the
  // steady layer's saving is the QKV's overlap with the residual before it, neither of which
  // reads the cache, so it is the same at every KV length.
  std::vector<int> lengths = DecodeLengths(r);
  const int w = r.model.sliding_window;
  if (r.model.sliding_layers > 0 && w < lengths.back() && std::find(lengths.begin(), lengths.end(), w) == lengths.end()) {
    lengths.push_back(w);  // the sliding layers' KV length once the cache passes the window
  }
  std::sort(lengths.begin() + 1, lengths.end());  // the first (S, two layers) stays first
  for (int kv : lengths) {
    const int n = s.decode.empty() ? 2 : 1;
    s.decode.push_back(Resolve(LayerScenario(r, plan, false, kv, n), r.model.source + " (decode)"));
  }
  return s;
}

// An MoE model's router and experts per layer on one rank (0 for a dense model): all E / moe_ep
// experts' weights are resident, whichever the router picks.
int64_t MoeBytes(const PredictRequest& r, const ResolvedScenario& decode) {
  if (!r.model.moe) return 0;
  PredictPlan plan;
  for (const PredictPlan& p : r.plans) {
    if (p.name == decode.plans.front().name) plan = p;
  }
  return MoeWeightBytesPerRank(MoeShapeOf(r.model), MoePlanOf(plan));
}

// The MoE blocks and dense MLPs of every layer on one rank: moe_layers x MoeBytes + the dense
// layers' MLPs (interleaved models; none otherwise).
int64_t MoeStackBytes(const PredictRequest& r, const ResolvedScenario& decode) {
  if (!r.model.moe) return 0;
  PredictPlan plan;
  for (const PredictPlan& p : r.plans) {
    if (p.name == decode.plans.front().name) plan = p;
  }
  const int64_t dense = r.model.dense_layers() > 0 ? DenseMlpBytesPerRank(MoeShapeOf(r.model), MoePlanOf(plan)) : 0;
  return MoeBytes(r, decode) * r.model.moe_layers + dense * r.model.dense_layers();
}

// The rows of an MoE model's per-layer blocks, each running in `layers` of the L layers.
void AddRows(const MoeBlockCost& c, int layers, int all, std::vector<PhaseTime>& into) {
  for (const MoePhaseCost& row : c.phases) into.push_back({row.phase, row.ns / 1000.0, layers == all ? 0 : layers});
}

}  // namespace

int64_t ModelHbm(const PredictRequest& r, const ResolvedScenario& decode, int batch, HbmFootprint* layers) {
  proto::Scenario whole = decode.spec;
  whole.set_batch(static_cast<uint32_t>(batch));
  whole.set_layers(static_cast<uint32_t>(r.model.layers));
  whole.set_kv_length(static_cast<uint32_t>(r.input_tokens));
  whole.set_steps(static_cast<uint32_t>(r.output_tokens));
  *layers = PlanHbmFootprint(whole, decode.dtype, Workload::kDecode, decode.plans.front(), decode.profile);
  const int tp = decode.plans.front().tp;
  const int64_t rows = (r.model.vocab + tp - 1) / tp;
  return layers->total() + rows * r.model.hidden * 2 * (r.model.tie_word_embeddings ? 1 : 2) +
         MoeStackBytes(r, decode);
}

namespace {

// The largest batch (a multiple of G, at most the decode kernels' 128) that fits; 0: none.
int MaxBatch(const PredictRequest& r, const ResolvedScenario& decode) {
  const int g = decode.plans.front().attention_dp;
  int best = 0;
  HbmFootprint f;
  for (int b = g; b <= kMaxDecodeBatch; b += g) {
    if (ModelHbm(r, decode, b, &f) > f.capacity) break;
    best = b;
  }
  return best;
}

// The longest prompt S' (N output tokens kept, S' + N within max_position_embeddings and the
// decode's KV limit) whose HBM fits at batch B, by bisection (HBM grows with S'); 0: none.
int MaxInput(const PredictRequest& r, const ResolvedScenario& decode) {
  const int64_t limit = r.model.max_positions > 0 ? r.model.max_positions : int64_t{1} << 20;
  PredictRequest q = r;
  HbmFootprint f;
  auto fits = [&](int s) {
    q.input_tokens = s;
    return ModelHbm(q, decode, r.batch, &f) <= f.capacity;
  };
  int lo = 0, hi = static_cast<int>(std::min<int64_t>(limit, int64_t{1} << 20) - r.output_tokens);
  if (hi >= 1 && fits(hi)) return hi;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    (mid >= 1 && fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

void FillHbm(const PredictRequest& r, const ResolvedScenario& decode, PlanPrediction& out) {
  out.hbm_bytes = ModelHbm(r, decode, r.batch, &out.layers_hbm);
  out.moe_bytes_per_layer = MoeBytes(r, decode);
  out.embedding_bytes = out.hbm_bytes - out.layers_hbm.total() - MoeStackBytes(r, decode);
  out.hbm_capacity = out.layers_hbm.capacity;
  out.fits = out.hbm_bytes <= out.hbm_capacity;
  out.max_batch = r.max_batch ? MaxBatch(r, decode) : -1;
  out.max_input = r.max_context ? MaxInput(r, decode) : -1;
}

void PredictPrefill(const PredictRequest& r, const PlanScenarios& s, PlanPrediction& out) {
  const std::string trace = r.trace_path.empty() ? "" : TracePaths(r.trace_path, out.plan).second;
  const LayerTimes prefill = Layers(RunTimingJob(s.prefill, trace).scenarios(0));
  out.prefill_chunks = s.chunks.count;
  out.prefill_chunk_tokens = s.chunks.tokens;
  out.prefill_tokens = PaddedToBucket(r.context_encoding_buckets, r.input_tokens);
  const int k = s.chunks.count, L = r.model.layers;
  out.prefill_stack_ns = PrefillStackNs(prefill, s.chunks, r.model);
  out.prefill_phases = prefill.phases;
  if (r.model.moe) {  // each MoE layer's block (each dense layer's MLP) over the chunk's B x C tokens, k chunks
    const int64_t tokens = int64_t{r.batch} * s.chunks.tokens;
    out.moe_prefill = PriceMoeBlock(MoeShapeOf(r.model), MoePlanOf(out.plan), tokens, r.skew, s.prefill.profile);
    out.prefill_stack_ns += double(k) * r.model.moe_layers * out.moe_prefill.total_ns();
    AddRows(out.moe_prefill, r.model.moe_layers, L, out.prefill_phases);
    if (r.model.dense_layers() > 0) {
      out.dense_prefill = PriceDenseMlpBlock(MoeShapeOf(r.model), MoePlanOf(out.plan), tokens, s.prefill.profile);
      out.prefill_stack_ns += double(k) * r.model.dense_layers() * out.dense_prefill.total_ns();
      AddRows(out.dense_prefill, r.model.dense_layers(), L, out.prefill_phases);
    }
  }
}

// The N steps as one back-to-back run (`steps: N`) times them: step 0's first layer is the
// only one whose QKV does not overlap a residual before it, every other layer is steady. So the
// mean step is L x the mean steady layer over KV S .. S+N-1 plus the first layer's extra / N.
void PredictDecode(const PredictRequest& r, const PlanScenarios& s, PlanPrediction& out) {
  double saving_ns = 0;  // first - steady layer, from the two-layer sample
  std::vector<std::pair<int, double>> steady;  // (KV length, one steady layer), every simulated length
  for (size_t i = 0; i < s.decode.size(); ++i) {
    const std::string trace = i == 0 && !r.trace_path.empty() ? TracePaths(r.trace_path, out.plan).first : "";
    const LayerTimes d = Layers(RunTimingJob(s.decode[i], trace).scenarios(0));
    const int kv = static_cast<int>(s.decode[i].spec.kv_length());
    if (i == 0) {
      saving_ns = d.first_ns - d.steady_ns;
      out.decode_phases = d.phases;
      out.decode_phases_kv = kv;
    }
    steady.emplace_back(kv, d.first_ns - saving_ns);  // every sample run's first layer, made steady
  }
  // The full layers at each sampled KV length; sliding layers at min(KV, W) (the window's length
  // is simulated too when it falls below S + N - 1: ResolvePlan).
  const int slide = r.model.sliding_layers, full = r.model.layers - slide;
  for (const auto& [kv, ns] : steady) {
    if (kv < r.input_tokens) continue;  // the window's own sample
    const double windowed = slide > 0 ? InterpolatedAt(steady, std::min(kv, r.model.sliding_window)) : 0.0;
    out.samples.emplace_back(kv, full * ns + slide * windowed);
  }
  if (r.model.moe) {  // each MoE layer's block (dense layer's MLP) over the step's B tokens, at every KV length
    const int L = r.model.layers;
    out.moe_decode = PriceMoeBlock(MoeShapeOf(r.model), MoePlanOf(out.plan), r.batch, r.skew, s.decode.front().profile);
    AddRows(out.moe_decode, r.model.moe_layers, L, out.decode_phases);
    double blocks = r.model.moe_layers * out.moe_decode.total_ns();
    if (r.model.dense_layers() > 0) {
      out.dense_decode = PriceDenseMlpBlock(MoeShapeOf(r.model), MoePlanOf(out.plan), r.batch, s.decode.front().profile);
      AddRows(out.dense_decode, r.model.dense_layers(), L, out.decode_phases);
      blocks += r.model.dense_layers() * out.dense_decode.total_ns();
    }
    for (auto& sample : out.samples) sample.second += blocks;
  }
  const double mean_ns = r.token_generation_buckets.empty()
                            ? MeanInterpolated(out.samples, r.input_tokens, r.output_tokens)
                            : MeanBucketed(out.samples, r.token_generation_buckets, r.input_tokens, r.output_tokens);
  out.decode_stack_mean_ns = mean_ns + saving_ns / r.output_tokens;
}

void PredictTimes(const PredictRequest& r, const PlanScenarios& s, PlanPrediction& out) {
  PredictPrefill(r, s, out);
  PredictDecode(r, s, out);
  const HardwareProfile& hw = s.prefill.profile;
  const PredictPlan& plan = out.plan;
  out.lm_head_prefill_ns = LmHeadNs(r, plan, hw, r.batch);
  out.lm_head_decode_ns = LmHeadNs(r, plan, hw, r.batch);
  out.ttft_ms = (out.prefill_stack_ns + out.lm_head_prefill_ns) / 1e6;
  out.device_tpot_ms = (out.decode_stack_mean_ns + out.lm_head_decode_ns) / 1e6;
  out.host_ms_per_step = hw.host_ms_per_step();
  out.tpot_ms = out.device_tpot_ms + out.host_ms_per_step;
  out.tokens_per_s = 1000.0 / out.tpot_ms;
  const int per_instance = static_cast<int>(hw.physical_cores_per_chip() / plan.lnc * hw.chips_per_instance());
  const double instances = std::max(1.0, std::ceil(static_cast<double>(plan.tp) * plan.replicas / per_instance));
  out.tokens_per_s_instance = out.tokens_per_s * r.batch * plan.replicas / instances;
}

// The HBM verdict first; then the times. A plan that does not fit HBM and whose layer the
// kernels cannot run either (their SBUF tiles) keeps its verdict and the error instead of times.
PlanPrediction PredictPlanTimes(const PredictRequest& r, const PredictPlan& plan, const PlanScenarios& s) {
  PlanPrediction out;
  out.plan = plan;
  FillHbm(r, s.decode.front(), out);
  try {
    PredictTimes(r, s, out);
    out.simulated = true;
  } catch (const Error& e) {
    if (out.fits) throw;
    out.error = e.what();
  }
  return out;
}

}  // namespace

double PrefillStackNs(const LayerTimes& chunk, const Chunks& chunks, const HfModel& model) {
  double attention_us = 0;
  for (const PhaseTime& p : chunk.phases) attention_us += p.phase == "attention" ? p.us : 0;
  const int k = chunks.count, L = model.layers;
  // Sliding layers attend at most W keys back (estimates, not simulated): within a chunk of
  // C > W tokens their causal triangle keeps the band of width W (area fraction 2 W / C - (W / C)^2)
  // and the earlier chunks add nothing; with W >= C, chunk j attends min(j C, W) earlier keys,
  // 2 min(j, W / C) times one chunk's triangle (the full layers' 2 j, summed: k (k - 1)).
  const int slide = model.sliding_layers, full = L - slide;
  const double c = chunks.tokens, w = model.sliding_window;
  const double band = slide > 0 && w < c ? 2 * w / c - (w / c) * (w / c) : 1.0;
  double slide_earlier = 0;
  for (int j = 1; slide > 0 && w >= c && j < k; ++j) slide_earlier += 2 * std::min<double>(j, w / c);
  return k * chunk.Stack(L) - double(k) * slide * (1 - band) * attention_us * 1000.0 +
         (double(k) * (k - 1) * full + slide_earlier * slide) * attention_us * 1000.0;
}

MoePlan MoePlanOf(const PredictPlan& p) {
  MoePlan m;
  m.tp = std::max(1, p.tp);
  m.lnc = std::max(1, p.lnc);
  m.ep = p.moe_ep > 0 ? p.moe_ep : (p.moe_tp > 0 ? std::max(1, m.tp / p.moe_tp) : 1);
  m.moe_tp = p.moe_tp > 0 ? p.moe_tp : std::max(1, m.tp / m.ep);
  return m;
}

MoeShape MoeShapeOf(const HfModel& m) {
  MoeShape s;
  s.hidden = m.hidden;
  s.experts = m.experts;
  s.top_k = m.top_k;
  s.expert_inter = m.expert_inter;
  s.shared_inter = m.shared_inter;
  s.dense_inter = m.moe && m.dense_layers() > 0 ? m.dense_inter : 0;
  s.family = reference::ParseRouterFamily(m.router);
  return s;
}

std::string DefaultPlanName(const PredictPlan& p) {
  std::string name = StrCat("tp", p.tp);
  if (p.attention_dp > 1) name += StrCat("xdp", p.attention_dp);
  if (p.moe_ep > 1) name += StrCat("_ep", p.moe_ep);
  if (p.replicas > 1) name += StrCat("r", p.replicas);
  if (p.lnc == 1) name += "_lnc1";
  return name;
}

std::pair<std::string, std::string> TracePaths(const std::string& path, const PredictPlan& plan) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  const size_t at = dot == std::string::npos || (slash != std::string::npos && dot < slash) || dot == slash + 1
                        ? path.size()
                        : dot;
  const std::string stem = path.substr(0, at), ext = path.substr(at);
  return {StrCat(stem, ".", plan.name, ".decode", ext), StrCat(stem, ".", plan.name, ".prefill", ext)};
}

PredictPlan ParsePlan(const std::string& text) {
  PredictPlan p;
  if (text.rfind("tp", 0) == 0 && text.find('=') == std::string::npos) {
    p.tp = ParseCount(text.substr(2), "tp", text);
    p.name = DefaultPlanName(p);
    return p;
  }
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "tp") {
      p.tp = ParseCount(value, key, text);
    } else if (key == "attention_dp") {
      p.attention_dp = ParseCount(value, key, text);
    } else if (key == "lnc") {
      p.lnc = ParseCount(value, key, text);
    } else if (key == "replicas") {
      p.replicas = ParseCount(value, key, text);
    } else if (key == "moe_ep") {
      p.moe_ep = ParseCount(value, key, text);
    } else if (key == "moe_tp") {
      p.moe_tp = ParseCount(value, key, text);
    } else {
      Raise(ErrorCode::kBadConfig, StrCat("--plan ", text, ": '", item, "': unknown; a plan is ",
                                          "tp=N[,attention_dp=G][,lnc=L][,replicas=R][,moe_ep=E][,moe_tp=T] or tpN"));
    }
    start = comma + 1;
  }
  if (p.tp == 0) Raise(ErrorCode::kBadConfig, StrCat("--plan ", text, ": tp: missing: required"));
  p.name = DefaultPlanName(p);
  return p;
}

proto::Scenario LayerScenario(const PredictRequest& r, const PredictPlan& plan, bool prefill,
                              int tokens, int layers, int steps) {
  proto::Scenario s;
  proto::ModelShape& m = *s.mutable_model();
  // The attention kernels take H in whole 128-partition tiles split over the LNC's cores: H 2880
  // runs as 3072 at LNC 2 (zero rows; priced, an upper bound).
  m.set_hidden(static_cast<uint32_t>(r.model.padded_hidden(plan.lnc)));
  // A head of d 256 (Gemma) runs as two heads of 128, Q and KV alike: the same projection columns,
  // KV cache bytes and QK / PV matmul work; the softmax runs per half-head, twice (an upper bound).
  // RequestProblems keeps every plan's TP within the KV heads, so no real head is split over ranks.
  const int split = r.model.head_dim > 128 ? r.model.head_dim / 128 : 1;
  m.set_n_q_heads(static_cast<uint32_t>(r.model.n_q_heads * split));
  m.set_n_kv_heads(static_cast<uint32_t>(r.model.n_kv_heads * split));
  // The prefill's QKV CTE writes heads of d = 128 only: a smaller d is priced as 128 there (an upper
  // bound: the QKV columns and the attention's PV are doubled at d 64); the decode runs its own d.
  const int d = r.model.head_dim / split;
  m.set_d_head(static_cast<uint32_t>(prefill ? std::max(128, d) : d));
  m.set_rms_eps(r.model.rms_eps);
  m.set_qkv_bias(r.model.qkv_bias);
  if (r.model.moe) {
    // The MoE block is priced apart (model/moe_block.h): the layer simulated is the attention block.
    s.set_attention_only(true);
  } else {
    m.set_intermediate(static_cast<uint32_t>(r.model.intermediate));
    m.set_activation(r.model.activation);
  }
  s.set_dtype(r.model.dtype);
  s.set_seed(1);
  s.set_hardware_profile(r.profile_path);
  s.set_batch(static_cast<uint32_t>(r.batch));
  s.set_layers(static_cast<uint32_t>(layers));
  proto::Plan& p = *s.add_plans();
  p.set_name(plan.name);
  p.set_tp(static_cast<uint32_t>(plan.tp));
  p.set_lnc(static_cast<uint32_t>(plan.lnc));
  p.set_instances(static_cast<uint32_t>(r.instances));
  if (prefill) {
    // The context encoding runs as plain TP; with sequence parallelism (as the NxD Inference
    // 70B tutorial compiles it) when the tokens split evenly over tp.
    s.set_workload("prefill");
    s.set_seq_len(static_cast<uint32_t>(tokens));
    s.set_sequence_parallel(!r.model.moe && tokens % plan.tp == 0);
  } else {
    s.set_workload("decode");
    s.set_kv_length(static_cast<uint32_t>(tokens));
    s.set_steps(static_cast<uint32_t>(steps));
    p.set_attention_dp(static_cast<uint32_t>(plan.attention_dp));
  }
  return s;
}

std::vector<int> DecodeSampleLengths(int input_tokens, int output_tokens, int samples) {
  const int k = std::min(samples, output_tokens);
  if (k <= 1) return {input_tokens};
  std::vector<int> out;
  for (int j = 0; j < k; ++j) {
    const int64_t offset = (int64_t{j} * (output_tokens - 1) + (k - 1) / 2) / (k - 1);
    const int kv = input_tokens + static_cast<int>(offset);
    if (out.empty() || kv != out.back()) out.push_back(kv);
  }
  return out;
}

int PaddedToBucket(const std::vector<int>& buckets, int n) {
  const auto it = std::lower_bound(buckets.begin(), buckets.end(), n);
  return it == buckets.end() ? n : *it;
}

std::vector<int> DecodeLengths(const PredictRequest& r) {
  const std::vector<int>& tkg = r.token_generation_buckets;
  if (tkg.empty()) return DecodeSampleLengths(r.input_tokens, r.output_tokens, r.decode_samples);
  std::vector<int> out;
  const int last = r.input_tokens + r.output_tokens - 1;
  for (auto it = std::lower_bound(tkg.begin(), tkg.end(), r.input_tokens); it != tkg.end(); ++it) {
    out.push_back(*it);
    if (*it >= last) break;
  }
  return out;
}

double MeanBucketed(const std::vector<std::pair<int, double>>& samples, const std::vector<int>& buckets,
                    int input_tokens, int output_tokens) {
  double sum = 0;
  for (int i = 0; i < output_tokens; ++i) {
    const int bucket = PaddedToBucket(buckets, input_tokens + i);
    const auto it = std::find_if(samples.begin(), samples.end(), [&](const auto& s) { return s.first == bucket; });
    if (it == samples.end()) Raise(ErrorCode::kInternal, StrCat("predict: no decode sample at bucket ", bucket));
    sum += it->second;
  }
  return sum / output_tokens;
}

double InterpolatedAt(const std::vector<std::pair<int, double>>& samples, int kv) {
  std::vector<std::pair<int, double>> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.size() == 1 || kv <= sorted.front().first) return sorted.front().second;
  for (size_t i = 1; i < sorted.size(); ++i) {
    const auto& [k0, t0] = sorted[i - 1];
    const auto& [k1, t1] = sorted[i];
    if (kv <= k1) return t0 + (t1 - t0) * (kv - k0) / static_cast<double>(k1 - k0);
  }
  return sorted.back().second;
}

double MeanInterpolated(const std::vector<std::pair<int, double>>& samples, int input_tokens,
                        int output_tokens) {
  if (samples.size() == 1) return samples.front().second;
  double sum = 0;
  size_t seg = 0;
  for (int i = 0; i < output_tokens; ++i) {
    const int kv = input_tokens + i;
    while (seg + 2 < samples.size() && kv > samples[seg + 1].first) ++seg;
    const auto& [k0, t0] = samples[seg];
    const auto& [k1, t1] = samples[seg + 1];
    sum += t0 + (t1 - t0) * (kv - k0) / static_cast<double>(k1 - k0);
  }
  return sum / output_tokens;
}

namespace {

void RaiseRequestProblems(const PredictRequest& r) {
  const std::vector<std::string> problems = RequestProblems(r);
  if (problems.empty()) return;
  std::string message = StrCat("predict: ", problems.size(), problems.size() == 1 ? " problem:" : " problems:");
  for (const std::string& p : problems) message += StrCat("\n  ", p);
  Raise(ErrorCode::kBadConfig, message);
}

}  // namespace

void CheckPredictRequest(const PredictRequest& r) {
  RaiseRequestProblems(r);
  for (const PredictPlan& plan : r.plans) ResolvePlan(r, plan);
}

std::vector<PlanPrediction> Predict(const PredictRequest& r) {
  RaiseRequestProblems(r);
  // Every plan's layer scenarios resolved (and so checked) before any simulation runs.
  std::vector<PlanScenarios> scenarios;
  for (const PredictPlan& plan : r.plans) scenarios.push_back(ResolvePlan(r, plan));
  std::vector<PlanPrediction> out;
  for (size_t i = 0; i < r.plans.size(); ++i) out.push_back(PredictPlanTimes(r, r.plans[i], scenarios[i]));
  return out;
}

}  // namespace nkisim::launcher
