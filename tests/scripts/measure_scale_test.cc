// scripts/measure-scale.sh's arguments: a PAIRS count that is not a whole number from 1 to 99 is
// refused with exit 2 and a message naming the value, before any job starts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;

TEST(MeasureScaleScriptTest, RefusesAPairsCountOutsideOneToNinetyNine) {
  const std::string source = NKISIM_SOURCE_DIR;
  for (const std::string pairs : {"0", "-1", "x", "100", "1.5", "nan"}) {
    const auto r = nkisim::testing::RunCommand(
        "bash " + source + "/scripts/measure-scale.sh configs/small_8ranks.textproto '" + pairs + "'", 10);
    EXPECT_EQ(r.exit_code, 2) << pairs << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("PAIRS '" + pairs + "' must be a whole number from 1 to 99"));
  }
}

}  // namespace
