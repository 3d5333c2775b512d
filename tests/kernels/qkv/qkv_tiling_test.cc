// The QKV kernels' data-movement helpers (kernels/common/tiling.h): DMA sizing from the profile,
// cutting a transfer into pieces, the row broadcast, and the weight ring's scoreboard ordering.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/common/tiling.h"
#include "runtime/cost_model.h"
#include "runtime/hardware_profile.h"
#include "runtime/nisa/nisa.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::kernels {
namespace {

class QkvTilingTest : public ::testing::Test {
 protected:
  QkvTilingTest() : core_(0, Trn2Profile()), scope_(core_) {}

  // HBM tensor whose element i holds i (exact in bf16 below 256).
  static TensorView Counting(const Shape& shape) {
    TensorView t = TensorView::Create(shape, DType::kBFloat16, "w");
    std::vector<float> v(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 256);
    t.FromFloats(v);
    return t;
  }

  std::vector<InstructionRecord> Records(const char* name) const {
    std::vector<InstructionRecord> out;
    for (const InstructionRecord& r : core_.timeline().records()) {
      if (std::strcmp(r.name, name) == 0) out.push_back(r);
    }
    return out;
  }

  NeuronCore core_;
  ScopedCurrentCore scope_;
};

// 16 queues moving DmaTargetBytes each, 600 ns fixed, deliver more than the 362.5 GB/s port;
// half the break-even size (a quarter of the target) would not.
TEST_F(QkvTilingTest, DmaTargetBytesSaturatesTheHbmPort) {
  const HardwareProfile& p = Trn2Profile();
  const double b = static_cast<double>(DmaTargetBytes(p));
  auto delivered = [&](double bytes) {
    return p.dma_queues() * bytes / (p.dma_fixed_ns() + bytes / p.dma_queue_gbps());
  };
  EXPECT_NEAR(b, 2 * 600 * 362.5 * 27.34375 / (16 * 27.34375 - 362.5), 1.0);
  EXPECT_GT(delivered(b), p.hbm_gbps_per_core());
  EXPECT_LT(delivered(b / 4), p.hbm_gbps_per_core());
}

TEST_F(QkvTilingTest, DmaInPiecesCutsAlongTheDimAndCopiesEverything) {
  const TensorView src = Counting({128, 8, 512});  // 1 MiB of bf16: 7 pieces of <= 155 KiB
  Tile dst = core_.AllocateSbuf("dst", {128, 8, 512}, DType::kBFloat16);
  DmaInPieces(dst, src, 1);
  EXPECT_EQ(Records("dma_copy").size(), 7u);
  EXPECT_EQ(dst.ToFloats(), src.ToFloats());
}

TEST_F(QkvTilingTest, LoadRowBroadcastRepeatsRowZero) {
  const TensorView rows = Counting({2, 6});
  const Tile t = LoadRowBroadcast(core_, "row", rows, 4, DType::kFloat32);
  for (int64_t p = 0; p < 4; ++p) {
    for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(t.get(p, {i}), static_cast<float>(i));
  }
}

// With one slot, chunk 1's DMA may only start when the matmul reading chunk 0 has ended.
TEST_F(QkvTilingTest, WeightRingRefillWaitsForTheReaderOfTheSlot) {
  const TensorView w = Counting({128, 2, 512});
  WeightStream stream(core_, 512, DType::kBFloat16, 2, 1,
                      [&](int64_t k) { return w.slice(1, k, k + 1); });
  stream.Start();
  Tile x = core_.AllocateSbuf("x", {128, 4}, DType::kBFloat16);
  nisa::memset(x, 1.0f);
  Tile acc = core_.AllocatePsum("acc", {4, 512});
  nisa::nc_matmul(acc, x, stream.Get(0).select(1, 0));
  stream.Release(0);
  const auto dmas = Records("dma_copy");
  const auto matmuls = Records("nc_matmul");
  ASSERT_EQ(dmas.size(), 2u);
  EXPECT_GE(dmas[1].start_ns, matmuls[0].end_ns);
  const std::vector<float> second = stream.Get(1).ToFloats(), want = w.slice(1, 1, 2).ToFloats();
  EXPECT_EQ(second, want);
  EXPECT_EQ(testing::ErrorMessageOf(ErrorCode::kInternal, [&] { stream.Get(0); }),
            "WeightStream: chunk 0 is not resident (released 1, issued 2)");
  EXPECT_EQ(testing::ErrorMessageOf(ErrorCode::kInternal, [&] { stream.Release(0); }),
            "WeightStream: chunk 0 released out of order (next is 1)");
}

// SplitFirst cuts the first chunks into DMAs along their last dim (landing on several queues at
// once), IssueUpTo issues no further than asked nor than the ring has room for, and the chunks
// arrive whole either way.
TEST_F(QkvTilingTest, WeightStreamSplitsTheFirstChunksAndIssuesOnRequest) {
  const TensorView w = Counting({128, 4, 512});
  WeightStream stream(core_, 512, DType::kBFloat16, 4, 3,
                      [&](int64_t k) { return w.slice(1, k, k + 1); });
  stream.SplitFirst(2, 4);
  stream.IssueUpTo(1);
  EXPECT_EQ(Records("dma_copy").size(), 4u);  // chunk 0 as 4 DMAs
  stream.IssueUpTo(10);                        // the ring holds 3: chunks 1 (4 DMAs) and 2 (1)
  auto dmas = Records("dma_copy");
  ASSERT_EQ(dmas.size(), 9u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dmas[static_cast<size_t>(i)].bytes, 128 * 128 * 2) << i;
  EXPECT_EQ(dmas[8].bytes, 128 * 512 * 2);
  // The four pieces of chunk 0 run side by side on four queues: they end together, sooner than
  // one DMA of the whole chunk would.
  for (int i = 1; i < 4; ++i) {
    EXPECT_NE(dmas[static_cast<size_t>(i)].engine, dmas[0].engine) << i;
    EXPECT_DOUBLE_EQ(dmas[static_cast<size_t>(i)].end_ns, dmas[0].end_ns) << i;
  }
  EXPECT_LT(dmas[0].end_ns, DmaQueueNs(core_.profile(), 128 * 512 * 2));
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_EQ(stream.Get(k).ToFloats(), w.slice(1, k, k + 1).ToFloats()) << k;
  }
  stream.Release(0);  // frees a slot: chunk 3 is issued whole
  dmas = Records("dma_copy");
  ASSERT_EQ(dmas.size(), 10u);
  EXPECT_EQ(stream.Get(3).ToFloats(), w.slice(1, 3, 4).ToFloats());
}

}  // namespace
}  // namespace nkisim::kernels
