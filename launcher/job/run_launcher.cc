// The launcher side of `nkisim run`: supervises the ranks through the control plane.
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>

#include <algorithm>
#include <array>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "launcher/control/server.h"
#include "launcher/job/monitor.h"
#include "launcher/job/mpirun.h"
#include "launcher/job/stop_signals.h"
#include "launcher/job/run_job.h"
#include "model/run_report.h"
#include "model/scenario_config.h"
#include "runtime/config_file.h"
#include "runtime/error.h"
#include "runtime/output_file.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// How long mpirun may take to abort by itself after a rank failed or died, before it is stopped.
constexpr auto kAbortGrace = std::chrono::seconds(3);

// How long mpirun may take to exit once every rank has reported; then it is stopped.
constexpr auto kExitDeadline = std::chrono::seconds(10);

// How long a lost rank's failure waits for a classified one (an error report) to overtake it.
constexpr auto kClassifyGrace = std::chrono::milliseconds(500);

// A lost control connection is often the echo of another rank's classified failure (mpirun ends
// every rank once one aborts), and the server may read the dead rank's end of stream before the
// failed rank's report: an error report that arrives within kClassifyGrace decides the exit code.
Failure PreferClassified(Failure failure, Monitor& monitor, const EventSource& next) {
  const Clock::time_point until = Clock::now() + kClassifyGrace;
  while (failure.code == ErrorCode::kCommError && Clock::now() < until) {
    std::optional<control::Event> e = next(std::chrono::milliseconds(50));
    if (!e) continue;
    const Failure f = monitor.Handle(*e, Clock::now());
    if (f.failed() && f.code != ErrorCode::kCommError) failure = f;
  }
  return failure;
}

// After a failure: the outputs this run would have written are not left from an earlier run.
void RemoveStaleOutputs(const RunOptions& o) {
  for (const std::string& path : {o.report_json, o.trace}) {
    std::error_code ec;
    if (!path.empty() && std::filesystem::remove(path, ec)) {
      std::fprintf(stderr, "nkisim run: removed %s, an earlier run's output\n", path.c_str());
    }
  }
}

void PrintHeader(const RunOptions& o, const ResolvedScenario& sc, const std::string& channel) {
  std::printf("nkisim run %s: %d ranks, %s, plans:", o.config.c_str(), sc.world_size(),
              sc.spec.workload().c_str());
  for (const ResolvedPlan& p : sc.plans) std::printf(" %s", p.name.c_str());
  std::printf("\n  %s; stall timeout %.1f s (start-up %.0f s)\n", channel.c_str(),
              sc.spec.control().stall_timeout_s(), sc.spec.control().startup_timeout_s());
  std::fflush(stdout);
}

}  // namespace

int Supervise(const RunOptions& o, const ResolvedScenario& sc, control::Server& server, Job* job,
              std::chrono::steady_clock::time_point start) {
  return Supervise(
      o, sc, [&server](std::chrono::milliseconds timeout) { return server.Next(timeout); },
      StrCat("control plane ", server.host(), ":", server.port()), job, start);
}

int Supervise(const RunOptions& o, const ResolvedScenario& sc, const EventSource& next,
              const std::string& channel, Job* job, std::chrono::steady_clock::time_point start) {
  PrintHeader(o, sc, channel);
  std::optional<StopSignals> signals;
  if (job) signals.emplace();  // under a plain mpirun, mpirun owns the signals
  Monitor monitor(MonitorLimits::Of(sc), start);
  Failure failure;
  int stop_signal = 0;
  std::optional<Clock::time_point> all_in;
  while (!failure.failed() && !(job == nullptr && monitor.AllResults())) {
    if (StopSignals::Received() != 0) {
      stop_signal = StopSignals::Received();
      failure = {StrCat("interrupted by ", strsignal(stop_signal)), ErrorCode::kInternal};
      break;
    }
    if (std::optional<control::Event> e = next(std::chrono::milliseconds(100))) {
      failure = monitor.Handle(*e, Clock::now());
      continue;
    }
    monitor.DrawProgress(Clock::now());
    if (job && monitor.AllResults()) {
      if (!all_in) all_in = Clock::now();
      if (Clock::now() - *all_in > kExitDeadline && !job->Poll()) {
        std::fprintf(stderr,
                     "nkisim run: every rank reported, but mpirun had not exited %lld s later; "
                     "stopping it\n",
                     static_cast<long long>(kExitDeadline.count()));
        job->Stop();
        break;
      }
    }
    if (std::optional<int> code = job ? job->Poll() : std::nullopt) {
      if (monitor.AllResults() && *code == 0) break;
      // Late messages may still be queued: drain them before judging. After a clean exit every
      // rank has sent its result, which a loaded machine may take a while to read and parse (a
      // rank's result with its trace records): wait up to 2 s of quiet for them; after a failure,
      // 200 ms (the job is being torn down).
      const auto quiet = std::chrono::milliseconds(*code == 0 ? 2000 : 200);
      while (std::optional<control::Event> e = next(quiet)) {
        if (!failure.failed()) failure = monitor.Handle(*e, Clock::now());
      }
      if (!failure.failed() && !monitor.AllResults()) {
        const int r = monitor.FirstWithoutResult();
        failure = {
            StrCat("rank ", r, " in phase ", monitor.PhaseOf(r), ": mpirun exited with code ",
                   *code, " before the rank reported its result"),
            ErrorCode::kCommError};
      }
      break;
    }
    failure = monitor.CheckStalls(Clock::now());
  }
  if (failure.failed()) {
    if (stop_signal == 0) failure = PreferClassified(failure, monitor, next);
    if (job) {
      // A rank that failed or died makes mpirun abort the job by itself; signalling an mpirun
      // that is already aborting can crash it, so it gets a moment first. A stall or a signal
      // to the launcher needs the stop at once.
      const bool mpirun_aborts = failure.code == ErrorCode::kCommError ||
                                 (failure.code != ErrorCode::kTimeout && stop_signal == 0);
      if (mpirun_aborts) job->WaitFor(kAbortGrace);
      job->Stop();  // also ends ranks an exited (or killed) mpirun left behind
    }
    std::fprintf(stderr, "nkisim run: FAILED after %s s: %s; the job was stopped\n",
                 monitor.Elapsed(Clock::now()).c_str(), failure.message.c_str());
    RemoveStaleOutputs(o);
    return stop_signal != 0 ? 128 + stop_signal : ExitCodeFor(failure.code);
  }
  const double wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  const proto::RunReport report =
      BuildReport(sc, monitor.results(), wall_s, o.timing_only, o.in_process);
  std::printf("\n%s", FormatReport(report).c_str());
  WriteReportJson(report, o.report_json);
  std::printf("report: %s\n", o.report_json.c_str());
  if (!o.trace.empty()) {
    WriteRunTrace(sc, monitor.results(), o.trace);
    std::printf("trace: %s (open in the Perfetto UI)\n", o.trace.c_str());
  }
  return report.pass() ? 0 : 1;
}

int RunLauncher(const RunOptions& o) {
  const Clock::time_point start = Clock::now();
  const ResolvedScenario sc = LoadScenario(o.config);
  // The outputs must be writable before any rank starts, not after the whole job.
  CheckWritable(o.report_json, "--report");
  if (!o.trace.empty()) CheckWritable(o.trace, "--trace");
  // What mpirun is handed is checked here, with the rule, not left to fail inside mpirun.
  if (!sc.spec.hostfile().empty()) {
    CheckRegularFile(sc.spec.hostfile(), "scenario's hostfile (hostfile:, for mpirun --hostfile)");
  }
  if (o.timing_only && sc.workload == Workload::kMoe) {
    Raise(ErrorCode::kBadConfig, StrCat(o.config, ": workload moe: --timing-only is not supported yet ",
                                        "(the token counts come from the routed values); run it without"));
  }
  // Timing-only runs its ranks as threads, unless the job needs processes: another host, or a
  // fault that kills or hangs a rank (a thread can do neither alone).
  const proto::Fault::Kind fault = sc.spec.fault().kind();
  if (o.timing_only && !o.mpirun_ranks && sc.spec.hostfile().empty() &&
      fault != proto::Fault::KILL && fault != proto::Fault::STALL) {
    return RunInProcess(o, sc, start);
  }
  control::Server server(sc.spec.control().host(), static_cast<uint16_t>(sc.spec.control().port()));
  MpirunOptions m;
  m.mpirun = o.mpirun;
  m.ranks = sc.world_size();
  m.hostfile = sc.spec.hostfile();
  m.as_root = ::geteuid() == 0;
  m.host_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  m.rank_command = {SelfExecutable(), "run",       o.config,
                    "--as-rank",      "--control", StrCat(server.host(), ":", server.port()),
                    "--trace",        o.trace};  // "": the ranks keep no trace events
  if (o.timing_only) {
    m.rank_command.push_back("--timing-only");
    PrintTimingOnlyBanner("; ranks as MPI processes");
  }
  Job job(MpirunCommand(m));
  return Supervise(o, sc, server, &job, start);
}

}  // namespace nkisim::launcher
