// The nl example kernel (kernels/examples/row_softmax.h) on LNC = 1 and 2, partial row blocks
// included, against its fp64 golden; the golden itself against a hand-computed case; the
// kernel's validation errors.
#include "kernels/examples/row_softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/reference/compare.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/rng.h"
#include "tests/runtime/language/nl_test_util.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::kernels {
namespace {

using ::nkisim::nl::testing::ExpectClose;
using ::nkisim::testing::InvalidArgumentMessage;

TensorView RandomInput(const Shape& shape, DType dtype) {
  TensorView t = TensorView::Create(shape, dtype, "x");
  FillUniform(t, CounterRng(3, TensorIdFromName("x")), -4.0f, 4.0f);
  return t;
}

TEST(RowSoftmaxTest, GoldenOfAHandComputedRow) {
  TensorView x = TensorView::Create({1, 3}, DType::kFloat32, "x");
  x.FromFloats({0, std::log(2.0f), std::log(5.0f)});
  const std::vector<float> g = RowSoftmaxGolden(x);  // 1 : 2 : 5 of 8
  EXPECT_NEAR(g[0], 0.125, 1e-7);
  EXPECT_NEAR(g[1], 0.25, 1e-7);
  EXPECT_NEAR(g[2], 0.625, 1e-7);
}

TEST(RowSoftmaxTest, MatchesTheGoldenOnOneAndTwoCores) {
  for (int lnc_size : {1, 2}) {
    for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
      const TensorView x = RandomInput({300, 384}, dt);  // 150 rows per core: a partial block
      const TensorView y = TensorView::Create({300, 384}, dt, "y");
      ValidateRowSoftmax(x, y);
      LogicalCore lnc(lnc_size, Trn2Profile());
      lnc.Launch([&](const KernelContext& ctx) { RowSoftmaxKernel(ctx, x, y); });
      std::vector<double> golden;
      for (float g : RowSoftmaxGolden(x)) golden.push_back(g);
      ExpectClose(StrCat("row_softmax LNC ", lnc_size, " ", DTypeName(dt)), y.ToFloats(), golden,
                  nl::testing::ToleranceFor(dt));
      // Every program did work: each core recorded instructions.
      for (int c = 0; c < lnc_size; ++c) EXPECT_GT(lnc.core(c).Summary().instructions, 0) << c;
    }
  }
}

TEST(RowSoftmaxTest, ValidationNamesTheOperand) {
  const TensorView x = RandomInput({4, 8}, DType::kFloat32);
  EXPECT_EQ(InvalidArgumentMessage([&] {
              ValidateRowSoftmax(x, TensorView::Create({4, 9}, DType::kFloat32, "y"));
            }),
            "row_softmax: y is [4, 9]; must match x's [4, 8]");
  EXPECT_EQ(InvalidArgumentMessage([&] {
              ValidateRowSoftmax(TensorView::Create({4, 8, 2}, DType::kFloat32, "x"), x);
            }),
            "row_softmax: x is [4, 8, 2]; must be 2-D [R, C] with R, C >= 1");
  EXPECT_EQ(InvalidArgumentMessage([&] {
              ValidateRowSoftmax(x, TensorView::Create({4, 8}, DType::kInt32, "y"));
            }),
            "row_softmax: x is fp32 and y int32; both must be float dtypes");
}

}  // namespace
}  // namespace nkisim::kernels
