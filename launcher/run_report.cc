#include "launcher/run_report.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <fstream>

#include "runtime/error.h"
#include "runtime/output_file.h"
#include "runtime/trace.h"

namespace nkisim::launcher {
namespace {

proto::PhaseSummary& PhaseOf(proto::ScenarioSummary& s, const std::string& phase) {
  for (proto::PhaseSummary& p : *s.mutable_phases()) {
    if (p.phase() == phase) return p;
  }
  proto::PhaseSummary& p = *s.add_phases();
  p.set_phase(phase);
  p.set_pass(true);
  return p;
}

std::string Line(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Line(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return buffer;
}

}  // namespace

proto::RunReport BuildReport(const ResolvedScenario& scenario,
                             const std::map<int, proto::RankResult>& results, double wall_s) {
  proto::RunReport report;
  report.set_config(scenario.source);
  report.set_world_size(static_cast<uint32_t>(scenario.world_size()));
  report.set_lnc(static_cast<uint32_t>(scenario.topology.lnc));
  report.set_wall_s(wall_s);
  report.set_pass(true);
  for (const std::string& name : scenario.spec.scenarios()) {
    proto::ScenarioSummary& s = *report.add_scenarios();
    s.set_name(name);
    s.set_pass(true);
    for (const auto& [rank, result] : results) {
      for (const proto::PhaseResult& r : result.phases()) {
        if (r.scenario() != name) continue;
        proto::PhaseSummary& p = PhaseOf(s, r.phase());
        p.set_sim_ns(std::max(p.sim_ns(), r.sim_ns()));
        p.set_host_ms(std::max(p.host_ms(), r.host_ms()));
        p.set_max_abs_error(std::max(p.max_abs_error(), r.max_abs_error()));
        p.set_max_rel_error(std::max(p.max_rel_error(), r.max_rel_error()));
        p.set_bound(std::max(p.bound(), r.bound()));
        p.set_elements(p.elements() + r.elements());
        p.set_failures(p.failures() + r.failures());
        p.set_bytes_moved(p.bytes_moved() + r.bytes_moved());
        p.set_pass(p.failures() == 0);
        if (p.algorithm().empty()) p.set_algorithm(r.algorithm());
        if (r.algorithm() != p.algorithm() && p.algorithm().find(r.algorithm()) == std::string::npos) {
          p.set_algorithm(p.algorithm() + "," + r.algorithm());  // groups that chose differently
        }
      }
      const auto value = [&](const auto& map) { return map.contains(name) ? map.at(name) : 0; };
      s.set_step_sim_ns(std::max(s.step_sim_ns(), value(result.step_sim_ns())));
      s.set_kv_cache_bytes_per_rank(std::max(s.kv_cache_bytes_per_rank(), value(result.kv_cache_bytes())));
      s.set_weight_bytes_per_rank(std::max(s.weight_bytes_per_rank(), value(result.weight_bytes())));
      report.set_peak_rss_mib(std::max(report.peak_rss_mib(), result.peak_rss_mib()));
    }
    for (const proto::PhaseSummary& p : s.phases()) s.set_pass(s.pass() && p.pass());
    report.set_pass(report.pass() && s.pass());
  }
  return report;
}

std::string FormatReport(const proto::RunReport& report) {
  std::string out = Line("nkisim run %s: %u ranks x LNC %u, wall %.1f s, peak RSS %.0f MiB per rank "
                         "(largest)\n",
                         report.config().c_str(), report.world_size(), report.lnc(),
                         report.wall_s(), report.peak_rss_mib());
  for (const proto::ScenarioSummary& s : report.scenarios()) {
    out += Line("\n%s: %s\n", s.name().c_str(), s.pass() ? "PASS" : "FAIL");
    out += Line("  %-12s %12s %10s %12s %12s %12s %14s  %-28s %s\n", "phase", "sim (us)",
                "host (ms)", "max abs err", "max rel err", "bound", "moved (MB)", "check",
                "collective:algorithm");
    for (const proto::PhaseSummary& p : s.phases()) {
      const std::string check = StrCat(p.pass() ? "PASS" : "FAIL", " (", p.failures(), "/",
                                       p.elements(), " outside)");
      out += Line("  %-12s %12.3f %10.1f %12.3e %12.3e %12.3e %14.3f  %-28s %s\n",
                  p.phase().c_str(), p.sim_ns() / 1000.0, p.host_ms(), p.max_abs_error(),
                  p.max_rel_error(), p.bound(), p.bytes_moved() / 1e6, check.c_str(),
                  p.algorithm().empty() ? "-" : p.algorithm().c_str());
    }
    out += Line("  decode step: %.3f us simulated; per rank: KV cache %.2f MiB, weights %.2f MiB\n",
                s.step_sim_ns() / 1000.0, s.kv_cache_bytes_per_rank() / 1048576.0,
                s.weight_bytes_per_rank() / 1048576.0);
  }
  if (report.scenarios_size() == 2) {
    const proto::ScenarioSummary &a = report.scenarios(0), &b = report.scenarios(1);
    out += Line("\n%-22s %16s %16s\n", "side by side", a.name().c_str(), b.name().c_str());
    out += Line("%-22s %16.3f %16.3f\n", "decode step (us)", a.step_sim_ns() / 1000.0,
                b.step_sim_ns() / 1000.0);
    out += Line("%-22s %16.2f %16.2f\n", "KV cache/rank (MiB)", a.kv_cache_bytes_per_rank() / 1048576.0,
                b.kv_cache_bytes_per_rank() / 1048576.0);
    out += Line("%-22s %16.2f %16.2f\n", "weights/rank (MiB)", a.weight_bytes_per_rank() / 1048576.0,
                b.weight_bytes_per_rank() / 1048576.0);
  }
  out += Line("\nresult: %s\n", report.pass() ? "PASS" : "FAIL");
  return out;
}

void WriteReportJson(const proto::RunReport& report, const std::string& path) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(report, &json, options);
  WriteFileAtomically(path, json, "report file");
}

void WriteRunTrace(const ResolvedScenario& scenario,
                   const std::map<int, proto::RankResult>& results, const std::string& path) {
  ChromeTrace trace;
  const int world = scenario.world_size();
  for (int si = 0; si < scenario.spec.scenarios_size(); ++si) {
    const std::string& name = scenario.spec.scenarios(si);
    for (const auto& [rank, result] : results) {
      const int pid = si * world + rank;
      trace.NameProcess(pid, StrCat(name, " rank ", rank));
      for (const proto::TraceEvent& e : result.trace()) {
        if (e.scenario() != name) continue;
        const Engine engine = static_cast<Engine>(e.engine());
        const int tid = ChromeTrace::CoreEngineTid(static_cast<int>(e.core()), engine);
        trace.NameThread(pid, tid, StrCat("core ", e.core(), " ", EngineName(engine)));
        trace.AddEvent({e.name(), EngineName(engine), pid, tid, e.start_ns(), e.end_ns(), e.bytes(),
                        e.flops(), e.operands()});
      }
    }
  }
  trace.WriteFile(path);
}

}  // namespace nkisim::launcher
