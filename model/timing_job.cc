#include "model/timing_job.h"

#include <map>
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
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) threads.emplace_back(rank_main, r);
  for (std::thread& t : threads) t.join();
  if (failure) throw *failure;
  if (!trace_path.empty()) WriteRunTrace(sc, results, trace_path);
  return BuildReport(sc, results, 0.0, /*timing_only=*/true, /*in_process=*/true);
}

}  // namespace nkisim::launcher
