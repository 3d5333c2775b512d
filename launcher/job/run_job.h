// The job of `nkisim run CONFIG`, both sides. The launcher side (run_launcher.cc) validates the
// scenario, serves the control plane, starts the ranks under mpirun, supervises them through a
// Monitor (monitor.h), stops the whole job on the first failure (naming the rank, the phase and
// why) and writes the report and the trace (run_report.h). The rank side (run_rank.cc) is one
// rank of that job: one MPI process, one logical core, the scenario's phases. In the timing-only
// mode the launcher runs the ranks as threads of its own process instead (in_process.cc), with
// the same supervision and report, unless the scenario needs processes (a hostfile, a fault that
// kills or hangs a rank) or --mpirun-ranks asks for them.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "launcher/control/server.h"
#include "launcher/job/mpirun.h"
#include "model/scenario_config.h"

namespace nkisim::launcher {

struct RunOptions {
  std::string config;
  std::string report_json = "nkisim-run.report.json";
  std::string trace = "nkisim-run.trace.json";
  std::string mpirun = "mpirun";
  std::string control;  // rank mode: the launcher's host:port
  bool as_rank = false;
  bool timing_only = false;  // clocks only: no values computed or checked (runtime/sim_mode.h)
  bool mpirun_ranks = false;  // timing-only: ranks as MPI processes, not threads of the launcher
  bool in_process = false;    // set by RunInProcess: the ranks are threads of this process
};

// The launcher side; returns the process exit code.
int RunLauncher(const RunOptions& options);
// The timing-only job with its ranks as threads of this process (in_process.cc): no mpirun, the
// clocks joined through a LocalFabric, supervised and reported as RunLauncher does.
int RunInProcess(const RunOptions& options, const ResolvedScenario& scenario,
                 std::chrono::steady_clock::time_point start);
// The rank side (inside mpirun); returns the process exit code. Without options.control (a plain
// `mpirun ... nkisim run CONFIG`), rank 0 serves the control plane and supervises the job itself.
int RunRank(const RunOptions& options);

// Watches the ranks through `server` until every rank reported (or `job`, when given, ended),
// printing progress; on success prints and writes the report and trace. Returns the exit code;
// on a failure it stops `job` (when given) and names the rank, the phase and why.
// Where the supervisor's events come from: the next one within `timeout`, or none.
using EventSource =
    std::function<std::optional<control::Event>(std::chrono::milliseconds timeout)>;
int Supervise(const RunOptions& options, const ResolvedScenario& scenario, control::Server& server,
              Job* job, std::chrono::steady_clock::time_point start);
// The same over any event source; `channel` says where the ranks report ("control plane
// 127.0.0.1:4000", "ranks as threads of this process").
int Supervise(const RunOptions& options, const ResolvedScenario& scenario, const EventSource& next,
              const std::string& channel, Job* job, std::chrono::steady_clock::time_point start);

}  // namespace nkisim::launcher
