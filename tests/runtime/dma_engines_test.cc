// The DMA engine model (runtime/dma_engines.h): how a transfer is split over the 16 engines, queue
// ordering, engines shared by transfers in flight, the completion semaphore, the HBM port, and
// the published figures (docs/dma.md) through kernels/examples/dma_curve.h. Every expected time
// is worked out from the trn2 profile's figures in the comments.
#include "runtime/dma_engines.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/examples/dma_curve.h"
#include "runtime/cost_model.h"
#include "runtime/neuron_core.h"
#include "runtime/nisa/dma.h"
#include "runtime/nisa/dma_descriptors.h"
#include "runtime/sim_mode.h"

namespace nkisim {
namespace {

const HardwareProfile& P() { return Trn2Profile(); }

int EnginesWith(const DmaSplit& s) { return s.engines_used(); }

// Partition counts 1, 4, 8, 9 and 128 of contiguous 1 KiB rows: 8 partitions an engine.
TEST(DmaSplitTest, PartitionsGoToEnginesInGroupsOfEight) {
  const DmaSplit one = SplitOverEngines(P(), 0, 1, 1024, 1024, false, true);
  EXPECT_EQ(EnginesWith(one), 1);
  EXPECT_EQ(one.bytes[0], 1024);
  const DmaSplit four = SplitOverEngines(P(), 0, 4, 1024, 1024, false, true);
  EXPECT_EQ(EnginesWith(four), 1);  // the overview's example 1: 4 partitions, one engine
  EXPECT_EQ(four.descriptors[0], 4);
  const DmaSplit eight = SplitOverEngines(P(), 0, 8, 1024, 1024, false, true);
  EXPECT_EQ(EnginesWith(eight), 1);
  const DmaSplit nine = SplitOverEngines(P(), 0, 9, 1024, 1024, false, true);
  EXPECT_EQ(EnginesWith(nine), 2);
  EXPECT_EQ(nine.bytes[0], 8 * 1024);
  EXPECT_EQ(nine.bytes[1], 1024);
  const DmaSplit all = SplitOverEngines(P(), 0, 128, 1024, 1024, false, true);
  EXPECT_EQ(EnginesWith(all), 16);
  for (int e = 0; e < 16; ++e) EXPECT_EQ(all.descriptors[static_cast<size_t>(e)], 8) << e;
  EXPECT_EQ(all.total_bytes(), 128 * 1024);
  // Partitions 64..67 sit on engine 8.
  const DmaSplit offset = SplitOverEngines(P(), 64, 4, 1024, 1024, false, true);
  EXPECT_EQ(offset.bytes[8], 4 * 1024);
  EXPECT_EQ(EnginesWith(offset), 1);
}

// Runs contiguous over whole rows (the HBM side) cover several partitions' rows: the overview's
// example 2, [128, 128] bf16, is one 2 KiB read per engine; long runs split at 4 KiB.
TEST(DmaSplitTest, DescriptorsFollowContiguousRunsAndSplitAtFourKiB) {
  const DmaSplit merged = SplitOverEngines(P(), 0, 128, 256, 128 * 256, true, true);
  EXPECT_EQ(merged.descriptors[0], 1);
  const DmaSplit rows8k = SplitOverEngines(P(), 0, 128, 8192, 8192, false, true);
  EXPECT_EQ(rows8k.descriptors[0], 8 * 2);  // 8 rows of 8 KiB, 2 descriptors each
  const DmaSplit strided = SplitOverEngines(P(), 0, 128, 1024, 64, false, true);
  EXPECT_EQ(strided.descriptors[0], 8 * 16);  // 64 B runs: 16 a row
  // HBM -> HBM spreads its rows over the engines in order.
  const DmaSplit hbm = SplitOverEngines(P(), 0, 32, 4096, 4096, false, false);
  EXPECT_EQ(EnginesWith(hbm), 16);
  EXPECT_EQ(hbm.bytes[0], 2 * 4096);
}

class DmaEngineTest : public ::testing::Test {
 protected:
  DmaEngineTest() : timing_(SimMode::kTimingOnly), core_(0, P()), scope_(core_) {}
  const std::vector<InstructionRecord>& Records() const { return core_.timeline().records(); }
  const std::vector<InstructionRecord>& Shares() const { return core_.timeline().shares(); }

  ScopedSimMode timing_;
  NeuronCore core_;
  ScopedCurrentCore scope_;
};

// A strided HBM view ([128, 64] of a [128, 512] bf16 tensor: 128 B runs) takes one descriptor
// per partition row; the contiguous one takes one 2 KiB run per engine (8 rows of 256 B).
TEST_F(DmaEngineTest, StridedViewsPayOneDescriptorPerRun) {
  TensorView wide = TensorView::Create({128, 512}, DType::kBFloat16, "wide");
  TensorView packed = TensorView::Create({128, 128}, DType::kBFloat16, "packed");
  Tile a = core_.AllocateSbuf("a", {128, 64}, DType::kBFloat16);
  Tile b = core_.AllocateSbuf("b", {128, 128}, DType::kBFloat16);
  nisa::dma_copy(a, wide.slice(1, 0, 64));
  nisa::dma_copy(b, packed);
  // Alone, the first: 1300 + 8 x 27.5 + 1024 / 27.2 = 1557.6 ns.
  EXPECT_NEAR(Records()[0].end_ns - Records()[0].start_ns,
              P().dma_latency_ns() + DmaShareNs(P(), 8 * 128, 8, 1.0), 1e-6);
  EXPECT_EQ(Shares()[0].bytes, 8 * 128);
}

// A transposing load ([128, 128] bf16 HBM -> SBUF) goes over the engines of its destination's
// partitions at 90% of the copy rate.
TEST_F(DmaEngineTest, TransposeRunsAtItsEfficiency) {
  TensorView src = TensorView::Create({16, 128}, DType::kBFloat16, "src");
  Tile dst = core_.AllocateSbuf("dst", {128, 16}, DType::kBFloat16);
  nisa::dma_transpose(dst, src, nisa::DgeMode::kHardware);
  const int64_t row = 16 * 2;
  EXPECT_NEAR(Records().back().end_ns - Records().back().start_ns,
              P().dma_latency_ns() + DmaShareNs(P(), 8 * row, 8, 0.9), 1e-6);
  EXPECT_EQ(static_cast<int>(Shares().size()), 16);
}

// Every engine writes the 4 B completion semaphore, even one with no bytes; the transfer is
// complete when the last one lands.
TEST_F(DmaEngineTest, CompletionWaitsForEverySemaphore) {
  TensorView src = TensorView::Create({4, 4096}, DType::kBFloat16, "A");
  Tile dst = core_.AllocateSbuf("A_sbuf", {4, 4096}, DType::kBFloat16);
  nisa::dma_copy(dst, src);
  ASSERT_EQ(Shares().size(), 16u);
  int with_data = 0;
  double last = 0;
  for (const InstructionRecord& s : Shares()) {
    with_data += s.bytes > 0;
    EXPECT_GE(s.end_ns - s.start_ns, DmaSemaphoreNs(P()) - 1e-9);
    last = std::max(last, s.end_ns);
  }
  EXPECT_EQ(with_data, 1);
  EXPECT_DOUBLE_EQ(Records().back().end_ns, last);
  EXPECT_DOUBLE_EQ(dst.buffer().ready_at, last);
}

// In order within a queue: a stream on one queue issues one transfer every dma_issue_ns, and a
// second queue's transfer is not held behind it.
TEST_F(DmaEngineTest, QueueIssuesInOrderAndQueuesOverlap) {
  TensorView src = TensorView::Create({128, 64}, DType::kBFloat16, "src");
  Tile t = core_.AllocateSbuf("t", {128, 64}, DType::kBFloat16);
  nisa::DmaOptions q0, q1;
  q0.queue = 0;
  q1.queue = 1;
  for (int i = 0; i < 3; ++i) nisa::dma_copy(t, src, q0);
  nisa::dma_copy(t, src, q1);
  EXPECT_DOUBLE_EQ(Records()[0].start_ns, 0);
  EXPECT_DOUBLE_EQ(Records()[1].start_ns, P().dma_issue_ns());
  EXPECT_DOUBLE_EQ(Records()[2].start_ns, 2 * P().dma_issue_ns());
  EXPECT_DOUBLE_EQ(Records()[3].start_ns, 0);           // queue 1 triggers at once
  EXPECT_LT(Records()[3].end_ns, Records()[1].end_ns);  // and completes before queue 0's second
  for (int i = 1; i < 3; ++i) EXPECT_GT(Records()[i].end_ns, Records()[i - 1].end_ns);
}

// Two large transfers on different queues share the engines: together they take about the sum
// of their shares (here the HBM port, 362.5 GB/s, is the bound for both), not each its own. Each
// engine runs the first share and its semaphore descriptor, then the second's: the second ends one
// port time and one semaphore after the first (the first's own semaphore is in dma_latency_ns).
TEST_F(DmaEngineTest, TransfersInFlightShareTheEngines) {
  TensorView src = TensorView::Create({2, 128, 8192}, DType::kBFloat16, "src");  // 2 MiB each
  Tile a = core_.AllocateSbuf("a", {128, 8192}, DType::kBFloat16);
  Tile b = core_.AllocateSbuf("b", {128, 8192}, DType::kBFloat16);
  nisa::DmaOptions q0, q1;
  q0.queue = 0;
  q1.queue = 1;
  nisa::dma_copy(a, src.select(0, 0), q0);
  nisa::dma_copy(b, src.select(0, 1), q1);
  const double alone = Records()[0].end_ns - Records()[0].start_ns;
  const double port = HbmTransferNs(P(), 128 * 8192 * 2);  // 5785 ns a transfer
  EXPECT_NEAR(alone, P().dma_latency_ns() + port, 1.0);
  EXPECT_NEAR(Records()[1].end_ns, alone + port + DmaSemaphoreNs(P()), 1.0);
}

// An engine idle while an earlier-issued transfer waits for its operand serves a later one:
// a store waiting on a late tile does not hold a ready load behind it.
TEST_F(DmaEngineTest, AWaitingTransferDoesNotBlockTheEngines) {
  Tile late = core_.AllocateSbuf("late", {128, 64}, DType::kBFloat16);
  late.buffer().ready_at = 50000;
  TensorView out = TensorView::Create({128, 64}, DType::kBFloat16, "out");
  TensorView src = TensorView::Create({128, 64}, DType::kBFloat16, "src");
  Tile t = core_.AllocateSbuf("t", {128, 64}, DType::kBFloat16);
  nisa::dma_copy(out, late);
  nisa::dma_copy(t, src);
  EXPECT_GE(Records()[0].start_ns, 50000);
  EXPECT_LT(Records()[1].end_ns, 5000);
}

// The published figures (docs/dma.md), within the issue's bars: the sweep within 5 points, the
// peak within 5% of min(16 x 23, 362.5), example 1's share within 10% and both examples' trigger
// to completion within 20%, the mixed kernel's two bandwidths within 20%.
TEST(DmaCurveTest, PublishedFiguresWithinTheirBars) {
  const std::vector<kernels::DmaSweepPoint> sweep = kernels::DmaSweep(P());
  for (const kernels::DmaSweepPoint& s : sweep) {
    EXPECT_NEAR(s.stream_percent, s.published_percent, 5.0) << s.bytes_per_partition << " B";
  }
  EXPECT_NEAR(sweep.back().stream_gbps, 362.5, 362.5 * 0.05);
  const kernels::DmaExampleResult e1 = kernels::DmaIsolatedTransfer(P(), 4, 4096);
  EXPECT_EQ(e1.engines_with_data, 1);
  EXPECT_EQ(e1.engines_with_semaphore, 16);
  EXPECT_NEAR(e1.largest_share_ns, 1416, 141.6);
  EXPECT_NEAR(e1.trigger_to_completion_ns, 2400, 480);
  const kernels::DmaExampleResult e2 = kernels::DmaIsolatedTransfer(P(), 128, 128);
  EXPECT_EQ(e2.engines_with_data, 16);
  EXPECT_NEAR(e2.trigger_to_completion_ns, 1200, 240);
  EXPECT_NEAR(kernels::DmaMixedDgeKernel(P(), 512).achieved_gbps, 259, 259 * 0.2);
  EXPECT_NEAR(kernels::DmaMixedDgeKernel(P(), 2048).achieved_gbps, 354, 354 * 0.2);
}

}  // namespace
}  // namespace nkisim
