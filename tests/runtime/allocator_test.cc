#include "runtime/allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "runtime/neuron_core.h"

namespace nkisim {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(AllocatorTest, FirstFitReusesFreedRanges) {
  OnChipAllocator a(MemorySpace::kSbuf, 1024, 64);
  EXPECT_EQ(a.Allocate("x", 100), 0u);    // rounds to 128
  EXPECT_EQ(a.Allocate("y", 64), 128u);
  EXPECT_EQ(a.Allocate("z", 256), 192u);
  a.Free(128);
  EXPECT_EQ(a.Allocate("w", 64), 128u);   // the hole is reused
  EXPECT_EQ(a.used_bytes(), 128u + 64 + 256);
  EXPECT_EQ(a.largest_free_range(), 1024u - 448);
}

TEST(AllocatorTest, ExhaustionNamesTileRequestAndFreeSpace) {
  OnChipAllocator a(MemorySpace::kSbuf, 1024, 64);
  a.Allocate("big", 960);
  try {
    a.Allocate("'w' [128, 64] bf16", 128);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfResources);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("SBUF"), HasSubstr("'w' [128, 64] bf16"),
                                HasSubstr("needs 128 B"), HasSubstr("free 64 B of 1024 B")));
  }
}

TEST(AllocatorTest, PsumAllocatesWholeBanks) {
  OnChipAllocator psum(MemorySpace::kPsum, 16384, 2048);
  EXPECT_EQ(psum.Allocate("a", 512), 0u);
  EXPECT_EQ(psum.Allocate("b", 4), 2048u);
  for (int i = 2; i < 8; ++i) psum.Allocate("bank", 2048);
  try {
    psum.Allocate("ninth", 4);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("PSUM"), HasSubstr("2048 B units"), HasSubstr("free 0 B")));
  }
}

TEST(AllocatorTest, CoreBudgetsComeFromTheProfile) {
  NeuronCore core(0, Trn2Profile());
  // 224 KiB per partition: 112 Ki bf16 elements fit, one more does not.
  Tile full = core.AllocateSbuf("full", {128, 112 * 1024}, DType::kBFloat16);
  EXPECT_EQ(core.sbuf().used_bytes(), 224u * 1024);
  EXPECT_THROW(core.AllocateSbuf("one_more", {1, 1}, DType::kFloat32), Error);
  // 16 KiB of PSUM per partition = 8 banks of 512 fp32.
  std::vector<Tile> banks;
  for (int i = 0; i < 8; ++i) banks.push_back(core.AllocatePsum("bank", {128, 512}));
  EXPECT_THROW(core.AllocatePsum("ninth", {128, 1}), Error);
}

TEST(AllocatorTest, DroppingTheLastHandleFreesTheTile) {
  NeuronCore core(0, Trn2Profile());
  {
    Tile t = core.AllocateSbuf("t", {128, 1024}, DType::kFloat32);
    Tile view = t.slice(1, 0, 10);
    t = Tile();
    EXPECT_EQ(core.sbuf().used_bytes(), 4096u);  // the view keeps it alive
  }
  EXPECT_EQ(core.sbuf().used_bytes(), 0u);
}

TEST(AllocatorTest, BadTileShapesAreRefused) {
  NeuronCore core(0, Trn2Profile());
  EXPECT_THROW(core.AllocateSbuf("p", {129, 4}, DType::kFloat32), Error);
  EXPECT_THROW(core.AllocateSbuf("no_free", {128}, DType::kFloat32), Error);
  EXPECT_THROW(core.AllocateSbuf("zero", {128, 0}, DType::kFloat32), Error);
  try {
    core.AllocateSbuf("p", {129, 4}, DType::kFloat32);
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("'p'"), HasSubstr("[129, 4]"), HasSubstr("<= 128")));
  }
}

TEST(TileTest, UninitialisedFloatTilesReadNaN) {
  NeuronCore core(0, Trn2Profile());
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFp8E4M3,
                      DType::kFp8E4M3FN, DType::kFp8E5M2}) {
    Tile t = core.AllocateSbuf("t", {4, 8}, dtype);
    for (float v : t.ToFloats()) EXPECT_TRUE(std::isnan(v)) << DTypeName(dtype) << ": " << v;
  }
  Tile i = core.AllocateSbuf("i", {4, 8}, DType::kInt32);
  for (float v : i.ToFloats()) EXPECT_EQ(v, 0.0f);
}

TEST(TileTest, ViewsSliceSelectReshapeBroadcast) {
  NeuronCore core(0, Trn2Profile());
  Tile t = core.AllocateSbuf("t", {4, 2, 3}, DType::kFloat32);
  std::vector<float> values(24);
  for (int i = 0; i < 24; ++i) values[i] = static_cast<float>(i);
  t.FromFloats(values);
  Tile s = t.slice(0, 1, 3).select(1, 1);  // partitions 1..2, free [1, :]
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.ToFloats(), (std::vector<float>{9, 10, 11, 15, 16, 17}));
  EXPECT_EQ(t.reshape({6}).get(3, {5}), 23.0f);
  Tile col = t.select(1, 0).slice(1, 0, 1);  // [4, 1]
  EXPECT_EQ(col.broadcast(1, 5).ToFloats()[4], 0.0f);
  EXPECT_EQ(col.broadcast(1, 5).ToFloats()[5], 6.0f);
  EXPECT_THROW(t.select(0, 0), Error);            // partition dim cannot be selected
  EXPECT_THROW(t.slice(2, 0, 4), Error);
  EXPECT_THROW(t.slice(2, 0, 2).reshape({4}), Error);  // not contiguous
  EXPECT_THROW(t.broadcast(1, 4), Error);          // dim of size 2
}

}  // namespace
}  // namespace nkisim
