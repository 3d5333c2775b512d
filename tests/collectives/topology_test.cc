#include "collectives/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "collectives/algorithms.h"
#include "runtime/error.h"
#include "runtime/problem_list.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::collectives {
namespace {

using ::nkisim::testing::ErrorMessageOf;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ResolvedTopology ResolveText(const std::string& text) {
  return ResolveTopology(ParseTopology(text, "t.textproto"), Trn2Profile(), "t.textproto");
}

TEST(TopologyTest, ContiguousGroupsAndDerivedIotaTable) {
  const ResolvedTopology t = ResolveText(
      "world_size: 64 lnc: 2 replica_groups { name: 'gqa' contiguous { group_size: 8 } }"
      " batch_shard { replica_group: 'gqa' batch: 32 }");
  const GroupSet& gqa = t.group_set("gqa");
  ASSERT_EQ(gqa.groups.size(), 8u);
  EXPECT_EQ(gqa.groups[1], (Group{8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(gqa.position_of_rank[13], 5);
  ASSERT_EQ(t.iota_workers.size(), 64u);
  for (int r = 0; r < 64; ++r) EXPECT_EQ(t.iota_workers[r], (r % 8) * 4) << "rank " << r;
  // 8 physical cores per chip at LNC 2: 4 ranks per chip, 16 chips.
  EXPECT_EQ(t.chip_of_rank[63], 15);
  EXPECT_EQ(t.chip_of_rank[5], 1);
}

TEST(TopologyTest, StridedGroupsTableFollowsPositionNotModulo) {
  const ResolvedTopology t = ResolveText(
      "world_size: 8 lnc: 1 replica_groups { name: 'dp' strided { group_size: 4 } }"
      " batch_shard { replica_group: 'dp' batch: 8 }");
  EXPECT_EQ(t.group_set("dp").groups[1], (Group{1, 3, 5, 7}));
  // Rank 5 is at position 2 of [1, 3, 5, 7]: offset 2 * 8 / 4 = 4, where r % G would say 2.
  EXPECT_EQ(t.iota_workers[5], 4);
  EXPECT_EQ(t.chip_of_rank[7], 0);  // 8 ranks per chip at LNC 1
}

TEST(TopologyTest, ExplicitGroupsAndGivenTableAccepted) {
  const ResolvedTopology t = ResolveText(
      "world_size: 4 lnc: 2 replica_groups { name: 'g' explicit { groups { ranks: [3, 1] }"
      " groups { ranks: [0, 2] } } } batch_shard { replica_group: 'g' batch: 4"
      " iota_workers: [0, 2, 2, 0] }");
  EXPECT_EQ(t.iota_workers, (std::vector<int>{0, 2, 2, 0}));
  EXPECT_EQ(t.group_set("g").group_of(1), (Group{3, 1}));
}

TEST(TopologyTest, JsonMappingAccepted) {
  const proto::Topology spec = ParseTopology(
      R"({"world_size": 4, "lnc": 1, "replica_groups": [{"name": "all", "contiguous": {"group_size": 4}}]})",
      "t.json");
  EXPECT_EQ(ResolveTopology(spec, Trn2Profile(), "t.json").group_set("all").groups.size(), 1u);
}

TEST(TopologyTest, UnknownGroupSetNamesTheKnownOnes) {
  const ResolvedTopology t = ResolveText("world_size: 2 lnc: 2 replica_groups { name: 'tp' contiguous { group_size: 2 } }");
  EXPECT_THAT(ErrorMessageOf(ErrorCode::kBadConfig, [&] { t.group_set("dp"); }),
              HasSubstr("'dp' is not in the topology (have: tp)"));
}

TEST(TopologyTest, FormatListsGroupsPlacementAndTable) {
  const std::string text = FormatTopology(ResolveText(
      "world_size: 8 lnc: 2 replica_groups { name: 'gqa' contiguous { group_size: 4 } }"
      " batch_shard { replica_group: 'gqa' batch: 8 }"));
  EXPECT_THAT(text, HasSubstr("replica group set 'gqa': 2 groups of 4 ranks"));
  EXPECT_THAT(text, HasSubstr("group 1: [4, 5, 6, 7]"));
  EXPECT_THAT(text, HasSubstr("chip 1: ranks [4, 5, 6, 7]"));
  EXPECT_THAT(text, HasSubstr("iota_workers: [0, 2, 4, 6, 0, 2, 4, 6]"));
}

TEST(TopologyTest, AllProblemsAreReportedAtOnce) {
  const std::vector<std::string> problems = CheckTopology(
      ParseTopology("world_size: 4 lnc: 3 replica_groups { contiguous { group_size: 3 } }", "t"),
      Trn2Profile());
  ASSERT_EQ(problems.size(), 3u);  // lnc, unnamed set, group size not dividing the world
}

// 2.6 million out-of-range ranks: the first ProblemList::kShown problems are listed and the rest
// counted, so the message (and the memory behind it) is bounded by the cap, not by the file.
TEST(TopologyTest, ProblemListIsCappedAndCountsTheRest) {
  proto::Topology t = ParseTopology("world_size: 4 lnc: 2", "t");
  auto* ranks = t.add_replica_groups();
  ranks->set_name("x");
  auto* group = ranks->mutable_explicit_()->add_groups();
  for (uint32_t r = 0; r < 4; ++r) group->add_ranks(r);
  constexpr int kBad = 2600000;
  for (int i = 0; i < kBad; ++i) group->add_ranks(4 + static_cast<uint32_t>(i % 1000));
  const std::vector<std::string> problems = CheckTopology(t, Trn2Profile());
  ASSERT_EQ(problems.size(), ProblemList::kShown + 1);
  EXPECT_THAT(problems.front(), HasSubstr("ranks[4]: 4 is outside [0, 4)"));
  EXPECT_EQ(problems.back(), StrCat("... and ", kBad - ProblemList::kShown, " more (", kBad,
                                    " problems in all; the first ", ProblemList::kShown,
                                    " are listed)"));
  const std::string message =
      ErrorMessageOf(ErrorCode::kBadConfig, [&] { ResolveTopology(t, Trn2Profile(), "big"); });
  EXPECT_THAT(message, HasSubstr(StrCat("big: ", kBad, " problems:")));
  EXPECT_LT(message.size(), 8000u);
}

// The rule tying lnc to the profile is the same one calibrate and collective apply
// (runtime/hardware_profile.h LncProblem): 3 physical cores do not split into ranks of 2.
TEST(TopologyTest, LncMustDivideThePhysicalCoresOfAChip) {
  HardwareProfile odd = Trn2Profile();
  odd.set_physical_cores_per_chip(3);
  const std::string message = ErrorMessageOf(ErrorCode::kBadConfig, [&] {
    ResolveTopology(ParseTopology("world_size: 4 lnc: 2 replica_groups { name: 'a' contiguous { "
                                  "group_size: 4 } }", "t"),
                    odd, "t");
  });
  EXPECT_THAT(message, HasSubstr("lnc: 2: does not divide the profile's physical_cores_per_chip (3)"));
  EXPECT_THAT(ErrorMessageOf(ErrorCode::kBadConfig, [&] { DefaultPlacement(8, 2, odd); }),
              HasSubstr("lnc 2 does not divide the profile's physical_cores_per_chip (3)"));
  EXPECT_NO_THROW(DefaultPlacement(8, 1, odd));
}

TEST(TopologyTest, BatchHasAnUpperBound) {
  EXPECT_THAT(ErrorMessageOf(ErrorCode::kBadConfig, [] {
                ResolveText("world_size: 1 lnc: 2 replica_groups { name: 'g' contiguous { "
                            "group_size: 1 } } batch_shard { replica_group: 'g' batch: 4294967295 }");
              }),
              HasSubstr("batch_shard.batch: 4294967295 must be at most 1048576"));
  EXPECT_EQ(ResolveText("world_size: 1 lnc: 2 replica_groups { name: 'g' contiguous { "
                        "group_size: 1 } } batch_shard { replica_group: 'g' batch: 1048576 }")
                .batch,
            1048576);
}

// Every file in bad_configs/ must be refused with the message fragment its manifest line gives.
TEST(TopologyTest, EveryBadConfigurationIsRefusedWithItsMessage) {
  const std::string dir = std::string(NKISIM_SOURCE_DIR) + "/tests/collectives/bad_configs/";
  std::istringstream manifest(ReadFile(dir + "expected_errors.txt"));
  int cases = 0;
  for (std::string line; std::getline(manifest, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t bar = line.find(" | ");
    const std::string file = line.substr(0, bar), fragment = line.substr(bar + 3);
    const std::string message = ErrorMessageOf(ErrorCode::kBadConfig, [&] {
      ResolveTopology(ParseTopology(ReadFile(dir + file), file), Trn2Profile(), file);
    });
    EXPECT_THAT(message, HasSubstr(fragment)) << file;
    ++cases;
  }
  EXPECT_GE(cases, 15);
}

}  // namespace
}  // namespace nkisim::collectives
