// Memory ops of nl (memory_ops.h): load / store round trips with casting, the on-chip copy, the
// transposing load on both DGE paths and its limits, atomic_rmw's scatter-add and its two named
// errors, and broadcast_to views of tiles and HBM tensors.
#include "runtime/language/memory_ops.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/language/matmul_ops.h"
#include "tests/runtime/language/nl_test_util.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nl::testing {
namespace {

using ::nkisim::testing::Contains;
using ::nkisim::testing::InvalidArgumentMessage;

TensorView Counting(const Shape& shape, DType dtype, const std::string& name) {
  TensorView t = TensorView::Create(shape, dtype, name);
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 251) - 100;
  t.FromFloats(v);
  return t;
}

TEST_F(NlTest, LoadAndStoreRoundTrip) {
  const TensorView src = Counting({64, 3, 10}, DType::kFloat32, "src");
  const Tile t = load(src, DType::kBFloat16);
  EXPECT_EQ(t.shape(), (Shape{64, 3, 10}));
  EXPECT_EQ(t.dtype(), DType::kBFloat16);
  const TensorView dst = TensorView::Create({64, 3, 10}, DType::kFloat32, "dst");
  store(dst, t);
  EXPECT_EQ(dst.ToFloats(), src.ToFloats());  // integers up to 150: exact in bf16
  const Tile v = load(Counting({40}, DType::kInt32, "vec"));
  EXPECT_EQ(v.shape(), (Shape{40, 1}));
  EXPECT_EQ(InvalidArgumentMessage([&] {
              load(Counting({200, 4}, DType::kFloat32, "big"));
            }),
            "load: src 'big' [200, 4] fp32 HBM: dim 0 (200) becomes the partition dim and must be "
            "<= 128; slice it into tiles");
}

TEST_F(NlTest, CopyEvictsPsumToSbufOnAComputeEngine) {
  const Tile x = Input({16, 32}, DType::kFloat32, -1, 1);
  const Tile psum = transpose(x);
  const size_t mark = Mark();
  const Tile c = copy(psum, DType::kBFloat16);
  EXPECT_EQ(Since(mark), (std::vector<Emitted>{{"tensor_copy", Engine::kVector}}));
  EXPECT_EQ(c.memory(), MemorySpace::kSbuf);
  EXPECT_EQ(c.dtype(), DType::kBFloat16);
  EXPECT_EQ(c.shape(), (Shape{32, 16}));
  EXPECT_EQ(c.get(5, {3}), RoundTo(DType::kBFloat16, x.get(3, {5})));
}

void ExpectTransposed(const TensorView& src, const Tile& t) {
  const std::vector<float> in = src.ToFloats(), out = t.ToFloats();
  const int64_t r = src.dim(0), c = src.dim(1);
  ASSERT_EQ(t.shape(), (Shape{c, r}));
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) ASSERT_EQ(out[j * r + i], in[i * c + j]) << i << ", " << j;
  }
}

TEST_F(NlTest, LoadTranspose2dUsesTheHardwareDgeWithinItsRulesAndFallsBackOtherwise) {
  const TensorView hw = Counting({16, 128}, DType::kBFloat16, "hw");
  size_t mark = Mark();
  ExpectTransposed(hw, load_transpose2d(hw));
  EXPECT_EQ(Since(mark), (std::vector<Emitted>{{"dma_transpose", Engine::kDma0}}));

  for (const TensorView& sw : {Counting({40, 96}, DType::kBFloat16, "rows"),
                               Counting({8, 64}, DType::kFloat32, "wide_dtype")}) {
    mark = Mark();
    ExpectTransposed(sw, load_transpose2d(sw));
    EXPECT_EQ(Since(mark), (std::vector<Emitted>{{"dge_descriptors", Engine::kGpSimd},
                                                 {"dma_transpose", Engine::kDma0}}))
        << sw.name();
  }
  mark = Mark();
  ExpectTransposed(hw, load_transpose2d(hw, std::nullopt, nisa::DgeMode::kSoftware));
  EXPECT_EQ(Since(mark).size(), 2u);
}

TEST_F(NlTest, LoadTranspose2dLimits) {
  EXPECT_EQ(InvalidArgumentMessage([&] {
              load_transpose2d(Counting({40, 96}, DType::kBFloat16, "src"), std::nullopt,
                               nisa::DgeMode::kHardware);
            }),
            "load_transpose2d: src 'src' [40, 96] bf16 HBM: R = 40 rows exceed the hardware DGE's "
            "16 (dge = hardware; kAuto falls back to software DGE)");
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] {
                         load_transpose2d(Counting({8, 64}, DType::kFloat32, "src"), std::nullopt,
                                          nisa::DgeMode::kHardware);
                       }),
                       "dtype fp32 is not 2 bytes wide"));
  EXPECT_EQ(InvalidArgumentMessage([&] {
              load_transpose2d(Counting({8, 256}, DType::kBFloat16, "src"));
            }),
            "load_transpose2d: src 'src' [8, 256] bf16 HBM: its C = 256 columns become "
            "partitions and must be <= 128");
  EXPECT_EQ(InvalidArgumentMessage([&] {
              load_transpose2d(Counting({2, 8, 8}, DType::kBFloat16, "src"));
            }),
            "load_transpose2d: src 'src' [2, 8, 8] bf16 HBM: must be a 2-D view [R, C]");
}

TEST_F(NlTest, AtomicRmwScatterAddsRowsChosenAtRunTime) {
  const TensorView table = Counting({10, 6}, DType::kFloat32, "table");
  const std::vector<float> before = table.ToFloats();
  const std::vector<float> rows = {3, 7, 3, 0};  // row 3 twice: the adds accumulate
  const Tile indices = FromValues({4, 1}, DType::kInt32, rows);
  const Tile value = Input({4, 6}, DType::kFloat32, -1, 1);
  atomic_rmw(Memref(table, indices), value, Op::kAdd);
  std::vector<double> want(before.begin(), before.end());
  const std::vector<double> v = Values(value);
  for (int n = 0; n < 4; ++n) {
    for (int j = 0; j < 6; ++j) want[static_cast<int>(rows[n]) * 6 + j] += v[n * 6 + j];
  }
  ExpectClose("atomic_rmw scatter-add", table.ToFloats(), want, kFp32Tolerance);

  EXPECT_EQ(
      InvalidArgumentMessage([&] { atomic_rmw(Memref(table, indices), value, Op::kMultiply); }),
      "atomic_rmw: op = multiply: only add is supported (err_atomic_rmw_add_only)");
  EXPECT_EQ(InvalidArgumentMessage([&] { atomic_rmw(table.slice(0, 0, 4), value, Op::kAdd); }),
            "atomic_rmw: dst 'table' [4, 6] fp32 HBM is indexed statically: dst must be indexed by "
            "a dynamic index tile, Memref(tensor, indices) (err_atomic_rmw_dynamic_index)");
  const Tile bad = FromValues({4, 1}, DType::kInt32, {0, 1, 10, 2});
  EXPECT_TRUE(
      Contains(InvalidArgumentMessage([&] { atomic_rmw(Memref(table, bad), value, Op::kAdd); }),
               "partition 2 holds row index 10, outside dst's rows [0, 10)"));
}

TEST_F(NlTest, BroadcastToIsAViewOfTilesAndHbmTensors) {
  const Tile column = Input({8, 1}, DType::kFloat32, -1, 1);
  const size_t mark = Mark();
  const Tile wide = broadcast_to(column, {8, 5});
  EXPECT_TRUE(Since(mark).empty());
  EXPECT_TRUE(wide.SameBuffer(column));
  EXPECT_EQ(wide.get(6, {4}), column.get(6, {0}));
  EXPECT_EQ(InvalidArgumentMessage([&] {
              broadcast_to(column, {16, 5});
            }),
            "broadcast_to: src 'input' [8, 1] fp32 SBUF: the partition dim never broadcasts (load "
            "the data onto each partition instead)");
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] {
                         broadcast_to(column, {8, 5, 2});
                       }),
                       "cannot broadcast to [8, 5, 2]"));

  const TensorView row = Counting({1, 12}, DType::kFloat32, "row");
  const Tile every_partition = load(broadcast_to(row, {128, 12}));
  const std::vector<float> r = row.ToFloats(), got = every_partition.ToFloats();
  for (int p = 0; p < 128; ++p) {
    for (int j = 0; j < 12; ++j) ASSERT_EQ(got[p * 12 + j], r[j]) << p;
  }
}

}  // namespace
}  // namespace nkisim::nl::testing
