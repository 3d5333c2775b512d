// `nkisim serve` (docs/serving.md): a request trace or generated load served by R data-parallel
// replicas of one plan, each a vLLM-style scheduler over the plan's step-cost table built once
// from predict's simulation (or read back from --step-costs); TTFT / TPOT / e2e percentiles,
// throughput and goodput under SLOs, per-request CSV, plots, and --find-max-rate.
#pragma once

#include <string>
#include <vector>

#include "model/predict.h"
#include "serving/step_costs.h"

namespace CLI {
class App;
}

namespace nkisim::launcher {

void AddServeCommand(CLI::App* cmd, int* exit_code);

// The plan's step-cost table from predict (docs/serving.md, "Step costs"): each context-encoding
// bucket's prefill = predict's TTFT of that many tokens at batch 1 (prefill + LM head); each
// batch bucket's decode step at each KV bucket = predict's L decode layers simulated at exactly
// that KV length (one predict per pair, N = 1) + its LM head of that batch; host time =
// the profile's host_ms_per_step; KV blocks = (HBM per logical core - everything but the KV
// cache) / (KV bytes per token per core x block_size), at the largest batch bucket.
// REQUIRES: `base` names the model, profile, instances and exactly one plan; buckets ascending,
// the KV buckets within the model's context. `progress` (may be empty) gets a line per predict.
serving::StepCostTable BuildStepCostTable(const PredictRequest& base, const std::vector<int>& prefill_buckets,
                                          const std::vector<int>& batch_buckets,
                                          const std::vector<int>& kv_buckets, int block_size,
                                          void (*progress)(const std::string&) = nullptr);

}  // namespace nkisim::launcher
