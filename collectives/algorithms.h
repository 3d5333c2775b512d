// The collective algorithms, one row each, and the runtime-like choice between them.
//
// Rows (docs/collectives.md, "Algorithms", gives each schedule step by step):
//   ring         any group; p - 1 steps per phase around the group order.
//   mesh         any group inside one instance; routed writes from each chip to every other chip,
//                then an intra-chip broadcast (all_reduce: reduce-scatter then all-gather, 4 steps).
//   mesh_1step   all_reduce only: every member sends its whole buffer to every other, once.
//   rdh          groups inside one instance whose chips hold equally many members and number a
//                power of two: recursive doubling / halving across chips (the torus as a
//                hypercube), plus an intra-chip stage.
//   kangaring    groups holding every rank of each chip they touch, an even number per chip:
//                primaries in two counter-rotating cycles, one read feeding two writes.
//   hierarchical groups spanning several instances, equally many members in each: the
//                intra-instance algorithm (chosen by size among mesh, rdh, ring) and a ring across
//                instances.
//   pairwise     all_to_all: p - 1 rounds, member i sends to i + k.
// A group of one member runs no step.
#pragma once

#include <string>
#include <vector>

#include "collectives/schedule.h"
#include "collectives/topology.h"
#include "runtime/hardware_profile.h"

namespace nkisim::collectives {

// Where a group's members sit: chip and instance per member, plus the torus of the profile.
struct GroupPlacement {
  std::vector<int> world_rank;       // per member
  std::vector<int> chip;             // per member, global chip index
  std::vector<int> ranks_on_chip;    // per member: ranks of the whole job on its chip
  int chips_per_instance = 16;
  int torus_x = 4, torus_y = 4;
  int size() const { return static_cast<int>(chip.size()); }
  int instance(int member) const { return chip[member] / chips_per_instance; }
};

// REQUIRES: every rank of `group` is in [0, topology.world_size).
GroupPlacement PlaceGroup(const ResolvedTopology& topology, const HardwareProfile& profile,
                          const Group& group);
// The default placement of ranks 0 .. world - 1 at `lnc` (rank r on chip r / (cores / lnc)),
// for --model-only runs that have no topology file.
GroupPlacement DefaultPlacement(int world, int lnc, const HardwareProfile& profile);

struct AlgorithmRow {
  const char* name;
  const char* summary;
  bool (*serves)(CollectiveOp op);
  // "" when the group shape fits the algorithm, else the rule it breaks.
  std::string (*accepts)(const GroupPlacement& group);
  Schedule (*generate)(CollectiveOp op, const GroupPlacement& group, double buffer_bytes,
                       const HardwareProfile& profile);
  // nullptr when the schedule depends on the op and the group alone; else a key naming what the
  // size and the profile change in it (hierarchical: its intra-instance algorithms).
  std::string (*variant)(CollectiveOp op, const GroupPlacement& group, double buffer_bytes,
                         const HardwareProfile& profile) = nullptr;
};

// Every row, in the order of the table above.
const std::vector<AlgorithmRow>& AlgorithmTable();
// nullptr when there is no such row.
const AlgorithmRow* FindAlgorithm(const std::string& name);
// The schedule of `row` for op on the group (no steps for a group of one).
// REQUIRES: row.serves(op) and row.accepts(group) is "" (ChooseAlgorithm checks both).
Schedule BuildSchedule(const AlgorithmRow& row, CollectiveOp op, const GroupPlacement& group,
                       double buffer_bytes, const HardwareProfile& profile);
// Two sizes (or profiles) with the same ScheduleVariant build the same schedule of `row` for op on
// the group, so a cache keyed by op, row, group and variant may share it. "" for rows whose
// schedule does not depend on the size; hierarchical: "rs=mesh,ag=mesh" (its inner algorithms).
// REQUIRES: as BuildSchedule.
std::string ScheduleVariant(const AlgorithmRow& row, CollectiveOp op, const GroupPlacement& group,
                            double buffer_bytes, const HardwareProfile& profile);
// "ring, mesh, ..." for messages and --help.
std::string AlgorithmNames();

struct AlgorithmChoice {
  const AlgorithmRow* row = nullptr;
  std::string reason;  // "auto: 512 KiB < mesh_max_bytes", "rdh: 3 chips is not a power of two; ring"
};

// requested "auto" (or ""): by size and group shape as the runtime chooses (thresholds from the
// profile), falling back along rdh -> kangaring -> ring when a shape does not fit; any other name
// forces that row. Throws Error(kInvalidArgument) naming the algorithm, the group and the rule
// when a forced row does not serve the op or the group shape, or does not exist.
// buffer_bytes: the op's per-rank buffer (all_gather: input; others: input).
AlgorithmChoice ChooseAlgorithm(CollectiveOp op, const GroupPlacement& group, double buffer_bytes,
                                const HardwareProfile& profile, const std::string& requested);

}  // namespace nkisim::collectives
