#include "launcher/job/monitor.h"

#include <cstdio>

namespace nkisim::launcher {

MonitorLimits MonitorLimits::Of(const ResolvedScenario& scenario) {
  return {scenario.world_size(), scenario.spec.control().stall_timeout_s(),
          scenario.spec.control().startup_timeout_s()};
}

Monitor::Monitor(const MonitorLimits& limits, Clock::time_point start, Printer print)
    : limits_(limits),
      start_(start),
      print_(print ? std::move(print)
                   : Printer([](const std::string& line) {
                       std::printf("%s\n", line.c_str());
                       std::fflush(stdout);
                     })),
      last_seen_(limits.world_size, start),
      last_progress_(limits.world_size, start),
      waiting_in_(limits.world_size),
      phase_(limits.world_size) {}

// A rank's hello says how many MPI ranks were launched: a job of another size is a bad config
// (exit 14), however the ranks go on to fail, and whichever rank says so first.
Failure Monitor::WorldMismatch(const control::Event& e) const {
  if (e.kind != control::Event::Kind::kMessage || !e.message.has_hello() ||
      e.message.hello().world_size() == static_cast<uint32_t>(limits_.world_size)) {
    return {};
  }
  return {StrCat("scenario world_size ", limits_.world_size, " does not match the ",
                 e.message.hello().world_size(), " MPI ranks launched (mpirun -n ",
                 limits_.world_size, " runs it)"),
          ErrorCode::kBadConfig};
}

// A message from a rank the job does not have: its hello or its error classify the failure;
// anything else is a broken control plane. A rank is named only when it named itself.
Failure Monitor::OutsideRank(const control::Event& e) const {
  if (Failure f = WorldMismatch(e); f.failed()) return f;
  const std::string who =
      e.rank < 0 ? std::string("a control connection that named no rank")
                 : StrCat("rank ", e.rank, ", outside the scenario's world_size ", limits_.world_size);
  if (e.message.has_error()) {
    return {StrCat(who, ": ", e.message.error().message()), KnownCode(e.message.error().code())};
  }
  return {StrCat("a control message from ", who), ErrorCode::kCommError};
}

ErrorCode Monitor::KnownCode(uint32_t code) {
  // The code comes off the wire: anything but a known code is an internal error, so a bad value
  // can never become exit code 0 or overflow.
  return code >= static_cast<uint32_t>(ErrorCode::kInvalidArgument) &&
                 code <= static_cast<uint32_t>(ErrorCode::kInternal)
             ? static_cast<ErrorCode>(code)
             : ErrorCode::kInternal;
}

Failure Monitor::Handle(const control::Event& e, Clock::time_point now) {
  if (e.rank < 0 || e.rank >= limits_.world_size) {
    if (e.kind == control::Event::Kind::kDisconnected) return {};
    return OutsideRank(e);
  }
  if (Failure f = WorldMismatch(e); f.failed()) return f;
  last_seen_[e.rank] = now;
  // Heartbeats prove the process lives; only the other messages prove it makes progress.
  if (e.kind == control::Event::Kind::kMessage && !e.message.has_heartbeat()) {
    last_progress_[e.rank] = now;
  }
  if (e.kind == control::Event::Kind::kMessage && e.message.has_heartbeat()) {
    waiting_in_[e.rank] = e.message.heartbeat().waiting_in();
  }
  if (e.kind == control::Event::Kind::kDisconnected) {
    if (results_.contains(e.rank)) return {};
    return {StrCat("rank ", e.rank, " in phase ", PhaseOf(e.rank),
                   ": lost its control connection (", e.detail, "): the rank died"),
            ErrorCode::kCommError};
  }
  const proto::RankMessage& m = e.message;
  if (m.has_hello()) hello_.insert(e.rank);
  if (m.has_progress()) {
    const std::string key = m.progress().scenario() + "/" + m.progress().phase();
    phase_[e.rank] = m.progress().done() ? "" : key;
    if (m.progress().done() && ++done_[key] == limits_.world_size) {
      print_(StrCat("  [", Elapsed(now), " s] ", key, ": all ", limits_.world_size, " ranks done"));
    }
    dirty_ = true;
  }
  if (m.has_result()) results_[e.rank] = m.result();
  if (m.has_error()) {
    const std::string phase = m.error().phase().empty() ? PhaseOf(e.rank) : m.error().phase();
    return {StrCat("rank ", e.rank, " in phase ", phase, ": ", m.error().message()),
            KnownCode(m.error().code())};
  }
  return {};
}

Failure Monitor::CheckStalls(Clock::time_point now) const {
  // A rank that has not connected yet may be slow to start (MPI start-up on a loaded or large
  // machine): it gets the start-up timeout instead.
  const auto stall = std::chrono::duration<double>(limits_.stall_timeout_s);
  const auto startup = std::chrono::duration<double>(limits_.startup_timeout_s);
  int culprit = -1;
  for (int r = 0; r < limits_.world_size; ++r) {
    const auto limit = hello_.contains(r) ? stall : startup;
    if (results_.contains(r) || now - last_progress_[r] <= limit) continue;
    if (culprit < 0 || (!waiting_in_[culprit].empty() && waiting_in_[r].empty())) culprit = r;
  }
  if (culprit < 0) return {};
  const int r = culprit;
  const std::string why = !hello_.contains(r) ? " (it never connected)"
                          : now - last_seen_[r] > std::chrono::seconds(2)
                              ? " (its heartbeat stopped too)"
                          : waiting_in_[r].empty() ? " (alive, but not waiting in a collective)"
                                                   : StrCat(" (blocked in ", waiting_in_[r], ")");
  return {StrCat("rank ", r, " in phase ", PhaseOf(r), ": stalled, no progress for ",
                 hello_.contains(r) ? limits_.stall_timeout_s : limits_.startup_timeout_s, " s",
                 why),
          ErrorCode::kTimeout};
}

void Monitor::DrawProgress(Clock::time_point now) {
  if (!dirty_ || now - last_draw_ < std::chrono::seconds(2)) return;
  // Where the ranks are now: how many are inside each phase, and how many have finished.
  std::map<std::string, int> inside;
  for (const std::string& phase : phase_) {
    if (!phase.empty()) ++inside[phase];
  }
  std::string line =
      StrCat("  [", Elapsed(now), " s] connected ", hello_.size(), "/", limits_.world_size);
  for (const auto& [key, n] : inside) line += StrCat(" | in ", key, ": ", n);
  line += StrCat(" | finished: ", results_.size());
  print_(line);
  last_draw_ = now;
  dirty_ = false;
}

std::string Monitor::PhaseOf(int rank) const {
  return phase_[rank].empty() ? "(between phases)" : phase_[rank];
}

int Monitor::FirstWithoutResult() const {
  for (int r = 0; r < limits_.world_size; ++r) {
    if (!results_.contains(r)) return r;
  }
  return -1;
}

std::string Monitor::Elapsed(Clock::time_point now) const {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", std::chrono::duration<double>(now - start_).count());
  return text;
}

}  // namespace nkisim::launcher
