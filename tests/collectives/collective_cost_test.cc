#include "collectives/collective_cost.h"

#include <gtest/gtest.h>

namespace nkisim::collectives {
namespace {

// 64 ranks at LNC 2: 4 ranks per chip, chips 0..15 on the 4 x 4 torus of one instance.
ResolvedTopology Instance() {
  proto::Topology spec;
  spec.set_world_size(64);
  spec.set_lnc(2);
  return ResolveTopology(spec, Trn2Profile(), "test");
}

// Hand-computed from trn2: core link 600 ns + B / 362.5 GB/s; NeuronLink 2000 ns per hop +
// B / (1024 / 4) GB/s.
TEST(CollectiveCostTest, PointToPointBySameChipHopsAndInstance) {
  const ResolvedTopology t = Instance();
  const HardwareProfile& p = Trn2Profile();
  EXPECT_DOUBLE_EQ(PointToPointNs(t, p, 3, 3, 1e6), 0.0);
  EXPECT_NEAR(PointToPointNs(t, p, 0, 3, 362500), 600 + 1000, 1e-9);     // chip 0 both
  EXPECT_NEAR(PointToPointNs(t, p, 0, 4, 256000), 2000 + 1000, 1e-9);    // chip 0 -> 1: 1 hop
  EXPECT_NEAR(PointToPointNs(t, p, 0, 12, 256000), 2000 + 1000, 1e-9);   // chip 0 -> 3: wraps
  EXPECT_NEAR(PointToPointNs(t, p, 0, 20, 256000), 2 * 2000 + 1000, 1e-9);  // chip 0 -> 5: (1,1)
  EXPECT_NEAR(PointToPointNs(t, p, 0, 40, 256000), 4 * 2000 + 1000, 1e-9);  // chip 10: (2,2)
}

TEST(CollectiveCostTest, RingAllGatherTakesTheSlowestPairPerStep) {
  const ResolvedTopology t = Instance();
  const HardwareProfile& p = Trn2Profile();
  // Group of ranks 0..7 spans chips 0 and 1: the ring crosses the chip boundary (1 hop).
  const Group group{0, 1, 2, 3, 4, 5, 6, 7};
  const double step = 2000 + 4096 / 256.0;
  EXPECT_NEAR(AllGatherNs(t, p, group, 4096), 7 * step, 1e-9);
  EXPECT_NEAR(ReduceScatterNs(t, p, group, 4096), 7 * step, 1e-9);
  EXPECT_NEAR(AllReduceNs(t, p, group, 8 * 4096), 2 * 7 * step, 1e-9);
  // Inside one chip only the core link is used.
  EXPECT_NEAR(AllGatherNs(t, p, Group{0, 1, 2, 3}, 3625), 3 * (600 + 10), 1e-9);
  EXPECT_DOUBLE_EQ(AllGatherNs(t, p, Group{5}, 1e6), 0.0);
}

TEST(CollectiveCostTest, AllToAllSumsPairwiseRounds) {
  const ResolvedTopology t = Instance();
  const HardwareProfile& p = Trn2Profile();
  const Group group{0, 4};  // chips 0 and 1
  EXPECT_NEAR(AllToAllNs(t, p, group, 2 * 256000), 2000 + 1000, 1e-9);
  const Group four{0, 1, 4, 5};  // shifts 1 and 3 cross chips, shift 2 as well (0->4, 1->5)
  EXPECT_NEAR(AllToAllNs(t, p, four, 4 * 256000), 3 * (2000 + 1000), 1e-9);
}

}  // namespace
}  // namespace nkisim::collectives
