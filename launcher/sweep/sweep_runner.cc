#include "launcher/sweep/sweep_runner.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <boost/process.hpp>

#include "launcher/job/mpirun.h"
#include "launcher/job/stop_signals.h"
#include "proto/report.pb.h"
#include "runtime/error.h"
#include "runtime/output_file.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {
namespace {

namespace bp = boost::process;
using Clock = std::chrono::steady_clock;

// How long a stopped `nkisim run` may take to stop its mpirun and ranks before it is killed.
constexpr auto kStopGrace = std::chrono::seconds(15);


// One `nkisim run`: stdout and stderr to a log file, stdin from /dev/null, in a process group of
// its own so that stopping it reaches mpirun and the ranks too.
class LoggedProcess {
 public:
  LoggedProcess(const std::string& program, const std::vector<std::string>& args,
                const std::string& log) {
    try {
      child_ = bp::child(bp::exe = program, bp::args = args,
                         (bp::std_out & bp::std_err) > boost::filesystem::path(log),
                         bp::std_in < bp::null, group_);
    } catch (const std::exception& e) {
      Raise(ErrorCode::kBadConfig, StrCat("cannot start '", program, "': ", e.what()));
    }
  }
  ~LoggedProcess() {
    if (!Poll()) Stop();
  }
  LoggedProcess(const LoggedProcess&) = delete;
  LoggedProcess& operator=(const LoggedProcess&) = delete;

  // The exit code once ended (128 + signal when killed by one).
  std::optional<int> Poll() {
    if (exit_code_) return exit_code_;
    std::error_code ec;
    if (child_.running(ec) || ec) return std::nullopt;
    const int native = child_.native_exit_code();
    exit_code_ = WIFSIGNALED(native) ? 128 + WTERMSIG(native) : WEXITSTATUS(native);
    return exit_code_;
  }
  // SIGTERM to the group (`nkisim run` then stops mpirun itself), SIGKILL after kStopGrace.
  void Stop() {
    if (Poll()) return;
    ::kill(-group_.native_handle(), SIGTERM);
    const auto deadline = Clock::now() + kStopGrace;
    while (!Poll() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!Poll()) {
      std::error_code ec;
      group_.terminate(ec);
      child_.wait(ec);
      Poll();
    }
  }

 private:
  bp::group group_;
  bp::child child_;
  std::optional<int> exit_code_;
};

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Seconds(double s) {
  if (s < 9.95) {
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, "%.1f s", s);
    return buffer;
  }
  if (s < 59.5) return StrCat(static_cast<int>(s + 0.5), " s");
  const int total = static_cast<int>(s + 0.5);
  return total < 3600 ? StrCat(total / 60, " min ", total % 60, " s")
                      : StrCat(total / 3600, " h ", total % 3600 / 60, " min");
}

// Why a run failed, from its log: the launcher's "nkisim run: FAILED after T s: <why>; the job
// was stopped", else the top-level "nkisim: <code>: <message>" (with the problem lines under it),
// else the log's last line.
std::string FailureOf(const std::string& log_text, int exit_code) {
  std::vector<std::string> lines;
  std::istringstream in(log_text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string why;
  for (size_t i = lines.size(); i-- > 0 && why.empty();) {
    const std::string& line = lines[i];
    if (line.rfind("nkisim run: FAILED after ", 0) == 0) {
      const size_t colon = line.find(" s: ");
      why = colon == std::string::npos ? line : line.substr(colon + 4);
      const std::string stopped = "; the job was stopped";
      if (why.size() > stopped.size() && why.compare(why.size() - stopped.size(), stopped.size(), stopped) == 0) {
        why.resize(why.size() - stopped.size());
      }
    } else if (line.rfind("nkisim: ", 0) == 0) {
      why = line.substr(8);
      for (size_t j = i + 1; j < lines.size() && lines[j].rfind("  ", 0) == 0; ++j) why += StrCat(" ", lines[j].substr(2));
    }
  }
  if (why.empty()) {
    for (size_t i = lines.size(); i-- > 0 && why.empty();) why = lines[i];
  }
  if (why.empty()) why = "no output";
  return StrCat("exit ", exit_code, ": ", why);
}

// What one `nkisim run` gave.
struct RunOutcome {
  int exit_code = 0;
  std::optional<proto::RunReport> report;
  std::string log;
  std::string error;  // the failure, when exit_code != 0
  double wall_s = 0;
  bool interrupted = false;  // stopped by a signal to the sweep before it ended by itself
};

struct Runner {
  const ResolvedSweep& sweep;
  const SweepRunOptions& options;
  std::string program;
  std::string dir;  // <out>.points

  // Runs `scenario` as <dir>/<name>.textproto; waits, checking for a stop signal every 50 ms (on
  // one it stops the run, and sets *stop_signal; a run that still ends with exit 0 counts).
  RunOutcome Run(const std::string& name, const proto::Scenario& scenario, int* stop_signal) {
    const std::string config = StrCat(dir, "/", name, ".textproto");
    const std::string report = StrCat(dir, "/", name, ".report.json");
    RunOutcome out;
    out.log = StrCat(dir, "/", name, ".log");
    WriteFileAtomically(config, StrCat("# ", sweep.source, ": generated by nkisim sweep\n",
                                       ScenarioText(scenario)),
                        "point scenario");
    std::error_code ec;
    std::filesystem::remove(report, ec);
    std::vector<std::string> args = {"run", config, "--report", report, "--trace", "", "--mpirun",
                                     options.mpirun};
    if (options.timing_only) args.push_back("--timing-only");
    const Clock::time_point start = Clock::now();
    {
      LoggedProcess process(program, args, out.log);
      while (!process.Poll()) {
        if (StopSignals::Received() != 0 && *stop_signal == 0) {
          *stop_signal = StopSignals::Received();
          process.Stop();
          if (*process.Poll() != 0) {
            out.exit_code = 128 + *stop_signal;
            out.error = StrCat("interrupted by ", strsignal(*stop_signal));
            out.interrupted = true;
            return out;
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      out.exit_code = *process.Poll();
    }
    out.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
    if (out.exit_code == 2) {
      Raise(ErrorCode::kBadConfig,
            StrCat("'", program, " run' refused its command line (exit 2, a usage error): ",
                   FailureOf(ReadText(out.log), 2), " (log: ", out.log, ")"));
    }
    if (out.exit_code != 0) out.error = FailureOf(ReadText(out.log), out.exit_code);
    if (out.exit_code == 0 || out.exit_code == 1) {  // 1: a check failed; the report is written
      std::string text = ReadText(report);
      proto::RunReport parsed;
      google::protobuf::util::JsonParseOptions parse;
      parse.ignore_unknown_fields = true;  // a newer report's fields
      const auto status = google::protobuf::util::JsonStringToMessage(text, &parsed, parse);
      if (!text.empty() && status.ok()) {
        out.report = std::move(parsed);
      } else if (out.exit_code == 0) {
        out.exit_code = -1;
        out.error = StrCat("the report ", report, " is ",
                           text.empty() ? "missing" : StrCat("not valid: ", status.message().ToString()));
      }
    }
    return out;
  }

  // The point's result from a report that has its plan.
  PointResult FromReport(const SweepPoint& point, const RunOutcome& run) const {
    PointResult r = Base(point, run);
    const proto::RunReport& report = *run.report;
    const proto::ScenarioSummary* s = nullptr;
    for (const proto::ScenarioSummary& candidate : report.scenarios()) {
      if (candidate.name() == point.plan) s = &candidate;
    }
    if (s == nullptr) {
      r.error = StrCat("the report of ", run.log, " has no plan '", point.plan, "'");
      return r;
    }
    r.has_times = true;
    for (const proto::PhaseSummary& p : s->phases()) {
      r.phase_us.emplace_back(p.phase(), p.sim_ns() / 1000.0);
      if (!p.algorithm().empty()) r.phase_algorithm[p.phase()] = p.algorithm();
    }
    r.step_us = s->step_sim_ns() / 1000.0;
    r.kv_cache_mib = static_cast<double>(s->kv_cache_bytes_per_rank()) / 1048576.0;
    r.weights_mib = static_cast<double>(s->weight_bytes_per_rank()) / 1048576.0;
    r.host_s = s->host_ms() / 1000.0;
    r.job_wall_s = report.wall_s();
    std::string why;
    for (const proto::PhaseSummary& p : s->phases()) {
      if (!p.pass()) {
        why += StrCat(why.empty() ? "" : "; ", "check failed: ", p.phase(), " (", p.failures(), " of ",
                      p.elements(), " outside the bound ", p.bound(), ")");
      }
    }
    for (const proto::PlanAgreement& a : report.agreement()) {
      if (a.plan() == point.plan && !a.pass()) {
        why += StrCat(why.empty() ? "" : "; ", "layer output differs from ", a.reference(),
                      "'s: max |diff| ", a.max_abs_diff(), " > bound ", a.bound());
      }
    }
    if (why.empty() && !s->pass()) why = "the plan failed its checks";
    r.ok = why.empty();
    r.error = why;
    return r;
  }

  PointResult Failed(const SweepPoint& point, const RunOutcome& run) const {
    PointResult r = Base(point, run);
    r.error = run.error.empty() ? StrCat("exit ", run.exit_code) : run.error;
    return r;
  }

  PointResult Base(const SweepPoint& point, const RunOutcome& run) const {
    PointResult r;
    r.key = point.key;
    r.fingerprint = point.fingerprint;
    r.mode = SimModeName(options.timing_only ? SimMode::kTimingOnly : SimMode::kFunctional);
    r.log = run.log;
    r.job_wall_s = run.wall_s;
    return r;
  }
};

}  // namespace


SweepRun RunSweep(const ResolvedSweep& sweep, const SweepRunOptions& options,
                  const std::map<std::string, PointResult>& recorded,
                  const std::function<void(const std::vector<std::optional<PointResult>>&)>& after_job) {
  const Clock::time_point start = Clock::now();
  const std::string mode =
      SimModeName(options.timing_only ? SimMode::kTimingOnly : SimMode::kFunctional);
  SweepRun run;
  run.points.resize(sweep.points.size());
  for (const SweepPoint& point : sweep.points) {
    const auto found = recorded.find(point.key);
    if (found != recorded.end() && found->second.ok && found->second.fingerprint == point.fingerprint &&
        found->second.mode == mode) {
      run.points[point.index] = found->second;
      ++run.reused;
    }
  }
  Runner runner{sweep, options, options.nkisim.empty() ? SelfExecutable() : options.nkisim,
                options.out + ".points"};
  PrepareOutputDir(runner.dir, "--out: the directory of the points' scenarios, reports and logs");
  std::vector<const SweepJob*> to_run;
  int points_to_run = 0;
  for (const SweepJob& job : sweep.jobs) {
    int pending = 0;
    for (int p : job.points) pending += !run.points[p].has_value();
    if (pending > 0) to_run.push_back(&job);
    points_to_run += pending;
  }
  const int total = static_cast<int>(sweep.points.size());
  std::fprintf(stderr, "nkisim sweep %s: %d points, %d to run in %zu job%s (%d reused), %s; logs in %s/\n",
               sweep.source.c_str(), total, points_to_run, to_run.size(), to_run.size() == 1 ? "" : "s",
               run.reused, mode.c_str(), runner.dir.c_str());
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  int done = run.reused, failed = 0, ran = 0;
  const auto progress = [&](const std::string& what, bool final) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    std::string line = StrCat("nkisim sweep: ", what, " | ", done, "/", total, " points, ", failed,
                              " failed | elapsed ", Seconds(elapsed));
    if (ran > 0 && done < total) {
      line += StrCat(", ETA ", Seconds(elapsed / ran * (total - done)));
    }
    if (tty) {
      std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
    } else if (final) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
    std::fflush(stderr);
  };
  StopSignals signals;
  for (size_t j = 0; j < to_run.size() && run.stop_signal == 0; ++j) {
    const SweepJob& job = *to_run[j];
    std::vector<int> pending;
    for (int p : job.points) {
      if (!run.points[p].has_value()) pending.push_back(p);
    }
    const std::string name = StrCat("job", job.index < 100 ? (job.index < 10 ? "00" : "0") : "", job.index);
    const std::string what = StrCat("job ", j + 1, "/", to_run.size(), " ", sweep.shapes[job.shape].label,
                                    " (", pending.size(), " plan", pending.size() == 1 ? "" : "s", ", ",
                                    job.world_size, " ranks)");
    progress(what + ": running", false);
    const Clock::time_point job_start = Clock::now();
    const RunOutcome outcome = runner.Run(name, JobScenario(sweep, pending), &run.stop_signal);
    if (outcome.interrupted) break;
    if (outcome.report) {
      for (int p : pending) run.points[p] = runner.FromReport(sweep.points[p], outcome);
    } else if (pending.size() == 1) {
      run.points[pending[0]] = runner.Failed(sweep.points[pending[0]], outcome);
    } else if (run.stop_signal == 0) {
      // One point may have failed the whole job: run each alone, for its own result or error.
      progress(StrCat(what, ": failed (", outcome.error, "); running its points one by one"), true);
      for (int p : pending) {
        const SweepPoint& point = sweep.points[p];
        progress(StrCat(what, ": ", point.plan, " alone"), false);
        const RunOutcome alone =
            runner.Run(StrCat(name, ".", point.plan), JobScenario(sweep, {p}), &run.stop_signal);
        if (alone.interrupted) break;
        run.points[p] = alone.report ? runner.FromReport(point, alone) : runner.Failed(point, alone);
        if (run.stop_signal != 0) break;
      }
    }
    if (std::any_of(pending.begin(), pending.end(), [&](int p) { return !run.points[p].has_value(); })) {
      break;  // interrupted: the points of this job that have a result are kept
    }
    int job_failed = 0;
    for (int p : pending) job_failed += !run.points[p]->ok;
    done += static_cast<int>(pending.size());
    ran += static_cast<int>(pending.size());
    failed += job_failed;
    progress(StrCat(what, ": ", job_failed == 0 ? "ok" : StrCat(job_failed, " failed"), " in ",
                    Seconds(std::chrono::duration<double>(Clock::now() - job_start).count())),
             true);
    after_job(run.points);
  }
  if (run.stop_signal != 0) {
    progress(StrCat("interrupted by ", strsignal(run.stop_signal), ": the sweep stops here"), true);
    after_job(run.points);
  }
  return run;
}

}  // namespace nkisim::launcher
