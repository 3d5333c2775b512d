// Reductions of nl (reduction_ops.h): every tensor_reduce op against fp64 goldens in fp32 and
// bf16, keepdims and multi-axis shapes, the free-axis rule (the partition axis and scattered axes
// are refused), mean's integer promotion and sum's lack of it, var, all_reduce across the two
// programs of an LNC = 2 core, and loop_reduce across iterations.
#include "runtime/language/reduction_ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/logical_core.h"
#include "tests/runtime/language/nl_test_util.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nl::testing {
namespace {

using ::nkisim::testing::Contains;
using ::nkisim::testing::InvalidArgumentMessage;

// Reduces each row of `rows` x `cols` values with f, starting from init.
std::vector<double> RowReduce(const std::vector<double>& v, int64_t rows, int64_t cols, double init,
                              const std::function<double(double, double)>& f) {
  std::vector<double> out;
  for (int64_t r = 0; r < rows; ++r) {
    double acc = init;
    for (int64_t c = 0; c < cols; ++c) acc = f(acc, v[r * cols + c]);
    out.push_back(acc);
  }
  return out;
}

struct ReduceCase {
  ReduceFn fn;
  double init;
  std::function<double(double, double)> combine;
  bool mean;
};

TEST_F(NlTest, ReductionsOverTheLastAxisMatchGoldens) {
  const std::vector<ReduceCase> cases = {
      {max, -INFINITY, [](double a, double b) { return std::max(a, b); }, false},
      {min, INFINITY, [](double a, double b) { return std::min(a, b); }, false},
      {sum, 0, [](double a, double b) { return a + b; }, false},
      {prod, 1, [](double a, double b) { return a * b; }, false},
      {mean, 0, [](double a, double b) { return a + b; }, true},
  };
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    const Tile x = Input({64, 24}, dt, 0.8f, 1.25f);
    for (const ReduceCase& c : cases) {
      const Tile r = c.fn(x, {1});
      EXPECT_EQ(r.shape(), (Shape{64, 1})) << Info(c.fn.op).name;
      EXPECT_EQ(r.dtype(), dt);
      std::vector<double> want = RowReduce(Values(x), 64, 24, c.init, c.combine);
      if (c.mean) {
        for (double& w : want) w /= 24;
      }
      ExpectClose(StrCat(Info(c.fn.op).name, " ", DTypeName(dt)), r.ToFloats(), want,
                  ToleranceFor(dt));
    }
  }
}

TEST_F(NlTest, KeepdimsAndMultiAxisShapes) {
  const Tile x = Input({8, 3, 5}, DType::kFloat32, -1, 1);
  EXPECT_EQ(sum(x, {2}).shape(), (Shape{8, 3}));
  EXPECT_EQ(sum(x, {2}, /*keepdims=*/true).shape(), (Shape{8, 3, 1}));
  EXPECT_EQ(sum(x, {1, 2}).shape(), (Shape{8, 1}));
  EXPECT_EQ(sum(x, {2, 1}, /*keepdims=*/true).shape(), (Shape{8, 1, 1}));
  const std::vector<double> v = Values(x);
  ExpectClose("sum over axes {1, 2}", sum(x, {1, 2}).ToFloats(),
              RowReduce(v, 8, 15, 0, [](double a, double b) { return a + b; }), kFp32Tolerance);
  ExpectClose("max over axis {2}", max(x, {2}).ToFloats(),
              RowReduce(v, 24, 5, -INFINITY, [](double a, double b) { return std::max(a, b); }),
              kFp32Tolerance);
}

TEST_F(NlTest, OnlyFreeAxesReduce) {
  const Tile x = Input({8, 3, 5}, DType::kFloat32, -1, 1);
  EXPECT_EQ(InvalidArgumentMessage([&] { sum(x, {0}); }),
            "sum: axis 0 of x 'input' [8, 3, 5] fp32 SBUF is the partition axis; nl reduces free "
            "axes only (transpose first, or all_reduce across programs)");
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { max(x, {0, 1, 2}); }), "partition axis"));
  EXPECT_EQ(InvalidArgumentMessage([&] { mean(x, {1}); }),
            "mean: axes [1] of x 'input' [8, 3, 5] fp32 SBUF: must be a contiguous run of free "
            "dims ending at the last one (2)");
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { min(x, {3}); }), "axes [3]"));
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { prod(x, {}); }), "needs at least one axis"));
}

TEST_F(NlTest, OnlyMeanPromotesIntegerInput) {
  const Tile i8 = FromValues({2, 4}, DType::kInt8, {100, 100, 100, 3, -7, 2, 1, 1});
  const Tile m = mean(i8, {1});
  EXPECT_EQ(m.dtype(), DType::kFloat32);
  EXPECT_EQ(m.ToFloats(), (std::vector<float>{75.75f, -0.75f}));
  const Tile s = sum(i8, {1});
  EXPECT_EQ(s.dtype(), DType::kInt8);  // no promotion: 303 saturates to the int8 maximum
  EXPECT_EQ(s.ToFloats(), (std::vector<float>{127, -3}));
  EXPECT_EQ(prod(i8, {1}).dtype(), DType::kInt8);
  const Tile a = all(FromValues({3, 3}, DType::kFloat32, {1, 2, 3, 1, 0, 1, -1, 0.5f, 9}), {1});
  EXPECT_EQ(a.dtype(), kBool);
  EXPECT_EQ(a.ToFloats(), (std::vector<float>{1, 0, 1}));
}

TEST_F(NlTest, VarIsThePopulationVariance) {
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    const Tile x = Input({32, 50}, dt, -2, 3, 4);
    const std::vector<double> v = Values(x);
    std::vector<double> want;
    for (int r = 0; r < 32; ++r) {
      double m = 0, ss = 0;
      for (int c = 0; c < 50; ++c) m += v[r * 50 + c] / 50;
      for (int c = 0; c < 50; ++c) ss += (v[r * 50 + c] - m) * (v[r * 50 + c] - m);
      want.push_back(ss / 50);
    }
    // bf16 rounds the centred values and their squares: allow 2e-2 of the largest variance.
    ExpectClose(StrCat("var ", DTypeName(dt)), var(x, {1}).ToFloats(), want,
                dt == DType::kFloat32 ? reference::Tolerance{1e-6, 1e-5}
                                      : reference::Tolerance{1e-6, 2e-2});
  }
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] {
                         var(Input({4, 4}, DType::kFloat32, 0, 1), {0});
                       }),
                       "var: axis 0"));
}

TEST(AllReduceTest, CombinesBothProgramsOfALogicalCore) {
  for (Op op : {Op::kAdd, Op::kMaximum}) {
    LogicalCore lnc(2, Trn2Profile());
    std::vector<float> results[2];
    lnc.Launch([&](const KernelContext& ctx) {
      Tile t = ctx.core.AllocateSbuf("x", {4, 8}, DType::kFloat32);
      std::vector<float> v(32);
      for (int i = 0; i < 32; ++i) v[i] = static_cast<float>((ctx.prg_id + 1) * (i % 5) - 3);
      t.FromFloats(v);
      results[ctx.prg_id] = all_reduce(t, op).ToFloats();
    });
    for (int i = 0; i < 32; ++i) {
      const float a = static_cast<float>(i % 5 - 3), b = static_cast<float>(2 * (i % 5) - 3);
      const float want = op == Op::kAdd ? a + b : std::max(a, b);
      EXPECT_EQ(results[0][i], want) << Info(op).name << " element " << i;
      EXPECT_EQ(results[1][i], want) << Info(op).name << " element " << i;
    }
  }
}

TEST_F(NlTest, AllReduceOnOneProgramIsTheInputAndRefusesNonReductions) {
  const Tile x = Input({4, 8}, DType::kFloat32, 0, 1);
  const size_t mark = Mark();
  EXPECT_TRUE(all_reduce(x, Op::kAdd).SameBuffer(x));
  EXPECT_TRUE(Since(mark).empty());
  const Tile cast = all_reduce(x, Op::kAdd, DType::kBFloat16);
  EXPECT_EQ(cast.dtype(), DType::kBFloat16);
  EXPECT_EQ(cast.get(3, {7}), RoundTo(DType::kBFloat16, x.get(3, {7})));
  EXPECT_EQ(InvalidArgumentMessage([&] { all_reduce(x, Op::kSubtract); }),
            "all_reduce: op subtract is not a reduction; use add, multiply, maximum, minimum, "
            "logical_and or logical_or");
}

TEST_F(NlTest, LoopReduceCarriesAnAccumulatorAcrossIterations) {
  std::vector<double> want(16 * 32, 0.0);
  Tile carried;
  for (int k = 0; k < 4; ++k) {
    const Tile part = Input({16, 32}, DType::kBFloat16, -1, 1, 10 + k);
    const std::vector<double> v = Values(part);
    for (size_t i = 0; i < want.size(); ++i) want[i] += v[i];
    loop_reduce(part, Op::kAdd, &carried, DType::kFloat32);
  }
  EXPECT_EQ(carried.dtype(), DType::kFloat32);
  ExpectClose("loop_reduce add over 4 iterations", carried.ToFloats(), want, kFp32Tolerance);
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] {
                         loop_reduce(Input({16, 8}, DType::kFloat32, 0, 1), Op::kAdd, &carried);
                       }),
                       "does not match the carried accumulator"));
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { loop_reduce(carried, Op::kDivide, &carried); }),
                       "loop_reduce: op divide is not a reduction"));
}

}  // namespace
}  // namespace nkisim::nl::testing
