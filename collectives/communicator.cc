#include "collectives/communicator.h"

#include <atomic>

#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim::collectives {

namespace {
std::atomic<const char*> waiting_in{nullptr};
}  // namespace

WaitingInCollective::WaitingInCollective(const char* name) { waiting_in.store(name); }
WaitingInCollective::~WaitingInCollective() { waiting_in.store(nullptr); }

std::string CollectiveInProgress() {
  const char* name = waiting_in.load();
  return name ? name : "";
}

void CheckMpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  Raise(ErrorCode::kCommError, StrCat(what, ": MPI error: ", std::string(text, length)));
}

RankContext::RankContext(MPI_Comm world, const ResolvedTopology& topology, LogicalCore& lnc)
    : world_(world), topology_(topology), lnc_(lnc) {
  int size = 0;
  MPI_Comm_rank(world_, &rank_);
  MPI_Comm_size(world_, &size);
  MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN);
  if (size != topology.world_size) {
    Raise(ErrorCode::kBadConfig, StrCat("topology world_size ", topology.world_size,
                                        " does not match the ", size, " MPI ranks launched"));
  }
}

RankContext::RankContext(LocalFabric& fabric, int rank, const ResolvedTopology& topology,
                         LogicalCore& lnc)
    : local_(&fabric), rank_(rank), topology_(topology), lnc_(lnc) {
  if (Functional()) {
    Raise(ErrorCode::kInternal, "a world of threads moves no payloads: it needs the timing-only mode");
  }
  if (fabric.world_size() != topology.world_size || rank < 0 || rank >= topology.world_size) {
    Raise(ErrorCode::kBadConfig, StrCat("topology world_size ", topology.world_size, " and rank ",
                                        rank, " do not fit a world of ", fabric.world_size(),
                                        " threads"));
  }
}

RankContext::~RankContext() {
  for (auto& [name, group] : groups_) {
    if (group.comm != MPI_COMM_NULL) MPI_Comm_free(&group.comm);
  }
}

const GroupComm& RankContext::group(const std::string& set_name) {
  auto found = groups_.find(set_name);
  if (found != groups_.end()) return found->second;
  const GroupSet& set = topology_.group_set(set_name);
  GroupComm g;
  g.set = &set;
  g.members = &set.group_of(rank_);
  g.position = set.position_of_rank[rank_];
  g.index = set.group_of_rank[rank_];
  if (local_ == nullptr) {
    CheckMpi(MPI_Comm_split(world_, g.index, g.position, &g.comm), "MPI_Comm_split");
    MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
  }
  return groups_.emplace(set_name, g).first->second;
}

const CollectivePlan& RankContext::plan(const GroupComm& group, CollectiveOp op,
                                        double buffer_bytes) {
  const auto key = std::make_tuple(group.members, static_cast<int>(op), buffer_bytes, launch_);
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    const GroupPlacement placement = PlaceGroup(topology_, profile(), *group.members);
    it = plans_.emplace(key, PlanCollective(op, placement, buffer_bytes, profile(),
                                            group.set->algorithm, launch_)).first;
  }
  return it->second;
}

}  // namespace nkisim::collectives
