#include "model/rank_plans.h"

#include <chrono>
#include <fstream>

#include "model/workload.h"

namespace nkisim::launcher {
namespace {

void AppendTrace(const LogicalCore& lnc, const std::string& scenario, proto::RankResult& result) {
  for (int c = 0; c < lnc.lnc(); ++c) {
    const Timeline& clock = lnc.core(c).timeline();
    for (const std::vector<InstructionRecord>* records : {&clock.records(), &clock.shares()}) {
     for (const InstructionRecord& r : *records) {
      proto::TraceEvent& e = *result.add_trace();
      e.set_name(r.name);
      e.set_core(static_cast<uint32_t>(c));
      e.set_engine(static_cast<uint32_t>(EngineIndex(r.engine)));
      e.set_start_ns(r.start_ns);
      e.set_end_ns(r.end_ns);
      e.set_bytes(r.bytes);
      e.set_flops(r.flops);
      e.set_operands(r.shapes.data());
      e.set_scenario(scenario);
     }
    }
  }
}

}  // namespace

double PeakRssMib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

proto::RankResult RunRankPlans(const ResolvedScenario& sc, int rank,
                               const ContextFactory& make_context, const ProgressSink& sink,
                               std::string* phase, bool with_trace) {
  proto::RankResult result;
  SharedInputs shared;
  const WorkloadInfo& workload = FindWorkload(sc.workload);
  const double steps = sc.workload == Workload::kDecode ? sc.spec.steps() : 1;
  for (const ResolvedPlan& plan : sc.plans) {
    const auto plan_start = std::chrono::steady_clock::now();
    LogicalCore lnc(plan.lnc, sc.profile, rank);
    // Without a trace only the collectives' records are read (the report's algorithm column).
    for (int c = 0; c < lnc.lnc(); ++c) {
      lnc.core(c).timeline().set_keep(with_trace ? Timeline::Keep::kAll : Timeline::Keep::kCollectives);
      lnc.core(c).timeline().set_keep_shares(false);
    }
    const std::unique_ptr<collectives::RankContext> ctx = make_context(plan.topology, lnc);
    PhaseRunner runner(sink, lnc, rank, plan.name, sc.spec, result);
    PlanRun run{sc, plan, *ctx, runner, shared, result};
    ScenarioFootprint footprint;
    try {
      footprint = workload.run(run);
    } catch (...) {
      if (phase) *phase = runner.current();
      throw;
    }
    (*result.mutable_kv_cache_bytes())[plan.name] = footprint.kv_cache_bytes;
    (*result.mutable_weight_bytes())[plan.name] = footprint.weight_bytes;
    (*result.mutable_step_sim_ns())[plan.name] = lnc.now() / steps;
    (*result.mutable_host_ms())[plan.name] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - plan_start)
            .count();
    if (with_trace) AppendTrace(lnc, plan.name, result);
  }
  return result;
}

}  // namespace nkisim::launcher
