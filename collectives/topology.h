// Topology files: parse, validate and resolve the replica groups of a multi-rank job.
//
// A topology (proto/topology.proto) names sets of replica groups, given as explicit rank lists or
// generated (contiguous blocks, strided), the rank-to-chip placement and the iota_workers table of
// attn_q_batch_shard. Validation reports every problem at once, each naming the field, the value
// and the rule, so one run of `nkisim validate` shows all that is wrong.
// Pure functions: no MPI, usable before MPI starts.
#pragma once

#include <string>
#include <vector>

#include "proto/topology.pb.h"
#include "runtime/hardware_profile.h"

namespace nkisim::collectives {

using Group = std::vector<int>;

struct GroupSet {
  std::string name;
  std::vector<Group> groups;
  std::vector<int> group_of_rank;     // index into groups, per world rank
  std::vector<int> position_of_rank;  // position inside its group, per world rank
  std::string algorithm = "auto";     // collectives/algorithms.h row, or "auto"
  bool exact_reduction = false;       // reduction: "exact"
  // The group rank r belongs to.
  const Group& group_of(int rank) const { return groups[group_of_rank[rank]]; }
};

struct ResolvedTopology {
  int world_size = 0;
  int lnc = 0;
  std::vector<GroupSet> group_sets;
  std::vector<int> chip_of_rank;
  std::string batch_shard_group;  // empty when the topology has no batch shard
  int batch = 0;
  std::vector<int> iota_workers;  // per world rank

  // Throws Error(kBadConfig) naming the known sets when `name` is not one.
  const GroupSet& group_set(const std::string& name) const;
};

// Text format, or the JSON mapping when the first non-blank character is '{'. Syntax errors and
// unknown fields throw Error(kBadConfig) "source:line:column: message".
proto::Topology ParseTopology(const std::string& text, const std::string& source_name);
proto::Topology LoadTopology(const std::string& path);

// Every problem found, one message each ("field: value: rule"); empty when the topology is valid.
std::vector<std::string> CheckTopology(const proto::Topology& topology,
                                       const HardwareProfile& profile);

// Checks, then resolves. Throws Error(kBadConfig) listing every problem, one per line.
ResolvedTopology ResolveTopology(const proto::Topology& topology, const HardwareProfile& profile,
                                 const std::string& source_name);

// Human-readable listing of the resolved groups, placement and tables (nkisim validate).
std::string FormatTopology(const ResolvedTopology& topology);

}  // namespace nkisim::collectives
