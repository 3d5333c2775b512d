// `nkisim predict`: time to first token, time per output token and HBM of a whole model under
// each plan (docs/predict.md). One decoder layer at the model's real shapes is simulated
// timing-only (RunTimingJob: the phase table of `nkisim run`, ranks as threads) and multiplied by
// num_hidden_layers:
//   * TTFT = layers x the prefill layer of S tokens + the LM head of the last token's B rows;
//   * TPOT = layers x the mean decode layer over the N steps (KV lengths S .. S+N-1, computed from
//     a few sampled lengths by linear interpolation) + the LM head of B rows
//     + the profile's host_ms_per_step (reported apart);
//   * HBM per logical core = the footprint of all layers at S+N tokens (footprint.h) + the rank's
//     share of the embedding and the LM head (vocab-parallel, V / tp rows each).
// The LM head and the cross-rank argmax of on-device sampling are a roofline estimate from the
// profile (not simulated); the embedding gather, the final norm and sampling itself are not
// modeled (each well under 0.1% of a step at the shipped shapes).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "launcher/predict/hf_config.h"
#include "launcher/scenarios/footprint.h"
#include "proto/scenario.pb.h"
#include "runtime/hardware_profile.h"

namespace nkisim::launcher {

struct PredictPlan {
  std::string name;  // "tp64", "tp64xdp8", "_lnc1" appended at LNC 1
  int tp = 0;
  int attention_dp = 1;  // G, decode only (the prefill runs as plain TP)
  int lnc = 2;
};

struct PredictRequest {
  HfModel model;
  std::string profile_path;  // "" : the built-in trn2
  std::vector<PredictPlan> plans;
  int instances = 1;
  int batch = 1;
  int input_tokens = 0;   // S
  int output_tokens = 0;  // N
  int decode_samples = 5; // KV lengths simulated for the TPOT (at most N)
};

struct PhaseTime {
  std::string phase;
  double us = 0;  // simulated, slowest rank, one layer
};

struct PlanPrediction {
  PredictPlan plan;
  std::vector<PhaseTime> prefill_phases;         // one layer
  std::vector<PhaseTime> decode_phases;          // one layer, at the middle sampled KV length
  int decode_phases_kv = 0;                      // that KV length
  std::vector<std::pair<int, double>> samples;   // (KV length, one decode layer in ns)
  double prefill_layer_ns = 0;
  double decode_layer_mean_ns = 0;               // over the N steps (interpolated)
  double lm_head_prefill_ns = 0, lm_head_decode_ns = 0;  // incl. the cross-rank argmax
  double ttft_ms = 0, device_tpot_ms = 0, host_ms_per_step = 0, tpot_ms = 0;
  double tokens_per_s = 0;               // per request
  double tokens_per_s_instance = 0;      // B requests, per instance
  HbmFootprint layers_hbm;               // all layers, KV cache at S + N
  int64_t embedding_bytes = 0;           // embedding + LM head share per rank
  int64_t hbm_bytes = 0, hbm_capacity = 0;
  bool fits = false;
};

// "tp=64[,attention_dp=8][,lnc=1]" (also "tp64"); throws Error(kBadConfig) naming the value.
PredictPlan ParsePlan(const std::string& text);
std::string DefaultPlanName(const PredictPlan& p);

// The scenario of one decoder layer at the model's shapes: decode at kv_length `tokens` (one
// step) or prefill of seq_len `tokens`.
proto::Scenario LayerScenario(const PredictRequest& r, const PredictPlan& plan, bool prefill,
                              int tokens, int layers = 1, int steps = 1);

// The sampled KV lengths: `samples` (at most N, at least 2 unless N = 1) evenly spread over
// [S, S + N - 1], both ends included, ascending.
std::vector<int> DecodeSampleLengths(int input_tokens, int output_tokens, int samples);
// The mean over KV lengths S .. S+N-1 of the piecewise-linear interpolation of `samples`.
double MeanInterpolated(const std::vector<std::pair<int, double>>& samples, int input_tokens,
                        int output_tokens);

// Checks the request (every problem at once, Error(kBadConfig), exit 14) and predicts each plan.
std::vector<PlanPrediction> Predict(const PredictRequest& r);

std::string FormatPredictions(const PredictRequest& r, const std::vector<PlanPrediction>& p);
// The JSON of docs/predict.md (per plan name, ttft_ms, tpot_ms, ...).
std::string PredictionsJson(const PredictRequest& r, const std::vector<PlanPrediction>& p);

}  // namespace nkisim::launcher
