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

// Two full descriptors on every partition (128 x 2 x 4 KiB): an engine's share of such a DMA runs
// within 1% of its sustained 23 B/ns, and one with a quarter of it (2 KiB a partition) does not.
TEST_F(QkvTilingTest, DmaTargetBytesRunsTheEnginesAtTheirSustainedRate) {
  const HardwareProfile& p = Trn2Profile();
  const int64_t b = DmaTargetBytes(p);
  EXPECT_EQ(b, 128 * 2 * 4096);
  auto rate = [&](int64_t bytes) {  // one engine's share: 8 rows of bytes / 128 each
    const int64_t share = bytes / 16, descriptors = 8 * ((bytes / 128 + 4095) / 4096);
    return share / DmaShareNs(p, share, descriptors, 1.0);
  };
  EXPECT_GT(rate(b), 0.99 * p.dma_engine_gbps());
  EXPECT_LT(rate(b / 4), 0.99 * p.dma_engine_gbps() * 0.95);
}

TEST_F(QkvTilingTest, DmaInPiecesCutsAlongTheDimAndCopiesEverything) {
  const TensorView src = Counting({128, 24, 512});  // 3 MiB of bf16: 3 pieces of 1 MiB
  Tile dst = core_.AllocateSbuf("dst", {128, 24, 512}, DType::kBFloat16);
  DmaInPieces(dst, src, 1);
  EXPECT_EQ(Records("dma_copy").size(), 3u);
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

// IssueUpTo issues no further than asked nor than the ring has room for, one DMA a chunk, and the
// chunks arrive whole.
TEST_F(QkvTilingTest, WeightStreamIssuesOnRequest) {
  const TensorView w = Counting({128, 4, 512});
  WeightStream stream(core_, 512, DType::kBFloat16, 4, 3,
                      [&](int64_t k) { return w.slice(1, k, k + 1); });
  stream.IssueUpTo(1);
  EXPECT_EQ(Records("dma_copy").size(), 1u);
  stream.IssueUpTo(10);  // the ring holds 3
  auto dmas = Records("dma_copy");
  ASSERT_EQ(dmas.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(dmas[static_cast<size_t>(i)].bytes, 128 * 512 * 2) << i;
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_EQ(stream.Get(k).ToFloats(), w.slice(1, k, k + 1).ToFloats()) << k;
  }
  stream.Release(0);  // frees a slot: chunk 3 is issued whole
  dmas = Records("dma_copy");
  ASSERT_EQ(dmas.size(), 4u);
  EXPECT_EQ(stream.Get(3).ToFloats(), w.slice(1, 3, 4).ToFloats());
}

}  // namespace
}  // namespace nkisim::kernels
