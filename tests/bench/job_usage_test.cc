// bench/job_usage: the counters scripts/measure-scale.sh compares two jobs on.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace {

struct Usage {
  int exit_code = -1;
  double wall_s = -1, user_s = -1, sys_s = -1, max_rss_mib = -1;
  long minor_faults = -1;
  bool written = false;
};

// Runs `job_usage OUT -- sh -c SCRIPT` and reads OUT.
Usage RunUnderJobUsage(const std::string& script) {
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("job_usage_test_" + std::to_string(::getpid()));
  std::filesystem::remove(out);
  const std::string command =
      std::string(JOB_USAGE_BINARY) + " " + out.string() + " -- sh -c '" + script + "'";
  Usage u;
  const int status = std::system(command.c_str());
  u.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(out);
  u.written = static_cast<bool>(in >> u.wall_s >> u.user_s >> u.sys_s >> u.minor_faults >> u.max_rss_mib);
  std::filesystem::remove(out);
  return u;
}

TEST(JobUsage, PassesTheExitStatusThroughAndWritesFiveCounters) {
  const Usage u = RunUnderJobUsage("exit 3");
  EXPECT_EQ(u.exit_code, 3);
  ASSERT_TRUE(u.written);
  EXPECT_GE(u.wall_s, 0);
  EXPECT_LT(u.wall_s, 30);
  EXPECT_GE(u.user_s, 0);
  EXPECT_GE(u.sys_s, 0);
  EXPECT_GT(u.minor_faults, 0);
  EXPECT_GT(u.max_rss_mib, 0);
}

// dd with a 64 MiB block touches 64 MiB of fresh memory in a grandchild (sh waits for it): 16,384
// more 4 KiB pages than with a 4 KiB block, and a 64 MiB peak RSS.
TEST(JobUsage, CountsTheFreshPagesOfEveryProcessTheJobWaitedFor) {
  const Usage small = RunUnderJobUsage("dd if=/dev/zero of=/dev/null bs=4K count=1 2>/dev/null");
  const Usage large = RunUnderJobUsage("dd if=/dev/zero of=/dev/null bs=64M count=1 2>/dev/null");
  ASSERT_TRUE(small.written && large.written);
  EXPECT_EQ(small.exit_code, 0);
  EXPECT_EQ(large.exit_code, 0);
  EXPECT_GE(large.minor_faults - small.minor_faults, 16384 * 9 / 10)
      << small.minor_faults << " vs " << large.minor_faults;
  EXPECT_GE(large.max_rss_mib, 60);
  EXPECT_LT(small.max_rss_mib, 60);
}

TEST(JobUsage, RefusesAMissingCommandWith127AndBadUsageWith2) {
  const std::string binary = JOB_USAGE_BINARY;
  int status = std::system((binary + " /dev/null -- /nonexistent/program 2>/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(status), 127);
  status = std::system((binary + " /dev/null 2>/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
  status = std::system((binary + " /dev/null true 2>/dev/null").c_str());  // no --
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
