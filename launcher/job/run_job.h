// The job of `nkisim run CONFIG`, both sides. The launcher side (run_launcher.cc) validates the
// scenario, serves the control plane, starts the ranks under mpirun, supervises them through a
// Monitor (monitor.h), stops the whole job on the first failure (naming the rank, the phase and
// why) and writes the report and the trace (run_report.h). The rank side (run_rank.cc) is one
// rank of that job: one MPI process, one logical core, the scenario's phases.
#pragma once

#include <chrono>
#include <string>

#include "launcher/control/server.h"
#include "launcher/job/mpirun.h"
#include "launcher/scenarios/scenario_config.h"

namespace nkisim::launcher {

struct RunOptions {
  std::string config;
  std::string report_json = "nkisim-run.report.json";
  std::string trace = "nkisim-run.trace.json";
  std::string mpirun = "mpirun";
  std::string control;  // rank mode: the launcher's host:port
  bool as_rank = false;
};

// The launcher side; returns the process exit code.
int RunLauncher(const RunOptions& options);
// The rank side (inside mpirun); returns the process exit code. Without options.control (a plain
// `mpirun ... nkisim run CONFIG`), rank 0 serves the control plane and supervises the job itself.
int RunRank(const RunOptions& options);

// Watches the ranks through `server` until every rank reported (or `job`, when given, ended),
// printing progress; on success prints and writes the report and trace. Returns the exit code;
// on a failure it stops `job` (when given) and names the rank, the phase and why.
int Supervise(const RunOptions& options, const ResolvedScenario& scenario,
              control::Server& server, Job* job, std::chrono::steady_clock::time_point start);

}  // namespace nkisim::launcher
