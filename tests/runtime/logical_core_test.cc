#include "runtime/logical_core.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/nisa.h"

namespace nkisim {
namespace {

using ::testing::HasSubstr;

TEST(LogicalCoreTest, LaunchRunsOneProgramPerCoreConcurrently) {
  LogicalCore lnc(2, Trn2Profile());
  std::atomic<int> arrived{0};
  std::vector<int> seen(2, -1);
  lnc.Launch([&](const KernelContext& ctx) {
    EXPECT_EQ(ctx.n_prgs, 2);
    EXPECT_EQ(&CurrentCore(), &ctx.core);
    seen[ctx.prg_id] = ctx.core.id();
    ++arrived;
    // Both programs must be alive at once: each waits for the other.
    while (arrived.load() < 2) std::this_thread::yield();
  });
  EXPECT_EQ(seen, (std::vector<int>{0, 1}));
}

TEST(LogicalCoreTest, LncMustBeOneOrTwo) {
  EXPECT_THROW(LogicalCore(3, Trn2Profile()), Error);
  EXPECT_THROW(LogicalCore(0, Trn2Profile()), Error);
}

TEST(LogicalCoreTest, SendRecvSwapsTilesAndJoinsClocks) {
  LogicalCore lnc(2, Trn2Profile());
  std::vector<std::vector<float>> received(2);
  lnc.Launch([&](const KernelContext& ctx) {
    Tile mine = ctx.core.AllocateSbuf("mine", {128, 64}, DType::kFloat32);
    Tile theirs = ctx.core.AllocateSbuf("theirs", {128, 64}, DType::kFloat32);
    nisa::memset(mine, static_cast<float>(ctx.prg_id + 1));
    if (ctx.prg_id == 1) {  // core 1 is busy longer before it sends
      for (int i = 0; i < 10; ++i) nisa::memset(mine, 2.0f);
    }
    nisa::sendrecv(mine, theirs);
    received[ctx.prg_id] = theirs.ToFloats();
  });
  EXPECT_EQ(received[0], std::vector<float>(128 * 64, 2.0f));
  EXPECT_EQ(received[1], std::vector<float>(128 * 64, 1.0f));
  // Both cores record the same transfer window (a DMA on each core's engines, on its queue's
  // row), starting when the later core was ready: a whole DMA alone, dma_latency_ns plus one
  // engine's share of 8 partitions x 256 B (8 descriptors).
  const HardwareProfile& p = Trn2Profile();
  const InstructionRecord& r0 = lnc.core(0).timeline().records().back();
  const InstructionRecord& r1 = lnc.core(1).timeline().records().back();
  EXPECT_STREQ(r0.name, "sendrecv");
  EXPECT_TRUE(IsDmaQueue(r0.engine));
  EXPECT_DOUBLE_EQ(r0.start_ns, r1.start_ns);
  EXPECT_DOUBLE_EQ(r0.start_ns, lnc.core(1).timeline().records()[10].end_ns);
  EXPECT_NEAR(r0.end_ns - r0.start_ns, p.dma_latency_ns() + DmaShareNs(p, 2048, 8, 1.0), 1e-9);
}

TEST(LogicalCoreTest, BarrierAlignsBothClocks) {
  LogicalCore lnc(2, Trn2Profile());
  lnc.Launch([&](const KernelContext& ctx) {
    Tile t = ctx.core.AllocateSbuf("t", {128, 512}, DType::kFloat32);
    for (int i = 0; i < (ctx.prg_id == 0 ? 1 : 5); ++i) nisa::memset(t, 0.0f);
    nisa::core_barrier();
  });
  const double release = lnc.core(0).timeline().now();
  EXPECT_DOUBLE_EQ(release, lnc.core(1).timeline().now());
  const double busy_end = lnc.core(1).timeline().records()[4].end_ns;
  EXPECT_DOUBLE_EQ(release, busy_end + Trn2Profile().core_link_latency_ns());
}

TEST(LogicalCoreTest, ThousandSendRecvAndBarrierRoundsDoNotDeadlock) {
  LogicalCore lnc(2, Trn2Profile());
  std::vector<float> last(2);
  lnc.Launch([&](const KernelContext& ctx) {
    Tile send = ctx.core.AllocateSbuf("send", {1, 1}, DType::kFloat32);
    Tile recv = ctx.core.AllocateSbuf("recv", {1, 1}, DType::kFloat32);
    for (int i = 0; i < 1000; ++i) {
      send.set(0, {0}, static_cast<float>(i * 2 + ctx.prg_id));
      nisa::sendrecv(send, recv);
      // The value received is the peer's of this very round.
      EXPECT_EQ(recv.get(0, {0}), static_cast<float>(i * 2 + 1 - ctx.prg_id));
      nisa::core_barrier();
    }
    last[ctx.prg_id] = recv.get(0, {0});
  });
  EXPECT_EQ(last, (std::vector<float>{1999, 1998}));
}

TEST(LogicalCoreTest, FailingProgramReleasesItsPeerAndIsReported) {
  LogicalCore lnc(2, Trn2Profile());
  try {
    lnc.Launch([&](const KernelContext& ctx) {
      Tile t = ctx.core.AllocateSbuf("t", {1, 1}, DType::kFloat32);
      if (ctx.prg_id == 1) Raise(ErrorCode::kInvalidArgument, "program 1 broke");
      nisa::sendrecv(t, t);  // would wait forever without abort handling
    });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);  // the root cause, not the peer's abort
    EXPECT_THAT(e.what(), HasSubstr("program 1 broke"));
  }
  // The logical core is usable again afterwards.
  lnc.Launch([](const KernelContext& ctx) { ctx.core.AllocateSbuf("ok", {1, 1}, DType::kFloat32); });
}

TEST(LogicalCoreTest, WaitTimesOutInsteadOfHanging) {
  LogicalCore lnc(2, Trn2Profile());
  lnc.set_wait_timeout(std::chrono::milliseconds(200));
  try {
    lnc.Launch([&](const KernelContext& ctx) {
      if (ctx.prg_id == 0) nisa::core_barrier();  // core 1 never arrives
    });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_THAT(e.what(), HasSubstr("core_barrier on core 0"));
  }
}

TEST(LogicalCoreTest, SendRecvShapeMismatchAndLnc1AreRefused) {
  LogicalCore lnc(2, Trn2Profile());
  EXPECT_THROW(lnc.Launch([](const KernelContext& ctx) {
    Tile send = ctx.core.AllocateSbuf("send", {4, 4}, DType::kFloat32);
    Tile recv = ctx.core.AllocateSbuf("recv", {4, ctx.prg_id == 0 ? 4 : 8}, DType::kFloat32);
    nisa::sendrecv(send, recv);
  }), Error);
  LogicalCore single(1, Trn2Profile());
  try {
    single.Launch([](const KernelContext& ctx) {
      Tile t = ctx.core.AllocateSbuf("t", {1, 1}, DType::kFloat32);
      nisa::sendrecv(t, t);
    });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("needs LNC = 2"));
  }
}

TEST(LogicalCoreTest, InstructionOnAnotherCoresTileIsRefused) {
  LogicalCore lnc(2, Trn2Profile());
  Tile core1_tile = lnc.core(1).AllocateSbuf("t1", {1, 4}, DType::kFloat32);
  try {
    ScopedCurrentCore scope(lnc.core(0));
    nisa::memset(core1_tile, 0.0f);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("lives on core 1"));
  }
}

}  // namespace
}  // namespace nkisim
