// Every algorithm row, every op it serves and every group shape it accepts at 8, 16, 64 and 128
// ranks: a symbolic run of the schedule delivers exactly what the op promises.
#include "collectives/schedule.h"

#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "collectives/algorithms.h"
#include "runtime/error.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::collectives {
namespace {

using ::testing::HasSubstr;

// A group of `world` ranks at LNC 2 (4 ranks per chip, 16 chips per instance): the members
// chosen by `pick` from the world.
GroupPlacement Pick(int world, const std::vector<int>& ranks) {
  const GroupPlacement all = DefaultPlacement(world, 2, Trn2Profile());
  GroupPlacement g = all;
  g.world_rank.clear();
  g.chip.clear();
  g.ranks_on_chip.clear();
  for (int r : ranks) {
    g.world_rank.push_back(r);
    g.chip.push_back(all.chip[r]);
    g.ranks_on_chip.push_back(all.ranks_on_chip[r]);
  }
  return g;
}
std::vector<int> Range(int first, int count, int stride = 1) {
  std::vector<int> v;
  for (int i = 0; i < count; ++i) v.push_back(first + i * stride);
  return v;
}

struct Shape {
  const char* name;
  int world;
  std::vector<int> ranks;
};

std::vector<Shape> Shapes() {
  std::vector<Shape> shapes;
  for (int world : {8, 16, 64, 128}) {
    shapes.push_back({"whole world", world, Range(0, world)});
    shapes.push_back({"first 8 (2 chips)", world, Range(0, 8)});
    shapes.push_back({"one per chip (strided)", world, Range(0, world / 4, 4)});
    shapes.push_back({"two per chip", world, [&] {
                        std::vector<int> v;
                        for (int c = 0; c < world / 4; ++c) v.insert(v.end(), {4 * c, 4 * c + 1});
                        return v;
                      }()});
    if (world >= 16) shapes.push_back({"3 chips (12 ranks)", world, Range(0, 12)});
    if (world >= 16) shapes.push_back({"5 ranks over 2 chips", world, Range(2, 5)});
  }
  shapes.push_back({"one rank", 8, {3}});
  shapes.push_back({"first 4 (one chip)", 64, Range(0, 4)});
  shapes.push_back({"strided 8 over 64", 64, Range(0, 8, 8)});
  return shapes;
}

TEST(ScheduleTest, EveryAlgorithmDeliversEveryChunkOnEveryShape) {
  int checked = 0;
  for (const Shape& shape : Shapes()) {
    const GroupPlacement g = Pick(shape.world, shape.ranks);
    for (const AlgorithmRow& row : AlgorithmTable()) {
      for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                              CollectiveOp::kAllReduce, CollectiveOp::kAllToAll}) {
        if (!row.serves(op) || !row.accepts(g).empty()) continue;
        const Schedule s = BuildSchedule(row, op, g, 1 << 20, Trn2Profile());
        EXPECT_EQ(CheckSchedule(s), "")
            << row.name << " " << OpName(op) << " on " << shape.name << " of " << shape.world;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 150);
}

TEST(ScheduleTest, ShapesEachAlgorithmAcceptsAtSixtyFourAndOneTwentyEight) {
  const GroupPlacement w64 = Pick(64, Range(0, 64)), w128 = Pick(128, Range(0, 128));
  EXPECT_EQ(FindAlgorithm("rdh")->accepts(w64), "");
  EXPECT_EQ(FindAlgorithm("kangaring")->accepts(w64), "");
  EXPECT_EQ(FindAlgorithm("mesh")->accepts(w64), "");
  EXPECT_THAT(FindAlgorithm("hierarchical")->accepts(w64), HasSubstr("inside one instance"));
  EXPECT_EQ(FindAlgorithm("hierarchical")->accepts(w128), "");
  EXPECT_THAT(FindAlgorithm("mesh")->accepts(w128), HasSubstr("spans instances"));
  // Strided: one rank per chip, so kangaring (needs every rank of a chip) falls back.
  EXPECT_THAT(FindAlgorithm("kangaring")->accepts(Pick(64, Range(0, 16, 4))),
              HasSubstr("holds 1 of the 4 ranks"));
  EXPECT_THAT(FindAlgorithm("rdh")->accepts(Pick(64, Range(0, 12))),
              HasSubstr("3 chips, not a power of two"));
}

TEST(ScheduleTest, StepCountsFollowTheAlgorithms) {
  const GroupPlacement g = Pick(64, Range(0, 64));
  const HardwareProfile& p = Trn2Profile();
  auto steps = [&](const char* algo, CollectiveOp op) {
    return BuildSchedule(*FindAlgorithm(algo), op, g, 1 << 20, p).steps.size();
  };
  EXPECT_EQ(steps("ring", CollectiveOp::kAllGather), 63u);
  EXPECT_EQ(steps("ring", CollectiveOp::kAllReduce), 126u);
  EXPECT_EQ(steps("mesh", CollectiveOp::kAllGather), 2u);
  EXPECT_EQ(steps("mesh", CollectiveOp::kAllReduce), 4u);
  EXPECT_EQ(steps("mesh_1step", CollectiveOp::kAllReduce), 1u);
  EXPECT_EQ(steps("rdh", CollectiveOp::kAllGather), 5u);  // 4 hypercube axes + intra-chip
  EXPECT_EQ(steps("rdh", CollectiveOp::kAllReduce), 10u);
  EXPECT_EQ(steps("kangaring", CollectiveOp::kAllGather), 32u);  // 32 primaries per cycle
  EXPECT_EQ(steps("pairwise", CollectiveOp::kAllToAll), 63u);
}

TEST(ScheduleTest, RdhAxesAreTorusNeighboursOnAFullInstance) {
  // One rank per chip over all 16 chips: each recursive-doubling step pairs torus neighbours.
  const GroupPlacement g = Pick(64, Range(0, 16, 4));
  const Schedule s = BuildSchedule(*FindAlgorithm("rdh"), CollectiveOp::kAllGather, g, 4096,
                                   Trn2Profile());
  ASSERT_EQ(s.steps.size(), 4u);
  for (const Step& step : s.steps) {
    for (const Transfer& t : step.transfers) {
      const int a = g.chip[t.srcs[0]], b = g.chip[t.dst];
      const int dx = std::abs(a % 4 - b % 4), dy = std::abs(a / 4 - b / 4);
      EXPECT_EQ(std::min(dx, 4 - dx) + std::min(dy, 4 - dy), 1) << "chips " << a << " -> " << b;
    }
  }
}

TEST(ScheduleTest, CheckerCatchesBrokenSchedules) {
  const GroupPlacement g = Pick(8, Range(0, 8));
  Schedule s = BuildSchedule(*FindAlgorithm("ring"), CollectiveOp::kAllReduce, g, 4096,
                             Trn2Profile());
  Schedule dropped = s;
  dropped.steps.pop_back();
  EXPECT_THAT(CheckSchedule(dropped), HasSubstr("at the end member"));
  Schedule doubled = s;
  doubled.steps[0].transfers.push_back(doubled.steps[0].transfers[0]);
  EXPECT_THAT(CheckSchedule(doubled), HasSubstr("already holding"));
  Schedule ghost = s;
  ghost.steps[0].transfers[0].chunks = {99};
  EXPECT_THAT(CheckSchedule(ghost), HasSubstr("chunk 99 does not exist"));
}

TEST(ScheduleTest, ChooseAlgorithmLikeTheRuntime) {
  const HardwareProfile& p = Trn2Profile();
  const GroupPlacement tp64 = Pick(64, Range(0, 64));
  EXPECT_EQ(std::string(ChooseAlgorithm(CollectiveOp::kAllReduce, tp64, 512 << 10, p, "auto").row->name), "mesh");
  EXPECT_EQ(std::string(ChooseAlgorithm(CollectiveOp::kAllReduce, tp64, 8 << 20, p, "auto").row->name), "rdh");
  EXPECT_EQ(std::string(ChooseAlgorithm(CollectiveOp::kAllReduce, tp64, 64 << 20, p, "auto").row->name), "kangaring");
  // all_gather: the size is what all ranks gather (nccom-test's size).
  EXPECT_EQ(std::string(ChooseAlgorithm(CollectiveOp::kAllGather, tp64, 64 << 10, p, "auto").row->name), "rdh");
  // G's 16-rank all-reduce table: 128 KiB mesh, 2 MiB RDH, 32 MiB KangaRing.
  const GroupPlacement r16 = Pick(16, Range(0, 16));
  EXPECT_EQ(std::string(ChooseAlgorithm(CollectiveOp::kAllReduce, r16, 128 << 10, p, "auto").row->name), "mesh");
  EXPECT_EQ(std::string(ChooseAlgorithm(CollectiveOp::kAllReduce, r16, 2 << 20, p, "auto").row->name), "rdh");
  EXPECT_EQ(std::string(ChooseAlgorithm(CollectiveOp::kAllReduce, r16, 32 << 20, p, "auto").row->name), "kangaring");
  const GroupPlacement strided = Pick(64, Range(0, 16, 4));
  const AlgorithmChoice big = ChooseAlgorithm(CollectiveOp::kAllReduce, strided, 64 << 20, p, "auto");
  EXPECT_EQ(std::string(big.row->name), "ring");
  EXPECT_THAT(big.reason, HasSubstr("kangaring does not fit"));
  EXPECT_EQ(std::string(ChooseAlgorithm(CollectiveOp::kAllReduce, Pick(128, Range(0, 128)), 1 << 20, p, "auto").row->name),
            "hierarchical");
  EXPECT_EQ(std::string(ChooseAlgorithm(CollectiveOp::kAllToAll, tp64, 1 << 20, p, "auto").row->name), "pairwise");
}

// Plans share schedules between sizes with the same ScheduleVariant, so that variant must name
// everything the size changes: two sizes with one variant build identical schedules, and the
// hierarchical sweep over 128 ranks meets more than one variant (its inner mesh, rdh, ring).
bool SameSteps(const Schedule& a, const Schedule& b) {
  if (a.op != b.op || a.members != b.members || a.num_chunks != b.num_chunks ||
      a.steps.size() != b.steps.size()) {
    return false;
  }
  for (size_t k = 0; k < a.steps.size(); ++k) {
    const auto& x = a.steps[k].transfers;
    const auto& y = b.steps[k].transfers;
    if (a.steps[k].label != b.steps[k].label || x.size() != y.size()) return false;
    for (size_t t = 0; t < x.size(); ++t) {
      if (x[t].srcs != y[t].srcs || x[t].dst != y[t].dst || x[t].chunks != y[t].chunks ||
          x[t].reduce != y[t].reduce || x[t].shares_read != y[t].shares_read) {
        return false;
      }
    }
  }
  return true;
}

TEST(ScheduleTest, SizesWithOneScheduleVariantBuildTheSameSchedule) {
  const HardwareProfile& p = Trn2Profile();
  const GroupPlacement w128 = Pick(128, Range(0, 128));
  const AlgorithmRow& hier = *FindAlgorithm("hierarchical");
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    std::map<std::string, Schedule> by_variant;
    for (double bytes = 4; bytes <= (1 << 30); bytes *= 16) {
      const std::string variant = ScheduleVariant(hier, op, w128, bytes, p);
      SCOPED_TRACE(StrCat(OpName(op), " ", bytes, " B: ", variant));
      EXPECT_FALSE(variant.empty());
      const Schedule s = BuildSchedule(hier, op, w128, bytes, p);
      auto [it, first] = by_variant.emplace(variant, s);
      if (!first) EXPECT_TRUE(SameSteps(it->second, s));
    }
    EXPECT_GE(by_variant.size(), 2u) << OpName(op);
    // The variant names the inner algorithms the step labels show.
    for (const auto& [variant, s] : by_variant) {
      std::string labels;
      for (const Step& st : s.steps) labels += st.label + "\n";
      for (const char* stage : {"rs=", "ag="}) {
        const size_t at = variant.find(stage);
        if (at == std::string::npos) continue;
        const std::string inner = variant.substr(at + 3, variant.find(',', at) - at - 3);
        EXPECT_THAT(labels, HasSubstr(StrCat("hierarchical/", inner, ":"))) << variant;
      }
    }
  }
  // Rows whose schedule ignores the size have no variant.
  EXPECT_EQ(ScheduleVariant(*FindAlgorithm("ring"), CollectiveOp::kAllReduce, w128, 4, p), "");
  EXPECT_EQ(ScheduleVariant(*FindAlgorithm("mesh"), CollectiveOp::kAllReduce, Pick(64, Range(0, 64)), 4, p), "");
}

TEST(ScheduleTest, ForcedAlgorithmsThatDoNotFitAreRefused) {
  const HardwareProfile& p = Trn2Profile();
  using testing::InvalidArgumentMessage;
  EXPECT_THAT(InvalidArgumentMessage([&] {
                ChooseAlgorithm(CollectiveOp::kAllReduce, Pick(64, Range(0, 16, 4)), 1 << 20, p,
                                "kangaring");
              }),
              HasSubstr("algorithm 'kangaring' cannot run all_reduce on group [0, 4, 8"));
  EXPECT_THAT(InvalidArgumentMessage([&] {
                ChooseAlgorithm(CollectiveOp::kAllGather, Pick(64, Range(0, 64)), 1 << 20, p,
                                "mesh_1step");
              }),
              HasSubstr("does not implement all_gather"));
  EXPECT_THAT(InvalidArgumentMessage([&] {
                ChooseAlgorithm(CollectiveOp::kAllGather, Pick(64, Range(0, 64)), 1 << 20, p, "tree");
              }),
              HasSubstr("'tree' is not one of auto, ring, mesh"));
}

}  // namespace
}  // namespace nkisim::collectives
