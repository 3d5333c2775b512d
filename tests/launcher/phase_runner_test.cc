// PhaseRunner (model/phase_runner.h) with a recording progress sink instead of the
// control-plane client: the messages it sends, the checks it records, the tolerances it picks.
#include "model/phase_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "runtime/error.h"
#include "runtime/hardware_profile.h"

namespace nkisim::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class PhaseRunnerTest : public ::testing::Test {
 protected:
  PhaseRunnerTest() : lnc_(1, Trn2Profile()) {
    proto::Tolerance tol;
    tol.set_atol(0.1);
    tol.set_rtol(0);
    (*spec_.mutable_tolerances())["qkv"] = tol;
  }

  PhaseRunner Runner() {
    return PhaseRunner([this](const proto::RankMessage& m) { sent_.push_back(m); }, lnc_,
                       /*rank=*/0, "tp8", spec_, result_);
  }
  // The progress messages sent, as "start qkv" / "done qkv".
  std::vector<std::string> Progress() const {
    std::vector<std::string> out;
    for (const proto::RankMessage& m : sent_) {
      EXPECT_TRUE(m.has_progress());
      EXPECT_EQ(m.progress().scenario(), "tp8");
      out.push_back((m.progress().done() ? "done " : "start ") + m.progress().phase());
    }
    return out;
  }
  static PhaseOutput Output(std::vector<float> actual, std::vector<double> golden) {
    return {std::move(actual), std::move(golden)};
  }

  LogicalCore lnc_;
  proto::Scenario spec_;
  proto::RankResult result_;
  std::vector<proto::RankMessage> sent_;
};

// 16 MiB touched for the first time inside the phase (a fresh mapping: above glibc's default
// mmap threshold) show as fresh bytes; a phase that touches nothing new shows few.
TEST_F(PhaseRunnerTest, RecordsTheFreshMemoryAPhaseTouches) {
  PhaseRunner runner = Runner();
  constexpr size_t kBytes = size_t{16} << 20;
  runner.Run("qkv", [&] {
    std::vector<char> fresh(kBytes);
    std::memset(fresh.data(), 1, fresh.size());
    return Output({static_cast<float>(fresh[kBytes / 2])}, {1});
  });
  runner.Run("attention", [] { return Output({}, {}); });
  ASSERT_EQ(result_.phases_size(), 2);
  EXPECT_GE(result_.phases(0).fresh_bytes(), static_cast<int64_t>(kBytes * 9 / 10));
  EXPECT_LT(result_.phases(1).fresh_bytes(), static_cast<int64_t>(kBytes / 4));
}

TEST_F(PhaseRunnerTest, ReportsStartAndDoneInOrder) {
  PhaseRunner runner = Runner();
  runner.Run("qkv", [&] {
    EXPECT_EQ(runner.current(), "tp8/qkv");
    return Output({1, 2}, {1, 2});
  });
  EXPECT_EQ(runner.current(), "");
  runner.Run("attention", [] { return Output({}, {}); });
  EXPECT_THAT(Progress(), ElementsAre("start qkv", "done qkv", "start attention", "done attention"));
  ASSERT_EQ(result_.phases_size(), 2);
  EXPECT_EQ(result_.phases(0).scenario(), "tp8");
  EXPECT_EQ(result_.phases(0).phase(), "qkv");
  EXPECT_EQ(result_.phases(1).phase(), "attention");
}

TEST_F(PhaseRunnerTest, WithinTolerancePasses) {
  PhaseRunner runner = Runner();
  runner.Run("qkv", [] { return Output({1.0f, 2.0f, 3.05f}, {1, 2, 3}); });
  ASSERT_EQ(result_.phases_size(), 1);
  const proto::PhaseResult& r = result_.phases(0);
  EXPECT_EQ(r.elements(), 3);
  EXPECT_EQ(r.failures(), 0);
  EXPECT_NEAR(r.bound(), 0.1, 1e-12);
  EXPECT_NEAR(r.max_abs_error(), 0.05, 1e-6);
}

TEST_F(PhaseRunnerTest, OutsideToleranceIsRecordedAsFailures) {
  PhaseRunner runner = Runner();
  runner.Run("qkv", [] { return Output({1.0f, 2.5f, 3.5f, 4.0f}, {1, 2, 3, 4}); });
  const proto::PhaseResult& r = result_.phases(0);
  EXPECT_EQ(r.elements(), 4);
  EXPECT_EQ(r.failures(), 2);
  EXPECT_NEAR(r.max_abs_error(), 0.5, 1e-6);
  // The runner records; it does not throw: the report decides.
  EXPECT_THAT(Progress(), ElementsAre("start qkv", "done qkv"));
}

// A phase may hand back a check instead of its output and golden: the runner calls it with the
// phase's tolerance (inside the phase's host time) and records what it returns.
TEST_F(PhaseRunnerTest, StreamedCheckGetsThePhaseToleranceAndIsRecorded) {
  PhaseRunner runner = Runner();
  reference::Tolerance seen{-1, -1};
  runner.Run("qkv", [&] {
    PhaseOutput out;
    out.check = [&](const reference::Tolerance& tol) {
      seen = tol;
      reference::StreamingCompare compare(tol);
      const std::vector<float> a1 = {1.0f, 2.5f}, a2 = {3.5f, 4.0f};
      const std::vector<double> g1 = {1, 2}, g2 = {3, 4};
      compare.Add(0, a1.data(), g1.data(), 2);
      compare.Add(2, a2.data(), g2.data(), 2);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      return compare.Finish();
    };
    return out;
  });
  const proto::PhaseResult& r = result_.phases(0);
  EXPECT_EQ(seen.atol, spec_.tolerances().at("qkv").atol());
  EXPECT_EQ(seen.rtol, spec_.tolerances().at("qkv").rtol());
  EXPECT_EQ(r.elements(), 4);
  EXPECT_EQ(r.failures(), 2);
  EXPECT_NEAR(r.max_abs_error(), 0.5, 1e-6);
  EXPECT_GE(r.host_ms(), 30);
  EXPECT_THAT(Progress(), ElementsAre("start qkv", "done qkv"));
}

TEST_F(PhaseRunnerTest, StepOfAMultiStepDecodeUsesThePhaseTolerance) {
  PhaseRunner runner = Runner();
  // "qkv[2]" has no tolerance of its own: with {0, 0} this 0.05 difference would fail.
  runner.Run("qkv[2]", [] { return Output({1.0f, 3.05f}, {1, 3}); });
  runner.Run("qkv[3]", [] { return Output({1.0f, 3.5f}, {1, 3}); });
  ASSERT_EQ(result_.phases_size(), 2);
  EXPECT_EQ(result_.phases(0).phase(), "qkv[2]");
  EXPECT_EQ(result_.phases(0).failures(), 0);
  EXPECT_NEAR(result_.phases(0).bound(), 0.1, 1e-12);
  EXPECT_EQ(result_.phases(1).failures(), 1);
  EXPECT_THAT(Progress(), ElementsAre("start qkv[2]", "done qkv[2]", "start qkv[3]", "done qkv[3]"));
}

TEST_F(PhaseRunnerTest, PhaseWithoutToleranceMustBeExact) {
  PhaseRunner runner = Runner();
  runner.Run("unshard", [] { return Output({1.0f, 2.0f}, {1, 2.001}); });
  EXPECT_EQ(result_.phases(0).failures(), 1);
  EXPECT_EQ(result_.phases(0).bound(), 0);
}

TEST_F(PhaseRunnerTest, ThrowingBodyLeavesThePhaseNamedAndNoDone) {
  PhaseRunner runner = Runner();
  EXPECT_THROW(runner.Run("attention", []() -> PhaseOutput {
    Raise(ErrorCode::kInvalidArgument, "bad");
  }), Error);
  EXPECT_EQ(runner.current(), "tp8/attention");
  EXPECT_THAT(Progress(), ElementsAre("start attention"));
  EXPECT_EQ(result_.phases_size(), 0);
}

TEST_F(PhaseRunnerTest, InjectedFaultFiresInEveryStepOfItsPhase) {
  spec_.mutable_fault()->set_kind(proto::Fault::THROW);
  spec_.mutable_fault()->set_rank(0);
  spec_.mutable_fault()->set_phase("qkv");
  PhaseRunner runner = Runner();
  runner.Run("attention", [] { return Output({}, {}); });  // another phase: no fault
  try {
    runner.Run("qkv[2]", [] { return Output({}, {}); });
    FAIL() << "no fault";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_THAT(e.what(), HasSubstr("injected fault: rank 0 throws in phase qkv[2]"));
  }
}

}  // namespace
}  // namespace nkisim::launcher
