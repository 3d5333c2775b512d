#include "model/timing_job.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "collectives/local_fabric.h"
#include "model/phase_runner.h"
#include "model/rank_plans.h"
#include "model/run_report.h"
#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {

namespace {

// Threads for the ranks of in-process jobs, kept for the next job: `nkisim serve`'s step-cost
// table runs some 24 jobs of up to 64 ranks, and creating (and unmapping) a thread per rank per
// job was a measurable share of its CPU time. Run(world, body) calls body(rank) for every rank
// in [0, world) on threads of its own, concurrently, and returns when all have returned.
class RankCrew {
 public:
  RankCrew() = default;
  RankCrew(const RankCrew&) = delete;
  RankCrew& operator=(const RankCrew&) = delete;
  ~RankCrew() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void Run(int world, const std::function<void(int)>& body) {
    std::unique_lock<std::mutex> lock(mutex_);
    body_ = &body;
    world_ = world;
    remaining_ = world;
    ++generation_;
    while (static_cast<int>(threads_.size()) < world) {
      const int index = static_cast<int>(threads_.size());
      threads_.emplace_back([this, index] { Loop(index); });
    }
    start_.notify_all();
    done_.wait(lock, [this] { return remaining_ == 0; });
    body_ = nullptr;
  }

 private:
  void Loop(int index) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= world_) continue;
      const std::function<void(int)>* body = body_;
      lock.unlock();
      (*body)(index);
      lock.lock();
      if (--remaining_ == 0) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* body_ = nullptr;
  int world_ = 0;
  int remaining_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

// Idle crews; a job takes one (or a new one) and gives it back, so jobs at once never share.
std::mutex idle_mutex;
std::vector<std::unique_ptr<RankCrew>> idle_crews;

void RunRanks(int world, const std::function<void(int)>& body) {
  std::unique_ptr<RankCrew> crew;
  {
    std::lock_guard<std::mutex> lock(idle_mutex);
    if (!idle_crews.empty()) {
      crew = std::move(idle_crews.back());
      idle_crews.pop_back();
    }
  }
  if (!crew) crew = std::make_unique<RankCrew>();
  crew->Run(world, body);
  std::lock_guard<std::mutex> lock(idle_mutex);
  idle_crews.push_back(std::move(crew));
}

}  // namespace

proto::RunReport RunTimingJob(const ResolvedScenario& sc, const std::string& trace_path) {
  SetSimMode(SimMode::kTimingOnly);
  const InProcessRanks shared_heap;  // the ranks' phases leave the heap alone (phase_runner.h)
  const int world = sc.world_size();
  collectives::LocalFabric fabric(world);
  std::map<int, proto::RankResult> results;
  std::optional<Error> failure;
  std::mutex mutex;
  auto rank_main = [&](int rank) {
    try {
      proto::RankResult r = RunRankPlans(
          sc, rank,
          [&fabric, rank](const collectives::ResolvedTopology& topology, LogicalCore& lnc) {
            return std::make_unique<collectives::RankContext>(fabric, rank, topology, lnc);
          },
          [](const proto::RankMessage&) {}, nullptr, !trace_path.empty());
      std::lock_guard<std::mutex> lock(mutex);
      results[rank] = std::move(r);
    } catch (const Error& e) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = e;
      }
      fabric.Abort(StrCat("rank ", rank, " failed"));
    }
  };
  RunRanks(world, rank_main);
  if (failure) throw *failure;
  if (!trace_path.empty()) WriteRunTrace(sc, results, trace_path);
  return BuildReport(sc, results, 0.0, /*timing_only=*/true, /*in_process=*/true);
}

}  // namespace nkisim::launcher
