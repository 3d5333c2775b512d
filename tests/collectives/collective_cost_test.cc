// The link model, computed by hand on small cases, and the per-op / per-algorithm tuning.
#include "collectives/collective_cost.h"
#include "runtime/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace nkisim::collectives {
namespace {

// 64 ranks at LNC 2: 4 ranks per chip, chips 0..15 on the 4 x 4 torus of one instance.
GroupPlacement Members(const std::vector<int>& ranks) {
  const GroupPlacement all = DefaultPlacement(64, 2, Trn2Profile());
  GroupPlacement g = all;
  g.world_rank = ranks;
  g.chip.clear();
  g.ranks_on_chip.clear();
  for (int r : ranks) {
    g.chip.push_back(all.chip[r]);
    g.ranks_on_chip.push_back(all.ranks_on_chip[r]);
  }
  return g;
}

// Round figures so the hand computations stay readable; HBM and DMA out of the way unless a
// test wants them.
CollectiveParams Params() {
  CollectiveParams p;
  p.step_latency_ns = 1000;
  p.fixed_ns = 500;
  p.link_gbps = 256;
  p.hop_latency_ns = 100;
  p.interinstance_latency_ns = 15000;
  p.interinstance_gbps = 100;
  p.intrachip_gbps = 400;
  p.dma_gbps_per_core = 1e9;
  p.hbm_gbps_per_chip = 1e9;
  return p;
}

Schedule OneStep(std::vector<Transfer> transfers, int members, int chunks) {
  Schedule s;
  s.op = CollectiveOp::kAllGather;
  s.members = members;
  s.num_chunks = chunks;
  s.steps.push_back({"test", std::move(transfers)});
  return s;
}

TEST(LinkModelTest, TwoChipRingAllGather) {
  // Ranks 0 (chip 0) and 4 (chip 1): one step, each sends 256 KB over its own direction.
  const GroupPlacement g = Members({0, 4});
  const Schedule s = BuildSchedule(*FindAlgorithm("ring"), CollectiveOp::kAllGather, g, 256000,
                                   Trn2Profile());
  ASSERT_EQ(s.steps.size(), 1u);
  const ScheduleCost c = PlaySchedule(s, g, 256000, Params(), Launch::kHost);
  // fixed + step latency + 1 hop + max(256000 B / 256 GB/s, HBM 512000 B / 1e9 GB/s per chip).
  EXPECT_NEAR(c.total_ns, 500 + 1000 + 100 + 1000, 1e-6);
  EXPECT_EQ(c.per_step[0].bound, "link");
  // The calibration decomposition adds back up.
  const CollectiveParams p = Params();
  EXPECT_NEAR(c.fixed_ns + c.latency_units * p.step_latency_ns + c.link_bytes / p.link_gbps +
                  c.rest_ns,
              c.total_ns, 1e-6);
}

TEST(LinkModelTest, TwoFlowsOnOneLinkShareIt) {
  // Ranks 0, 1 (chip 0) write to ranks 4, 5 (chip 1): both cross the chip 0 +x link.
  const GroupPlacement g = Members({0, 1, 4, 5});
  const Schedule shared = OneStep({{{0}, 2, {0}, false, false}, {{1}, 3, {1}, false, false}}, 4, 4);
  const ScheduleCost c = PlaySchedule(shared, g, 256000, Params(), Launch::kHost);
  EXPECT_NEAR(c.total_ns, 500 + 1000 + 100 + 512000 / 256.0, 1e-6);
  // Rank 1 writing to chip 3 instead (rank 12, the -x wrap link) does not share: faster.
  const GroupPlacement apart_g = Members({0, 1, 4, 12});
  const ScheduleCost apart = PlaySchedule(shared, apart_g, 256000, Params(), Launch::kHost);
  EXPECT_NEAR(apart.total_ns, 500 + 1000 + 100 + 256000 / 256.0, 1e-6);
  EXPECT_GT(c.total_ns, apart.total_ns + 900);
}

TEST(LinkModelTest, RoutesByDimensionOrderAndCountsHops) {
  // Chip 0 -> chip 5 (x 1, y 1): two links, two hops; chip 0 -> chip 10 (2, 2): four hops.
  const GroupPlacement g = Members({0, 20, 40});
  const ScheduleCost two = PlaySchedule(OneStep({{{0}, 1, {0}, false, false}}, 3, 3), g, 0, Params(), Launch::kHost);
  const ScheduleCost four = PlaySchedule(OneStep({{{0}, 2, {0}, false, false}}, 3, 3), g, 0, Params(), Launch::kHost);
  EXPECT_NEAR(two.total_ns, 500 + 1000 + 2 * 100, 1e-9);
  EXPECT_NEAR(four.total_ns, 500 + 1000 + 4 * 100, 1e-9);
}

TEST(LinkModelTest, IntraChipDmaAndHbmLimits) {
  const GroupPlacement g = Members({0, 1});
  CollectiveParams p = Params();
  const Schedule s = OneStep({{{0}, 1, {0}, false, false}}, 2, 2);
  // 400000 B / 400 GB/s intra-chip; the HBM's 800000 B / 1e9 GB/s overlaps it.
  EXPECT_NEAR(PlaySchedule(s, g, 400000, p, Launch::kHost).total_ns, 500 + 1000 + 1000, 1e-6);
  p.dma_gbps_per_core = 100;  // now the rank's DMA bounds it: one physical core a rank
  EXPECT_NEAR(PlaySchedule(s, g, 400000, p, Launch::kHost).total_ns, 500 + 1000 + 4000, 1e-6);
  EXPECT_EQ(PlaySchedule(s, g, 400000, p, Launch::kHost).per_step[0].bound, "dma");
  // Four ranks on a chip of 8 physical cores: 2 cores, twice the engines, a rank.
  ASSERT_EQ(g.ranks_on_chip[0], 4);
  p.physical_cores_per_chip = 8;
  EXPECT_NEAR(PlaySchedule(s, g, 400000, p, Launch::kHost).total_ns, 500 + 1000 + 2000, 1e-6);
  // One read and one write on chip 0 at 100 GB/s: 8000 ns of HBM, longer than the data movement
  // it overlaps, so it sets the step.
  p.hbm_gbps_per_chip = 100;
  EXPECT_NEAR(PlaySchedule(s, g, 400000, p, Launch::kHost).total_ns, 500 + 1000 + 8000, 1e-6);
  EXPECT_EQ(PlaySchedule(s, g, 400000, p, Launch::kHost).per_step[0].bound, "hbm");
}

TEST(LinkModelTest, BetweenInstancesOverEfa) {
  const GroupPlacement all = DefaultPlacement(128, 2, Trn2Profile());
  GroupPlacement g = all;
  g.world_rank = {0, 64};
  g.chip = {all.chip[0], all.chip[64]};
  g.ranks_on_chip = {4, 4};
  const ScheduleCost c = PlaySchedule(OneStep({{{0}, 1, {0}, false, false}}, 2, 2), g, 100000, Params(), Launch::kHost);
  EXPECT_NEAR(c.total_ns, 500 + 1000 + 15000 + 100000 / 100.0, 1e-6);
}

TEST(LinkModelTest, GroupOfOneCostsNothing) {
  const GroupPlacement g = Members({5});
  const CollectivePlan plan = PlanCollective(CollectiveOp::kAllReduce, g, 1 << 20, Trn2Profile(), "auto",
                                             Launch::kHost);
  EXPECT_EQ(plan.cost.total_ns, 0.0);
}

// In a graph a collective pays the device's fixed cost and not the host launch; from the host it
// pays both, on the same schedule.
TEST(LinkModelTest, LaunchContextDecidesTheFixedCost) {
  const GroupPlacement g = Members({0, 4});
  const Schedule s = OneStep({{{0}, 1, {0}, false, false}}, 2, 2);
  CollectiveParams p = Params();
  p.in_graph_fixed_ns = 300;
  const ScheduleCost graph = PlaySchedule(s, g, 256000, p, Launch::kInGraph);
  const ScheduleCost host = PlaySchedule(s, g, 256000, p, Launch::kHost);
  // fixed + step latency + 1 hop + 256000 B / 256 GB/s (the HBM's read and write overlap it).
  EXPECT_NEAR(graph.total_ns, 300 + 1000 + 100 + 1000, 1e-6);
  EXPECT_NEAR(host.total_ns - graph.total_ns, 500, 1e-9);
  EXPECT_EQ(graph.fixed_ns, 0.0);
  EXPECT_EQ(host.fixed_ns, 500.0);
  EXPECT_EQ(graph.in_graph_fixed_ns, 300.0);
  for (const ScheduleCost* c : {&graph, &host}) {  // the calibration decomposition still adds up
    EXPECT_NEAR(c->fixed_ns + c->latency_units * p.step_latency_ns + c->link_bytes / p.link_gbps +
                    c->rest_ns,
                c->total_ns, 1e-6);
  }
}

// The default profile's 64-rank TP all_reduce of one decode token (B 1 x H 8192 bf16 = 16 KiB)
// in a graph: tens of microseconds, as the published 70B decode (245 us a layer with two of
// them) requires; from the host the nccom-test launch floor comes back.
TEST(LinkModelTest, InGraphTp64AllReduceIsTensOfMicroseconds) {
  const HardwareProfile prof = Trn2Profile();
  const GroupPlacement g = DefaultPlacement(64, 2, prof);
  const CollectivePlan graph =
      PlanCollective(CollectiveOp::kAllReduce, g, 16384, prof, "auto", Launch::kInGraph);
  const CollectivePlan host =
      PlanCollective(CollectiveOp::kAllReduce, g, 16384, prof, "auto", Launch::kHost);
  EXPECT_GT(graph.cost.total_ns, 2000);
  EXPECT_LT(graph.cost.total_ns, 50000);
  EXPECT_GT(host.cost.total_ns, 250000);
  EXPECT_EQ(graph.launch, Launch::kInGraph);
  EXPECT_NEAR(host.cost.total_ns - graph.cost.total_ns, host.cost.fixed_ns, 1e-6);
}

// RDH over 64 ranks on 16 chips: each local index walks the hypercube's axes in its own rotation,
// so in every inter-chip step the 4 members of a chip send over 4 different links and no link
// carries more than one member's bytes (with a common axis order, one link would carry all 4).
TEST(LinkModelTest, RdhMembersOfAChipUseDifferentLinksEachStep) {
  const GroupPlacement g = DefaultPlacement(64, 2, Trn2Profile());
  const Schedule s = BuildSchedule(*FindAlgorithm("rdh"), CollectiveOp::kAllReduce, g, 16 << 20,
                                   Trn2Profile());
  const double chunk = (16 << 20) / 64.0;
  const ScheduleCost c = PlaySchedule(s, g, chunk, Params(), Launch::kInGraph);
  int inter = 0;
  for (const StepCost& step : c.per_step) {
    if (step.label.find("recursive") == std::string::npos) continue;
    ++inter;
    EXPECT_GT(step.link_bytes, 0) << step.label;
    EXPECT_DOUBLE_EQ(step.link_bytes, step.dma_bytes) << step.label;
  }
  EXPECT_EQ(inter, 8);  // 4 halving + 4 doubling steps
  // Halving's first step sends half of a member's quarter (2 MiB) over one link at 256 GB/s.
  EXPECT_NEAR(c.per_step[1].move_ns, (2 << 20) / 256.0, 1e-6);
}

// The TP64 prefill all_reduce of 16 MiB on the trn2 profile, term by term (docs/collectives.md,
// "Per-step arithmetic"). A rank at LNC 2 has 2 cores x min(362.5, 16 x 65536 / (27.5 + 65536 /
// 27.2)) = 725 GB/s of collective DMA; the chip's HBM is 8 x 362.5 = 2900 GB/s.
//   intra-chip reduce: 12 transfers of 4 MiB a chip, each reading 2 copies and writing one:
//                      144 MiB of HBM / 2900 = 52067 ns (> 12 MiB / 725 = 17356 ns of DMA)
//   halving 2, 1, 0.5, 0.25 MiB: HBM 24, 12, 6, 3 MiB / 2900 (above the link's 8192, 4096,
//                      2048, 1024 ns by 6%), each + 1500 step + 150 hop latency
//   doubling 0.25 .. 2 MiB: link-bound, 1024 .. 8192 ns + 1650 each
//   intra-chip broadcast: 64 MiB of HBM / 2900 = 23141 ns
//   fixed: 369 + 1300 = 1669 ns
TEST(LinkModelTest, Tp64PrefillAllReduceByHand) {
  const HardwareProfile prof = Trn2Profile();
  const GroupPlacement g = DefaultPlacement(64, 2, prof);
  const CollectivePlan plan =
      PlanCollective(CollectiveOp::kAllReduce, g, 16 << 20, prof, "auto", Launch::kInGraph);
  ASSERT_EQ(plan.algorithm, "rdh");
  const double mib = 1 << 20, hbm = 2900, link = 256;
  const double hand = 1669 + (1500 + 144 * mib / hbm) +
                      (4 * 1650 + (24 + 12 + 6 + 3) * mib / hbm) +
                      (4 * 1650 + (0.25 + 0.5 + 1 + 2) * mib / link) + (1500 + 64 * mib / hbm);
  EXPECT_NEAR(plan.cost.total_ns, hand, 1e-6 * hand);
}

TEST(LinkModelTest, ParseLaunchNamesTheRule) {
  EXPECT_EQ(ParseLaunch("in-graph", "x"), Launch::kInGraph);
  EXPECT_EQ(ParseLaunch("in_graph", "x"), Launch::kInGraph);
  EXPECT_EQ(ParseLaunch("host", "x"), Launch::kHost);
  try {
    ParseLaunch("device", "--launch");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("--launch: 'device' is not a launch context"));
  }
}

TEST(LinkModelTest, TuningAppliesMostSpecificLast) {
  HardwareProfile p = Trn2Profile();
  p.clear_collective_tuning();
  p.set_collective_fixed_ns(100);
  auto* any_reduce = p.add_collective_tuning();
  any_reduce->set_op("all_reduce");
  any_reduce->set_fixed_ns(7000);
  auto* mesh_reduce = p.add_collective_tuning();
  mesh_reduce->set_op("all_reduce");
  mesh_reduce->set_algorithm("mesh");
  mesh_reduce->set_link_gbps(50);
  auto* mesh_any = p.add_collective_tuning();
  mesh_any->set_algorithm("mesh");
  mesh_any->set_fixed_ns(9000);
  mesh_any->set_step_latency_ns(3000);
  const CollectiveParams ar_mesh = ResolveParams(p, CollectiveOp::kAllReduce, "mesh");
  EXPECT_EQ(ar_mesh.fixed_ns, 7000);  // op beats algorithm
  EXPECT_EQ(ar_mesh.link_gbps, 50);
  EXPECT_EQ(ar_mesh.step_latency_ns, 3000);
  EXPECT_EQ(ResolveParams(p, CollectiveOp::kAllGather, "mesh").fixed_ns, 9000);
  EXPECT_EQ(ResolveParams(p, CollectiveOp::kAllGather, "ring").fixed_ns, 100);
  EXPECT_EQ(ResolveParams(p, CollectiveOp::kAllGather, "ring").link_gbps, 256);
}

TEST(LinkModelTest, PointToPoint) {
  proto::Topology spec;
  spec.set_world_size(64);
  spec.set_lnc(2);
  const ResolvedTopology t = ResolveTopology(spec, Trn2Profile(), "test");
  const HardwareProfile& p = Trn2Profile();
  EXPECT_DOUBLE_EQ(PointToPointNs(t, p, 3, 3, 1e6), 0.0);
  // Farther costs more, and more bytes cost more.
  EXPECT_LT(PointToPointNs(t, p, 0, 4, 1e5), PointToPointNs(t, p, 0, 40, 1e5));
  EXPECT_LT(PointToPointNs(t, p, 0, 4, 1e5), PointToPointNs(t, p, 0, 4, 1e6));
}

}  // namespace
}  // namespace nkisim::collectives
