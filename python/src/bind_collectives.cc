// nki.collectives over nkisim's collectives layer: one MPI rank per process (started by
// `nkisim python --ranks N`), replica groups as group sets of a process-wide topology (named by
// their rank lists, made on first use), and one RankContext per kernel run on that run's logical
// core, so a collective joins the ranks' simulated clocks and is charged on the run's timeline.
//
// MPI starts on the first call that needs it (rank_id, a collective) and ends at interpreter
// exit. A replica group must partition the world (every rank in exactly one group): each rank
// then takes part in the communicator split, and none waits for a rank that never comes.
#include <dlfcn.h>
#include <mpi.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/all_to_all_v.h"
#include "collectives/collectives.h"
#include "collectives/communicator.h"
#include "collectives/topology.h"
#include "python/src/bindings.h"
#include "python/src/session.h"
#include "runtime/error.h"

namespace nkisim::python {
namespace {

using collectives::Group;
using Groups = std::vector<Group>;

// Room for this many distinct replica groups per process: RankContext keeps pointers into
// group_sets, so the vector must never reallocate.
constexpr size_t kMaxGroupSets = 256;

struct World {
  int rank = 0;
  int size = 1;
  collectives::ResolvedTopology topology;
};

World& GetWorld() {
  static World* world = [] {
    // Open MPI loads its components as plugins that resolve libmpi's symbols; a library that
    // Python loaded (RTLD_LOCAL) does not offer them, so promote it to global first, as mpi4py
    // does.
    for (const char* lib : {"libmpi.so.40", "libmpi.so"}) {
      if (dlopen(lib, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) != nullptr) break;
    }
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    }
    auto* w = new World;
    MPI_Comm_rank(MPI_COMM_WORLD, &w->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w->size);
    w->topology.world_size = w->size;
    w->topology.lnc = 1;
    w->topology.group_sets.reserve(kMaxGroupSets);
    // The default placement: physical_cores_per_chip / lnc ranks per chip (trn2: 8).
    const int per_chip = std::max<int>(1, Trn2Profile().physical_cores_per_chip());
    for (int r = 0; r < w->size; ++r) w->topology.chip_of_rank.push_back(r / per_chip);
    return w;
  }();
  return *world;
}

// "[[0,1][2,3]]": the set's name, one per distinct list of groups.
std::string GroupsName(const Groups& groups) {
  std::ostringstream name;
  name << '[';
  for (const Group& g : groups) {
    name << '[';
    for (size_t i = 0; i < g.size(); ++i) name << (i ? "," : "") << g[i];
    name << ']';
  }
  name << ']';
  return name.str();
}

// The set for `groups`, added on first use. Throws Error(kInvalidArgument) unless the groups
// partition the world.
const std::string& GroupSetFor(const Groups& groups) {
  World& w = GetWorld();
  const std::string name = GroupsName(groups);
  for (const auto& set : w.topology.group_sets) {
    if (set.name == name) return set.name;
  }
  collectives::GroupSet set;
  set.name = name;
  set.groups = groups;
  set.group_of_rank.assign(w.size, -1);
  set.position_of_rank.assign(w.size, -1);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    for (size_t pos = 0; pos < groups[gi].size(); ++pos) {
      const int r = groups[gi][pos];
      if (r < 0 || r >= w.size || set.group_of_rank[r] != -1) {
        Raise(ErrorCode::kInvalidArgument,
              StrCat("replica_group ", name, ": rank ", r, " is ",
                     r < 0 || r >= w.size ? "outside the world" : "in two groups", " (world of ",
                     w.size, " ranks; the groups must not overlap)"));
      }
      set.group_of_rank[r] = static_cast<int>(gi);
      set.position_of_rank[r] = static_cast<int>(pos);
    }
  }
  for (int r = 0; r < w.size; ++r) {
    if (set.group_of_rank[r] == -1) {
      Raise(ErrorCode::kNotSupported,
            StrCat("replica_group ", name, ": rank ", r,
                   " is in no group; nkisim needs the "
                   "groups to cover all ",
                   w.size, " ranks (add [", r, "] as a group of its own)"));
    }
  }
  if (w.topology.group_sets.size() == kMaxGroupSets) {
    Raise(ErrorCode::kNotSupported,
          StrCat("more than ", kMaxGroupSets, " distinct replica groups"));
  }
  w.topology.group_sets.push_back(std::move(set));
  return w.topology.group_sets.back().name;
}

collectives::RankContext& Context() {
  KernelRun* run = CurrentRun();
  if (run == nullptr) {
    Raise(ErrorCode::kInvalidArgument, "nki.collectives: called outside a kernel");
  }
  if (run->lnc().lnc() != 1) {
    Raise(ErrorCode::kNotSupported,
          "nki.collectives: a collective inside an LNC 2 kernel is not "
          "modelled (launch the collective kernel with LNC 1)");
  }
  auto& ctx = run->rank_context();
  if (!ctx) {
    ctx =
        std::make_unique<collectives::RankContext>(MPI_COMM_WORLD, GetWorld().topology, run->lnc());
  }
  return *ctx;
}

const collectives::GroupComm& GroupOf(const Groups& groups) {
  const std::string& name = GroupSetFor(groups);
  return Context().group(name);
}

void Finalize() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  ReleaseRankContexts();
  MPI_Finalize();
}

}  // namespace

void BindCollectives(py::module_& m) {
  py::module_ c = m.def_submodule("coll", "collectives over MPI ranks");
  c.def("world", [] { return py::make_tuple(GetWorld().rank, GetWorld().size); });
  c.def("finalize", &Finalize);
  c.def("abort", [](int code) { MPI_Abort(MPI_COMM_WORLD, code); });
  py::call_guard<py::gil_scoped_release> no_gil;
  c.def(
      "all_gather",
      [](const Groups& g, const TensorView& in, const TensorView& out, int dim) {
        collectives::all_gather(Context(), GroupOf(g), in, out, dim);
      },
      no_gil);
  c.def(
      "all_reduce",
      [](const Groups& g, const TensorView& in, const TensorView& out) {
        collectives::all_reduce(Context(), GroupOf(g), in, out);
      },
      no_gil);
  c.def(
      "reduce_scatter",
      [](const Groups& g, const TensorView& in, const TensorView& out) {
        collectives::reduce_scatter(Context(), GroupOf(g), in, out);
      },
      no_gil);
  c.def(
      "all_to_all",
      [](const Groups& g, const TensorView& in, const TensorView& out, int dim) {
        collectives::all_to_all(Context(), GroupOf(g), in, out, dim);
      },
      no_gil);
  // Returns the rows received from each group member (collectives/all_to_all_v.h).
  c.def(
      "all_to_all_v",
      [](const Groups& g, const TensorView& in, const std::vector<int64_t>& send_rows,
         const TensorView& out) {
        return collectives::all_to_all_v(Context(), GroupOf(g), in, send_rows, out).recv_rows;
      },
      no_gil);
  c.def(
      "send",
      [](const TensorView& t, int dest, int tag) { collectives::send(Context(), t, dest, tag); },
      no_gil);
  c.def(
      "recv",
      [](const TensorView& t, int source, int tag) {
        collectives::recv(Context(), t, source, tag);
      },
      no_gil);
}

}  // namespace nkisim::python
