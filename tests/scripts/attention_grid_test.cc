// scripts/attention-grid.sh as a user runs it: the 96-case decode grid, each row's ratios to the
// HBM bound and to the stream floor, and a tally that matches the rows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;

TEST(AttentionGridScriptTest, RefusesAMissingBinary) {
  const auto r = nkisim::testing::RunCommand(
      "bash " + std::string(NKISIM_SOURCE_DIR) + "/scripts/attention-grid.sh /nonexistent/nkisim",
      10);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no nkisim binary at '/nonexistent/nkisim'"));
}

TEST(AttentionGridScriptTest, RowsRespectTheFloorAndTheTallyCountsThem) {
  const auto r = nkisim::testing::RunCommand(
      "bash " + std::string(NKISIM_SOURCE_DIR) + "/scripts/attention-grid.sh " + NKISIM_BINARY,
      240);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  int rows = 0, within = 0, out_of_reach = 0, missed = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream f(line);
    int d = 0, lnc = 0, bl = 0, g = 0, t = 0;
    double sim = 0, bound = 0, floor = 0;
    std::string x_bound, x_floor;
    if (!(f >> d >> lnc >> bl >> g >> t >> sim >> bound >> floor >> x_bound >> x_floor)) continue;
    ++rows;
    SCOPED_TRACE(line);
    // Two DMA latencies of 1300 ns less the store's 27.6 ns semaphore (trn2; docs/dma.md).
    EXPECT_NEAR(floor - bound, 2572.4, 0.2);
    EXPECT_GE(sim, floor - 0.1);              // no kernel beats the floor
    EXPECT_NEAR(std::stod(x_bound), sim / bound, 0.006);
    EXPECT_NEAR(std::stod(x_floor), sim / floor, 0.006);
    if (sim / bound <= 1.25) {
      ++within;
    } else if (floor / bound > 1.25) {
      ++out_of_reach;
    } else {
      ++missed;
    }
  }
  EXPECT_EQ(rows, 96);
  EXPECT_THAT(r.output, HasSubstr("96 cases, geomean "));
  EXPECT_THAT(
      r.output,
      HasSubstr("within 1.25x of the roofline:              " + std::to_string(within) + "\n"));
  if (out_of_reach > 0) {
    EXPECT_THAT(r.output, HasSubstr("floor alone above 1.25x (out of reach):    " +
                                    std::to_string(out_of_reach) + " ("));
  }
  if (missed > 0) {
    EXPECT_THAT(
        r.output,
        HasSubstr("above 1.25x although the floor allows it:  " + std::to_string(missed) + " ("));
  }
  EXPECT_GT(out_of_reach, 0);  // the grid's smallest streams: 0.36 - 1.7 MB per core
}

}  // namespace
