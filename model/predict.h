// `nkisim predict`: time to first token, time per output token and HBM of a whole model under
// each plan (docs/predict.md). One decoder layer at the model's real shapes is simulated
// timing-only (RunTimingJob: the phase table of `nkisim run`, ranks as threads) and multiplied by
// num_hidden_layers (decode: two layers simulated at S, from layer 2 on a layer is "steady": its
// QKV overlaps the residual before it; prefill: one, its layers take identical times):
//   * TTFT = the L prefill layers of S tokens + the LM head of the last token's B rows;
//   * TPOT = the mean step of the N steps run back to back as `steps: N` times them (KV lengths
//     S .. S+N-1, from a few sampled lengths by linear interpolation) + the LM head of B rows
//     + the profile's host_ms_per_step (reported apart);
//   * HBM per logical core = the footprint of all layers at S+N tokens (footprint.h) + the rank's
//     share of the embedding and the LM head (vocab-parallel, V / tp rows each).
// A prompt longer than the attention CTE holds (kernels::AttentionCteMaxSeqLen: 9557 in bf16 on
// trn2) is prefilled in k = ceil(S / max) chunks of C = ceil(S / k) tokens: each chunk is the
// simulated prefill of C tokens, and the attention of chunk j over the j x C keys before it is
// priced from the simulated chunk's attention by its quadratic growth (k chunks' causal attention
// = k^2 x one chunk's); an estimate, not simulated (no kernel attends a prefix cache).
// The LM head and the cross-rank argmax of on-device sampling are a roofline estimate from the
// profile (not simulated); the embedding gather, the final norm and sampling itself are not
// modeled (each well under 0.1% of a step at the shipped shapes).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/footprint.h"
#include "model/hf_config.h"
#include "model/moe_block.h"
#include "model/scenario_config.h"
#include "proto/report.pb.h"
#include "proto/scenario.pb.h"
#include "runtime/hardware_profile.h"

namespace nkisim::launcher {

struct PredictPlan {
  std::string name;  // "tp64", "tp64xdp8", "r4" appended for 4 replicas, "_lnc1" at LNC 1
  int tp = 0;
  int attention_dp = 1;  // G, decode only (the prefill runs as plain TP)
  int lnc = 2;
  // R independent copies of the tp ranks, each serving its own B requests (data parallel): the
  // times are one replica's (one is simulated: replicas share nothing), the ranks and the
  // tokens per instance R times one's.
  int replicas = 1;
  // Mixture-of-experts models: the replica's tp ranks cut as moe_ep x moe_tp (model/moe_block.h);
  // 0: not given (moe_ep 1, moe_tp tp: every rank holds every expert's I / tp). Dense models
  // refuse them.
  int moe_ep = 0, moe_tp = 0;
};

struct PredictRequest {
  HfModel model;
  std::string profile_path;  // "" : the built-in trn2
  std::vector<PredictPlan> plans;
  int instances = 1;
  int batch = 1;
  int input_tokens = 0;   // S
  int output_tokens = 0;  // N
  bool max_batch = false; // also find each plan's largest batch that fits HBM at S + N
  bool max_context = false;  // also find each plan's longest prompt that fits at B (N kept)
  int decode_samples = 2; // KV lengths simulated for the TPOT (at most N): S and S + N - 1 by default
  // The longest prefill chunk simulated (also capped by the attention CTE's limit): the host
  // time of a 64-rank prefill grows with S, and the chunking's estimate is tested up to here.
  int max_prefill_chunk = 1024;
  // The compiled buckets of the deployment (NxD Inference's context_encoding_buckets and
  // token_generation_buckets), ascending; empty: none (the prompt and the KV run unpadded). Given,
  // the prompt is prefilled padded to the smallest context bucket >= S (the compiled graph runs
  // every padded row), and each decode step at KV k runs the smallest generation bucket >= k
  // (its attention reads the bucket's KV), so the decode is simulated once per bucket the N
  // steps cross and --decode-samples is not used.
  std::vector<int> context_encoding_buckets;
  std::vector<int> token_generation_buckets;
  // --trace: the Chrome/Perfetto traces of each plan's simulated jobs, the decode layers at KV S
  // and the prefill chunk's layer (TracePaths); "" none.
  std::string trace_path;
  // MoE models: how the router spreads the tokens over the experts (--router-skew): a law, or
  // the counts of one routed sample of skew_sample_tokens tokens (0: their sum / top_k), carried
  // to each step's tokens (CountsForStep). skew_text names it in errors.
  kernels::moe::RouterSkew skew;
  int64_t skew_sample_tokens = 0;
  std::string skew_text = "--router-skew";
};

// The smallest bucket >= n of ascending `buckets`; n itself when `buckets` is empty.
// REQUIRES: n <= buckets.back() (RequestProblems refuses a longer prompt or context).
int PaddedToBucket(const std::vector<int>& buckets, int n);

// The MoE plan of a PredictPlan (moe_ep / moe_tp defaults filled).
MoePlan MoePlanOf(const PredictPlan& p);
// The MoE block shape of a model (REQUIRES: model.moe).
MoeShape MoeShapeOf(const HfModel& m);

// The trace files of a plan under --trace PATH: PATH with ".<plan>.decode" and ".<plan>.prefill"
// put before its extension ("t.json" -> "t.tp64.decode.json", "t.tp64.prefill.json").
std::pair<std::string, std::string> TracePaths(const std::string& path, const PredictPlan& plan);

struct PhaseTime {
  std::string phase;
  double us = 0;  // simulated, slowest rank, one layer
  int layers = 0;  // the layers this row runs in (an interleaved model's MoE or dense rows); 0: all
};

struct PlanPrediction {
  PredictPlan plan;
  std::vector<PhaseTime> prefill_phases;         // one (steady) layer
  std::vector<PhaseTime> decode_phases;          // one (steady) layer, at KV length S
  int decode_phases_kv = 0;                      // that KV length
  std::vector<std::pair<int, double>> samples;   // (KV length, the L decode layers in ns)
  double prefill_stack_ns = 0;                   // the L layers of the prefill (all chunks)
  int prefill_chunks = 1, prefill_chunk_tokens = 0;  // S > the attention CTE's limit: k chunks of C
  int prefill_tokens = 0;                        // S padded to its context bucket (S: no buckets)
  double decode_stack_mean_ns = 0;               // the L decode layers, mean over the N steps
  double lm_head_prefill_ns = 0, lm_head_decode_ns = 0;  // incl. the cross-rank argmax
  double ttft_ms = 0, device_tpot_ms = 0, host_ms_per_step = 0, tpot_ms = 0;
  double tokens_per_s = 0;               // per request
  double tokens_per_s_instance = 0;      // B requests x R replicas, per instance they take
  HbmFootprint layers_hbm;               // all layers, KV cache at S + N
  int64_t embedding_bytes = 0;           // embedding + LM head share per rank
  int64_t hbm_bytes = 0, hbm_capacity = 0;
  bool fits = false;
  int max_batch = -1;      // with PredictRequest::max_batch: the largest B (multiple of G, <= 128)
                           // whose HBM fits at S + N; 0 when none does
  int max_input = -1;      // with PredictRequest::max_context: the longest prompt that fits at B
                           // with N output tokens (context = it + N); 0 when none does
  // MoE models: one MoE block of a decode step (B tokens) and of a prefill chunk (B x C tokens);
  // their rows are also in decode_phases / prefill_phases.
  MoeBlockCost moe_decode, moe_prefill;
  // Interleaved MoE models (Llama 4 Maverick): one dense layer's MLP, decode step and prefill chunk;
  // the stacks take moe_layers x the MoE block + dense_layers() x this. Empty: no dense layer.
  MoeBlockCost dense_decode, dense_prefill;
  int64_t moe_bytes_per_layer = 0;  // the rank's router + experts (+ shared expert) weights
  bool simulated = false;  // false: a plan that does not fit and whose layer could not run
  std::string error;       // why (the kernel's error)
};

// The pieces of a prediction, also priced one by one by `nkisim serve`'s step-cost table
// (launcher/commands/serve_step_costs.h), which simulates each distinct layer job once.
ResolvedScenario Resolve(const proto::Scenario& s, const std::string& source);
// One simulated decode job of two layers (one when the model has one): the first layer and the second,
// whose QKV weight loads start while the first's residual runs, as every later layer's do
// (tests/launcher/layer_e2e_test.cc: layers 2, 3, ... take identical times). The stack of L
// layers then takes first + (L - 1) x steady, which the tests check against a `layers: k` run.
struct LayerTimes {
  double first_ns = 0, steady_ns = 0;
  std::vector<PhaseTime> phases;  // the steady layer's (the first's for a one-layer model)
  double Stack(int layers) const { return first_ns + (layers - 1) * steady_ns; }
};
LayerTimes Layers(const proto::ScenarioSummary& s);
// A prefill longer than the chunk limit (--max-prefill-chunk, the attention CTE's keys, the o_proj
// CTE's B x C rows) runs in k chunks of C = ceil(S / k) tokens.
struct Chunks {
  int count = 1, tokens = 0;
};
Chunks PrefillChunks(const PredictRequest& r);
// k chunks: each runs the simulated chunk; chunk j's queries also attend the j x C keys before
// it, priced by the causal attention's quadratic growth: all k chunks' attention is k^2 times
// one chunk's, of which the k simulated chunks hold k; a sliding layer's attention at most its
// window's. The model's L layers of all chunks, ns.
double PrefillStackNs(const LayerTimes& chunk, const Chunks& chunks, const HfModel& model);
// The LM head of `rows` rows and the cross-rank argmax, ns (a roofline: see the top of this file).
double LmHeadNs(const PredictRequest& r, const PredictPlan& plan, const HardwareProfile& hw, int rows);
// HBM per logical core of the whole model at batch `batch`, the KV cache at S + N tokens (fills
// `layers` with the layers' footprint).
int64_t ModelHbm(const PredictRequest& r, const ResolvedScenario& decode, int batch, HbmFootprint* layers);

// "tp=64[,attention_dp=8][,lnc=1][,replicas=4][,moe_ep=8,moe_tp=8]" (also "tp64"); throws Error(kBadConfig) naming
// the value.
PredictPlan ParsePlan(const std::string& text);
std::string DefaultPlanName(const PredictPlan& p);

// The scenario of one decoder layer at the model's shapes: decode at kv_length `tokens` (one
// step) or prefill of seq_len `tokens`.
proto::Scenario LayerScenario(const PredictRequest& r, const PredictPlan& plan, bool prefill,
                              int tokens, int layers = 1, int steps = 1);

// The sampled KV lengths: `samples` (at most N, at least 2 unless N = 1) evenly spread over
// [S, S + N - 1], both ends included, ascending.
std::vector<int> DecodeSampleLengths(int input_tokens, int output_tokens, int samples);
// The piecewise-linear interpolation of `samples` (any order) at `kv`, flat beyond the ends.
double InterpolatedAt(const std::vector<std::pair<int, double>>& samples, int kv);
// The mean over KV lengths S .. S+N-1 of the piecewise-linear interpolation of `samples`.
double MeanInterpolated(const std::vector<std::pair<int, double>>& samples, int input_tokens,
                        int output_tokens);
// The mean over KV lengths S .. S+N-1 of each step's generation bucket's sample (`samples` holds
// one per bucket crossed, keyed by the bucket; other keys are ignored).
// REQUIRES: every bucket of S .. S+N-1 is in `samples`.
double MeanBucketed(const std::vector<std::pair<int, double>>& samples, const std::vector<int>& buckets,
                    int input_tokens, int output_tokens);
// The KV lengths the decode is simulated at: DecodeSampleLengths without generation buckets,
// else the buckets S .. S+N-1 cross, ascending.
std::vector<int> DecodeLengths(const PredictRequest& r);

// Checks the request without simulating anything: every problem at once ("predict: N problems:
// ..."), then each plan's layer scenarios with the rules of `nkisim run` (Error(kBadConfig)).
void CheckPredictRequest(const PredictRequest& r);
// Checks the request (as CheckPredictRequest) and predicts each plan.
std::vector<PlanPrediction> Predict(const PredictRequest& r);

std::string FormatPredictions(const PredictRequest& r, const std::vector<PlanPrediction>& p);
// The JSON of docs/predict.md (per plan name, ttft_ms, tpot_ms, ...).
std::string PredictionsJson(const PredictRequest& r, const std::vector<PlanPrediction>& p);
// One plan's object of that JSON (what `nkisim sweep` records per point of a predict sweep).
std::string PlanPredictionJson(const PlanPrediction& p);

}  // namespace nkisim::launcher
