#include "runtime/tensor_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "runtime/error.h"

namespace nkisim {
namespace {

using ::testing::HasSubstr;

// A [2, 3, 4] fp32 tensor holding 0..23 in row-major order.
TensorView Iota234() {
  TensorView t = TensorView::Create({2, 3, 4}, DType::kFloat32, "t");
  std::vector<float> values(24);
  std::iota(values.begin(), values.end(), 0.0f);
  t.FromFloats(values);
  return t;
}

TEST(TensorViewTest, CreateIsZeroFilledAndRowMajor) {
  TensorView t = TensorView::Create({2, 3}, DType::kBFloat16, "z");
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_EQ(t.size_bytes(), 12);
  for (float v : t.ToFloats()) EXPECT_EQ(v, 0.0f);
}

TEST(TensorViewTest, SelectThenSliceChainsLikeTheSeed) {
  TensorView t = Iota234();
  TensorView v = TensorView(t).select(0, 1).slice(1, 1, 3);  // t[1, :, 1:3]
  EXPECT_EQ(v.shape(), (Shape{3, 2}));
  EXPECT_EQ(v.ToFloats(), (std::vector<float>{13, 14, 17, 18, 21, 22}));
  EXPECT_TRUE(v.SameBuffer(t));
}

TEST(TensorViewTest, ViewsShareStorage) {
  TensorView t = Iota234();
  t.select(0, 0).select(0, 2).set({3}, -5.0f);
  EXPECT_EQ(t.get({0, 2, 3}), -5.0f);
}

TEST(TensorViewTest, SliceWithStep) {
  TensorView v = Iota234().slice(2, 0, 4, 2).select(0, 0);  // t[0, :, ::2]
  EXPECT_EQ(v.ToFloats(), (std::vector<float>{0, 2, 4, 6, 8, 10}));
}

TEST(TensorViewTest, PermuteTransposes) {
  TensorView v = Iota234().permute({2, 0, 1});
  EXPECT_EQ(v.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(v.get({3, 1, 2}), 1 * 12 + 2 * 4 + 3);
  EXPECT_FALSE(v.is_contiguous());
}

TEST(TensorViewTest, ReshapeContiguousView) {
  TensorView v = Iota234().select(0, 1).reshape({12});
  EXPECT_EQ(v.get({5}), 17.0f);
}

TEST(TensorViewTest, ReshapeOfNonContiguousViewFails) {
  TensorView v = Iota234().permute({1, 0, 2});
  try {
    v.reshape({24});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("not contiguous"));
  }
}

TEST(TensorViewTest, BadViewsNameTheRule) {
  TensorView t = Iota234();
  EXPECT_THROW(t.select(3, 0), Error);
  EXPECT_THROW(t.select(0, 2), Error);
  EXPECT_THROW(t.slice(1, 2, 4), Error);
  EXPECT_THROW(t.permute({0, 0, 1}), Error);
  EXPECT_THROW(t.reshape({5, 5}), Error);
  EXPECT_THROW(TensorView::Create({1, 1, 1, 1, 1, 1}, DType::kFloat32, "deep"), Error);
  try {
    t.slice(1, 2, 4);
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'t'"));
    EXPECT_THAT(e.what(), HasSubstr("<= 3"));
  }
}

TEST(TensorViewTest, AccessPatternRoundTrip) {
  TensorView t = Iota234();
  TensorView v = t.select(1, 2);  // [2, 4] at offset 8, strides {12, 1}
  AccessPattern ap = v.access_pattern();
  EXPECT_EQ(ap.offset, 8);
  ASSERT_EQ(ap.dims.size(), 2u);
  EXPECT_EQ(ap.dims[0], (std::pair<int64_t, int64_t>{12, 2}));
  EXPECT_EQ(t.ap(ap).ToFloats(), v.ToFloats());
}

TEST(TensorViewTest, AccessPatternReadsColumns) {
  // [[1, 4], [4, 3]] from offset 1: the transpose of column block t[0, :, 1:].
  TensorView v = Iota234().ap({1, {{1, 3}, {4, 3}}});
  EXPECT_EQ(v.ToFloats(), (std::vector<float>{1, 5, 9, 2, 6, 10, 3, 7, 11}));
}

TEST(TensorViewTest, AccessPatternOutOfBoundsFails) {
  TensorView t = Iota234();
  EXPECT_THROW(t.ap({20, {{1, 8}}}), Error);
  EXPECT_THROW(t.ap({0, {{1, 0}}}), Error);
}

TEST(TensorViewTest, FromFloatsRoundsIntoDtype) {
  TensorView t = TensorView::Create({2}, DType::kBFloat16, "b");
  t.FromFloats({1.00390625f, 3.0f});  // 1 + 2^-8 is a tie: rounds to even, 1.0
  EXPECT_EQ(t.ToFloats(), (std::vector<float>{1.0f, 3.0f}));
  EXPECT_THROW(t.FromFloats({1.0f}), Error);
}

// Views whose rows are contiguous but not the rows of their buffer (a column slice, a selected
// middle dim) convert a row at a time; element by element must give the same values in bf16.
TEST(TensorViewTest, ContiguousRowViewsConvertLikeElementAccess) {
  TensorView t = TensorView::Create({3, 4, 6}, DType::kBFloat16, "rows");
  std::vector<float> values(72);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.37f * static_cast<float>(i) - 9.0f;
  t.FromFloats(values);
  for (const TensorView& v :
       {t.slice(2, 1, 5), t.select(1, 2), t.slice(0, 1, 3).slice(1, 1, 4).slice(2, 2, 6)}) {
    std::vector<float> expect;
    v.ForEachOffset([&](int64_t off) {
      expect.push_back(ToFloat(DType::kBFloat16, t.buffer().data() + off * 2));
    });
    EXPECT_EQ(v.ToFloats(), expect);
    std::vector<float> fresh(expect.size());
    for (size_t i = 0; i < fresh.size(); ++i) fresh[i] = 100.0f + static_cast<float>(i);
    v.FromFloats(fresh);
    size_t i = 0;
    v.ForEachOffset([&](int64_t off) {
      EXPECT_EQ(ToFloat(DType::kBFloat16, t.buffer().data() + off * 2), fresh[i])
          << "element " << i;
      ++i;
    });
  }
  // The row-major order is kept across the outer dims: t[:, 1:3, 1:3] of 0..23 in fp32.
  EXPECT_EQ(Iota234().slice(1, 1, 3).slice(2, 1, 3).ToFloats(),
            (std::vector<float>{5, 6, 9, 10, 17, 18, 21, 22}));
}

}  // namespace
}  // namespace nkisim
