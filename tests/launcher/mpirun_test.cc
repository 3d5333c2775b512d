#include "launcher/job/mpirun.h"

#include <gtest/gtest.h>

#include <thread>

#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

using namespace std::chrono_literals;

TEST(MpirunTest, CommandAddsRootAndOversubscribeWhenNeeded) {
  MpirunOptions o;
  o.ranks = 64;
  o.as_root = true;
  o.host_cores = 2;
  o.rank_command = {"/bin/nkisim", "run", "c.textproto"};
  EXPECT_EQ(MpirunCommand(o),
            (std::vector<std::string>{"mpirun", "--allow-run-as-root", "--oversubscribe", "-n", "64",
                                      "/bin/nkisim", "run", "c.textproto"}));
  o.as_root = false;
  o.ranks = 2;
  EXPECT_EQ(MpirunCommand(o)[1], "-n");
}

TEST(MpirunTest, HostfilePassesThroughInsteadOfOversubscribing) {
  MpirunOptions o;
  o.ranks = 128;
  o.hostfile = "hosts.txt";
  o.rank_command = {"x"};
  EXPECT_EQ(MpirunCommand(o),
            (std::vector<std::string>{"mpirun", "--hostfile", "hosts.txt", "-n", "128", "x"}));
}

TEST(JobTest, ReportsExitCodesAndSignals) {
  Job ok({"sh", "-c", "exit 3"});
  while (!ok.Poll()) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(*ok.Poll(), 3);
  Job killed({"sh", "-c", "kill -9 $$"});
  while (!killed.Poll()) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(*killed.Poll(), 128 + 9);
}

TEST(JobTest, StopEndsTheWholeProcessGroupPromptly) {
  // The child ignores SIGTERM and has a grandchild: both must go.
  Job ignores_term({"sh", "-c", "trap '' TERM; sleep 30 & sleep 30"});
  const auto start = std::chrono::steady_clock::now();
  ignores_term.Stop(200ms);
  EXPECT_TRUE(ignores_term.Poll().has_value());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(JobTest, MissingProgramIsABadConfig) {
  try {
    Job missing({"no-such-program-nkisim"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
  }
}

TEST(JobTest, AbsolutePathsRunAsGivenAndNonExecutablesAreRefused) {
  Job by_path({"/bin/sh", "-c", "exit 4"});
  while (!by_path.Poll()) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(*by_path.Poll(), 4);
  for (const char* bad : {"/etc/passwd", "/tmp", "/no/such/mpirun"}) {
    try {
      Job job({bad});
      ADD_FAILURE() << bad << " was started";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig) << bad;
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace nkisim::launcher
