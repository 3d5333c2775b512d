// One rank's whole part of a `nkisim run` job: every plan of the scenario in turn on a fresh
// logical core, its phases reported through `sink`, the result (phases, footprints, simulated
// step time, host time, trace records) returned for the launcher. The MPI rank (run_rank.cc)
// and the in-process timing-only job (in_process.cc) both run exactly this.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "model/phase_runner.h"
#include "model/scenario_config.h"
#include "proto/control.pb.h"

namespace nkisim::launcher {

// Makes the rank's context for one plan's topology on `lnc` (an MPI world or a LocalFabric).
using ContextFactory = std::function<std::unique_ptr<collectives::RankContext>(
    const collectives::ResolvedTopology& topology, LogicalCore& lnc)>;

// Runs every plan of `scenario` as rank `rank`. `*phase`, when given, holds the phase running
// ("plan/phase", "" between phases) whenever this throws, for the error report. The result holds
// the timelines' records as trace events only when `with_trace` (a job without --trace would
// otherwise carry them all to the launcher for nothing). Throws what a phase throws.
proto::RankResult RunRankPlans(const ResolvedScenario& scenario, int rank,
                               const ContextFactory& make_context, const ProgressSink& sink,
                               std::string* phase, bool with_trace);

// Peak resident set (VmHWM) of this process, in MiB.
double PeakRssMib();


}  // namespace nkisim::launcher
