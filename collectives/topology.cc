#include "collectives/topology.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "collectives/algorithms.h"
#include "runtime/config_file.h"
#include "runtime/error.h"
#include "runtime/problem_list.h"

namespace nkisim::collectives {
namespace {

// Bounds that keep every table sized by them small (16,384 ranks: 256 trn2 instances at LNC 2).
constexpr uint32_t kMaxWorldSize = 16384;
constexpr uint32_t kMaxChips = 65536;
// A batch far beyond any serving batch (decode scenarios take at most 128); keeps B and every
// iota_workers entry in an int.
constexpr uint32_t kMaxBatch = 1u << 20;

std::string Quoted(const proto::ReplicaGroupSet& set, int index) {
  return StrCat("replica_groups[", index, "]",
                set.name().empty() ? "" : StrCat(" ('", set.name(), "')"));
}

std::string RankListString(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) s += StrCat(i ? ", " : "", ranks[i]);
  if (ranks.size() > 8) s += StrCat(", ... (", ranks.size(), " in all)");
  return s;
}

// Builds the groups of one set; appends a message per problem. Groups that cannot be built stay
// empty, so later checks still run on the rest.
std::vector<Group> BuildGroups(const proto::ReplicaGroupSet& set, int index, int world,
                               ProblemList& problems) {
  const std::string where = Quoted(set, index);
  std::vector<Group> groups;
  auto generated = [&](const char* kind, uint32_t size, bool strided) {
    if (world == 0) return;  // world_size is reported on its own
    if (size == 0 || size > static_cast<uint32_t>(world) ||
        world % static_cast<int>(size) != 0) {
      problems.push_back(StrCat(where, ".", kind, ".group_size: ", size,
                                " must be >= 1 and divide world_size ", world));
      return;
    }
    const int g = static_cast<int>(size), count = world / g;
    for (int i = 0; i < count; ++i) {
      Group group;
      for (int j = 0; j < g; ++j) group.push_back(strided ? i + j * count : i * g + j);
      groups.push_back(group);
    }
  };
  switch (set.groups_case()) {
    case proto::ReplicaGroupSet::kContiguous:
      generated("contiguous", set.contiguous().group_size(), false);
      break;
    case proto::ReplicaGroupSet::kStrided:
      generated("strided", set.strided().group_size(), true);
      break;
    case proto::ReplicaGroupSet::kExplicit:
      if (set.explicit_().groups_size() == 0) {
        problems.push_back(StrCat(where, ".explicit: no groups; list at least one"));
      }
      for (int gi = 0; gi < set.explicit_().groups_size(); ++gi) {
        const auto& ranks = set.explicit_().groups(gi).ranks();
        if (ranks.empty()) {
          problems.push_back(
              StrCat(where, ".explicit.groups[", gi, "]: empty: a group needs at least one rank"));
        }
        Group group;
        for (int ri = 0; ri < ranks.size(); ++ri) {
          if (static_cast<int64_t>(ranks[ri]) >= world && problems.full()) {
            problems.CountOnly();
          } else if (static_cast<int64_t>(ranks[ri]) >= world) {
            problems.push_back(StrCat(where, ".explicit.groups[", gi, "].ranks[", ri, "]: ",
                                      ranks[ri], " is outside [0, ", world, ") (world_size)"));
          } else {
            group.push_back(static_cast<int>(ranks[ri]));
          }
        }
        groups.push_back(group);
      }
      break;
    case proto::ReplicaGroupSet::GROUPS_NOT_SET:
      problems.push_back(
          StrCat(where, ": no groups given: set one of explicit, contiguous, strided"));
      break;
  }
  return groups;
}

// Fills group_of_rank / position_of_rank; reports overlaps and ranks in no group.
void IndexGroups(GroupSet& set, const std::string& where, int world,
                 ProblemList& problems) {
  set.group_of_rank.assign(world, -1);
  set.position_of_rank.assign(world, -1);
  for (size_t gi = 0; gi < set.groups.size(); ++gi) {
    for (size_t pos = 0; pos < set.groups[gi].size(); ++pos) {
      const int r = set.groups[gi][pos];
      if (set.group_of_rank[r] != -1 && problems.full()) {
        problems.CountOnly();
        continue;
      }
      if (set.group_of_rank[r] != -1) {
        problems.push_back(StrCat(where, ": rank ", r, " appears in groups ", set.group_of_rank[r],
                                  " and ", gi, "; the groups of a set must be disjoint"));
        continue;
      }
      set.group_of_rank[r] = static_cast<int>(gi);
      set.position_of_rank[r] = static_cast<int>(pos);
    }
  }
  std::vector<int> missing;
  for (int r = 0; r < world; ++r) {
    if (set.group_of_rank[r] == -1) missing.push_back(r);
  }
  if (!missing.empty() && !set.groups.empty()) {
    problems.push_back(StrCat(where, ": ranks [", RankListString(missing),
                              "] are in no group; the groups must cover every rank of the world"));
  }
}

void CheckBatchShard(const proto::Topology& t, const ResolvedTopology& r,
                     ProblemList& problems) {
  const proto::BatchShard& bs = t.batch_shard();
  const auto found = std::find_if(r.group_sets.begin(), r.group_sets.end(),
                                  [&](const GroupSet& s) { return s.name == bs.replica_group(); });
  if (found == r.group_sets.end()) {
    std::string names;
    for (const GroupSet& s : r.group_sets) names += StrCat(names.empty() ? "" : ", ", s.name);
    problems.push_back(
        StrCat("batch_shard.replica_group: '", bs.replica_group(),
               "' names no replica group set (have: ", names.empty() ? "none" : names, ")"));
    return;
  }
  const GroupSet& set = *found;
  if (set.groups.empty()) return;  // its own problems are already reported
  const size_t g = set.groups[0].size();
  for (const Group& group : set.groups) {
    if (group.size() != g) {
      problems.push_back(StrCat("batch_shard: replica group set '", set.name, "' has groups of ", g,
                                " and ", group.size(),
                                " ranks; attn_q_batch_shard needs equal sizes"));
      return;
    }
  }
  if (bs.batch() > kMaxBatch) {
    problems.push_back(StrCat("batch_shard.batch: ", bs.batch(), " must be at most ", kMaxBatch,
                              " (sequences in one batch)"));
    return;
  }
  if (bs.batch() == 0 || g == 0 || bs.batch() % g != 0) {
    problems.push_back(StrCat("batch_shard.batch: ", bs.batch(),
                              " must be >= 1 and divisible by the ", "group size G = ", g, " of '",
                              set.name, "'"));
    return;
  }
  if (bs.iota_workers_size() == 0) return;
  if (bs.iota_workers_size() != r.world_size) {
    problems.push_back(StrCat("batch_shard.iota_workers: ", bs.iota_workers_size(),
                              " entries; the table needs world_size = ", r.world_size));
    return;
  }
  const int per_rank = static_cast<int>(bs.batch() / g);
  for (int rank = 0; rank < r.world_size; ++rank) {
    const int pos = set.position_of_rank[rank];
    if (pos < 0) continue;
    if (bs.iota_workers(rank) != pos * per_rank && problems.full()) {
      problems.CountOnly();
    } else if (bs.iota_workers(rank) != pos * per_rank) {
      problems.push_back(StrCat("batch_shard.iota_workers[", rank, "]: ", bs.iota_workers(rank),
                                " but rank ", rank, " is at position ", pos, " of its group [",
                                RankListString(set.group_of(rank)), "], so it must be ", pos, " * ",
                                bs.batch(), " / ", g, " = ", pos * per_rank));
    }
  }
}

void CheckPlacement(const proto::Topology& t, const HardwareProfile& profile, ResolvedTopology& r,
                    ProblemList& problems) {
  const int lnc = std::max(r.lnc, 1);
  // At least 1, so that the chips still get built when the lnc is refused (reported apart).
  const int per_chip = std::max(1, static_cast<int>(profile.physical_cores_per_chip()) / lnc);
  const auto& chips = t.placement().chip_of_rank();
  if (chips.empty()) {
    for (int rank = 0; rank < r.world_size; ++rank)
      r.chip_of_rank.push_back(rank / std::max(per_chip, 1));
    return;
  }
  if (chips.size() != r.world_size) {
    problems.push_back(StrCat("placement.chip_of_rank: ", chips.size(),
                              " entries; needs one per rank (world_size = ", r.world_size, ")"));
    return;
  }
  std::map<uint32_t, int> ranks_on_chip;
  for (uint32_t chip : chips) {
    if (chip >= kMaxChips && problems.full()) {
      problems.CountOnly();
      chip = 0;
    } else if (chip >= kMaxChips) {
      problems.push_back(StrCat("placement.chip_of_rank: chip ", chip, " must be below ", kMaxChips));
      chip = 0;
    }
    r.chip_of_rank.push_back(static_cast<int>(chip));
    if (++ranks_on_chip[chip] == per_chip + 1) {
      problems.push_back(StrCat("placement.chip_of_rank: chip ", chip, " holds more than ",
                                per_chip, " ranks (", profile.physical_cores_per_chip(),
                                " physical cores per chip / lnc ", lnc, ")"));
    }
  }
}

ResolvedTopology Resolve(const proto::Topology& t, const HardwareProfile& profile,
                         ProblemList& problems) {
  ResolvedTopology r;
  r.world_size = static_cast<int>(t.world_size());
  r.lnc = static_cast<int>(t.lnc());
  if (t.world_size() == 0) problems.push_back("world_size: 0: must be >= 1");
  if (t.world_size() > kMaxWorldSize) {
    problems.push_back(StrCat("world_size: ", t.world_size(), ": must be at most ", kMaxWorldSize));
    r.world_size = 0;  // nothing sized by it is built
  }
  if (const std::string lnc = LncProblem(profile, t.lnc()); !lnc.empty()) {
    problems.push_back(StrCat("lnc: ", t.lnc(), ": ", lnc));
  }
  std::map<std::string, int> seen;
  for (int i = 0; i < t.replica_groups_size(); ++i) {
    const proto::ReplicaGroupSet& spec = t.replica_groups(i);
    if (spec.name().empty()) {
      problems.push_back(
          StrCat("replica_groups[", i, "].name: empty: every group set needs a name"));
    } else if (!seen.emplace(spec.name(), i).second) {
      problems.push_back(StrCat("replica_groups[", i, "].name: '", spec.name(),
                                "' is already used by ", "replica_groups[", seen[spec.name()],
                                "]; names must be unique"));
    }
    GroupSet set{spec.name(), BuildGroups(spec, i, r.world_size, problems), {}, {}};
    if (!spec.algorithm().empty() && spec.algorithm() != "auto" && !FindAlgorithm(spec.algorithm())) {
      problems.push_back(StrCat(Quoted(spec, i), ".algorithm: '", spec.algorithm(),
                                "' is not one of auto, ", AlgorithmNames()));
    } else if (!spec.algorithm().empty()) {
      set.algorithm = spec.algorithm();
    }
    if (spec.reduction() == "exact") {
      set.exact_reduction = true;
    } else if (!spec.reduction().empty() && spec.reduction() != "algorithm") {
      problems.push_back(StrCat(Quoted(spec, i), ".reduction: '", spec.reduction(),
                                "' is not one of algorithm, exact"));
    }
    IndexGroups(set, Quoted(spec, i), r.world_size, problems);
    r.group_sets.push_back(std::move(set));
  }
  if (t.has_batch_shard()) {
    CheckBatchShard(t, r, problems);
    r.batch_shard_group = t.batch_shard().replica_group();
    r.batch = static_cast<int>(std::min(t.batch_shard().batch(), kMaxBatch));
  }
  CheckPlacement(t, profile, r, problems);
  return r;
}

}  // namespace

const GroupSet& ResolvedTopology::group_set(const std::string& name) const {
  std::string names;
  for (const GroupSet& s : group_sets) {
    if (s.name == name) return s;
    names += StrCat(names.empty() ? "" : ", ", s.name);
  }
  Raise(ErrorCode::kBadConfig,
        StrCat("replica group set '", name,
               "' is not in the topology (have: ", names.empty() ? "none" : names, ")"));
}

proto::Topology ParseTopology(const std::string& text, const std::string& source_name) {
  proto::Topology topology;
  ParseConfigText(text, source_name, &topology);
  return topology;
}

proto::Topology LoadTopology(const std::string& path) {
  return ParseTopology(ReadConfigFile(path, "topology file"), path);
}

std::vector<std::string> CheckTopology(const proto::Topology& topology,
                                       const HardwareProfile& profile) {
  ProblemList problems;
  Resolve(topology, profile, problems);
  return problems.Lines();
}

ResolvedTopology ResolveTopology(const proto::Topology& topology, const HardwareProfile& profile,
                                 const std::string& source_name) {
  ProblemList problems;
  ResolvedTopology resolved = Resolve(topology, profile, problems);
  if (!problems.empty()) Raise(ErrorCode::kBadConfig, problems.Message(source_name));
  if (!resolved.batch_shard_group.empty() && topology.batch_shard().iota_workers_size() == 0) {
    const GroupSet& set = resolved.group_set(resolved.batch_shard_group);
    const int per_rank = resolved.batch / static_cast<int>(set.groups[0].size());
    for (int rank = 0; rank < resolved.world_size; ++rank) {
      resolved.iota_workers.push_back(set.position_of_rank[rank] * per_rank);
    }
  } else {
    resolved.iota_workers.assign(topology.batch_shard().iota_workers().begin(),
                                 topology.batch_shard().iota_workers().end());
  }
  return resolved;
}

std::string FormatTopology(const ResolvedTopology& t) {
  std::ostringstream out;
  out << "world_size " << t.world_size << ", lnc " << t.lnc << " (" << t.world_size * t.lnc
      << " physical cores)\n";
  for (const GroupSet& set : t.group_sets) {
    out << "replica group set '" << set.name << "': " << set.groups.size() << " groups of "
        << (set.groups.empty() ? 0 : set.groups[0].size()) << " ranks; algorithm "
        << set.algorithm << ", reduction " << (set.exact_reduction ? "exact" : "algorithm")
        << "\n";
    for (size_t g = 0; g < set.groups.size(); ++g) {
      out << "  group " << g << ": [" << RankListString(set.groups[g]) << "]\n";
    }
  }
  std::map<int, std::vector<int>> ranks_of_chip;
  for (int r = 0; r < t.world_size; ++r) ranks_of_chip[t.chip_of_rank[r]].push_back(r);
  out << "placement: " << ranks_of_chip.size() << " chips\n";
  for (const auto& [chip, ranks] : ranks_of_chip) {
    out << "  chip " << chip << ": ranks [" << RankListString(ranks) << "]\n";
  }
  if (!t.batch_shard_group.empty()) {
    out << "batch_shard on '" << t.batch_shard_group << "', B = " << t.batch
        << "\n  iota_workers: [";
    for (size_t r = 0; r < t.iota_workers.size(); ++r) out << (r ? ", " : "") << t.iota_workers[r];
    out << "]\n";
  }
  return out.str();
}

}  // namespace nkisim::collectives
