#include "serving/metrics.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "runtime/error.h"

namespace nkisim::serving {

Slo ParseSlo(const std::string& text) {
  Slo s;
  size_t start = 0;
  bool any = false;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
    double* field = key == "ttft_p99_ms" ? &s.ttft_p99_ms
                    : key == "tpot_p99_ms" ? &s.tpot_p99_ms
                    : key == "e2el_p99_ms" ? &s.e2el_p99_ms
                                           : nullptr;
    if (field == nullptr) {
      Raise(ErrorCode::kBadConfig, StrCat("--slo: '", key, "': unknown SLO; the SLOs are ttft_p99_ms, tpot_p99_ms, ",
                                          "e2el_p99_ms (NAME=MS, comma-separated)"));
    }
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
      Raise(ErrorCode::kBadConfig, StrCat("--slo: ", key, ": '", value, "': must be a number of ms > 0"));
    }
    *field = v;
    any = true;
    start = comma + 1;
  }
  if (!any) Raise(ErrorCode::kBadConfig, "--slo: empty: give NAME=MS");
  return s;
}

double Percentile(std::vector<double> v, double pct) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = pct / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

double Percentile(const std::map<double, int64_t>& counts, double pct) {
  int64_t n = 0;
  for (const auto& [v, c] : counts) n += c;
  if (n == 0) return 0;
  const double pos = pct / 100.0 * static_cast<double>(n - 1);
  const int64_t lo = static_cast<int64_t>(std::floor(pos)), hi = std::min(lo + 1, n - 1);
  double at_lo = 0, at_hi = 0;
  int64_t seen = 0;  // values before this one
  for (const auto& [v, c] : counts) {
    if (lo >= seen && lo < seen + c) at_lo = v;
    if (hi >= seen && hi < seen + c) {
      at_hi = v;
      break;
    }
    seen += c;
  }
  return at_lo + (at_hi - at_lo) * (pos - static_cast<double>(lo));
}

namespace {

void CountStats(std::map<std::string, double>& out, const std::string& name, const std::map<double, int64_t>& counts) {
  double n = 0, mean = 0, var = 0;
  for (const auto& [v, c] : counts) {
    n += static_cast<double>(c);
    mean += v * static_cast<double>(c);
  }
  mean = n > 0 ? mean / n : 0;
  for (const auto& [v, c] : counts) var += (v - mean) * (v - mean) * static_cast<double>(c);
  out["mean_" + name + "_ms"] = mean;
  out["std_" + name + "_ms"] = n > 0 ? std::sqrt(var / n) : 0;
  out["median_" + name + "_ms"] = Percentile(counts, 50);
  out["p90_" + name + "_ms"] = Percentile(counts, 90);
  out["p99_" + name + "_ms"] = Percentile(counts, 99);
}

void Stats(std::map<std::string, double>& out, const std::string& name, const std::vector<double>& v) {
  double mean = 0, var = 0;
  for (double x : v) mean += x;
  mean = v.empty() ? 0 : mean / static_cast<double>(v.size());
  for (double x : v) var += (x - mean) * (x - mean);
  out["mean_" + name + "_ms"] = mean;
  out["std_" + name + "_ms"] = v.empty() ? 0 : std::sqrt(var / static_cast<double>(v.size()));
  out["median_" + name + "_ms"] = Percentile(v, 50);
  out["p90_" + name + "_ms"] = Percentile(v, 90);
  out["p99_" + name + "_ms"] = Percentile(v, 99);
}

}  // namespace

Metrics ComputeMetrics(const SimulationResult& r, const Slo& slo) {
  Metrics m;
  std::vector<double> ttft, tpot, e2el, queue;
  int64_t good = 0;
  for (const RequestRecord& x : r.records) {
    if (x.rejected) {
      ++m.rejected;
      continue;
    }
    if (x.finish_ms < 0) continue;
    ++m.completed;
    m.total_input_tokens += x.request.input_tokens;
    m.total_output_tokens += x.request.output_tokens;
    ttft.push_back(x.ttft_ms());
    e2el.push_back(x.e2e_ms());
    queue.push_back(x.queue_ms());
    if (x.tpot_ms() >= 0) tpot.push_back(x.tpot_ms());
    const bool ok = (slo.ttft_p99_ms <= 0 || x.ttft_ms() <= slo.ttft_p99_ms) &&
                    (slo.tpot_p99_ms <= 0 || x.tpot_ms() <= slo.tpot_p99_ms) &&
                    (slo.e2el_p99_ms <= 0 || x.e2e_ms() <= slo.e2el_p99_ms);
    good += ok;
  }
  m.duration_s = r.duration_ms / 1000.0;
  const double d = m.duration_s > 0 ? m.duration_s : 1;
  m.request_throughput = m.completed / d;
  m.output_throughput = m.total_output_tokens / d;
  m.total_token_throughput = (m.total_input_tokens + m.total_output_tokens) / d;
  m.request_goodput = good / d;
  Stats(m.latency_ms, "ttft", ttft);
  Stats(m.latency_ms, "tpot", tpot);
  Stats(m.latency_ms, "e2el", e2el);
  Stats(m.latency_ms, "queue", queue);
  CountStats(m.latency_ms, "itl", r.itl_counts);
  const double dur_ms = r.duration_ms > 0 ? r.duration_ms : 1;
  m.mean_running = r.slot_area_ms / dur_ms;
  m.mean_in_system = r.in_system_area_ms / dur_ms;
  m.mean_kv_blocks = r.kv_block_area_ms / dur_ms;
  m.littles_law_l = m.mean_in_system;
  m.littles_law_lambda_w = m.completed / dur_ms * m.latency_ms["mean_e2el_ms"];
  m.prefix_hit_rate = r.prefix_lookup_tokens > 0 ? double(r.prefix_hit_tokens) / r.prefix_lookup_tokens : 0;
  m.preemptions = r.preemptions;
  m.steps = r.steps;
  m.max_waiting = r.max_waiting;
  return m;
}

bool MeetsSlo(const Metrics& m, const Slo& slo) {
  auto at = [&](const char* k) { return m.latency_ms.at(k); };
  return m.rejected == 0 && m.completed > 0 && (slo.ttft_p99_ms <= 0 || at("p99_ttft_ms") <= slo.ttft_p99_ms) &&
         (slo.tpot_p99_ms <= 0 || at("p99_tpot_ms") <= slo.tpot_p99_ms) &&
         (slo.e2el_p99_ms <= 0 || at("p99_e2el_ms") <= slo.e2el_p99_ms);
}

std::string MetricsJson(const Metrics& m, const std::string& extra_json_fields) {
  nlohmann::ordered_json j;
  j["completed"] = m.completed;
  j["failed"] = m.rejected;
  j["total_input_tokens"] = m.total_input_tokens;
  j["total_output_tokens"] = m.total_output_tokens;
  j["duration"] = m.duration_s;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = m.request_goodput;
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  for (const auto& [k, v] : m.latency_ms) j[k] = v;
  j["mean_running_seqs"] = m.mean_running;
  j["mean_requests_in_system"] = m.mean_in_system;
  j["mean_kv_blocks_used"] = m.mean_kv_blocks;
  j["littles_law"] = {{"L_time_average_in_system", m.littles_law_l},
                      {"lambda_times_W", m.littles_law_lambda_w}};
  j["prefix_cache_hit_rate"] = m.prefix_hit_rate;
  j["preemptions"] = m.preemptions;
  j["steps"] = m.steps;
  j["max_waiting"] = m.max_waiting;
  if (!extra_json_fields.empty()) {
    const nlohmann::ordered_json extra = nlohmann::ordered_json::parse(extra_json_fields);
    for (const auto& [k, v] : extra.items()) j[k] = v;
  }
  return j.dump(2) + "\n";
}

std::string RequestsCsv(const SimulationResult& r) {
  std::string out =
      "id,replica,arrival_ms,input_tokens,output_tokens,cached_tokens,queue_ms,ttft_ms,tpot_ms,itl_p50_ms,"
      "itl_p99_ms,itl_max_ms,e2el_ms,preemptions,rejected\n";
  for (const RequestRecord& x : r.records) {
    if (x.rejected || x.finish_ms < 0) {
      out += StrPrintf("%lld,,%.6f,%d,%d,,,,,,,,,,%s\n", static_cast<long long>(x.request.id), x.arrival_ms,
                       x.request.input_tokens, x.request.output_tokens, x.rejected ? "1" : "0");
      continue;
    }
    const std::string itl = x.itl_max_ms < 0 ? std::string(",,")
                                              : StrPrintf("%.6f,%.6f,%.6f", x.itl_p50_ms, x.itl_p99_ms, x.itl_max_ms);
    out += StrPrintf("%lld,%d,%.6f,%d,%d,%d,%.6f,%.6f,%.6f,%s,%.6f,%d,0\n", static_cast<long long>(x.request.id),
                     x.replica, x.arrival_ms, x.request.input_tokens, x.request.output_tokens, x.cached_tokens,
                     x.queue_ms(), x.ttft_ms(), x.tpot_ms(),
                     itl.c_str(), x.e2e_ms(), x.preemptions);
  }
  return out;
}

std::string FormatMetrics(const Metrics& m) {
  auto at = [&](const char* k) { return m.latency_ms.at(k); };
  std::string s;
  s += StrPrintf("requests: %lld completed, %lld refused, in %.3f s\n", static_cast<long long>(m.completed),
                 static_cast<long long>(m.rejected), m.duration_s);
  s += StrPrintf("throughput: %.3f req/s, output %.1f tok/s, total %.1f tok/s, goodput %.3f req/s\n",
                 m.request_throughput, m.output_throughput, m.total_token_throughput, m.request_goodput);
  s += "                  mean     p50     p90     p99   (ms)\n";
  for (const char* name : {"ttft", "tpot", "itl", "e2el", "queue"}) {
    const std::string n = name;
    s += StrPrintf("  %-8s %9.2f %7.2f %7.2f %7.2f\n", name, at(("mean_" + n + "_ms").c_str()),
                   at(("median_" + n + "_ms").c_str()), at(("p90_" + n + "_ms").c_str()),
                   at(("p99_" + n + "_ms").c_str()));
  }
  s += StrPrintf("occupancy: %.2f running seqs, %.2f in system, %.1f KV blocks (means); max queue %d; "
                 "%lld preemptions; %lld steps\n",
                 m.mean_running, m.mean_in_system, m.mean_kv_blocks, m.max_waiting,
                 static_cast<long long>(m.preemptions), static_cast<long long>(m.steps));
  s += StrPrintf("little's law: L = %.4f, lambda x W = %.4f\n", m.littles_law_l, m.littles_law_lambda_w);
  if (m.prefix_hit_rate > 0) s += StrPrintf("prefix cache: %.1f%% of prompt tokens hit\n", 100 * m.prefix_hit_rate);
  return s;
}

}  // namespace nkisim::serving
