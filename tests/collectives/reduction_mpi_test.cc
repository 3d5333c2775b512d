// Reductions that follow the algorithm: a bf16 all_reduce with reduction "algorithm" equals a
// plain reference that adds in the schedule's order with the same rounding, bit for bit, and
// differs from reduction "exact" on data chosen to show it. Any world size >= 2.
#include <mpi.h>
#include <malloc.h>
#include <sys/resource.h>

#include <gtest/gtest.h>

#include <memory>
#include <optional>

#include "collectives/collectives.h"
#include "collectives/reduction.h"
#include "runtime/dtype.h"

namespace nkisim::collectives {
namespace {

// Rank 0 holds 256 (bf16 ulp 2 there); every other rank 0.75: added one at a time to 256 each
// 0.75 is lost, while the exact sum 256 + 0.75 (n - 1) rounds once.
float Input(int rank, int64_t i) { return rank == 0 ? 256.0f + 2.0f * (i % 3) : 0.75f; }

// One bf16 addition as the wire does it: in double, rounded to fp32, then to bf16.
float Add(float a, float b) {
  return RoundTo(DType::kBFloat16, static_cast<float>(static_cast<double>(a) + b));
}

// One all_reduce set-up on the world: group "world" with the algorithm and reduction given, and
// bf16 input / output of `elements`, the input Input(rank, i).
struct WorldReduction {
  WorldReduction(const std::string& algorithm, const std::string& reduction, int64_t elements)
      : topology(Topology(algorithm, reduction)),
        lnc(2, Trn2Profile(), Rank()),
        ctx(MPI_COMM_WORLD, topology, lnc),
        in(TensorView::Create({elements}, DType::kBFloat16, "in")),
        result(TensorView::Create({elements}, DType::kBFloat16, "out")) {
    std::vector<float> v(static_cast<size_t>(elements));
    for (int64_t i = 0; i < elements; ++i) v[i] = Input(Rank(), i);
    in.FromFloats(v);
  }
  CollectiveResult AllReduce() { return all_reduce(ctx, ctx.group("world"), in, result); }

  static int Rank() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
  }
  static ResolvedTopology Topology(const std::string& algorithm, const std::string& reduction) {
    int world = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    proto::Topology spec;
    spec.set_world_size(world);
    spec.set_lnc(2);
    auto* set = spec.add_replica_groups();
    set->set_name("world");
    set->mutable_contiguous()->set_group_size(world);
    set->set_algorithm(algorithm);
    set->set_reduction(reduction);
    return ResolveTopology(spec, Trn2Profile(), "test");
  }

  const ResolvedTopology topology;
  LogicalCore lnc;
  RankContext ctx;
  TensorView in, result;
};

class AlgorithmReductionTest : public ::testing::Test {
 protected:
  void Run(const std::string& algorithm, const std::string& reduction, std::vector<float>* out,
           int64_t elements = kElements) {
    WorldReduction w(algorithm, reduction, elements);
    const CollectiveResult r = w.AllReduce();
    EXPECT_EQ(r.algorithm, algorithm);
    *out = w.result.ToFloats();
  }
  static constexpr int64_t kElements = 96;
};

// Ring: chunk c (elements [c E / n, (c + 1) E / n)) starts at member c + 1 and every next member
// adds its own value to what it received; the full sum ends at member c and is then copied.
TEST_F(AlgorithmReductionTest, RingBf16MatchesAPlainSameOrderReferenceBitForBit) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<float> got, exact;
  Run("ring", "algorithm", &got);
  Run("ring", "exact", &exact);
  int differ = 0;
  for (int64_t e = 0; e < kElements; ++e) {
    int c = 0;
    while ((c + 1) * kElements / world <= e) ++c;
    float acc = Input((c + 1) % world, e);
    for (int k = 2; k <= world; ++k) acc = Add(acc, Input((c + k) % world, e));
    EXPECT_EQ(got[e], acc) << "element " << e << " (chunk " << c << ")";
    double sum = 0;
    for (int r = 0; r < world; ++r) sum += Input(r, e);
    EXPECT_EQ(exact[e], RoundTo(DType::kBFloat16, static_cast<float>(sum))) << "element " << e;
    differ += got[e] != exact[e];
  }
  if (world >= 4) {
    EXPECT_GT(differ, 0) << "the data should show the order of the additions";
  }
}

// Above kReductionPieceElements the reduction runs in pieces (part p of every chunk at a time):
// every element still meets the ring's additions in the ring's order, bit for bit. Two pieces of
// unequal parts, with chunks that do not divide evenly.
TEST_F(AlgorithmReductionTest, RingInPiecesMatchesThePlainSameOrderReference) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const int64_t elements = kReductionPieceElements + 4099;
  std::vector<float> got;
  Run("ring", "algorithm", &got, elements);
  ASSERT_EQ(static_cast<int64_t>(got.size()), elements);
  int64_t wrong = 0, first_wrong = -1;
  int c = 0;
  for (int64_t e = 0; e < elements; ++e) {
    while ((c + 1) * elements / world <= e) ++c;
    float acc = Input((c + 1) % world, e);
    for (int k = 2; k <= world; ++k) acc = Add(acc, Input((c + k) % world, e));
    if (got[e] != acc && wrong++ == 0) first_wrong = e;
  }
  EXPECT_EQ(wrong, 0) << "first at element " << first_wrong;
}

// Mesh (two-step): member m's chunk gets, in step 0, one partial per other chip (that chip's
// members added in their order, the sender first), accumulated in chip order; in step 1 the
// chip-mates' values are added. Here with the plain order spelled out for LNC 2 (4 per chip).
TEST_F(AlgorithmReductionTest, MeshBf16MatchesAPlainSameOrderReference) {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<float> got;
  Run("mesh", "algorithm", &got);
  const int per_chip = std::min(world, 4), chips = (world + 3) / 4;
  for (int64_t e = 0; e < kElements; ++e) {
    int m = 0;
    while ((m + 1) * kElements / world <= e) ++m;
    const int my_chip = m / per_chip;
    float acc = Input(m, e);
    for (int a = 0; a < chips; ++a) {
      if (a == my_chip) continue;
      // The sender on chip a for destination m: destinations dealt out in order over a's members.
      int dest_index = 0;
      for (int b = 0; b < chips; ++b) {
        if (b == a) continue;
        for (int d = b * per_chip; d < (b + 1) * per_chip; ++d, ++dest_index) {
          if (d != m) continue;
          const int sender = a * per_chip + dest_index % per_chip;
          float partial = Input(sender, e);
          for (int k = a * per_chip; k < (a + 1) * per_chip; ++k) {
            if (k != sender) partial = Add(partial, Input(k, e));
          }
          acc = Add(acc, partial);
        }
      }
    }
    float mates = 0;
    bool first = true;
    for (int j = 1; j < per_chip; ++j) {
      const int k = my_chip * per_chip + (m % per_chip + j) % per_chip;
      mates = first ? Input(k, e) : Add(mates, Input(k, e));
      first = false;
    }
    if (!first) acc = Add(acc, mates);
    EXPECT_EQ(got[e], acc) << "element " << e << " (member " << m << "'s chunk)";
  }
}

// Under a KeepReductionBuffers, repeated reductions take no fresh pages: the wire buffers and the
// fp32 piece stay with the thread for its next call, whatever the process's malloc policy. Here
// the policy hands every freed buffer from 64 KiB up back to the system, as glibc's defaults did
// for the 64-rank `nkisim collective` sweep (2.2 MiB of fresh pages per rank and call).
TEST_F(AlgorithmReductionTest, RepeatedCallsTakeNoFreshPages) {
  std::optional<KeepReductionBuffers> keep(std::in_place);
  mallopt(M_MMAP_THRESHOLD, 64 << 10);
  mallopt(M_TRIM_THRESHOLD, 64 << 10);
  const int rank = WorldReduction::Rank();
  WorldReduction w("mesh", "algorithm", int64_t{1} << 18);  // 512 KiB of bf16
  auto minor_faults = [] {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
  };
  for (int i = 0; i < 2; ++i) w.AllReduce();  // the buffers grow
  const std::vector<float> first = w.result.ToFloats();
  constexpr int kCalls = 6;
  const long before = minor_faults();
  for (int i = 0; i < kCalls; ++i) w.AllReduce();
  const long per_call = (minor_faults() - before) / kCalls;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the rank policy's values (runtime/host_memory.h) for the
  mallopt(M_TRIM_THRESHOLD, 256 << 20);  // tests that follow in this process
  // Before: about 1,000 pages a call; now a few (MPI bookkeeping, the call's trace records).
  EXPECT_LT(per_call, 32) << "fresh pages per all_reduce call on rank " << rank;
  // When the keeper ends they go back (mapped or heap: the bytes malloc holds for the program).
  auto held = [] {
    const struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
  };
  const size_t before_release = held();
  keep.reset();
  const size_t after_release = held();
  EXPECT_GT(before_release - after_release, size_t{1} << 20) << "the fp32 piece alone is 1 MiB";
  // Without a keeper, a call keeps nothing.
  w.AllReduce();
  EXPECT_LT(held(), after_release + (size_t{256} << 10)) << "bytes held after a call without a keeper";
  // And every call gave the first call's sums, bit for bit.
  EXPECT_EQ(w.result.ToFloats(), first);
}

}  // namespace
}  // namespace nkisim::collectives
