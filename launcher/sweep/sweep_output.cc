#include "launcher/sweep/sweep_output.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/config_file.h"
#include "runtime/error.h"
#include "runtime/output_file.h"

namespace nkisim::launcher {
namespace {

using Json = nlohmann::ordered_json;


std::string CsvField(const std::string& value) {
  std::string v = value;
  for (char& c : v) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  if (v.find_first_of(",\"") == std::string::npos) return v;
  std::string quoted = "\"";
  for (char c : v) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

const char* Status(const std::optional<PointResult>& r) {
  return !r ? "pending" : r->ok ? "ok" : "failed";
}

// The phases that ran a collective in some point, in `phases` order.
std::vector<std::string> CollectivePhases(const std::vector<std::string>& phases, const SweepResults& results) {
  std::set<std::string> with;
  for (const auto& r : results) {
    if (!r) continue;
    for (const auto& [phase, algorithm] : r->phase_algorithm) with.insert(phase);
  }
  std::vector<std::string> out;
  for (const std::string& p : phases) {
    if (with.contains(p)) out.push_back(p);
  }
  return out;
}

std::string Ratio(double r) { return StrPrintf("%.2fx", r); }

}  // namespace

std::vector<std::string> ResultPhases(const SweepResults& results) {
  std::vector<std::string> phases;
  for (const auto& r : results) {
    if (!r) continue;
    size_t at = 0;  // where the next new phase of this result goes
    for (const auto& [phase, us] : r->phase_us) {
      const auto found = std::find(phases.begin(), phases.end(), phase);
      if (found != phases.end()) {
        at = static_cast<size_t>(found - phases.begin()) + 1;
      } else {
        phases.insert(phases.begin() + static_cast<std::ptrdiff_t>(at), phase);
        ++at;
      }
    }
  }
  return phases;
}

double TokensPerSecond(const ResolvedSweep& sweep, const SweepPoint& point, const PointResult& result) {
  if (!result.has_times || result.step_us <= 0) return 0;
  double tokens = static_cast<double>(point.batch) * point.replicas;
  if (sweep.workload == Workload::kPrefill) tokens *= point.length;
  return tokens * 1e6 / result.step_us;
}

std::string SweepCsv(const ResolvedSweep& sweep, const SweepResults& results) {
  const std::vector<std::string> phases = ResultPhases(results);
  const std::vector<std::string> collective = CollectivePhases(phases, results);
  std::vector<std::string> header = {"point", "plan", "tp", "attention_dp", "lnc", "instances", "replicas",
                                     "workload", "batch", sweep.length_axis(), "algorithm", "profile"};
  for (const std::string& p : phases) header.push_back(p + "_us");
  for (const char* h : {"step_us", "tokens_per_s", "kv_cache_mib_per_rank", "weights_mib_per_rank"}) {
    header.push_back(h);
  }
  for (const std::string& p : collective) header.push_back(p + "_algorithm");
  for (const char* h : {"status", "error", "mode", "host_s", "job_wall_s", "log"}) header.push_back(h);
  std::string out;
  for (size_t i = 0; i < header.size(); ++i) out += StrCat(i ? "," : "", CsvField(header[i]));
  out += "\n";
  for (const SweepPoint& point : sweep.points) {
    const std::optional<PointResult>& r = results.at(point.index);
    const bool times = r && r->has_times;
    std::vector<std::string> row = {point.key,
                                    point.plan,
                                    StrCat(point.tp),
                                    StrCat(point.attention_dp),
                                    StrCat(point.lnc),
                                    StrCat(point.instances),
                                    StrCat(point.replicas),
                                    sweep.workload == Workload::kDecode ? "decode" : "prefill",
                                    StrCat(point.batch),
                                    StrCat(point.length),
                                    point.algorithm,
                                    point.profile};
    for (const std::string& p : phases) {
      std::string cell;
      if (times) {
        for (const auto& [phase, us] : r->phase_us) {
          if (phase == p) cell = StrPrintf("%.3f", us);
        }
      }
      row.push_back(cell);
    }
    row.push_back(times ? StrPrintf("%.3f", r->step_us) : "");
    row.push_back(times ? StrPrintf("%.1f", TokensPerSecond(sweep, point, *r)) : "");
    row.push_back(times ? StrPrintf("%.3f", r->kv_cache_mib) : "");
    row.push_back(times ? StrPrintf("%.3f", r->weights_mib) : "");
    for (const std::string& p : collective) {
      std::string cell;
      if (times && r->phase_algorithm.contains(p)) cell = r->phase_algorithm.at(p);
      row.push_back(cell);
    }
    row.push_back(Status(r));
    row.push_back(r ? r->error : "");
    row.push_back(r ? r->mode : "");
    row.push_back(times ? StrPrintf("%.2f", r->host_s) : "");
    row.push_back(r ? StrPrintf("%.2f", r->job_wall_s) : "");
    row.push_back(r ? r->log : "");
    for (size_t i = 0; i < row.size(); ++i) out += StrCat(i ? "," : "", CsvField(row[i]));
    out += "\n";
  }
  return out;
}

std::string SweepJson(const ResolvedSweep& sweep, const SweepResults& results) {
  Json doc;
  doc["sweep"] = sweep.source;
  doc["title"] = sweep.title;
  doc["workload"] = sweep.workload == Workload::kDecode ? "decode" : "prefill";
  doc["length_axis"] = sweep.length_axis();
  doc["phases"] = ResultPhases(results);
  Json points = Json::array();
  for (const SweepPoint& point : sweep.points) {
    const std::optional<PointResult>& r = results.at(point.index);
    Json p;
    p["point"] = point.key;
    p["index"] = point.index;
    p["shape"] = sweep.shapes[point.shape].label;
    p["plan"] = point.plan;
    p["tp"] = point.tp;
    p["attention_dp"] = point.attention_dp;
    p["lnc"] = point.lnc;
    p["instances"] = point.instances;
    p["replicas"] = point.replicas;
    p["batch"] = point.batch;
    p[sweep.length_axis()] = point.length;
    p["algorithm"] = point.algorithm;
    p["profile"] = point.profile;
    p["status"] = Status(r);
    if (r) {
      p["error"] = r->error;
      p["mode"] = r->mode;
      p["fingerprint"] = r->fingerprint;
      p["log"] = r->log;
      p["job_wall_s"] = r->job_wall_s;
      if (r->has_times) {
        p["step_us"] = r->step_us;
        p["tokens_per_s"] = TokensPerSecond(sweep, point, *r);
        p["kv_cache_mib_per_rank"] = r->kv_cache_mib;
        p["weights_mib_per_rank"] = r->weights_mib;
        p["host_s"] = r->host_s;
        Json phases = Json::object();
        for (const auto& [phase, us] : r->phase_us) phases[phase] = us;
        p["phase_us"] = phases;
        Json algorithms = Json::object();
        for (const auto& [phase, algorithm] : r->phase_algorithm) algorithms[phase] = algorithm;
        p["phase_algorithm"] = algorithms;
      }
    }
    points.push_back(std::move(p));
  }
  doc["points"] = std::move(points);
  return doc.dump(2) + "\n";
}

std::map<std::string, PointResult> ReadSweepJson(const std::string& path) {
  const std::string text = ReadConfigFile(path, "sweep results");
  std::map<std::string, PointResult> out;
  try {
    const Json doc = Json::parse(text);
    for (const Json& p : doc.at("points")) {
      const std::string status = p.at("status").get<std::string>();
      if (status == "pending") continue;
      PointResult r;
      r.key = p.at("point").get<std::string>();
      r.ok = status == "ok";
      r.error = p.value("error", "");
      r.mode = p.value("mode", "");
      r.fingerprint = p.value("fingerprint", "");
      r.log = p.value("log", "");
      r.job_wall_s = p.value("job_wall_s", 0.0);
      if (p.contains("step_us")) {
        r.has_times = true;
        r.step_us = p.at("step_us").get<double>();
        r.kv_cache_mib = p.at("kv_cache_mib_per_rank").get<double>();
        r.weights_mib = p.at("weights_mib_per_rank").get<double>();
        r.host_s = p.value("host_s", 0.0);
        for (const auto& [phase, us] : p.at("phase_us").items()) r.phase_us.emplace_back(phase, us.get<double>());
        for (const auto& [phase, a] : p.at("phase_algorithm").items()) r.phase_algorithm[phase] = a.get<std::string>();
      }
      out[r.key] = std::move(r);
    }
  } catch (const nlohmann::json::exception& e) {
    Raise(ErrorCode::kBadConfig, StrCat(path, ": not the JSON of a sweep's results (written by nkisim ",
                                        "sweep): ", e.what()));
  }
  return out;
}

std::string SweepVerdict(const ResolvedSweep& sweep, const SweepResults& results) {
  const bool decode = sweep.workload == Workload::kDecode;
  int ok = 0, failed = 0, pending = 0;
  std::set<std::string> modes;
  for (const auto& r : results) {
    ok += r && r->ok;
    failed += r && !r->ok;
    pending += !r;
    if (r) modes.insert(r->mode);
  }
  std::string mode;
  for (const std::string& m : modes) mode += StrCat(mode.empty() ? "" : " and ", m);
  std::string out = StrCat("nkisim sweep ", sweep.title, ": ", decode ? "decode step" : "prefill",
                           " time per plan (simulated", mode.empty() ? "" : StrCat(", ", mode), "); ",
                           sweep.points.size(), " points, ", ok, " ok, ", failed, " failed",
                           pending ? StrCat(", ", pending, " not run") : "", "\n");
  std::map<std::string, std::vector<std::string>> fastest_in;  // plan -> shapes
  std::vector<std::string> plan_order;
  int shapes_with_results = 0;
  for (const SweepShape& shape : sweep.shapes) {
    std::vector<std::pair<double, const SweepPoint*>> timed;
    std::vector<const SweepPoint*> bad;
    for (int pi : shape.points) {
      const SweepPoint& point = sweep.points[pi];
      const std::optional<PointResult>& r = results[pi];
      if (r && r->ok && r->has_times) timed.emplace_back(r->step_us, &point);
      if (r && !r->ok) bad.push_back(&point);
      if (std::find(plan_order.begin(), plan_order.end(), point.plan) == plan_order.end()) {
        plan_order.push_back(point.plan);
      }
    }
    if (timed.empty() && bad.empty()) continue;
    std::stable_sort(timed.begin(), timed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::string line = shape.label + ": ";
    if (!timed.empty()) {
      ++shapes_with_results;
      const SweepPoint& best = *timed[0].second;
      const PointResult& br = *results[best.index];
      fastest_in[best.plan].push_back(shape.label);
      line += timed.size() == 1 ? StrCat(best.plan, " (the only plan with a result)")
                                : StrCat(best.plan, " is fastest");
      line += StrPrintf(", %.3f us (%.1f tok/s), %.2f MiB KV/rank", br.step_us,
                     TokensPerSecond(sweep, best, br), br.kv_cache_mib);
      for (size_t i = 1; i < timed.size(); ++i) {
        const PointResult& r = *results[timed[i].second->index];
        line += StrCat("; ", timed[i].second->plan, " ", Ratio(r.step_us / br.step_us),
                       StrPrintf(", %.2f MiB", r.kv_cache_mib));
      }
      // The plan that keeps the least KV per rank, when it is not the fastest.
      const auto least = std::min_element(timed.begin(), timed.end(), [&](const auto& a, const auto& b) {
        return results[a.second->index]->kv_cache_mib < results[b.second->index]->kv_cache_mib;
      });
      const PointResult& lr = *results[least->second->index];
      if (lr.kv_cache_mib < br.kv_cache_mib) {
        line += StrCat(" (least KV/rank: ", least->second->plan, StrPrintf(", %.1fx less", br.kv_cache_mib / lr.kv_cache_mib),
                       " at ", Ratio(lr.step_us / br.step_us), " the time)");
      }
    }
    for (const SweepPoint* p : bad) {
      line += StrCat(timed.empty() && p == bad.front() ? "" : "; ", p->plan, " FAILED (", results[p->index]->error, ")");
    }
    out += line + "\n";
  }
  if (shapes_with_results > 1) {
    std::string summary = "fastest plan:";
    bool first = true;
    for (const std::string& plan : plan_order) {
      const auto found = fastest_in.find(plan);
      if (found == fastest_in.end()) continue;
      summary += StrCat(first ? " " : "; ", plan, " in ", found->second.size(), " of ", shapes_with_results,
                        " shapes");
      if (found->second.size() <= 4 && found->second.size() < static_cast<size_t>(shapes_with_results)) {
        summary += " (";
        for (size_t i = 0; i < found->second.size(); ++i) summary += StrCat(i ? ", " : "", found->second[i]);
        summary += ")";
      }
      first = false;
    }
    out += summary + "\n";
  }
  return out;
}

void WriteSweepOutputs(const ResolvedSweep& sweep, const SweepResults& results, const std::string& out) {
  WriteFileAtomically(out + ".csv", SweepCsv(sweep, results), "sweep table");
  WriteFileAtomically(out + ".json", SweepJson(sweep, results), "sweep results");
  WriteFileAtomically(out + ".verdict.txt", SweepVerdict(sweep, results), "sweep verdict");
}

}  // namespace nkisim::launcher
