// The launcher's view of a running job, as the control plane reports it: which ranks connected,
// which phase each is in, which finished (their results), and when one must be declared stalled.
// No I/O of its own but the progress lines it hands to its printer, and no clock of its own: every
// call that needs the time takes it, so tests drive it with made-up times.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "launcher/control/server.h"
#include "model/scenario_config.h"
#include "proto/control.pb.h"
#include "runtime/error.h"

namespace nkisim::launcher {

// Why the job must stop, and the exit code that says so.
struct Failure {
  std::string message;
  ErrorCode code = ErrorCode::kCommError;
  bool failed() const { return !message.empty(); }
};

// What the monitor needs of the scenario.
struct MonitorLimits {
  int world_size = 1;
  double stall_timeout_s = 30;     // a connected rank without progress this long is stalled
  double startup_timeout_s = 300;  // how long a rank may take to connect at all

  static MonitorLimits Of(const ResolvedScenario& scenario);
};

class Monitor {
 public:
  using Clock = std::chrono::steady_clock;
  // Receives each progress line ("  [1.2 s] decode/qkv: all 64 ranks done"); default: stdout.
  using Printer = std::function<void(const std::string&)>;

  // `start` is when the job started: every rank's silence is counted from it until it speaks.
  Monitor(const MonitorLimits& limits, Clock::time_point start, Printer print = {});

  // Handles one event received at `now`; returns a failure when the job must stop (a rank
  // reported an error, lost its connection before its result, or is not one of the job's). A
  // hello whose world_size is not the scenario's is a bad config (kBadConfig), from any rank.
  Failure Handle(const control::Event& e, Clock::time_point now);

  // At `now`: a rank that made no progress (no phase started or finished) for longer than the
  // stall timeout, or that has not connected within the start-up timeout. Ranks blocked in a
  // collective are usually waiting for a peer: the one named is a stalled rank that is not in a
  // collective (it hangs by itself); failing that, the first one.
  Failure CheckStalls(Clock::time_point now) const;

  // At most every 2 s, when something changed: one line of where the ranks are.
  void DrawProgress(Clock::time_point now);

  bool AllResults() const { return static_cast<int>(results_.size()) == limits_.world_size; }
  const std::map<int, proto::RankResult>& results() const { return results_; }
  // "scenario/phase" the rank is in, or "(between phases)".
  std::string PhaseOf(int rank) const;
  // The lowest rank without a result, -1 when every rank reported.
  int FirstWithoutResult() const;
  // Seconds since the start at `now`, "12.3".
  std::string Elapsed(Clock::time_point now) const;

 private:
  Failure WorldMismatch(const control::Event& e) const;
  Failure OutsideRank(const control::Event& e) const;
  static ErrorCode KnownCode(uint32_t code);

  MonitorLimits limits_;
  Clock::time_point start_;
  Printer print_;
  std::vector<Clock::time_point> last_seen_;
  std::vector<Clock::time_point> last_progress_;
  std::vector<std::string> waiting_in_;
  std::vector<std::string> phase_;
  std::set<int> hello_;
  std::map<std::string, int> done_;
  std::map<int, proto::RankResult> results_;
  bool dirty_ = false;
  Clock::time_point last_draw_;
};

}  // namespace nkisim::launcher
