// The per-plan step-cost table of `nkisim serve` (docs/serving.md, "Step costs"), built from
// predict's simulation once per plan:
//   * each context-encoding bucket's prefill = predict's TTFT of that many tokens at batch 1
//     (the L prefill layers, chunked as predict chunks them, + the LM head);
//   * each batch bucket's decode step at each KV bucket = predict's L decode layers simulated at
//     exactly that KV length (as one predict at batch b, S = the KV bucket, N = 1 takes them) +
//     the LM head of that batch;
//   * host time = the profile's host_ms_per_step;
//   * KV blocks = (HBM per logical core - everything but the KV cache) / (KV bytes per token per
//     core x block_size), at the largest batch bucket.
// REQUIRES (both builders): `base` names the model, profile, instances and exactly one plan;
// buckets ascending, the KV buckets within the model's context. `progress` (may be empty) gets a
// line per simulated job.
#pragma once

#include <string>
#include <vector>

#include "model/predict.h"
#include "serving/step_costs.h"

namespace nkisim::launcher {

// The fast builder `nkisim serve` uses: each distinct layer job simulated once (keyed by the
// layer scenario's text) and nothing simulated that the table does not use. The jobs can run
// `workers` at a time (each is self-contained: its ranks as threads on their own fabric), but on
// 2 cores two at a time saves no reliable wall time (bench/serve_table_bench.cc: the
// ranks' threads of two jobs contend), so one at a time is the default:
//   * a prefill bucket simulates one chunk's layer (not the decode a predict also runs); buckets
//     chunked into the same chunk length (every bucket over the 1,024-token limit) share it;
//   * a decode entry simulates its two decode layers at its KV length (not the prefill a predict
//     also runs). Each entry keeps its own two-layer job: the steady layer's saving (first -
//     steady) is not the same at every KV length (0.35% apart on the test's model at batch 4),
//     so it is not reused across KV buckets.
// The numbers are those of BuildStepCostTableDirect to floating-point rounding
// (tests/serving/step_cost_builder_test.cc; bench/serve_table_bench.cc times the two).
serving::StepCostTable BuildStepCostTable(const PredictRequest& base, const std::vector<int>& prefill_buckets,
                                          const std::vector<int>& batch_buckets,
                                          const std::vector<int>& kv_buckets, int block_size,
                                          void (*progress)(const std::string&) = nullptr, int workers = 1);

// The reference: one whole predict per table entry (its prefill and its decode both simulated,
// one of them unused), as the table was first built. Slow (every job run again per entry); kept
// for the test and the benchmark.
serving::StepCostTable BuildStepCostTableDirect(const PredictRequest& base, const std::vector<int>& prefill_buckets,
                                                const std::vector<int>& batch_buckets,
                                                const std::vector<int>& kv_buckets, int block_size,
                                                void (*progress)(const std::string&) = nullptr);

}  // namespace nkisim::launcher
