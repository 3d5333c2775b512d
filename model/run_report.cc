#include "model/run_report.h"

#include "model/footprint.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdarg>
#include <cmath>
#include <cstdio>
#include <tuple>
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


}  // namespace

namespace {

// The layer-output samples of every plan against those of the first plan.
void CheckAgreement(const ResolvedScenario& sc, const std::map<int, proto::RankResult>& results,
                    proto::RunReport& report) {
  using Key = std::tuple<uint32_t, uint32_t, int64_t>;  // replica, step, index
  std::map<std::string, std::map<Key, float>> samples;
  for (const auto& [rank, result] : results) {
    for (const proto::LayerSample& s : result.layer_samples()) {
      std::map<Key, float>& of_plan = samples[s.scenario()];
      for (int i = 0; i < s.index_size() && i < s.value_size(); ++i) {
        of_plan[{s.replica(), s.step(), s.index(i)}] = s.value(i);
      }
    }
  }
  // Each plan's digest of its layer output: the sum of |value| over the sampled indices.
  for (proto::ScenarioSummary& summary : *report.mutable_scenarios()) {
    double sum = 0;
    for (const auto& [key, value] : samples[summary.name()]) sum += std::fabs(static_cast<double>(value));
    summary.set_layer_output_abs_sum(sum);
  }
  if (sc.plans.size() < 2) return;
  const std::string& reference = sc.plans.front().name;
  const std::map<Key, float>& ref = samples[reference];
  double max_ref = 0;
  for (const auto& [key, value] : ref) max_ref = std::max(max_ref, std::fabs(static_cast<double>(value)));
  const proto::Tolerance tol = sc.tolerance(sc.workload == Workload::kMoe   ? "combine"
                                            : sc.spec.sequence_parallel() ? "reduce_scatter"
                                                                          : "all_reduce");
  for (size_t i = 1; i < sc.plans.size(); ++i) {
    proto::PlanAgreement& a = *report.add_agreement();
    a.set_plan(sc.plans[i].name);
    a.set_reference(reference);
    a.set_bound(tol.atol() + tol.rtol() * max_ref);
    for (const auto& [key, value] : samples[sc.plans[i].name]) {
      const auto found = ref.find(key);
      if (found == ref.end()) continue;
      a.set_compared(a.compared() + 1);
      a.set_max_abs_diff(std::max(a.max_abs_diff(), std::fabs(static_cast<double>(value) - found->second)));
    }
    // Plans with no replica in common have nothing to compare; that is not a failure.
    a.set_pass(a.max_abs_diff() <= a.bound());
    report.set_pass(report.pass() && a.pass());
  }
}

}  // namespace

proto::RunReport BuildReport(const ResolvedScenario& scenario,
                             const std::map<int, proto::RankResult>& results, double wall_s,
                             bool timing_only, bool in_process) {
  proto::RunReport report;
  report.set_timing_only(timing_only);
  report.set_in_process(in_process);
  report.set_config(scenario.source);
  report.set_world_size(static_cast<uint32_t>(scenario.world_size()));
  report.set_lnc(static_cast<uint32_t>(scenario.plans.front().lnc));
  report.set_workload(scenario.spec.workload());
  report.set_wall_s(wall_s);
  report.set_pass(true);
  const uint32_t steps = scenario.workload == Workload::kDecode ? scenario.spec.steps() : 1;
  double summed = 0;
  for (const auto& [rank, result] : results) summed += result.peak_rss_mib();
  if (!in_process) report.set_peak_rss_summed_mib(summed);
  for (const ResolvedPlan& plan : scenario.plans) {
    const std::string& name = plan.name;
    proto::ScenarioSummary& s = *report.add_scenarios();
    s.set_name(name);
    s.set_pass(true);
    s.set_tp(static_cast<uint32_t>(plan.tp));
    s.set_attention_dp(static_cast<uint32_t>(plan.attention_dp));
    s.set_lnc(static_cast<uint32_t>(plan.lnc));
    s.set_instances(static_cast<uint32_t>(plan.instances));
    s.set_replicas(static_cast<uint32_t>(plan.replicas));
    s.set_steps(steps);
    const HbmFootprint hbm =
        PlanHbmFootprint(scenario.spec, scenario.dtype, scenario.workload, plan, scenario.profile);
    s.set_hbm_bytes_per_rank(hbm.total());
    s.set_hbm_capacity_bytes_per_rank(hbm.capacity);
    s.set_hbm_footprint(FormatHbmFootprint(hbm));
    s.set_layers(static_cast<uint32_t>(hbm.layers));
    for (const auto& [rank, result] : results) {
      for (const proto::PhaseResult& r : result.phases()) {
        if (r.scenario() != name) continue;
        if (r.phase() == "experts") {  // workload moe: who sets the step
          if (r.sim_ns() > PhaseOf(s, r.phase()).sim_ns()) s.set_slowest_rank(rank);
          if (s.fastest_experts_sim_ns() == 0 || r.sim_ns() < s.fastest_experts_sim_ns()) {
            s.set_fastest_experts_sim_ns(r.sim_ns());
          }
        }
        proto::PhaseSummary& p = PhaseOf(s, r.phase());
        p.set_sim_ns(std::max(p.sim_ns(), r.sim_ns()));
        p.set_host_ms(std::max(p.host_ms(), r.host_ms()));
        if (!in_process) p.set_fresh_bytes(std::max(p.fresh_bytes(), r.fresh_bytes()));
        p.set_max_abs_error(std::max(p.max_abs_error(), r.max_abs_error()));
        p.set_max_rel_error(std::max(p.max_rel_error(), r.max_rel_error()));
        p.set_bound(std::max(p.bound(), r.bound()));
        p.set_elements(p.elements() + r.elements());
        p.set_failures(p.failures() + r.failures());
        if (r.chain_bound() > 0) {
          p.set_chain_worst_ratio(std::max(p.chain_worst_ratio(), r.chain_max_abs_error() / r.chain_bound()));
        }
        p.set_chain_failures(p.chain_failures() + r.chain_failures());
        p.set_bytes_moved(p.bytes_moved() + r.bytes_moved());
        p.set_pass(p.failures() == 0 && p.chain_failures() == 0);
        if (p.algorithm().empty()) p.set_algorithm(r.algorithm());
        if (r.algorithm() != p.algorithm() && p.algorithm().find(r.algorithm()) == std::string::npos) {
          p.set_algorithm(p.algorithm() + "," + r.algorithm());  // groups that chose differently
        }
      }
      const auto value = [&](const auto& map) { return map.contains(name) ? map.at(name) : 0; };
      if (result.expert_rows().contains(name)) s.add_expert_rows_per_rank(result.expert_rows().at(name));
      s.set_step_sim_ns(std::max(s.step_sim_ns(), value(result.step_sim_ns())));
      s.set_host_ms(std::max(s.host_ms(), value(result.host_ms())));
      s.set_kv_cache_bytes_per_rank(std::max(s.kv_cache_bytes_per_rank(), value(result.kv_cache_bytes())));
      s.set_weight_bytes_per_rank(std::max(s.weight_bytes_per_rank(), value(result.weight_bytes())));
      report.set_peak_rss_mib(std::max(report.peak_rss_mib(), result.peak_rss_mib()));
    }
    s.set_total_sim_ns(s.step_sim_ns() * steps);
    for (const proto::PhaseSummary& p : s.phases()) s.set_pass(s.pass() && p.pass());
    report.set_pass(report.pass() && s.pass());
  }
  if (!timing_only) CheckAgreement(scenario, results, report);
  return report;
}

namespace {

// Workload moe: the step (set by the slowest rank) and the token rows every rank's experts got.
std::string FormatMoeLine(const proto::ScenarioSummary& s) {
  double experts = 0;
  for (const proto::PhaseSummary& p : s.phases()) {
    if (p.phase() == "experts") experts = p.sim_ns();
  }
  std::string out = StrPrintf("  moe layer: %.3f us simulated; per rank: weights %.2f MiB; host %.1f s\n"
                              "  experts phase: %.3f us on rank %d (the longest; the all_reduce and "
                              "all_to_all_v after it wait for it, so it sets the step), %.3f us on the "
                              "shortest\n",
                              s.step_sim_ns() / 1000.0, s.weight_bytes_per_rank() / 1048576.0,
                              s.host_ms() / 1000.0, experts / 1000.0, s.slowest_rank(),
                              s.fastest_experts_sim_ns() / 1000.0);
  if (s.expert_rows_per_rank().empty()) return out;
  int64_t most = 0, least = s.expert_rows_per_rank(0), sum = 0;
  int busiest = 0;
  for (int r = 0; r < s.expert_rows_per_rank_size(); ++r) {
    const int64_t n = s.expert_rows_per_rank(r);
    if (n > most) busiest = r;
    most = std::max(most, n);
    least = std::min(least, n);
    sum += n;
  }
  out += "  token rows per rank (received by its experts):";
  for (int64_t n : s.expert_rows_per_rank()) out += StrCat(" ", n);
  out += StrPrintf("\n  busiest rank %d: %lld rows, least %lld, mean %.1f (busiest / mean %.2fx)\n", busiest,
                   static_cast<long long>(most), static_cast<long long>(least),
                   static_cast<double>(sum) / s.expert_rows_per_rank_size(),
                   sum > 0 ? most * static_cast<double>(s.expert_rows_per_rank_size()) / sum : 0.0);
  return out;
}

}  // namespace

std::string FormatReport(const proto::RunReport& report) {
  std::string out = StrPrintf("nkisim run %s: %u ranks, %s, wall %.1f s, peak RSS %.0f MiB %s",
                         report.config().c_str(), report.world_size(), report.workload().c_str(),
                         report.wall_s(), report.peak_rss_mib(),
                         report.in_process() ? "(one process: the ranks are its threads)"
                                             : "per rank (largest)");
  if (report.peak_rss_summed_mib() > 0) {
    out += StrPrintf(", %.2f GiB summed over ranks", report.peak_rss_summed_mib() / 1024.0);
  }
  out += "\n";
  const bool decode = report.workload() == "decode";
  const bool timed = report.timing_only();
  if (timed) {
    out += StrPrintf("mode: timing-only: simulated times as in the functional mode; no value computed "
                "or checked\n");
  }
  for (const proto::ScenarioSummary& s : report.scenarios()) {
    if (report.workload() == "moe") {  // tp = moe_tp, replicas = moe_ep (moe_config.h)
      out += StrPrintf("\n%s (moe_ep %u x moe_tp %u, lnc %u, %u instance%s): %s\n", s.name().c_str(),
                       s.replicas(), s.tp(), s.lnc(), s.instances(), s.instances() == 1 ? "" : "s",
                       timed ? "timed" : s.pass() ? "PASS" : "FAIL");
    } else {
      out += StrPrintf("\n%s (tp %u, attention_dp %u, lnc %u, %u instance%s, %u replica%s): %s\n",
                       s.name().c_str(), s.tp(), s.attention_dp(), s.lnc(), s.instances(),
                       s.instances() == 1 ? "" : "s", s.replicas(), s.replicas() == 1 ? "" : "s",
                       timed ? "timed" : s.pass() ? "PASS" : "FAIL");
    }
    out += StrPrintf("  %-16s %12s %10s %11s %12s %12s %12s %14s %14s  %-28s %s\n", "phase", "sim (us)",
                "host (ms)", "fresh (MiB)", "max abs err", "max rel err", "bound", "chain err/bnd",
                "moved (MB)", "check", "collective:algorithm@launch");
    for (const proto::PhaseSummary& p : s.phases()) {
      const std::string check = timed ? std::string("not checked")
                                      : StrCat(p.pass() ? "PASS" : "FAIL", " (", p.failures(),
                                               "/", p.elements(), " outside)");
      // Against the chain's golden: the worst rank's error over its bound (and what lies outside).
      const std::string chain =
          timed ? std::string("-")
          : p.chain_failures() > 0
              ? StrPrintf("%.2fx (%lld)", p.chain_worst_ratio(), static_cast<long long>(p.chain_failures()))
              : StrPrintf("%.2fx", p.chain_worst_ratio());
      // In one process (ranks as threads) the page faults are the process's, not a rank's.
      const std::string fresh = report.in_process() ? std::string("-")
                                                    : StrPrintf("%.1f", p.fresh_bytes() / 1048576.0);
      out += StrPrintf("  %-16s %12.3f %10.1f %11s %12.3e %12.3e %12.3e %14s %14.3f  %-28s %s\n",
                  p.phase().c_str(), p.sim_ns() / 1000.0, p.host_ms(), fresh.c_str(), p.max_abs_error(),
                  p.max_rel_error(), p.bound(), chain.c_str(), p.bytes_moved() / 1e6, check.c_str(),
                  p.algorithm().empty() ? "-" : p.algorithm().c_str());
    }
    if (report.workload() == "moe") {
      out += FormatMoeLine(s);
    } else if (decode) {
      out += StrPrintf("  decode step: %.3f us simulated (mean of %u; %u layer%s); per rank: KV cache "
                  "%.2f MiB, weights %.2f MiB; host %.1f s\n",
                  s.step_sim_ns() / 1000.0, s.steps(), std::max(1u, s.layers()),
                  s.layers() > 1 ? "s" : "", s.kv_cache_bytes_per_rank() / 1048576.0,
                  s.weight_bytes_per_rank() / 1048576.0, s.host_ms() / 1000.0);
    } else {
      out += StrPrintf("  prefill: %.3f us simulated; per rank: KV cache %.2f MiB, weights %.2f MiB; "
                  "host %.1f s\n",
                  s.step_sim_ns() / 1000.0, s.kv_cache_bytes_per_rank() / 1048576.0,
                  s.weight_bytes_per_rank() / 1048576.0, s.host_ms() / 1000.0);
    }
    if (!s.hbm_footprint().empty()) out += StrCat("  HBM per logical core: ", s.hbm_footprint(), "\n");
  }
  if (report.scenarios_size() >= 2) {
    double fastest = report.scenarios(0).step_sim_ns();
    for (const proto::ScenarioSummary& s : report.scenarios()) fastest = std::min(fastest, s.step_sim_ns());
    out += StrPrintf("\n%-22s", "side by side");
    for (const proto::ScenarioSummary& s : report.scenarios()) out += StrPrintf(" %14s", s.name().c_str());
    out += StrPrintf("\n%-22s", decode                          ? "decode step (us)"
                                 : report.workload() == "moe" ? "moe layer (us)"
                                                              : "prefill (us)");
    for (const proto::ScenarioSummary& s : report.scenarios()) out += StrPrintf(" %14.3f", s.step_sim_ns() / 1000.0);
    out += StrPrintf("\n%-22s", "vs fastest");
    for (const proto::ScenarioSummary& s : report.scenarios()) {
      out += StrPrintf(" %13.2fx", fastest > 0 ? s.step_sim_ns() / fastest : 0.0);
    }
    out += StrPrintf("\n%-22s", "KV cache/rank (MiB)");
    for (const proto::ScenarioSummary& s : report.scenarios()) {
      out += StrPrintf(" %14.2f", s.kv_cache_bytes_per_rank() / 1048576.0);
    }
    out += StrPrintf("\n%-22s", "weights/rank (MiB)");
    for (const proto::ScenarioSummary& s : report.scenarios()) {
      out += StrPrintf(" %14.2f", s.weight_bytes_per_rank() / 1048576.0);
    }
    out += "\n";
  }
  for (const proto::PlanAgreement& a : report.agreement()) {
    out += StrPrintf("layer output %s vs %s: max |diff| %.3e, bound %.3e over %lld values: %s\n",
                a.plan().c_str(), a.reference().c_str(), a.max_abs_diff(), a.bound(),
                static_cast<long long>(a.compared()), a.pass() ? "AGREE" : "DIFFER");
  }
  out += StrPrintf("\nresult: %s\n", timed         ? "DONE (timing-only: nothing checked)"
                               : report.pass() ? "PASS"
                                               : "FAIL");
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
  for (size_t si = 0; si < scenario.plans.size(); ++si) {
    const std::string& name = scenario.plans[si].name;
    for (const auto& [rank, result] : results) {
      const int pid = static_cast<int>(si) * world + rank;
      trace.NameProcess(pid, StrCat(name, " rank ", rank));
      // The phases on a thread of their own, above the engines.
      constexpr int kPhaseTid = 1000;
      trace.NameThread(pid, kPhaseTid, "phases");
      for (const proto::PhaseResult& p : result.phases()) {
        if (p.scenario() != name) continue;
        trace.AddEvent({p.phase(), "Phase", pid, kPhaseTid, p.start_ns(), p.end_ns(), p.bytes_moved(), 0,
                        p.algorithm()});
      }
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
