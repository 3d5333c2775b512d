#include "collectives/collective_cost.h"

#include <map>
#include <mutex>

#include "runtime/error.h"

namespace nkisim::collectives {
namespace {

std::string PlacementKey(const GroupPlacement& g) {
  std::string key = StrCat(g.chips_per_instance, "x", g.torus_x, "x", g.torus_y, ":");
  for (int m = 0; m < g.size(); ++m) key += StrCat(g.chip[m], "/", g.ranks_on_chip[m], ",");
  return key;
}

}  // namespace

CollectivePlan PlanCollective(CollectiveOp op, const GroupPlacement& group, double buffer_bytes,
                              const HardwareProfile& profile, const std::string& requested,
                              Launch launch) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Schedule>> schedules;
  static std::map<std::string, CollectivePlan> plans;
  const std::string profile_key = profile.SerializeAsString();
  const std::string where = PlacementKey(group);
  const std::string plan_key =
      StrCat(OpName(op), "|", requested, "|", LaunchName(launch), "|", buffer_bytes, "|", where, "|",
             profile_key);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = plans.find(plan_key); it != plans.end()) return it->second;
  }
  const AlgorithmChoice choice = ChooseAlgorithm(op, group, buffer_bytes, profile, requested);
  CollectivePlan plan;
  plan.op = op;
  plan.algorithm = choice.row->name;
  plan.reason = choice.reason;
  plan.launch = launch;
  // Sizes whose schedule is the same (ScheduleVariant) share one build.
  const std::string schedule_key =
      StrCat(OpName(op), "|", plan.algorithm, "|",
             ScheduleVariant(*choice.row, op, group, buffer_bytes, profile), "|", where);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = schedules.find(schedule_key); it != schedules.end()) plan.schedule = it->second;
  }
  if (!plan.schedule) {
    auto built = std::make_shared<const Schedule>(
        BuildSchedule(*choice.row, op, group, buffer_bytes, profile));
    std::lock_guard<std::mutex> lock(mu);
    plan.schedule = schedules.emplace(schedule_key, built).first->second;
  }
  plan.chunk_bytes = ChunkBytes(*plan.schedule, buffer_bytes);
  plan.cost = PlaySchedule(*plan.schedule, group, plan.chunk_bytes,
                           ResolveParams(profile, op, plan.algorithm), launch);
  std::lock_guard<std::mutex> lock(mu);
  if (plans.size() > 4096) plans.clear();
  if (schedules.size() > 256) schedules.clear();
  plans.emplace(plan_key, plan);
  return plan;
}

double PointToPointNs(const ResolvedTopology& topo, const HardwareProfile& profile, int from_rank,
                      int to_rank, double bytes) {
  if (from_rank == to_rank) return 0.0;
  const GroupPlacement pair = PlaceGroup(topo, profile, {from_rank, to_rank});
  Schedule s;
  s.op = CollectiveOp::kAllGather;
  s.members = 2;
  s.num_chunks = 2;
  s.steps.push_back({"send", {{{0}, 1, {0}, false, false}}});
  CollectiveParams params = ResolveParams(profile, CollectiveOp::kAllGather, "");
  params.in_graph_fixed_ns = 0;  // a point-to-point copy has no group to synchronise
  return PlaySchedule(s, pair, bytes, params, Launch::kInGraph).total_ns;
}

}  // namespace nkisim::collectives
