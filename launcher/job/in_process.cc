// The timing-only job with its ranks as threads of the launcher (run_job.h): no mpirun, no
// process per rank. Each thread runs exactly what an MPI rank runs (RunRankPlans) on a RankContext
// over a LocalFabric, which joins the clocks the collectives would join over MPI; the messages a
// rank would send on the control plane go through an in-process queue to the same supervisor.
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/local_fabric.h"
#include "model/rank_plans.h"
#include "launcher/job/run_job.h"
#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// How long the rank threads may take to end after a failure woke them; then the process exits.
constexpr auto kUnwindDeadline = std::chrono::seconds(5);

// The control plane's stand-in: rank threads push, the supervisor pops.
class EventQueue {
 public:
  void Push(control::Event e) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(std::move(e));
    }
    changed_.notify_one();
  }
  std::optional<control::Event> Next(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
    control::Event e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<control::Event> events_;
};

}  // namespace

int RunInProcess(const RunOptions& options, const ResolvedScenario& sc, Clock::time_point start) {
  SetSimMode(SimMode::kTimingOnly);
  RunOptions o = options;
  o.in_process = true;
  const int world = sc.world_size();
  collectives::LocalFabric fabric(world);
  EventQueue queue;
  std::mutex finished_mutex;
  std::condition_variable finished_changed;
  int finished = 0;

  auto rank_main = [&](int rank) {
    auto send = [&queue, rank](const proto::RankMessage& m) {
      queue.Push({control::Event::Kind::kMessage, rank, m, ""});
    };
    proto::RankMessage hello;
    hello.mutable_hello()->set_world_size(static_cast<uint32_t>(world));
    hello.mutable_hello()->set_pid(static_cast<uint32_t>(::getpid()));
    send(hello);
    std::string phase;
    proto::RankMessage last;
    try {
      proto::RankResult result = RunRankPlans(
          sc, rank,
          [&fabric, rank](const collectives::ResolvedTopology& topology, LogicalCore& lnc) {
            return std::make_unique<collectives::RankContext>(fabric, rank, topology, lnc);
          },
          send, &phase, !o.trace.empty());
      result.set_peak_rss_mib(PeakRssMib());
      *last.mutable_result() = std::move(result);
    } catch (const Error& e) {
      last.mutable_error()->set_phase(phase);
      last.mutable_error()->set_message(ValidUtf8(StrCat(ErrorCodeName(e.code()), ": ", e.what())));
      last.mutable_error()->set_code(static_cast<uint32_t>(e.code()));
    } catch (const std::exception& e) {
      last.mutable_error()->set_phase(phase);
      last.mutable_error()->set_message(ValidUtf8(StrCat("internal: ", e.what())));
      last.mutable_error()->set_code(static_cast<uint32_t>(ErrorCode::kInternal));
    }
    // The error first, then the wake-up of the ranks waiting on this one: the supervisor then
    // hears the cause before the "job aborted" of the others.
    send(last);
    if (last.has_error()) fabric.Abort(StrCat("rank ", rank, " failed"));
    {
      std::lock_guard<std::mutex> lock(finished_mutex);
      ++finished;
    }
    finished_changed.notify_all();
  };

  PrintTimingOnlyBanner(StrCat("; ", world, " ranks as threads of this process"));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) threads.emplace_back(rank_main, r);
  const int code = Supervise(
      o, sc, [&queue](std::chrono::milliseconds timeout) { return queue.Next(timeout); },
      "ranks as threads of this process (timing-only, no mpirun)", nullptr, start);
  if (code != 0 && code != 1) {
    // Failed or stalled: wake every rank waiting on a peer; one that hangs by itself cannot be
    // stopped, so the process ends without it.
    fabric.Abort("the job failed");
    std::unique_lock<std::mutex> lock(finished_mutex);
    if (!finished_changed.wait_for(lock, kUnwindDeadline, [&] { return finished == world; })) {
      std::fflush(nullptr);
      std::_Exit(code);
    }
  }
  for (std::thread& t : threads) t.join();
  return code;
}

}  // namespace nkisim::launcher
