// `nkisim calibrate` as a user runs it: the shipped published log is fitted with a lower geomean
// error and the written profile loads back; a malformed log exits 14 naming file:line and writes
// nothing; an unusable --out fails before any fitting.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;

using nkisim::testing::CommandResult;

// Runs the nkisim binary with `args` under a 60 s timeout; stdout and stderr together.
CommandResult RunNkisim(const std::string& args) {
  return nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + " " + args, 60);
}

const std::string kSource = NKISIM_SOURCE_DIR;
const std::string kLog = kSource + "/configs/calibration/nccom-test-published.log";

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/calibrate_cli_" + std::to_string(getpid()) + "_" + name;
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

// The two percentages of "geomean error: X% before, Y% after".
bool Geomeans(const std::string& output, double* before, double* after) {
  static const std::regex kLine(R"(geomean error: ([0-9.]+)% before, ([0-9.]+)% after)");
  std::smatch m;
  if (!std::regex_search(output, m, kLine)) return false;
  *before = std::stod(m[1]);
  *after = std::stod(m[2]);
  return true;
}

TEST(CalibrateCliTest, PublishedLogLowersTheGeomeanErrorAndTheProfileLoadsBack) {
  const std::string out = TempPath("published.textproto");
  const CommandResult r = RunNkisim("calibrate " + kLog + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  double before = 0, after = 0;
  ASSERT_TRUE(Geomeans(r.output, &before, &after)) << r.output;
  EXPECT_LT(after, before) << r.output;
  EXPECT_THAT(r.output, HasSubstr("nccom-test-published.log:14"));  // first row, file:line
  EXPECT_THAT(r.output, HasSubstr("all_reduce / kangaring"));
  EXPECT_THAT(r.output, HasSubstr("wrote " + out));
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  EXPECT_THAT(text.str(), HasSubstr("source: \"nkisim calibrate " + kLog + "\""));

  // The written profile loads (as a base) and its model is the calibrated one: calibrating again
  // on top of it starts where the first run ended.
  const std::string again = TempPath("again.textproto");
  const CommandResult r2 = RunNkisim("calibrate " + kLog + " --profile " + out + " --out " + again);
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  double before2 = 0, after2 = 0;
  ASSERT_TRUE(Geomeans(r2.output, &before2, &after2)) << r2.output;
  EXPECT_NEAR(before2, after, 0.11) << r2.output;
  std::remove(out.c_str());
  std::remove(again.c_str());
}

TEST(CalibrateCliTest, MalformedLogExitsWithBadConfigAndFileLine) {
  const std::string log = TempPath("bad.log");
  std::ofstream(log) << "nccom-test -r 8 allg\n"
                        "  size(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s)\n"
                        "  1024 1024 uint8 10.0 0.10 0.09\n"
                        "  65536 65536 uint8 eleven 5.80 5.07\n";
  const std::string out = TempPath("bad.textproto");
  const CommandResult r = RunNkisim("calibrate " + log + " --out " + out);
  EXPECT_EQ(r.exit_code, 14) << r.output;  // 10 + kBadConfig
  EXPECT_THAT(r.output, HasSubstr("nkisim: bad config: " + log + ":4: time(us) 'eleven'"));
  EXPECT_FALSE(Exists(out));
  std::remove(log.c_str());
}

TEST(CalibrateCliTest, UsageAndOutputErrors) {
  EXPECT_EQ(RunNkisim("calibrate " + kLog).exit_code, 2);  // --out is required
  EXPECT_EQ(RunNkisim("calibrate --out x.textproto").exit_code, 2);  // a log is required
  const CommandResult missing = RunNkisim("calibrate /nonexistent/a.log --out " + TempPath("m.textproto"));
  EXPECT_EQ(missing.exit_code, 14) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("/nonexistent/a.log: cannot open nccom-test log"));
  const CommandResult no_dir = RunNkisim("calibrate " + kLog + " --out /nonexistent/dir/p.textproto");
  EXPECT_EQ(no_dir.exit_code, 11) << no_dir.output;  // 10 + kInvalidArgument, before any fitting
  EXPECT_THAT(no_dir.output, HasSubstr("directory /nonexistent/dir does not exist"));
  EXPECT_THAT(no_dir.output, ::testing::Not(HasSubstr("geomean")));
  const std::string empty = TempPath("empty.log");
  std::ofstream(empty) << "# nothing measured\n";
  const CommandResult none = RunNkisim("calibrate " + empty + " --out " + TempPath("e.textproto"));
  EXPECT_EQ(none.exit_code, 11) << none.output;
  EXPECT_THAT(none.output, HasSubstr("calibrate: no rows to fit in " + empty));
  std::remove(empty.c_str());
  // Not a regular file: /dev/zero would never end, a FIFO would block (fuzzer finding).
  const CommandResult device = RunNkisim("calibrate /dev/zero --out " + TempPath("z.textproto"));
  EXPECT_EQ(device.exit_code, 14) << device.output;
  EXPECT_THAT(device.output, HasSubstr("/dev/zero"));
}

}  // namespace
