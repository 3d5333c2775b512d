// The serving simulation (docs/serving.md): R data-parallel replicas behind a load balancer, each
// a vLLM-style scheduler stepping a compiled model whose step costs come from a StepCostTable.
// Discrete events: request arrivals and step ends; a replica steps whenever it has work. Knobs are
// named as vLLM / NxD Inference name them, with their defaults here.
//
// One step of a replica (SchedulerConfig::enable_chunked_prefill false, vLLM's default):
//   * a prefill step when a waiting request can be admitted: as many as fit max_num_seqs slots,
//     max_num_batched_tokens and the free KV blocks, in arrival order; each prefilled alone in
//     its context-encoding bucket (the step costs the sum) and gives its first token;
//   * else a decode step of every running sequence at the compiled batch and KV buckets.
// Chunked prefill: one mixed step: every running decode (a token each), then prompt chunks of the
// sequences being prefilled and of newly admitted ones within max_num_batched_tokens (capped at
// the largest context-encoding bucket); it costs the decode step plus the prefill of all the
// step's chunk tokens in one bucket (the chunks' attention over their earlier chunks not priced).
// KV cache: blocks of block_size tokens, kv_blocks per replica (the table's); a sequence holds
// ceil(tokens / block_size). Prefix caching: the full blocks of a shared prefix are kept after
// their users finish, in an LRU evicted when blocks run out; a request admitted with its prefix's
// first k blocks cached prefills only the rest (at least one token). Preemption (vLLM's recompute):
// when a decode needs a block and none is free, the latest-admitted running sequence is freed and
// requeued first; on readmission it prefills its prompt and the tokens it had generated.
// Refusals (counted, not errors): a prompt longer than the largest context-encoding bucket
// (without chunked prefill), a prompt + output longer than max_model_len, a request whose KV
// blocks exceed the replica's.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <map>
#include <vector>

#include "serving/requests.h"
#include "serving/step_costs.h"

namespace nkisim::serving {

enum class LoadBalance { kRoundRobin, kLeastOutstanding };

struct SchedulerConfig {
  int max_num_seqs = 8;                  // slots (NxD Inference: the compiled max batch)
  int max_num_batched_tokens = 8192;     // tokens one step may schedule
  int max_model_len = 0;                 // prompt + output; 0: the largest KV bucket
  bool enable_chunked_prefill = false;
  bool enable_prefix_caching = false;
  int block_size = 32;                   // tokens per KV block
  bool async_mode = false;               // host time overlapped with the device
  int replicas = 1;
  LoadBalance load_balance = LoadBalance::kRoundRobin;
  int closed_loop_users = 0;             // > 0: concurrency N, request i >= N sent when one ends
  // > 0: an occupancy sample at most this often; past 4,096 samples every other one is dropped
  // and the interval doubled (memory bounded on any run).
  double timeline_interval_ms = 0;
};

// Throws Error(kBadConfig) naming the knob, value and rule.
void CheckSchedulerConfig(const SchedulerConfig& c, const StepCostTable& t);

struct RequestRecord {
  Request request;
  int replica = -1;
  bool rejected = false;
  std::string reject_reason;
  double arrival_ms = 0;       // as simulated (closed loop: when its user sent it)
  double first_scheduled_ms = -1;
  double first_token_ms = -1;
  double finish_ms = -1;
  int preemptions = 0;
  int cached_tokens = 0;       // prompt tokens found in the prefix cache at first admission
  double last_token_ms = -1;
  // Inter-token latency (vllm bench serve's ITL: the gaps between a request's successive output
  // tokens, output - 1 of them, summing to e2e - TTFT): this request's median, p99 and largest;
  // -1 for one output token. The gaps are kept only while the request runs.
  double itl_p50_ms = -1, itl_p99_ms = -1, itl_max_ms = -1;
  std::vector<double> itls_running;
  double ttft_ms() const { return first_token_ms - arrival_ms; }
  double e2e_ms() const { return finish_ms - arrival_ms; }
  double queue_ms() const { return first_scheduled_ms - arrival_ms; }
  // vLLM's: (e2e - ttft) / (output - 1); -1 for one output token.
  double tpot_ms() const {
    return request.output_tokens > 1 ? (finish_ms - first_token_ms) / (request.output_tokens - 1) : -1;
  }
};

struct TimelineSample {
  double t_ms = 0;
  int running = 0, waiting = 0;  // over all replicas
  int64_t kv_blocks_used = 0;
};

struct SimulationResult {
  std::vector<RequestRecord> records;  // by request id
  std::vector<TimelineSample> timeline;
  double duration_ms = 0;              // first arrival to last finish
  double in_system_area_ms = 0;        // integral over time of requests waiting or running
  double slot_area_ms = 0;             // integral of running sequences (slot occupancy)
  double kv_block_area_ms = 0;         // integral of KV blocks held
  int64_t steps = 0, prefill_steps = 0, decode_steps = 0, preemptions = 0;
  int64_t prefix_hit_tokens = 0, prefix_lookup_tokens = 0;
  int max_waiting = 0;
  // Every inter-token gap of every request: gap (ms) -> how many (exact; the distinct gaps are
  // sums of step times, few next to the tokens).
  std::map<double, int64_t> itl_counts;
};

// REQUIRES: the table passed CheckStepCostTable, the config CheckSchedulerConfig, requests
// arrivals ascending (open loop) with lengths >= 1. `progress` (may be empty) is called with
// (requests done, total) every few thousand requests.
// RETURNS every request's record and the run's aggregates. Deterministic.
SimulationResult Simulate(const StepCostTable& table, const SchedulerConfig& config,
                          const std::vector<Request>& requests,
                          const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace nkisim::serving
