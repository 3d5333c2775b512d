// The launcher's supervision logic (launcher/job/monitor.h) on made-up events and times: no
// mpirun, no sockets, no sleeping.
#include "launcher/job/monitor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace nkisim::launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Clock = Monitor::Clock;

const Clock::time_point kStart = Clock::time_point() + std::chrono::hours(1);

Clock::time_point At(double seconds) {
  return kStart + std::chrono::duration_cast<Clock::duration>(
                      std::chrono::duration<double>(seconds));
}

control::Event Message(int rank, const proto::RankMessage& m) {
  return {control::Event::Kind::kMessage, rank, m, ""};
}
control::Event Hello(int rank) {
  proto::RankMessage m;
  m.mutable_hello()->set_world_size(4);
  return Message(rank, m);
}
control::Event Progress(int rank, const std::string& phase, bool done) {
  proto::RankMessage m;
  m.mutable_progress()->set_scenario("decode");
  m.mutable_progress()->set_phase(phase);
  m.mutable_progress()->set_done(done);
  return Message(rank, m);
}
control::Event Heartbeat(int rank, const std::string& waiting_in = "") {
  proto::RankMessage m;
  m.mutable_heartbeat()->set_waiting_in(waiting_in);
  return Message(rank, m);
}
control::Event Result(int rank) {
  proto::RankMessage m;
  m.mutable_result()->set_peak_rss_mib(1);
  return Message(rank, m);
}

// A 4-rank job: stall timeout 3 s, start-up timeout 5 s; progress lines go to `lines`.
class MonitorTest : public ::testing::Test {
 protected:
  MonitorTest()
      : monitor_({.world_size = 4, .stall_timeout_s = 3, .startup_timeout_s = 5}, kStart,
                 [this](const std::string& line) { lines_.push_back(line); }) {}

  void Feed(const control::Event& e, double at) {
    const Failure f = monitor_.Handle(e, At(at));
    ASSERT_FALSE(f.failed()) << f.message;
  }
  // Every rank connects at 0.1 s and starts phase qkv at 1 s.
  void AllStartQkv() {
    for (int r = 0; r < 4; ++r) Feed(Hello(r), 0.1);
    for (int r = 0; r < 4; ++r) Feed(Progress(r, "qkv", false), 1.0);
  }

  std::vector<std::string> lines_;
  Monitor monitor_;
};

TEST_F(MonitorTest, NoStallWithinTheTimeout) {
  AllStartQkv();
  EXPECT_FALSE(monitor_.CheckStalls(At(3.9)).failed());  // 2.9 s since the last progress
}

TEST_F(MonitorTest, SilentRankIsStalledNamingRankAndPhase) {
  AllStartQkv();
  for (int r : {0, 1, 3}) Feed(Progress(r, "qkv", true), 3.0);
  for (double t : {3.5, 4.0, 4.5}) Feed(Heartbeat(2), t);  // alive, no progress
  EXPECT_FALSE(monitor_.CheckStalls(At(3.9)).failed());
  const Failure f = monitor_.CheckStalls(At(4.6));
  ASSERT_TRUE(f.failed());
  EXPECT_EQ(f.code, ErrorCode::kTimeout);
  EXPECT_THAT(f.message, HasSubstr("rank 2 in phase decode/qkv: stalled, no progress for 3"));
  EXPECT_THAT(f.message, HasSubstr("(alive, but not waiting in a collective)"));
}

TEST_F(MonitorTest, RankBlockedInACollectiveIsWordedSo) {
  AllStartQkv();
  for (int r : {0, 1, 3}) Feed(Progress(r, "qkv", true), 3.0);
  Feed(Heartbeat(2, "all_reduce"), 4.5);
  const Failure f = monitor_.CheckStalls(At(4.6));
  ASSERT_TRUE(f.failed());
  EXPECT_THAT(f.message, HasSubstr("rank 2 in phase decode/qkv: stalled"));
  EXPECT_THAT(f.message, HasSubstr("(blocked in all_reduce)"));
}

TEST_F(MonitorTest, NamesTheStalledRankThatIsNotInACollective) {
  AllStartQkv();
  // Ranks 1 and 3 both stall; rank 1 waits in a collective (for rank 3, presumably), rank 3
  // hangs by itself: rank 3 is the one to name, though rank 1 comes first.
  for (int r : {0, 2}) Feed(Progress(r, "qkv", true), 3.0);
  Feed(Heartbeat(1, "all_gather"), 4.5);
  Feed(Heartbeat(3, ""), 4.5);
  const Failure f = monitor_.CheckStalls(At(4.6));
  ASSERT_TRUE(f.failed());
  EXPECT_THAT(f.message, HasSubstr("rank 3 in phase decode/qkv: stalled"));
  EXPECT_THAT(f.message, HasSubstr("(alive, but not waiting in a collective)"));
}

TEST_F(MonitorTest, AllStalledInCollectivesNamesTheFirst) {
  AllStartQkv();
  for (int r = 0; r < 4; ++r) Feed(Heartbeat(r, "all_gather"), 4.5);
  const Failure f = monitor_.CheckStalls(At(4.6));
  ASSERT_TRUE(f.failed());
  EXPECT_THAT(f.message, HasSubstr("rank 0 in phase decode/qkv: stalled"));
  EXPECT_THAT(f.message, HasSubstr("(blocked in all_gather)"));
}

TEST_F(MonitorTest, StalledRankWhoseHeartbeatStoppedIsWordedSo) {
  AllStartQkv();
  for (int r : {0, 1, 3}) Feed(Progress(r, "qkv", true), 3.0);
  Feed(Heartbeat(2), 1.5);  // last heard of 3.1 s before the check
  const Failure f = monitor_.CheckStalls(At(4.6));
  ASSERT_TRUE(f.failed());
  EXPECT_THAT(f.message, HasSubstr("rank 2 in phase decode/qkv: stalled"));
  EXPECT_THAT(f.message, HasSubstr("(its heartbeat stopped too)"));
}

TEST_F(MonitorTest, StartupTimeoutAppliesBeforeHello) {
  for (int r : {0, 1, 2}) Feed(Hello(r), 0.5);
  for (int r : {0, 1, 2}) Feed(Progress(r, "qkv", false), 3.0);
  // Past the 3 s stall timeout but within the 5 s start-up timeout: rank 3 may still connect.
  EXPECT_FALSE(monitor_.CheckStalls(At(4.9)).failed());
  const Failure f = monitor_.CheckStalls(At(5.1));
  ASSERT_TRUE(f.failed());
  EXPECT_EQ(f.code, ErrorCode::kTimeout);
  EXPECT_THAT(f.message, HasSubstr("rank 3 in phase (between phases): stalled, no progress for 5"));
  EXPECT_THAT(f.message, HasSubstr("(it never connected)"));
}

TEST_F(MonitorTest, AfterHelloTheStallTimeoutApplies) {
  for (int r = 0; r < 4; ++r) Feed(Hello(r), 0.5);
  for (int r : {0, 1, 2}) Feed(Progress(r, "qkv", false), 3.0);
  Feed(Heartbeat(3), 3.4);
  const Failure f = monitor_.CheckStalls(At(3.6));  // 3.1 s after rank 3's hello
  ASSERT_TRUE(f.failed());
  EXPECT_THAT(f.message, HasSubstr("rank 3 in phase (between phases): stalled, no progress for 3"));
}

TEST_F(MonitorTest, RanksWithResultsNeverStall) {
  AllStartQkv();
  for (int r = 0; r < 4; ++r) Feed(Result(r), 2.0);
  EXPECT_TRUE(monitor_.AllResults());
  EXPECT_EQ(monitor_.FirstWithoutResult(), -1);
  EXPECT_FALSE(monitor_.CheckStalls(At(100)).failed());
}

TEST_F(MonitorTest, ErrorNamesRankPhaseAndCode) {
  AllStartQkv();
  proto::RankMessage m;
  m.mutable_error()->set_message("boom");
  m.mutable_error()->set_code(static_cast<uint32_t>(ErrorCode::kInternal));
  const Failure f = monitor_.Handle(Message(1, m), At(1.5));
  ASSERT_TRUE(f.failed());
  EXPECT_EQ(f.message, "rank 1 in phase decode/qkv: boom");
  EXPECT_EQ(f.code, ErrorCode::kInternal);
}

// The code arrives over a socket: unknown values become kInternal (exit 17), never an exit code
// of 0 (10 + 246 = 256) or an overflow (a fuzzer finding).
TEST_F(MonitorTest, UnknownErrorCodesFromTheWireAreInternal) {
  for (const uint32_t code : {0u, 8u, 246u, 0x80000000u, 0xFFFFFFFFu}) {
    AllStartQkv();
    proto::RankMessage m;
    m.mutable_error()->set_message("odd");
    m.mutable_error()->set_code(code);
    const Failure f = monitor_.Handle(Message(2, m), At(1.5));
    ASSERT_TRUE(f.failed());
    EXPECT_EQ(f.code, ErrorCode::kInternal) << code;
  }
  proto::RankMessage m;
  m.mutable_error()->set_code(static_cast<uint32_t>(ErrorCode::kTimeout));
  EXPECT_EQ(monitor_.Handle(Message(2, m), At(1.5)).code, ErrorCode::kTimeout);
}

TEST_F(MonitorTest, DisconnectBeforeResultIsADeadRank) {
  AllStartQkv();
  Feed(Result(0), 2.0);
  EXPECT_FALSE(monitor_.Handle({control::Event::Kind::kDisconnected, 0, {}, "eof"}, At(2.1)).failed());
  const Failure f =
      monitor_.Handle({control::Event::Kind::kDisconnected, 2, {}, "end of stream"}, At(2.1));
  ASSERT_TRUE(f.failed());
  EXPECT_EQ(f.code, ErrorCode::kCommError);
  EXPECT_EQ(f.message,
            "rank 2 in phase decode/qkv: lost its control connection (end of stream): the rank died");
  EXPECT_EQ(monitor_.FirstWithoutResult(), 1);
}

TEST_F(MonitorTest, UnknownRankIsRefused) {
  const Failure f = monitor_.Handle(Hello(7), At(0.1));
  ASSERT_TRUE(f.failed());
  EXPECT_EQ(f.code, ErrorCode::kCommError);
  EXPECT_EQ(f.message, "a control message from rank 7, outside the scenario's world_size 4");
}

// mpirun -n 10 on a 4-rank scenario: the first hello of any rank, in the job or beyond it,
// classifies the failure as the bad config it is (exit 14), never as a control-plane error.
TEST_F(MonitorTest, HelloOfAnotherWorldSizeIsABadConfigFromAnyRank) {
  for (int rank : {0, 3, 7, -1}) {
    Monitor monitor(MonitorLimits{4, 30, 300}, kStart, [](const std::string&) {});
    proto::RankMessage m;
    m.mutable_hello()->set_world_size(10);
    const Failure f = monitor.Handle(Message(rank, m), At(0.1));
    ASSERT_TRUE(f.failed()) << rank;
    EXPECT_EQ(f.code, ErrorCode::kBadConfig) << rank;
    EXPECT_EQ(f.message,
              "scenario world_size 4 does not match the 10 MPI ranks launched (mpirun -n 4 runs it)");
  }
}

// An error report from a rank beyond the job keeps its code, and names no rank it does not know.
TEST_F(MonitorTest, ErrorFromOutsideRankKeepsItsCode) {
  proto::RankMessage m;
  m.mutable_error()->set_message("bad config: x");
  m.mutable_error()->set_code(static_cast<uint32_t>(ErrorCode::kBadConfig));
  Failure f = monitor_.Handle(Message(9, m), At(0.1));
  EXPECT_EQ(f.code, ErrorCode::kBadConfig);
  EXPECT_THAT(f.message, HasSubstr("rank 9, outside the scenario's world_size 4: bad config: x"));
  f = monitor_.Handle(Message(-1, m), At(0.1));
  EXPECT_EQ(f.code, ErrorCode::kBadConfig);
  EXPECT_THAT(f.message, HasSubstr("a control connection that named no rank: bad config: x"));
}

TEST_F(MonitorTest, ProgressLines) {
  AllStartQkv();
  for (int r = 0; r < 3; ++r) Feed(Progress(r, "qkv", true), 2.0);
  EXPECT_THAT(lines_, IsEmpty());
  Feed(Progress(3, "qkv", true), 2.5);
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(lines_[0], "  [2.5 s] decode/qkv: all 4 ranks done");
  Feed(Progress(0, "attention", false), 2.6);
  monitor_.DrawProgress(At(2.7));
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(lines_[1], "  [2.7 s] connected 4/4 | in decode/attention: 1 | finished: 0");
  monitor_.DrawProgress(At(3.0));  // nothing new, and within 2 s of the last line
  EXPECT_EQ(lines_.size(), 2u);
}

}  // namespace
}  // namespace nkisim::launcher
