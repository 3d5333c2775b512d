#include "collectives/algorithms.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "runtime/error.h"

namespace nkisim::collectives {
namespace {

// ---------------------------------------------------------------------------------------------
// Building blocks over a virtual group of n members holding one chunk each (chunk i = member i).

std::vector<Step> RingAllGather(int n, const char* label) {
  std::vector<Step> steps(static_cast<size_t>(std::max(n - 1, 0)));
  for (int k = 0; k + 1 < n; ++k) {
    steps[k].label = label;
    for (int i = 0; i < n; ++i) {
      steps[k].transfers.push_back({{i}, (i + 1) % n, {((i - k) % n + n) % n}, false, false});
    }
  }
  return steps;
}

std::vector<Step> RingReduceScatter(int n, const char* label) {
  std::vector<Step> steps(static_cast<size_t>(std::max(n - 1, 0)));
  for (int k = 0; k + 1 < n; ++k) {
    steps[k].label = label;
    for (int i = 0; i < n; ++i) {
      steps[k].transfers.push_back({{i}, (i + 1) % n, {((i - k - 1) % n + 2 * n) % n}, true, false});
    }
  }
  return steps;
}

// One step: every member sends its chunk to every other (a broadcast with duplication).
std::vector<Step> DirectAllGather(int n, const char* label) {
  if (n < 2) return {};
  Step s;
  s.label = label;
  for (int i = 0; i < n; ++i) {
    for (int j = 1; j < n; ++j) s.transfers.push_back({{i}, (i + j) % n, {i}, false, j > 1});
  }
  return {s};
}

// One step: every member sends its copy of chunk j to member j, which adds them in turn.
std::vector<Step> DirectReduceScatter(int n, const char* label) {
  if (n < 2) return {};
  Step s;
  s.label = label;
  for (int j = 0; j < n; ++j) {
    for (int k = 1; k < n; ++k) s.transfers.push_back({{(j + k) % n}, j, {j}, true, false});
  }
  return {s};
}

// n a power of two; axis k pairs i with i ^ 2^k, exchanging the 2^k chunks gathered so far.
std::vector<Step> RecursiveDoublingAllGather(int n, const char* label) {
  std::vector<Step> steps;
  for (int bit = 1; bit < n; bit <<= 1) {
    Step s;
    s.label = label;
    for (int i = 0; i < n; ++i) {
      Transfer t{{i}, i ^ bit, {}, false, false};
      const int base = i & ~(bit - 1);
      for (int c = base; c < base + bit; ++c) t.chunks.push_back(c);
      s.transfers.push_back(std::move(t));
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

// n a power of two; the highest axis first, each member keeps the half its partner does not.
std::vector<Step> RecursiveHalvingReduceScatter(int n, const char* label) {
  std::vector<Step> steps;
  for (int bit = n / 2; bit >= 1; bit >>= 1) {
    Step s;
    s.label = label;
    for (int i = 0; i < n; ++i) {
      const int partner = i ^ bit;
      Transfer t{{i}, partner, {}, true, false};
      // The window both still share: chunks agreeing with i above this bit; send the partner's half.
      const int window = i & ~(2 * bit - 1);
      for (int c = window; c < window + 2 * bit; ++c) {
        if ((c & bit) == (partner & bit)) t.chunks.push_back(c);
      }
      s.transfers.push_back(std::move(t));
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

// ---------------------------------------------------------------------------------------------
// Group structure.

bool IsPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

// v's low `dims` bits rotated left by `by` (mod dims): bit k moves to bit (k + by) mod dims.
int RotateBits(int v, int by, int dims) {
  if (dims <= 1) return v;
  by %= dims;
  const int mask = (1 << dims) - 1;
  return ((v << by) | (v >> (dims - by))) & mask;
}

// Members grouped by chip, chips in order of first appearance; members in group order.
struct ChipGroups {
  std::vector<int> chips;                 // global chip ids
  std::vector<std::vector<int>> members;  // per chip
  std::vector<int> local_index;           // per member: index inside its chip's list
};

ChipGroups ByChip(const GroupPlacement& g) {
  ChipGroups out;
  out.local_index.resize(static_cast<size_t>(g.size()));
  std::map<int, size_t> index;
  for (int m = 0; m < g.size(); ++m) {
    auto [it, fresh] = index.emplace(g.chip[m], out.chips.size());
    if (fresh) {
      out.chips.push_back(g.chip[m]);
      out.members.emplace_back();
    }
    out.local_index[m] = static_cast<int>(out.members[it->second].size());
    out.members[it->second].push_back(m);
  }
  return out;
}

// Position of a chip on the torus seen as a hypercube: a 4-ring is a 2-cube under the Gray code
// (0, 1, 3, 2), so on a 4 x 4 torus hypercube neighbours are torus neighbours.
int GrayInverse(int x) {
  int v = 0;
  for (; x; x >>= 1) v ^= x;
  return v;
}
int HypercubeKey(const GroupPlacement& g, int chip) {
  const int local = chip % g.chips_per_instance;
  const int x = local % g.torus_x, y = local / g.torus_x;
  return (chip / g.chips_per_instance) * g.chips_per_instance + GrayInverse(y) * g.torus_x +
         GrayInverse(x);
}
// A Hamiltonian-style order of chips: the snake through the torus rows.
int SnakeKey(const GroupPlacement& g, int chip) {
  const int local = chip % g.chips_per_instance;
  const int x = local % g.torus_x, y = local / g.torus_x;
  return (chip / g.chips_per_instance) * g.chips_per_instance + y * g.torus_x +
         (y % 2 ? g.torus_x - 1 - x : x);
}

// Chip indices of `cg` ordered by key.
std::vector<int> OrderChips(const GroupPlacement& g, const ChipGroups& cg, int (*key)(const GroupPlacement&, int)) {
  std::vector<int> order(cg.chips.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return key(g, cg.chips[a]) < key(g, cg.chips[b]); });
  return order;
}

std::string EqualMembersPerChip(const ChipGroups& cg) {
  for (size_t c = 1; c < cg.members.size(); ++c) {
    if (cg.members[c].size() != cg.members[0].size()) {
      return StrCat("chip ", cg.chips[0], " holds ", cg.members[0].size(), " members and chip ",
                    cg.chips[c], " holds ", cg.members[c].size(), "; every chip must hold as many");
    }
  }
  return "";
}

std::string OneInstance(const GroupPlacement& g) {
  for (int m = 1; m < g.size(); ++m) {
    if (g.instance(m) != g.instance(0)) {
      return StrCat("the group spans instances ", g.instance(0), " and ", g.instance(m),
                    "; use hierarchical");
    }
  }
  return "";
}

Schedule Empty(CollectiveOp op, int n, int split) {
  Schedule s;
  s.op = op;
  s.members = n;
  s.num_chunks = NumChunks(op, n, split);
  return s;
}

void Append(std::vector<Step>& into, std::vector<Step> more) {
  for (Step& s : more) {
    if (!s.transfers.empty()) into.push_back(std::move(s));
  }
}

std::vector<int> Iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

std::vector<std::vector<int>> Singletons(const std::vector<int>& chunks) {
  std::vector<std::vector<int>> out;
  for (int c : chunks) out.push_back({c});
  return out;
}

// ---------------------------------------------------------------------------------------------
// ring

bool ServesReductionsAndGather(CollectiveOp op) { return op != CollectiveOp::kAllToAll; }
std::string AcceptsAny(const GroupPlacement&) { return ""; }

Schedule RingSchedule(CollectiveOp op, const GroupPlacement& g, double, const HardwareProfile&) {
  const int n = g.size();
  Schedule s = Empty(op, n, 1);
  if (op != CollectiveOp::kAllGather) Append(s.steps, RingReduceScatter(n, "ring: reduce-scatter"));
  if (op != CollectiveOp::kReduceScatter) Append(s.steps, RingAllGather(n, "ring: all-gather"));
  return s;
}

// ---------------------------------------------------------------------------------------------
// mesh

// Step 0 of the mesh all-gather: who on chip `a` writes which chunks to whom on chip `b`.
// Destination chips are dealt out to the source chip's members; with fewer destination chips
// than members, every member writes its own chunk instead. Receivers are spread over the
// destination chip's members by the source chip's rank among the chips writing to it.
std::vector<Step> MeshAllGather(const GroupPlacement& g, const ChipGroups& cg) {
  const int n = g.size();
  const size_t chips = cg.chips.size();
  std::vector<std::vector<int>> received(static_cast<size_t>(n));
  Step routed{"mesh: routed write", {}};
  for (size_t a = 0; a < chips; ++a) {
    const std::vector<int>& from = cg.members[a];
    std::vector<int> chip_chunks = from;  // chunk m = member m's input
    int dest_index = 0;
    for (size_t b = 0; b < chips; ++b) {
      if (b == a) continue;
      const std::vector<int>& to = cg.members[b];
      const int source_rank_at_b = static_cast<int>(a < b ? a : a - 1);
      if (chips - 1 >= from.size()) {
        const int sender = from[dest_index % from.size()];
        const int receiver = to[source_rank_at_b % to.size()];
        Transfer t{{sender}, receiver, chip_chunks, false, false};
        for (int m : from) if (m != sender) t.srcs.push_back(m);
        received[receiver].insert(received[receiver].end(), chip_chunks.begin(), chip_chunks.end());
        routed.transfers.push_back(std::move(t));
      } else {
        for (size_t k = 0; k < from.size(); ++k) {
          const int receiver = to[(k + source_rank_at_b) % to.size()];
          routed.transfers.push_back({{from[k]}, receiver, {from[k]}, false, false});
          received[receiver].push_back(from[k]);
        }
      }
      ++dest_index;
    }
  }
  Step broadcast{"mesh: intra-chip broadcast", {}};
  for (size_t b = 0; b < chips; ++b) {
    const std::vector<int>& on = cg.members[b];
    for (size_t i = 0; i < on.size(); ++i) {
      std::vector<int> chunks = received[on[i]];
      chunks.insert(chunks.begin(), on[i]);
      for (size_t j = 1; j < on.size(); ++j) {
        broadcast.transfers.push_back({{on[i]}, on[(i + j) % on.size()], chunks, false, j > 1});
      }
    }
  }
  std::vector<Step> steps;
  Append(steps, {routed, broadcast});
  return steps;
}

// The mirror: each member's chunk gets one partial per other chip (reduced over that chip's
// members on the way out), then the partial of its own chip.
std::vector<Step> MeshReduceScatter(const GroupPlacement& g, const ChipGroups& cg) {
  (void)g;
  const size_t chips = cg.chips.size();
  Step routed{"mesh: routed reduce", {}};
  for (size_t a = 0; a < chips; ++a) {
    const std::vector<int>& from = cg.members[a];
    int dest_index = 0;
    for (size_t b = 0; b < chips; ++b) {
      if (b == a) continue;
      for (int dst : cg.members[b]) {
        const int sender = from[dest_index++ % from.size()];
        Transfer t{{sender}, dst, {dst}, true, false};
        for (int m : from) if (m != sender) t.srcs.push_back(m);
        routed.transfers.push_back(std::move(t));
      }
    }
  }
  Step local{"mesh: intra-chip reduce", {}};
  for (size_t b = 0; b < chips; ++b) {
    const std::vector<int>& on = cg.members[b];
    for (size_t i = 0; i < on.size(); ++i) {
      Transfer t{{}, on[i], {on[i]}, true, false};
      for (size_t j = 1; j < on.size(); ++j) t.srcs.push_back(on[(i + j) % on.size()]);
      if (!t.srcs.empty()) local.transfers.push_back(std::move(t));
    }
  }
  std::vector<Step> steps;
  Append(steps, {routed, local});
  return steps;
}

Schedule MeshSchedule(CollectiveOp op, const GroupPlacement& g, double, const HardwareProfile&) {
  Schedule s = Empty(op, g.size(), 1);
  const ChipGroups cg = ByChip(g);
  if (op != CollectiveOp::kAllGather) Append(s.steps, MeshReduceScatter(g, cg));
  if (op != CollectiveOp::kReduceScatter) Append(s.steps, MeshAllGather(g, cg));
  return s;
}

bool ServesAllReduce(CollectiveOp op) { return op == CollectiveOp::kAllReduce; }

Schedule MeshOneStepSchedule(CollectiveOp op, const GroupPlacement& g, double,
                             const HardwareProfile&) {
  const int n = g.size();
  Schedule s = Empty(op, n, 1);
  if (n < 2) return s;
  Step all{"mesh_1step: broadcast and reduce", {}};
  const std::vector<int> every = Iota(n);
  for (int dst = 0; dst < n; ++dst) {
    for (int k = 1; k < n; ++k) {
      const int src = (dst + k) % n;
      all.transfers.push_back({{src}, dst, every, true, dst != (src + 1) % n});
    }
  }
  s.steps.push_back(std::move(all));
  return s;
}

// ---------------------------------------------------------------------------------------------
// rdh

std::string RdhAccepts(const GroupPlacement& g) {
  if (std::string why = OneInstance(g); !why.empty()) return why;
  const ChipGroups cg = ByChip(g);
  if (!IsPowerOfTwo(static_cast<int>(cg.chips.size()))) {
    return StrCat("the group touches ", cg.chips.size(), " chips, not a power of two");
  }
  return EqualMembersPerChip(cg);
}

Schedule RdhSchedule(CollectiveOp op, const GroupPlacement& g, double, const HardwareProfile&) {
  Schedule s = Empty(op, g.size(), 1);
  const ChipGroups cg = ByChip(g);
  const std::vector<int> order = OrderChips(g, cg, HypercubeKey);
  const int c = static_cast<int>(cg.chips.size()), l = static_cast<int>(cg.members[0].size());
  // Inter-chip groups: the members of one local index, chips in hypercube order. Each local
  // index walks the hypercube's axes in its own rotation (index li starts on axis li), so at
  // every step the chip's members use different links: the runtime's RDH contends on a link
  // "only in some of the cases" (intra-node collectives guide), which a common axis order would
  // make every case. Virtual member v of group li is the chip at position RotateBits(v, li).
  std::vector<std::vector<int>> across(static_cast<size_t>(l));
  int dims = 0;
  while ((1 << dims) < c) ++dims;
  for (int li = 0; li < l; ++li) {
    for (int v = 0; v < c; ++v) across[li].push_back(cg.members[order[RotateBits(v, li, dims)]][li]);
  }
  // Chunks that local index li is responsible for across the chip stage: its group's chunks.
  std::vector<std::vector<int>> of_index = across;
  auto inter = [&](bool gather) {
    std::vector<Step> steps;
    for (int li = 0; li < l; ++li) {
      const std::vector<Step> v = gather ? RecursiveDoublingAllGather(c, "rdh: recursive doubling")
                                         : RecursiveHalvingReduceScatter(c, "rdh: recursive halving");
      MergeSteps(steps, 0, Lift(v, across[li], Singletons(across[li])));
    }
    return steps;
  };
  auto intra = [&](bool gather) {
    std::vector<Step> steps;
    for (int ci = 0; ci < c; ++ci) {
      const std::vector<Step> v = gather ? DirectAllGather(l, "rdh: intra-chip broadcast")
                                         : DirectReduceScatter(l, "rdh: intra-chip reduce");
      MergeSteps(steps, 0, Lift(v, cg.members[ci], of_index));
    }
    return steps;
  };
  if (op != CollectiveOp::kAllGather) {
    Append(s.steps, intra(false));
    Append(s.steps, inter(false));
  }
  if (op != CollectiveOp::kReduceScatter) {
    Append(s.steps, inter(true));
    Append(s.steps, intra(true));
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// kangaring

std::string KangaRingAccepts(const GroupPlacement& g) {
  if (std::string why = OneInstance(g); !why.empty()) return why;
  const ChipGroups cg = ByChip(g);
  for (size_t c = 0; c < cg.chips.size(); ++c) {
    const int here = static_cast<int>(cg.members[c].size());
    const int total = g.ranks_on_chip[cg.members[c][0]];
    if (here != total) {
      return StrCat("the group holds ", here, " of the ", total, " ranks of chip ", cg.chips[c],
                    "; kangaring needs every rank of each chip it touches");
    }
    if (here % 2 != 0) {
      return StrCat("chip ", cg.chips[c], " holds ", here,
                    " ranks; kangaring pairs primaries with secondaries, so it needs an even count");
    }
  }
  return EqualMembersPerChip(cg);
}

// Two cycles h = 0, 1 (the second runs the other way round), each carrying half of every
// member's data (chunk 2m + h). Per chip, ranks pair up (local 2p, 2p + 1); in cycle h the
// primary is local 2p + h, the secondary the other.
Schedule KangaRingSchedule(CollectiveOp op, const GroupPlacement& g, double,
                           const HardwareProfile&) {
  Schedule s = Empty(op, g.size(), 2);
  const ChipGroups cg = ByChip(g);
  const std::vector<int> order = OrderChips(g, cg, SnakeKey);
  const int pairs = static_cast<int>(cg.members[0].size()) / 2;
  std::vector<Step> rs_steps, ag_steps;
  for (int h = 0; h < 2; ++h) {
    std::vector<int> primary, secondary;
    for (int ci : order) {
      for (int p = 0; p < pairs; ++p) {
        primary.push_back(cg.members[ci][2 * p + h]);
        secondary.push_back(cg.members[ci][2 * p + 1 - h]);
      }
    }
    if (h == 1) {
      std::reverse(primary.begin(), primary.end());
      std::reverse(secondary.begin(), secondary.end());
    }
    const int np = static_cast<int>(primary.size());
    auto chunk = [h](int member) { return 2 * member + h; };
    auto pair_chunks = [&](int i) { return std::vector<int>{chunk(primary[i]), chunk(secondary[i])}; };
    // Reduce-scatter: P - 1 ring steps reading primary + secondary (3R1W), then the pair settles.
    std::vector<Step> rs(static_cast<size_t>(np));
    for (int k = 0; k + 1 < np; ++k) {
      rs[k].label = "kangaring: reduce";
      for (int i = 0; i < np; ++i) {
        const int c = ((i - k - 1) % np + 2 * np) % np;
        rs[k].transfers.push_back({{primary[i], secondary[i]}, primary[(i + 1) % np], pair_chunks(c), true, false});
      }
    }
    rs[np - 1].label = "kangaring: settle pair";
    for (int i = 0; i < np; ++i) {
      rs[np - 1].transfers.push_back({{secondary[i]}, primary[i], {chunk(primary[i])}, true, false});
      rs[np - 1].transfers.push_back({{primary[i]}, secondary[i], {chunk(secondary[i])}, true, false});
    }
    MergeSteps(rs_steps, 0, std::move(rs));
    // All-gather: the pair swaps its chunks and the primary writes both downstream; then each
    // primary forwards what it received to the next primary and, from the same read, to its
    // secondary.
    std::vector<Step> ag(static_cast<size_t>(np));
    for (int k = 0; k < np; ++k) {
      ag[k].label = "kangaring: forward + duplicate";
      for (int i = 0; i < np; ++i) {
        const int c = ((i - k) % np + np) % np;
        if (k == 0) {
          if (np > 1) {
            ag[k].transfers.push_back({{primary[i], secondary[i]}, primary[(i + 1) % np], pair_chunks(i), false, false});
          }
          ag[k].transfers.push_back({{primary[i]}, secondary[i], {chunk(primary[i])}, false, true});
          ag[k].transfers.push_back({{secondary[i]}, primary[i], {chunk(secondary[i])}, false, true});
          continue;
        }
        if (k + 1 < np) {
          ag[k].transfers.push_back({{primary[i]}, primary[(i + 1) % np], pair_chunks(c), false, false});
        }
        ag[k].transfers.push_back({{primary[i]}, secondary[i], pair_chunks(c), false, k + 1 < np});
      }
    }
    MergeSteps(ag_steps, 0, std::move(ag));
  }
  if (op != CollectiveOp::kAllGather) Append(s.steps, std::move(rs_steps));
  if (op != CollectiveOp::kReduceScatter) Append(s.steps, std::move(ag_steps));
  return s;
}

// ---------------------------------------------------------------------------------------------
// hierarchical

std::string HierarchicalAccepts(const GroupPlacement& g) {
  std::map<int, int> per_instance;
  for (int m = 0; m < g.size(); ++m) ++per_instance[g.instance(m)];
  if (per_instance.size() < 2) return "the group lies inside one instance";
  for (const auto& [inst, count] : per_instance) {
    if (count != per_instance.begin()->second) {
      return StrCat("instance ", per_instance.begin()->first, " holds ",
                    per_instance.begin()->second, " members and instance ", inst, " holds ", count,
                    "; every instance must hold as many");
    }
  }
  return "";
}


// The members of each instance, in instance order.
std::vector<std::vector<int>> ByInstance(const GroupPlacement& g) {
  std::map<int, std::vector<int>> by_instance;
  for (int m = 0; m < g.size(); ++m) by_instance[g.instance(m)].push_back(m);
  std::vector<std::vector<int>> instances;
  for (auto& [inst, members] : by_instance) instances.push_back(std::move(members));
  return instances;
}

// The sub-group of g made of `members`, placed where they sit.
GroupPlacement SubPlacement(const GroupPlacement& g, const std::vector<int>& members) {
  GroupPlacement sub;
  sub.chips_per_instance = g.chips_per_instance;
  sub.torus_x = g.torus_x;
  sub.torus_y = g.torus_y;
  for (int m : members) {
    sub.world_rank.push_back(g.world_rank[m]);
    sub.chip.push_back(g.chip[m]);
    sub.ranks_on_chip.push_back(g.ranks_on_chip[m]);
  }
  return sub;
}

// The intra-instance stage's algorithm for sub_op on one instance's sub-group: what auto would
// pick there, with kangaring replaced by rdh and a shape the row refuses by ring.
const AlgorithmRow* HierarchicalInner(CollectiveOp sub_op, const GroupPlacement& sub, double bytes,
                                      const HardwareProfile& profile) {
  const AlgorithmRow* row = ChooseAlgorithm(sub_op, sub, bytes, profile, "auto").row;
  if (std::string(row->name) == "kangaring") row = FindAlgorithm("rdh");
  if (!row->accepts(sub).empty()) row = FindAlgorithm("ring");
  return row;
}

// The schedule depends on the size only through the intra-instance algorithms.
std::string HierarchicalVariant(CollectiveOp op, const GroupPlacement& g, double bytes,
                                const HardwareProfile& profile) {
  const GroupPlacement sub = SubPlacement(g, ByInstance(g)[0]);
  std::string key;
  if (op != CollectiveOp::kAllGather) {
    key += StrCat("rs=", HierarchicalInner(CollectiveOp::kReduceScatter, sub, bytes, profile)->name);
  }
  if (op != CollectiveOp::kReduceScatter) {
    key += StrCat(key.empty() ? "" : ",", "ag=",
                  HierarchicalInner(CollectiveOp::kAllGather, sub, bytes, profile)->name);
  }
  return key;
}

Schedule HierarchicalSchedule(CollectiveOp op, const GroupPlacement& g, double bytes,
                              const HardwareProfile& profile) {
  Schedule s = Empty(op, g.size(), 1);
  const std::vector<std::vector<int>> instances = ByInstance(g);
  const int count = static_cast<int>(instances.size());
  const int per = static_cast<int>(instances[0].size());
  // Peers: the members with one local index, one per instance.
  std::vector<std::vector<int>> peers(static_cast<size_t>(per));
  for (int li = 0; li < per; ++li) {
    for (int i = 0; i < count; ++i) peers[li].push_back(instances[i][li]);
  }
  const GroupPlacement sub = SubPlacement(g, instances[0]);
  // The intra-instance stage: the inner algorithm on one instance's sub-group, its virtual chunk
  // li standing for the chunks of every peer of local index li.
  auto intra = [&](CollectiveOp sub_op) {
    const AlgorithmRow* inner = HierarchicalInner(sub_op, sub, bytes, profile);
    std::vector<Step> steps;
    // Every instance has the same shape: the first one's schedule, relabelled for each.
    const Schedule v = BuildSchedule(*inner, sub_op, sub, bytes, profile);
    ReserveMerged(steps, v.steps, count);
    for (int i = 0; i < count; ++i) MergeSteps(steps, 0, Lift(v.steps, instances[i], peers));
    for (Step& st : steps) st.label = StrCat("hierarchical/", inner->name, ": ", st.label);
    return steps;
  };
  auto inter = [&](bool gather) {
    std::vector<Step> steps;
    const std::vector<Step> v = gather ? RingAllGather(count, "hierarchical: inter-instance ring")
                                       : RingReduceScatter(count, "hierarchical: inter-instance ring");
    ReserveMerged(steps, v, per);
    for (int li = 0; li < per; ++li) MergeSteps(steps, 0, Lift(v, peers[li], Singletons(peers[li])));
    return steps;
  };
  if (op != CollectiveOp::kAllGather) {
    Append(s.steps, intra(CollectiveOp::kReduceScatter));
    Append(s.steps, inter(false));
  }
  if (op != CollectiveOp::kReduceScatter) {
    Append(s.steps, inter(true));
    Append(s.steps, intra(CollectiveOp::kAllGather));
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// pairwise

bool ServesAllToAll(CollectiveOp op) { return op == CollectiveOp::kAllToAll; }

Schedule PairwiseSchedule(CollectiveOp op, const GroupPlacement& g, double, const HardwareProfile&) {
  const int n = g.size();
  Schedule s = Empty(op, n, 1);
  for (int k = 1; k < n; ++k) {
    Step st{"pairwise: round", {}};
    for (int i = 0; i < n; ++i) {
      const int j = (i + k) % n;
      st.transfers.push_back({{i}, j, {i * n + j}, false, false});
    }
    s.steps.push_back(std::move(st));
  }
  return s;
}

const std::vector<AlgorithmRow>& Table() {
  static const std::vector<AlgorithmRow> kTable = {
      {"ring", "p - 1 steps per phase around the group; the fallback", ServesReductionsAndGather,
       AcceptsAny, RingSchedule},
      {"mesh", "routed writes chip to chip, then an intra-chip broadcast; small messages",
       ServesReductionsAndGather, OneInstance, MeshSchedule},
      {"mesh_1step", "all_reduce: every member sends its whole buffer to all, once",
       ServesAllReduce, OneInstance, MeshOneStepSchedule},
      {"rdh", "recursive doubling/halving over the torus as a hypercube, plus an intra-chip stage",
       ServesReductionsAndGather, RdhAccepts, RdhSchedule},
      {"kangaring", "primaries on two counter-rotating cycles; one read feeds two writes",
       ServesReductionsAndGather, KangaRingAccepts, KangaRingSchedule},
      {"hierarchical", "the intra-instance algorithm, then a ring across instances",
       ServesReductionsAndGather, HierarchicalAccepts, HierarchicalSchedule, HierarchicalVariant},
      {"pairwise", "all_to_all: p - 1 rounds, member i sends to i + k", ServesAllToAll,
       AcceptsAny, PairwiseSchedule},
  };
  return kTable;
}


std::string GroupString(const GroupPlacement& g) {
  std::string s = "[";
  for (int m = 0; m < g.size() && m < 8; ++m) s += StrCat(m ? ", " : "", g.world_rank[m]);
  if (g.size() > 8) s += StrCat(", ... (", g.size(), " ranks)");
  return s + "]";
}

std::string SizeString(double bytes) {
  if (bytes >= 1 << 20) return StrCat(bytes / (1 << 20), " MiB");
  if (bytes >= 1 << 10) return StrCat(bytes / (1 << 10), " KiB");
  return StrCat(bytes, " B");
}

}  // namespace

GroupPlacement PlaceGroup(const ResolvedTopology& topology, const HardwareProfile& profile,
                          const Group& group) {
  GroupPlacement g;
  g.chips_per_instance = static_cast<int>(std::max<uint32_t>(profile.chips_per_instance(), 1));
  g.torus_x = static_cast<int>(std::max<uint32_t>(profile.torus_x(), 1));
  g.torus_y = static_cast<int>(std::max<uint32_t>(profile.torus_y(), 1));
  std::map<int, int> on_chip;
  for (int chip : topology.chip_of_rank) ++on_chip[chip];
  for (int r : group) {
    g.world_rank.push_back(r);
    g.chip.push_back(topology.chip_of_rank[r]);
    g.ranks_on_chip.push_back(on_chip[topology.chip_of_rank[r]]);
  }
  return g;
}

GroupPlacement DefaultPlacement(int world, int lnc, const HardwareProfile& profile) {
  ResolvedTopology t;
  t.world_size = world;
  t.lnc = lnc;
  const int per_chip = RanksPerChip(profile, lnc, StrCat("profile ", profile.name()));
  for (int r = 0; r < world; ++r) t.chip_of_rank.push_back(r / per_chip);
  Group all(static_cast<size_t>(world));
  std::iota(all.begin(), all.end(), 0);
  return PlaceGroup(t, profile, all);
}

const std::vector<AlgorithmRow>& AlgorithmTable() { return Table(); }

Schedule BuildSchedule(const AlgorithmRow& row, CollectiveOp op, const GroupPlacement& group,
                       double buffer_bytes, const HardwareProfile& profile) {
  if (group.size() < 2) return Empty(op, group.size(), 1);
  return row.generate(op, group, buffer_bytes, profile);
}

std::string ScheduleVariant(const AlgorithmRow& row, CollectiveOp op, const GroupPlacement& group,
                            double buffer_bytes, const HardwareProfile& profile) {
  if (group.size() < 2 || row.variant == nullptr) return "";
  return row.variant(op, group, buffer_bytes, profile);
}

const AlgorithmRow* FindAlgorithm(const std::string& name) {
  for (const AlgorithmRow& row : Table()) {
    if (name == row.name) return &row;
  }
  return nullptr;
}

std::string AlgorithmNames() {
  std::string s;
  for (const AlgorithmRow& row : Table()) s += StrCat(s.empty() ? "" : ", ", row.name);
  return s;
}

AlgorithmChoice ChooseAlgorithm(CollectiveOp op, const GroupPlacement& group, double buffer_bytes,
                                const HardwareProfile& profile, const std::string& requested) {
  if (!requested.empty() && requested != "auto") {
    const AlgorithmRow* row = FindAlgorithm(requested);
    if (!row) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat("algorithm '", requested, "' is not one of auto, ", AlgorithmNames()));
    }
    if (!row->serves(op)) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat("algorithm '", requested, "' does not implement ", OpName(op), " (", row->name,
                   ": ", row->summary, ")"));
    }
    if (group.size() >= 2) {
      if (std::string why = row->accepts(group); !why.empty()) {
        Raise(ErrorCode::kInvalidArgument, StrCat("algorithm '", requested, "' cannot run ",
                                                  OpName(op), " on group ", GroupString(group),
                                                  ": ", why));
      }
    }
    return {row, "forced"};
  }
  if (op == CollectiveOp::kAllToAll) return {FindAlgorithm("pairwise"), "auto: all_to_all"};
  if (HierarchicalAccepts(group).empty()) {
    return {FindAlgorithm("hierarchical"), "auto: the group spans instances"};
  }
  if (!OneInstance(group).empty()) {
    return {FindAlgorithm("ring"),
            StrCat("auto: hierarchical does not fit (", HierarchicalAccepts(group), "); ring")};
  }
  // The size the runtime's thresholds speak of: what nccom-test calls the size.
  const double size = op == CollectiveOp::kAllGather ? buffer_bytes * group.size() : buffer_bytes;
  const double n = group.size();
  const double mesh_max = static_cast<double>(profile.mesh_max_bytes_per_rank()) * n;
  const double rdh_max = static_cast<double>(profile.rdh_max_bytes_per_rank()) * n;
  if (size < mesh_max) {
    return {FindAlgorithm("mesh"),
            StrCat("auto: ", SizeString(size), " < ", SizeString(mesh_max), " (mesh_max_bytes_per_rank x ", n, ")")};
  }
  std::string why = StrCat("auto: ", SizeString(size));
  if (size < rdh_max) {
    const std::string rule = RdhAccepts(group);
    if (rule.empty()) {
      return {FindAlgorithm("rdh"), StrCat(why, " < ", SizeString(rdh_max), " (rdh_max_bytes_per_rank x ", n, ")")};
    }
    why += StrCat(" < rdh_max, but rdh does not fit (", rule, ")");
  } else {
    why += StrCat(" >= ", SizeString(rdh_max), " (rdh_max_bytes_per_rank x ", n, ")");
  }
  const std::string rule = KangaRingAccepts(group);
  if (rule.empty()) return {FindAlgorithm("kangaring"), why};
  return {FindAlgorithm("ring"), StrCat(why, "; kangaring does not fit (", rule, "); ring")};
}

}  // namespace nkisim::collectives
