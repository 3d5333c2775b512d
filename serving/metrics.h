// The metrics of a serving simulation (docs/serving.md): per request and aggregated under the
// keys of `vllm bench serve` (median_ttft_ms, p99_tpot_ms, output_throughput, ...), goodput under
// SLOs, occupancy, and Little's law as a check of the bookkeeping. Pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "serving/simulator.h"

namespace nkisim::serving {

// SLOs in ms; 0: none on that metric.
struct Slo {
  double ttft_p99_ms = 0, tpot_p99_ms = 0, e2el_p99_ms = 0;
};
// "ttft_p99_ms=2000,tpot_p99_ms=50" (also e2el_p99_ms); throws Error(kBadConfig) naming an
// unknown SLO name (and the known ones) or a value that is not a number > 0.
Slo ParseSlo(const std::string& text);

// numpy.percentile's linear interpolation (what vllm bench serve reports); 0 for no values.
double Percentile(std::vector<double> values, double pct);
// The same over a multiset given as value -> count (counts >= 1); 0 when empty.
double Percentile(const std::map<double, int64_t>& counts, double pct);

struct Metrics {
  int64_t completed = 0, rejected = 0, total_input_tokens = 0, total_output_tokens = 0;
  double duration_s = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  double request_goodput = 0;  // completed requests meeting every SLO per second
  // ttft, tpot, e2el, queue, and itl (over every inter-token gap of every request, as vllm
  // bench serve's): mean, std, p50 (median), p90, p99
  std::map<std::string, double> latency_ms;
  double mean_running = 0, mean_in_system = 0, mean_kv_blocks = 0;
  double littles_law_l = 0, littles_law_lambda_w = 0;  // time-average in system vs rate x mean e2e
  double prefix_hit_rate = 0;
  int64_t preemptions = 0, steps = 0;
  int max_waiting = 0;
};

Metrics ComputeMetrics(const SimulationResult& r, const Slo& slo);
// Whether the run's p99s meet every SLO given (and every request was served).
bool MeetsSlo(const Metrics& m, const Slo& slo);

// The JSON object (vllm bench serve keys plus nkisim's), `header` (assumptions, knobs) merged in
// as "assumptions" etc. by the caller.
std::string MetricsJson(const Metrics& m, const std::string& extra_json_fields);
// One CSV line per request: id, replica, arrival_ms, input_tokens, output_tokens, cached_tokens,
// queue_ms, ttft_ms, tpot_ms, itl_p50_ms, itl_p99_ms, itl_max_ms, e2el_ms, preemptions, rejected
// (the ITL columns empty for one output token).
std::string RequestsCsv(const SimulationResult& r);
// The lines printed after a run.
std::string FormatMetrics(const Metrics& m);

}  // namespace nkisim::serving
