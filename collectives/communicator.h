// A rank's view of the job: its MPI world, the resolved topology, one MPI sub-communicator per
// replica group set (MPI_Comm_split on first use, then cached) and the rank's logical core, whose
// simulated clock the collectives advance. In the timing-only mode the world may instead be a
// LocalFabric (ranks as threads of one process, no MPI): then the collectives only join clocks.
//
// Thread and rank safety: one RankContext per rank, used by one thread. group() is collective
// over the world the first time a set is named: every rank must ask for the sets in the same
// order. MPI errors are returned (MPI_ERRORS_RETURN) and thrown as Error(kCommError).
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "collectives/collective_cost.h"
#include "collectives/local_fabric.h"
#include "collectives/topology.h"
#include "runtime/logical_core.h"

namespace nkisim::collectives {

// This rank's group within one replica group set.
struct GroupComm {
  MPI_Comm comm = MPI_COMM_NULL;  // MPI_COMM_NULL on a LocalFabric
  const GroupSet* set = nullptr;
  int index = 0;                   // the group's index in its set
  const Group* members = nullptr;  // world ranks, in group order
  int position = 0;                // this rank's position in members
  int size() const { return static_cast<int>(members->size()); }
};

class RankContext {
 public:
  // REQUIRES: MPI initialised; the world's size equals topology.world_size.
  // Throws Error(kBadConfig) when the sizes disagree.
  RankContext(MPI_Comm world, const ResolvedTopology& topology, LogicalCore& lnc);
  // Rank `rank` of a world of threads. REQUIRES: the timing-only mode (no payload can move);
  // rank in [0, fabric.world_size()). Throws Error(kBadConfig) when the sizes disagree.
  RankContext(LocalFabric& fabric, int rank, const ResolvedTopology& topology, LogicalCore& lnc);
  ~RankContext();
  RankContext(const RankContext&) = delete;
  RankContext& operator=(const RankContext&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return topology_.world_size; }
  MPI_Comm world() const { return world_; }  // MPI_COMM_NULL on a LocalFabric
  LocalFabric* local() const { return local_; }  // nullptr in an MPI job
  const ResolvedTopology& topology() const { return topology_; }
  LogicalCore& lnc() const { return lnc_; }
  const HardwareProfile& profile() const { return lnc_.profile(); }

  // This rank's group in the named set; creates the communicator on first use (collective).
  const GroupComm& group(const std::string& set_name);

  // The plan of op on `group` at buffer_bytes (collective_cost.h), memoised for this context.
  const CollectivePlan& plan(const GroupComm& group, CollectiveOp op, double buffer_bytes);

  // Where this rank's collectives are issued: in a compiled graph (the default: a job's layer
  // phases) or from the host per call (`nkisim collective --launch host`, as nccom-test).
  Launch launch() const { return launch_; }
  void set_launch(Launch launch) { launch_ = launch; }

 private:
  MPI_Comm world_ = MPI_COMM_NULL;
  LocalFabric* local_ = nullptr;
  int rank_ = 0;
  const ResolvedTopology& topology_;
  LogicalCore& lnc_;
  std::map<std::string, GroupComm> groups_;
  std::map<std::tuple<const Group*, int, double, Launch>, CollectivePlan> plans_;
  Launch launch_ = Launch::kInGraph;
};

// Marks the calling process as blocked in a collective for the guard's lifetime, so that a
// supervisor can tell the ranks waiting on a peer from the peer that hangs. Thread-safe.
class WaitingInCollective {
 public:
  explicit WaitingInCollective(const char* name);
  ~WaitingInCollective();
  WaitingInCollective(const WaitingInCollective&) = delete;
  WaitingInCollective& operator=(const WaitingInCollective&) = delete;
};
// The collective this process is blocked in, or "" when it is not in one.
std::string CollectiveInProgress();

// Throws Error(kCommError) "<what>: MPI error: <MPI_Error_string>" unless rc == MPI_SUCCESS.
void CheckMpi(int rc, const char* what);

}  // namespace nkisim::collectives
