// `nkisim collective` as a user runs it: --model-only sweeps, forced algorithms, and bad flags,
// each refused with exit 11 and a message naming the flag, the value and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;
using nkisim::testing::CommandResult;

CommandResult Collective(const std::string& args) {
  return nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + " collective " + args, 60);
}

TEST(CollectiveCliTest, ModelOnlyPricesAThousandRanksWithTheirAlgorithms) {
  const CommandResult r = Collective("all_reduce --model-only --ranks 1024 -b 4 -e 1G -f 16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("1024 ranks (256 chips, 16 instances)"));
  EXPECT_THAT(r.output, HasSubstr("hierarchical"));
  EXPECT_THAT(r.output, HasSubstr("# priced 8 sizes"));
}

// 12 ranks at LNC 2 sit on chips 0..2; the ring's route 2 -> 0 wraps round through chip 3,
// outside the group (a fuzzer finding: the link loads were sized by the group's chips only).
TEST(CollectiveCliTest, ModelOnlyGroupsWhoseRoutesLeaveTheirChips) {
  for (const char* op : {"all_gather", "all_reduce", "reduce_scatter"}) {
    const CommandResult r = Collective(std::string(op) +
                                      " --model-only --ranks 12 -b 4K -e 4M -f 32");
    EXPECT_EQ(r.exit_code, 0) << op << "\n" << r.output;
  }
}

TEST(CollectiveCliTest, ModelOnlyShowsTheRuntimesChoiceBySize) {
  const CommandResult r = Collective("all_reduce --model-only --ranks 16 -b 128K -e 32M -f 16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(" mesh "));
  EXPECT_THAT(r.output, HasSubstr(" rdh "));
  EXPECT_THAT(r.output, HasSubstr(" kangaring "));
}

// -b / -e count nccom-test's size column: an 8-rank all_gather of 8K gathers 1K per rank, as
// `nccom-test -r 8 allg -b 8K` does; --per-rank keeps the rank's own buffer.
TEST(CollectiveCliTest, SizesCountTheNccomTestSizeColumn) {
  const CommandResult r = Collective("all_gather --model-only --ranks 8 -b 8K -e 8K");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("\n +8192 +1024 "));
  const CommandResult per = Collective("all_gather --model-only --ranks 8 -b 8K -e 8K --per-rank");
  ASSERT_EQ(per.exit_code, 0) << per.output;
  EXPECT_THAT(per.output, ::testing::ContainsRegex("\n +65536 +8192 "));
  const CommandResult rs = Collective("reduce_scatter --model-only --ranks 8 -b 8K -e 8K");
  EXPECT_THAT(rs.output, ::testing::ContainsRegex("\n +8192 +1024 "));
  const CommandResult ar = Collective("all_reduce --model-only --ranks 8 -b 8K -e 8K");
  EXPECT_THAT(ar.output, ::testing::ContainsRegex("\n +8192 +8192 "));
}

// The launch context: host (the default, as nccom-test) pays the host launch cost on top of the
// in-graph schedule; the column and the header say which.
TEST(CollectiveCliTest, LaunchContextIsAColumnAndACost) {
  const std::string args = "all_reduce --model-only --ranks 64 -b 16K -e 16K -d bf16";
  const CommandResult host = Collective(args);
  const CommandResult graph = Collective(args + " --launch in-graph");
  ASSERT_EQ(host.exit_code, 0) << host.output;
  ASSERT_EQ(graph.exit_code, 0) << graph.output;
  EXPECT_THAT(host.output, HasSubstr(" host "));
  EXPECT_THAT(host.output, HasSubstr("launched from the host per call"));
  EXPECT_THAT(graph.output, HasSubstr(" in_graph "));
  EXPECT_THAT(graph.output, HasSubstr("launched in a compiled graph"));
  const CommandResult bad = Collective(args + " --launch device");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("--launch"));
}

TEST(CollectiveCliTest, AForcedAlgorithmThatCannotRunIsRefused) {
  const CommandResult r =
      Collective("all_reduce --model-only --ranks 64 -g 8 -b 1M -e 1M --algorithm mesh_1step");
  EXPECT_EQ(r.exit_code, 0) << r.output;  // 8 ranks on 2 chips: fits
  const CommandResult bad =
      Collective("all_gather --model-only --ranks 64 -b 1M -e 1M --algorithm mesh_1step");
  EXPECT_EQ(bad.exit_code, 11) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("algorithm 'mesh_1step' does not implement all_gather"));
  const CommandResult shape =
      Collective("all_reduce --model-only --ranks 128 -b 1M -e 1M --algorithm rdh");
  EXPECT_EQ(shape.exit_code, 11) << shape.output;
  EXPECT_THAT(shape.output, HasSubstr("spans instances"));
}

TEST(CollectiveCliTest, BadFlagsAreRefusedWithTheRule) {
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"all_gather --model-only --ranks 8 -b nan", "-b: 'nan' is not a size"},
      {"all_gather --model-only --ranks 8 -b 1e19", "the limit is 64G per rank"},
      {"all_gather --model-only --ranks 8 -e 64G -b 128G", "the limit is 64G per rank"},
      {"all_gather --model-only --ranks 8 -g -1", "-g -1 must be >= 1"},
      {"all_gather --model-only --ranks 8 -g 3", "-g 3 must be >= 1 and divide the world size 8"},
      {"all_gather --model-only --ranks 8 -n 0", "-n 0 must be >= 1"},
      {"all_gather --model-only --ranks 0", "--ranks 0 must be in [1, 16384]"},
      {"all_gather --model-only --ranks 8 --json /nonexistent/dir/x.json", "--json '/nonexistent/dir/x.json': cannot be written"},
      {"all_gather --model-only --ranks 8 --algorithm tree", "'tree' is not one of auto, ring"},
      {"all_gather --model-only --ranks 8 --profile /nonexistent.textproto", "/nonexistent.textproto"},
  };
  for (const auto& c : cases) {
    const CommandResult r = Collective(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_TRUE(r.exit_code == 11 || r.exit_code == 14) << c.args << ": " << r.exit_code;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
  }
}

}  // namespace
