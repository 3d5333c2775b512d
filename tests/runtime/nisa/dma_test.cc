// dma_copy of runtime/nisa/dma.h: every source / destination pairing, strided, permuted and
// access-pattern views, dtype conversion, dynamic offsets, queue selection, and the cost clock
// (the DMA engines' own tests are tests/runtime/dma_engines_test.cc).
#include "runtime/nisa/dma.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/neuron_core.h"
#include "runtime/nisa/elementwise.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nisa {
namespace {

using ::nkisim::testing::Contains;
using ::nkisim::testing::InvalidArgumentMessage;

// fp32 -> bf16 round to nearest, ties to even, by the bit trick (finite inputs).
float RoundToBf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return std::bit_cast<float>(bits & 0xFFFF0000u);
}

// 0, 1, 2, ... as floats.
std::vector<float> Iota(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
  return v;
}

// An HBM tensor holding 0, 1, 2, ... in row-major order.
TensorView CountingTensor(const Shape& shape, const std::string& name) {
  TensorView t = TensorView::Create(shape, DType::kFloat32, name);
  t.FromFloats(Iota(NumElements(shape)));
  return t;
}

// Options naming only a queue / only a dynamic offset. (Designated initializers would warn under
// -Wextra: DmaOptions' optional members have no default member initializers.)
DmaOptions OnQueue(int queue) {
  DmaOptions options;
  options.queue = queue;
  return options;
}

DmaOptions SrcOffset(const DynamicOffset& offset) {
  DmaOptions options;
  options.src_offset = offset;
  return options;
}

DmaOptions DstOffset(const DynamicOffset& offset) {
  DmaOptions options;
  options.dst_offset = offset;
  return options;
}

class DmaTest : public ::testing::Test {
 protected:
  DmaTest() : core_(0, Trn2Profile()), scope_(core_) {}


  const std::vector<InstructionRecord>& Records() const { return core_.timeline().records(); }

  // A one-element int32 HBM tensor for dynamic offsets.
  static TensorView Index(int32_t value) {
    TensorView index = TensorView::Create({1}, DType::kInt32, "index");
    index.set({0}, static_cast<float>(value));
    return index;
  }

  NeuronCore core_;
  ScopedCurrentCore scope_;
};

TEST_F(DmaTest, HbmToSbufAndBack) {
  TensorView src = CountingTensor({4, 6}, "src");
  Tile tile = core_.AllocateSbuf("tile", {4, 6}, DType::kFloat32);
  dma_copy(tile, src);
  EXPECT_EQ(tile.ToFloats(), Iota(24));

  TensorView out = TensorView::Create({4, 6}, DType::kFloat32, "out");
  dma_copy(out, tile);
  EXPECT_EQ(out.ToFloats(), Iota(24));
  ASSERT_EQ(Records().size(), 2u);
  EXPECT_STREQ(Records()[1].name, "dma_copy");
  EXPECT_DOUBLE_EQ(Records()[1].start_ns, Records()[0].end_ns);  // waits for the tile
  EXPECT_DOUBLE_EQ(out.buffer().ready_at(), Records()[1].end_ns);
}

TEST_F(DmaTest, SbufToSbufCostsOnlyTheQueue) {
  const HardwareProfile& p = core_.profile();
  Tile a = core_.AllocateSbuf("a", {16, 64}, DType::kFloat32);
  a.FromFloats(Iota(16 * 64));
  Tile b = core_.AllocateSbuf("b", {16, 64}, DType::kFloat32);
  dma_copy(b, a);
  EXPECT_EQ(b.ToFloats(), Iota(16 * 64));
  const int64_t bytes = 16 * 64 * 4;
  EXPECT_EQ(Records().back().bytes, bytes);
  // Alone: the fixed latency plus the largest share: 16 partitions on engines 0 and 1, 8 rows of
  // 256 B each (SBUF rows are not contiguous across partitions: 8 descriptors).
  EXPECT_DOUBLE_EQ(Records().back().end_ns - Records().back().start_ns,
                   p.dma_latency_ns() + DmaShareNs(p, 8 * 256, 8, 1.0));
}

TEST_F(DmaTest, PsumToSbufWaitsForTheEngineThatWroteIt) {
  Tile psum = core_.AllocatePsum("acc", {8, 32});
  memset(psum, 2.5f);
  Tile sbuf = core_.AllocateSbuf("sbuf", {8, 32}, DType::kFloat32);
  dma_copy(sbuf, psum);
  EXPECT_EQ(sbuf.ToFloats(), std::vector<float>(8 * 32, 2.5f));
  ASSERT_EQ(Records().size(), 2u);
  EXPECT_TRUE(IsDmaQueue(Records()[1].engine));
  EXPECT_GT(Records()[0].end_ns, 0.0);
  EXPECT_DOUBLE_EQ(Records()[1].start_ns, Records()[0].end_ns);
}

TEST_F(DmaTest, HbmToHbmThroughViews) {
  TensorView src = CountingTensor({6, 8}, "src");
  TensorView dst = TensorView::Create({3, 4}, DType::kFloat32, "dst");
  dma_copy(dst, src.slice(0, 1, 4).slice(1, 2, 6));  // rows 1..3, cols 2..5
  const std::vector<float> got = dst.ToFloats();
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c) EXPECT_EQ(got[r * 4 + c], (r + 1) * 8 + (c + 2)) << r << "," << c;
  }
}

TEST_F(DmaTest, StridedSliceLoads) {
  TensorView src = CountingTensor({8, 10}, "src");
  Tile tile = core_.AllocateSbuf("tile", {3, 3}, DType::kFloat32);
  dma_copy(tile, src.slice(0, 2, 8, 2).slice(1, 1, 9, 3));  // rows 2 4 6, cols 1 4 7
  const std::vector<float> got = tile.ToFloats();
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(got[r * 3 + c], (2 + 2 * r) * 10 + (1 + 3 * c));
  }
}

TEST_F(DmaTest, StoreIntoASlicedTileView) {
  Tile tile = core_.AllocateSbuf("tile", {4, 8}, DType::kFloat32);
  tile.FromFloats(std::vector<float>(32, -1.0f));
  dma_copy(tile.slice(0, 1, 3).slice(1, 4, 8), CountingTensor({2, 4}, "src"));
  const std::vector<float> got = tile.ToFloats();
  for (int p = 0; p < 4; ++p) {
    for (int f = 0; f < 8; ++f) {
      const bool inside = p >= 1 && p < 3 && f >= 4;
      EXPECT_EQ(got[p * 8 + f], inside ? (p - 1) * 4 + (f - 4) : -1.0f) << p << "," << f;
    }
  }
}

TEST_F(DmaTest, LoadsATransposedView) {
  TensorView src = CountingTensor({4, 6}, "src");
  Tile tile = core_.AllocateSbuf("tile", {6, 4}, DType::kFloat32);
  dma_copy(tile, src.permute({1, 0}));
  const std::vector<float> got = tile.ToFloats();
  for (int p = 0; p < 6; ++p) {
    for (int f = 0; f < 4; ++f) EXPECT_EQ(got[p * 4 + f], f * 6 + p) << p << "," << f;
  }
}

TEST_F(DmaTest, LoadsAnAccessPatternView) {
  TensorView src = CountingTensor({4, 6}, "src");
  AccessPattern pattern;
  pattern.offset = 1;
  pattern.dims = {{6, 4}, {2, 3}};  // every row, its odd columns
  Tile tile = core_.AllocateSbuf("tile", {4, 3}, DType::kFloat32);
  dma_copy(tile, src.ap(pattern));
  const std::vector<float> got = tile.ToFloats();
  for (int p = 0; p < 4; ++p) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(got[p * 3 + j], 1 + 6 * p + 2 * j) << p << "," << j;
  }
}

TEST_F(DmaTest, ConvertsFp32ToBf16OnTheWay) {
  std::vector<float> values(4 * 16);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = 1.0f / 3.0f + 0.0123f * static_cast<float>(i) * (i % 2 ? -1.0f : 1.0f);
  }
  TensorView src = TensorView::Create({4, 16}, DType::kFloat32, "src");
  src.FromFloats(values);
  Tile tile = core_.AllocateSbuf("tile", {4, 16}, DType::kBFloat16);
  dma_copy(tile, src);
  const std::vector<float> got = tile.ToFloats();
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(got[i], RoundToBf16(values[i])) << "element " << i;
    EXPECT_NE(got[i], values[i]) << "element " << i;  // the inputs are not bf16-exact
  }
}

TEST_F(DmaTest, LeadingSizeOneDimsAreAccepted) {
  TensorView src = CountingTensor({1, 4, 8}, "src");
  Tile tile = core_.AllocateSbuf("tile", {4, 8}, DType::kFloat32);
  dma_copy(tile, src);
  EXPECT_EQ(tile.ToFloats(), Iota(32));
  TensorView back = TensorView::Create({1, 1, 4, 8}, DType::kFloat32, "back");
  dma_copy(back, tile);
  EXPECT_EQ(back.ToFloats(), Iota(32));
}

TEST_F(DmaTest, ShapeMismatchIsRefused) {
  Tile tile = core_.AllocateSbuf("tile", {4, 8}, DType::kFloat32);
  const std::string message =
      InvalidArgumentMessage([&] { dma_copy(tile, CountingTensor({4, 6}, "narrow")); });
  EXPECT_TRUE(Contains(message, "narrow")) << message;
  EXPECT_TRUE(Contains(message, "same shape")) << message;
  InvalidArgumentMessage([&] { dma_copy(tile, CountingTensor({8, 4}, "transposed")); });
  EXPECT_TRUE(Records().empty());
}

TEST_F(DmaTest, DmaIntoPsumIsRefused) {
  Tile psum = core_.AllocatePsum("acc", {4, 8});
  std::string message =
      InvalidArgumentMessage([&] { dma_copy(psum, CountingTensor({4, 8}, "src")); });
  EXPECT_TRUE(Contains(message, "PSUM")) << message;
  Tile sbuf = core_.AllocateSbuf("sbuf", {4, 8}, DType::kFloat32);
  message = InvalidArgumentMessage([&] { dma_copy(psum, sbuf); });
  EXPECT_TRUE(Contains(message, "PSUM")) << message;
  EXPECT_TRUE(Records().empty());
}

TEST_F(DmaTest, DynamicOffsetShiftsTheSourceWindow) {
  TensorView table = CountingTensor({8, 4}, "table");
  Tile tile = core_.AllocateSbuf("tile", {2, 4}, DType::kFloat32);
  dma_copy(tile, table.slice(0, 0, 2), SrcOffset(DynamicOffset{Index(3), 0, 1, 8}));
  EXPECT_EQ(tile.ToFloats(), (std::vector<float>{12, 13, 14, 15, 16, 17, 18, 19}));  // rows 3, 4

  dma_copy(tile, table.slice(0, 0, 2), SrcOffset(DynamicOffset{Index(3), 0, 2, 8}));
  EXPECT_EQ(tile.ToFloats(), (std::vector<float>{24, 25, 26, 27, 28, 29, 30, 31}));  // rows 6, 7
}

TEST_F(DmaTest, DynamicOffsetShiftsTheDestinationWindow) {
  TensorView out = TensorView::Create({6, 3}, DType::kFloat32, "out");
  Tile tile = core_.AllocateSbuf("tile", {1, 3}, DType::kFloat32);
  tile.FromFloats({7, 8, 9});
  dma_copy(out.slice(0, 0, 1), tile, DstOffset(DynamicOffset{Index(4), 0, 1, 6}));
  const std::vector<float> got = out.ToFloats();
  for (int r = 0; r < 6; ++r) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(got[r * 3 + c], r == 4 ? 7 + c : 0) << r << "," << c;
  }
}

TEST_F(DmaTest, OutOfRangeDynamicOffsetIsRefusedNamingTheValue) {
  TensorView table = CountingTensor({8, 4}, "table");
  Tile tile = core_.AllocateSbuf("tile", {2, 4}, DType::kFloat32);
  std::string message = InvalidArgumentMessage([&] {
    dma_copy(tile, table.slice(0, 0, 2), SrcOffset(DynamicOffset{Index(42), 0, 1, 8}));
  });
  EXPECT_TRUE(Contains(message, "42")) << message;
  // The last row alone fits, but a two-row window starting there does not.
  InvalidArgumentMessage([&] {
    dma_copy(tile, table.slice(0, 0, 2), SrcOffset(DynamicOffset{Index(7), 0, 1, 8}));
  });
  message = InvalidArgumentMessage([&] {
    dma_copy(tile, table.slice(0, 0, 2), SrcOffset(DynamicOffset{Index(-3), 0, 1, 8}));
  });
  EXPECT_TRUE(Contains(message, "-3")) << message;
  EXPECT_TRUE(Records().empty());
}

TEST_F(DmaTest, DynamicOffsetOnAnOnChipSideIsRefused) {
  Tile a = core_.AllocateSbuf("a", {2, 4}, DType::kFloat32);
  Tile b = core_.AllocateSbuf("b", {2, 4}, DType::kFloat32);
  const std::string message = InvalidArgumentMessage(
      [&] { dma_copy(b, a, SrcOffset(DynamicOffset{Index(0), 0, 1, 2})); });
  EXPECT_TRUE(Contains(message, "HBM")) << message;
}

TEST_F(DmaTest, ExplicitQueueIsRecorded) {
  Tile tile = core_.AllocateSbuf("tile", {4, 8}, DType::kFloat32);
  dma_copy(tile, CountingTensor({4, 8}, "src"), OnQueue(5));
  EXPECT_EQ(Records().back().engine, DmaQueue(5));
  EXPECT_EQ(EngineName(Records().back().engine), "DMA queue 5");
  EXPECT_DOUBLE_EQ(core_.dma().queue_free_ns(5), core_.profile().dma_issue_ns());
  EXPECT_DOUBLE_EQ(core_.dma().queue_free_ns(0), 0.0);
}

TEST_F(DmaTest, OutOfRangeQueueIsRefused) {
  Tile tile = core_.AllocateSbuf("tile", {4, 8}, DType::kFloat32);
  const int queues = static_cast<int>(core_.profile().dma_queues());
  const std::string message = InvalidArgumentMessage(
      [&] { dma_copy(tile, CountingTensor({4, 8}, "src"), OnQueue(queues)); });
  EXPECT_TRUE(Contains(message, "queue " + std::to_string(queues))) << message;
  EXPECT_TRUE(Records().empty());
}

TEST_F(DmaTest, AutomaticQueuesSpreadIndependentTransfers) {
  std::vector<Tile> tiles;
  for (int i = 0; i < 4; ++i) {
    tiles.push_back(core_.AllocateSbuf("tile" + std::to_string(i), {32, 64}, DType::kFloat32));
    dma_copy(tiles.back(), CountingTensor({32, 64}, "src" + std::to_string(i)));
  }
  ASSERT_EQ(Records().size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(IsDmaQueue(Records()[i].engine));
    EXPECT_DOUBLE_EQ(Records()[i].start_ns, 0.0) << "transfer " << i;
    for (int j = 0; j < i; ++j) {
      EXPECT_NE(Records()[i].engine, Records()[j].engine) << i << "," << j;
    }
  }
}

}  // namespace
}  // namespace nkisim::nisa
