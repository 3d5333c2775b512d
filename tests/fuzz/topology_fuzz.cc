// Fuzz target: topology files (collectives::ParseTopology, CheckTopology, ResolveTopology against
// the trn2 profile, FormatTopology as `nkisim validate` prints it). An accepted topology must be
// internally consistent: every rank in exactly one group of every set, at the position recorded.
#include "collectives/topology.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using nkisim::StrCat;
using nkisim::fuzz::Finding;

void CheckResolved(const nkisim::collectives::ResolvedTopology& t) {
  if (t.world_size <= 0) Finding(StrCat("accepted topology with world_size ", t.world_size));
  if (static_cast<int>(t.chip_of_rank.size()) != t.world_size) {
    Finding(StrCat("chip_of_rank has ", t.chip_of_rank.size(), " entries for ", t.world_size,
                   " ranks"));
  }
  for (const auto& set : t.group_sets) {
    if (static_cast<int>(set.group_of_rank.size()) != t.world_size ||
        static_cast<int>(set.position_of_rank.size()) != t.world_size) {
      Finding(StrCat("set '", set.name, "': rank tables do not cover the world"));
    }
    for (int r = 0; r < t.world_size; ++r) {
      const int g = set.group_of_rank[r], pos = set.position_of_rank[r];
      if (g < 0 || g >= static_cast<int>(set.groups.size()) || pos < 0 ||
          pos >= static_cast<int>(set.groups[g].size()) || set.groups[g][pos] != r) {
        Finding(StrCat("set '", set.name, "': rank ", r, " has group ", g, " position ", pos,
                       " which does not hold it"));
      }
    }
  }
  if (!t.batch_shard_group.empty() &&
      static_cast<int>(t.iota_workers.size()) != t.world_size) {
    Finding(StrCat("iota_workers has ", t.iota_workers.size(), " entries for ", t.world_size,
                   " ranks"));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const unsigned char* data, size_t size) {
  const std::string text = nkisim::fuzz::Text(data, size);
  nkisim::fuzz::Guarded("ParseTopology/ResolveTopology", [&] {
    namespace c = nkisim::collectives;
    const nkisim::proto::Topology topology = c::ParseTopology(text, nkisim::fuzz::kSource);
    const std::vector<std::string> problems = c::CheckTopology(topology, nkisim::Trn2Profile());
    const c::ResolvedTopology resolved =
        c::ResolveTopology(topology, nkisim::Trn2Profile(), nkisim::fuzz::kSource);
    if (!problems.empty()) {
      Finding(StrCat("CheckTopology found ", problems.size(),
                     " problem(s) but ResolveTopology accepted the topology: ", problems[0]));
    }
    CheckResolved(resolved);
    (void)c::FormatTopology(resolved);
    for (const c::GroupSet& set : resolved.group_sets) (void)resolved.group_set(set.name);
  });
  return 0;
}
