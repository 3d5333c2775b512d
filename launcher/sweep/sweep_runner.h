// Running the points of a sweep: each job is one `nkisim run` of a generated scenario (the job's
// plans side by side), started as a subprocess of this executable with its output in a log file;
// its JSON report gives every point's simulated times and memory. A job that fails is rerun
// point by point, so that each failing point gets its own error and the others their results;
// a failed point is recorded with its error and the sweep goes on.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/sweep/sweep_config.h"

namespace nkisim::launcher {

// What one point gave.
struct PointResult {
  std::string key;           // SweepPoint::key
  std::string fingerprint;   // SweepPoint::fingerprint of the run that gave it
  std::string mode;          // "timing-only" or "functional"
  bool ok = false;
  std::string error;         // why the point failed ("" when ok)
  std::string log;           // the log of the run that gave the result
  // From the report (has_times false when the run wrote none, e.g. it failed).
  bool has_times = false;
  std::vector<std::pair<std::string, double>> phase_us;  // simulated, slowest rank, report order
  std::map<std::string, std::string> phase_algorithm;    // "all_reduce:mesh"; only collectives
  double step_us = 0;        // decode step (mean over steps) or prefill, simulated
  double kv_cache_mib = 0;   // per rank, largest
  double weights_mib = 0;    // per rank, largest
  double host_s = 0;         // host time of the plan, slowest rank
  double job_wall_s = 0;     // wall time of the whole `nkisim run` job that gave it
};

struct SweepRunOptions {
  std::string out;                // output prefix: generated files go to <out>.points/
  bool timing_only = true;        // pass --timing-only to `nkisim run` (else: functional)
  std::string mpirun = "mpirun";  // passed to `nkisim run --mpirun`
  std::string nkisim;             // the executable to run; empty: this one (/proc/self/exe)
};


struct SweepRun {
  std::vector<std::optional<PointResult>> points;  // per point index; empty: not run
  int reused = 0;         // points taken from `recorded`
  int stop_signal = 0;    // the signal that stopped the sweep early, 0 when it ran to the end
};

// The results per point index: the recorded ones that still hold (same key, fingerprint and mode,
// and ok: failed points run again) plus those of the jobs run now. Runs the jobs in order, one at
// a time, printing a progress line per job on stderr (points done / total, failed, elapsed, ETA),
// and calls after_job(results) after each job (to write the outputs so far). On SIGINT, SIGTERM
// or SIGHUP it stops the running job (and its ranks) and returns early with stop_signal set.
// Throws Error(kBadConfig) when `nkisim run` cannot be started or refuses its command line (exit
// 2: a usage error is the sweep's, not a point's), or <out>.points/ cannot be made.
SweepRun RunSweep(
    const ResolvedSweep& sweep, const SweepRunOptions& options,
    const std::map<std::string, PointResult>& recorded,
    const std::function<void(const std::vector<std::optional<PointResult>>&)>& after_job);


}  // namespace nkisim::launcher
