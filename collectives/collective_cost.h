// What a collective costs: the algorithm the runtime would run (collectives/algorithms.h), its
// schedule, and that schedule played on the link model (collectives/link_model.h).
// Pure functions of the group's placement, the size and the profile; thread-safe (plans are
// cached behind a mutex, keyed by everything they depend on).
#pragma once

#include <memory>
#include <string>

#include "collectives/algorithms.h"
#include "collectives/link_model.h"
#include "collectives/schedule.h"
#include "collectives/topology.h"
#include "runtime/hardware_profile.h"

namespace nkisim::collectives {

struct CollectivePlan {
  CollectiveOp op = CollectiveOp::kAllGather;
  std::string algorithm;  // the row that runs
  std::string reason;     // why ("forced", "auto: 512 KiB < mesh_max_bytes", ...)
  Launch launch = Launch::kInGraph;  // where it is issued (what its fixed cost includes)
  std::shared_ptr<const Schedule> schedule;
  double chunk_bytes = 0;
  ScheduleCost cost;
};

// buffer_bytes: one rank's input (all_gather: what it contributes; reduce_scatter: all n
// chunks; all_reduce: the buffer; all_to_all: its n blocks). requested: "auto" or a row name.
// launch: in a compiled graph (the device's fixed cost only) or from the host (plus the host
// launch cost of the op and algorithm). Throws Error(kInvalidArgument) as ChooseAlgorithm does.
CollectivePlan PlanCollective(CollectiveOp op, const GroupPlacement& group, double buffer_bytes,
                              const HardwareProfile& profile, const std::string& requested,
                              Launch launch);

// Point to point a -> b (send / recv): one step of one transfer on the link model.
double PointToPointNs(const ResolvedTopology& topo, const HardwareProfile& profile, int from_rank,
                      int to_rank, double bytes);

}  // namespace nkisim::collectives
