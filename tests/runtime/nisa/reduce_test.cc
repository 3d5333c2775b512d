// Reductions of runtime/nisa/reduce.h: tensor_reduce over each combination of free axes against
// plain loop nests, its options and legality rules, and bn_stats + bn_aggr against a two-pass
// mean / population variance in double.
#include "runtime/nisa/reduce.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"
#include "runtime/neuron_core.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nisa {
namespace {

using ::nkisim::testing::Contains;
using ::nkisim::testing::InvalidArgumentMessage;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct ReduceCase {
  AluOp op;
  double identity;
  std::function<double(double, double)> combine;
};

const std::vector<ReduceCase>& ReduceCases() {
  static const std::vector<ReduceCase> cases = {
      {AluOp::kAdd, 0.0, [](double acc, double x) { return acc + x; }},
      {AluOp::kMax, -kInf, [](double acc, double x) { return std::max(acc, x); }},
      {AluOp::kMin, kInf, [](double acc, double x) { return std::min(acc, x); }},
      {AluOp::kMultiply, 1.0, [](double acc, double x) { return acc * x; }},
  };
  return cases;
}

// Reduces data[P][A][B] (row-major) over the flagged free axes; the result is row-major over
// the kept axes.
std::vector<double> ReduceReference(const std::vector<float>& data, int partitions, int a_size,
                                    int b_size, bool over_a, bool over_b, const ReduceCase& c) {
  const int kept_a = over_a ? 1 : a_size, kept_b = over_b ? 1 : b_size;
  std::vector<double> out(static_cast<size_t>(partitions * kept_a * kept_b), c.identity);
  for (int p = 0; p < partitions; ++p) {
    for (int a = 0; a < a_size; ++a) {
      for (int b = 0; b < b_size; ++b) {
        double& slot = out[(p * kept_a + (over_a ? 0 : a)) * kept_b + (over_b ? 0 : b)];
        slot = c.combine(slot, data[(p * a_size + a) * b_size + b]);
      }
    }
  }
  return out;
}

// Per-row (mean, population variance) of data[P][F] by two passes in double.
std::vector<std::pair<double, double>> RowMoments(const std::vector<float>& data, int partitions,
                                                  int free_size) {
  std::vector<std::pair<double, double>> out;
  for (int p = 0; p < partitions; ++p) {
    double sum = 0;
    for (int i = 0; i < free_size; ++i) sum += data[p * free_size + i];
    const double mean = sum / free_size;
    double squares = 0;
    for (int i = 0; i < free_size; ++i) {
      const double d = data[p * free_size + i] - mean;
      squares += d * d;
    }
    out.emplace_back(mean, squares / free_size);
  }
  return out;
}

// Values with an offset far from zero, so a one-pass E[x^2] - E[x]^2 would lose digits.
std::vector<float> Samples(int partitions, int free_size, float offset) {
  std::vector<float> v(static_cast<size_t>(partitions * free_size));
  for (int p = 0; p < partitions; ++p) {
    for (int i = 0; i < free_size; ++i) {
      v[p * free_size + i] = offset + static_cast<float>(p) +
                             (1.0f + 0.5f * static_cast<float>(p)) *
                                 static_cast<float>(std::sin(0.37 * i + 0.11 * p) + 0.1 * (i % 7));
    }
  }
  return v;
}

class ReduceTest : public ::testing::Test {
 protected:
  static constexpr int kP = 3, kA = 4, kB = 5;

  ReduceTest() : core_(0, Trn2Profile()), scope_(core_) {
    data_values_.resize(kP * kA * kB);
    for (size_t i = 0; i < data_values_.size(); ++i) {
      data_values_[i] = static_cast<float>(1.05 * std::sin(0.7 * static_cast<double>(i) + 0.3));
    }
    data_ = Sbuf("data", {kP, kA, kB}, data_values_);
  }

  Tile Sbuf(const std::string& name, const Shape& shape, const std::vector<float>& values) {
    Tile t = core_.AllocateSbuf(name, shape, DType::kFloat32);
    t.FromFloats(values);
    return t;
  }

  // Reduces data_ over `axes` with every op, into a dst of each of `dst_shapes`.
  void CheckEveryOp(const std::vector<int>& axes, const std::vector<Shape>& dst_shapes) {
    const bool over_a = std::count(axes.begin(), axes.end(), 1) > 0;
    const bool over_b = std::count(axes.begin(), axes.end(), 2) > 0;
    for (const Shape& shape : dst_shapes) {
      Tile dst = core_.AllocateSbuf("dst", shape, DType::kFloat32);
      for (const ReduceCase& c : ReduceCases()) {
        tensor_reduce(dst, c.op, data_, axes);
        const std::vector<float> got = dst.ToFloats();
        const std::vector<double> want =
            ReduceReference(data_values_, kP, kA, kB, over_a, over_b, c);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_NEAR(got[i], want[i], 1e-6 * std::max(1.0, std::fabs(want[i])))
              << AluOpName(c.op) << " into " << ShapeString(shape) << " element " << i;
        }
      }
    }
  }


  NeuronCore core_;
  ScopedCurrentCore scope_;
  std::vector<float> data_values_;
  Tile data_;
};

TEST_F(ReduceTest, LastFreeAxis) { CheckEveryOp({2}, {{kP, kA}, {kP, kA, 1}}); }

TEST_F(ReduceTest, FirstOfTwoFreeAxes) { CheckEveryOp({1}, {{kP, kB}, {kP, 1, kB}}); }

TEST_F(ReduceTest, BothFreeAxes) { CheckEveryOp({1, 2}, {{kP, 1}, {kP, 1, 1}}); }

TEST_F(ReduceTest, MiddleOfThreeFreeAxesKeepsTheOuterAndInnerOrder) {
  constexpr int kI = 2, kJ = 3, kK = 4;
  std::vector<float> values(kP * kI * kJ * kK);
  for (size_t n = 0; n < values.size(); ++n) {
    values[n] = static_cast<float>(std::cos(0.9 * static_cast<double>(n)) * 10.0);
  }
  Tile data = Sbuf("data3", {kP, kI, kJ, kK}, values);
  for (const Shape& shape : {Shape{kP, kI, kK}, Shape{kP, kI, 1, kK}}) {
    Tile dst = core_.AllocateSbuf("dst", shape, DType::kFloat32);
    tensor_reduce(dst, AluOp::kMax, data, {2});
    const std::vector<float> got = dst.ToFloats();
    for (int p = 0; p < kP; ++p) {
      for (int i = 0; i < kI; ++i) {
        for (int k = 0; k < kK; ++k) {
          const auto at = [&](int j) { return values[((p * kI + i) * kJ + j) * kK + k]; };
          float want = at(0);
          for (int j = 1; j < kJ; ++j) want = std::max(want, at(j));
          EXPECT_EQ(got[(p * kI + i) * kK + k], want)
              << ShapeString(shape) << " at " << p << "," << i << "," << k;
        }
      }
    }
  }
}

TEST_F(ReduceTest, SingleFreeAxisOfA2DTile) {
  const std::vector<float> values = {3, -1, 4, 1, -5, 9, 2, -6};
  Tile dst = core_.AllocateSbuf("dst", {2, 1}, DType::kFloat32);
  tensor_reduce(dst, AluOp::kMax, Sbuf("rows", {2, 4}, values), {1});
  EXPECT_EQ(dst.ToFloats(), (std::vector<float>{4, 9}));
  EXPECT_EQ(core_.timeline().records().back().engine, Engine::kVector);
}

TEST_F(ReduceTest, MeanAndNegateOptions) {
  Tile dst = core_.AllocateSbuf("dst", {kP, kA}, DType::kFloat32);
  tensor_reduce(dst, AluOp::kAdd, data_, {2}, {.mean = true});
  std::vector<float> got = dst.ToFloats();
  for (int p = 0; p < kP; ++p) {
    for (int a = 0; a < kA; ++a) {
      double sum = 0;
      for (int b = 0; b < kB; ++b) sum += data_values_[(p * kA + a) * kB + b];
      EXPECT_NEAR(got[p * kA + a], sum / kB, 1e-6) << p << "," << a;
    }
  }

  tensor_reduce(dst, AluOp::kMax, data_, {2}, {.negate = true});
  got = dst.ToFloats();
  for (int p = 0; p < kP; ++p) {
    for (int a = 0; a < kA; ++a) {
      float row_max = data_values_[(p * kA + a) * kB];
      for (int b = 1; b < kB; ++b) row_max = std::max(row_max, data_values_[(p * kA + a) * kB + b]);
      EXPECT_EQ(got[p * kA + a], -row_max) << p << "," << a;
    }
  }

  Tile total = core_.AllocateSbuf("total", {kP, 1}, DType::kFloat32);
  tensor_reduce(total, AluOp::kAdd, data_, {1, 2}, {.mean = true, .negate = true});
  got = total.ToFloats();
  for (int p = 0; p < kP; ++p) {
    double sum = 0;
    for (int i = 0; i < kA * kB; ++i) sum += data_values_[p * kA * kB + i];
    EXPECT_NEAR(got[p], -sum / (kA * kB), 1e-6) << "partition " << p;
  }
}

TEST_F(ReduceTest, MeanWithANonAddOpIsRefused) {
  Tile dst = core_.AllocateSbuf("dst", {data_.partitions(), 1}, DType::kFloat32);
  try {
    tensor_reduce(dst, AluOp::kMax, data_, {1, 2}, {.mean = true});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mean option needs op add"), std::string::npos) << e.what();
  }
}

TEST_F(ReduceTest, RunsOnGpSimdWhenAsked) {
  Tile dst = core_.AllocateSbuf("dst", {kP, kA}, DType::kFloat32);
  tensor_reduce(dst, AluOp::kAdd, data_, {2}, {}, Engine::kGpSimd);
  EXPECT_EQ(core_.timeline().records().back().engine, Engine::kGpSimd);
  const std::string message = InvalidArgumentMessage(
      [&] { tensor_reduce(dst, AluOp::kAdd, data_, {2}, {}, Engine::kScalar); });
  EXPECT_TRUE(Contains(message, "Scalar")) << message;
}

TEST_F(ReduceTest, PartitionAxisIsRefused) {
  Tile dst = core_.AllocateSbuf("dst", {1, kA, kB}, DType::kFloat32);
  const std::string message =
      InvalidArgumentMessage([&] { tensor_reduce(dst, AluOp::kAdd, data_, {0}); });
  EXPECT_TRUE(Contains(message, "partition")) << message;
  EXPECT_TRUE(core_.timeline().records().empty());
}

TEST_F(ReduceTest, NonReductionOpIsRefused) {
  Tile dst = core_.AllocateSbuf("dst", {kP, kA}, DType::kFloat32);
  for (AluOp op : {AluOp::kSubtract, AluOp::kDivide, AluOp::kBitwiseAnd, AluOp::kBypass}) {
    const std::string message =
        InvalidArgumentMessage([&] { tensor_reduce(dst, op, data_, {2}); });
    EXPECT_TRUE(Contains(message, AluOpName(op))) << message;
    EXPECT_TRUE(Contains(message, "not a reduction")) << message;
  }
  EXPECT_TRUE(core_.timeline().records().empty());
}

TEST_F(ReduceTest, WrongDstShapeIsRefused) {
  Tile wrong_free = core_.AllocateSbuf("wrong_free", {kP, kB}, DType::kFloat32);
  std::string message =
      InvalidArgumentMessage([&] { tensor_reduce(wrong_free, AluOp::kAdd, data_, {2}); });
  EXPECT_TRUE(Contains(message, "operand 'dst'")) << message;
  Tile wrong_partitions = core_.AllocateSbuf("wrong_partitions", {kP - 1, kA}, DType::kFloat32);
  message =
      InvalidArgumentMessage([&] { tensor_reduce(wrong_partitions, AluOp::kAdd, data_, {2}); });
  EXPECT_TRUE(Contains(message, "operand 'dst'")) << message;
  Tile unreduced = core_.AllocateSbuf("unreduced", {kP, kA, kB}, DType::kFloat32);
  InvalidArgumentMessage([&] { tensor_reduce(unreduced, AluOp::kAdd, data_, {1, 2}); });
  EXPECT_TRUE(core_.timeline().records().empty());
}

TEST_F(ReduceTest, BnStatsSplitsEvenAndOddElements) {
  const std::vector<float> row = {1, 10, 2, 20, 3, 30, 6};  // evens 1 2 3 6, odds 10 20 30
  Tile stats = core_.AllocateSbuf("stats", {1, 6}, DType::kFloat32);
  bn_stats(stats, Sbuf("row", {1, 7}, row));
  const std::vector<float> got = stats.ToFloats();
  EXPECT_EQ(got[0], 4);
  EXPECT_FLOAT_EQ(got[1], 3.0f);
  EXPECT_FLOAT_EQ(got[2], (4 + 1 + 0 + 9) / 4.0f);
  EXPECT_EQ(got[3], 3);
  EXPECT_FLOAT_EQ(got[4], 20.0f);
  EXPECT_FLOAT_EQ(got[5], 200.0f / 3.0f);
}

TEST_F(ReduceTest, BnStatsThenBnAggrGiveRowMeanAndPopulationVariance) {
  for (int free_size : {512, 7, 2, 301}) {
    constexpr int kRows = 4;
    const std::vector<float> values = Samples(kRows, free_size, 100.0f);
    Tile stats = core_.AllocateSbuf("stats", {kRows, 6}, DType::kFloat32);
    Tile moments = core_.AllocateSbuf("moments", {kRows, 2}, DType::kFloat32);
    bn_stats(stats, Sbuf("x", {kRows, free_size}, values));
    bn_aggr(moments, stats);
    const std::vector<float> got = moments.ToFloats();
    const std::vector<std::pair<double, double>> want = RowMoments(values, kRows, free_size);
    for (int p = 0; p < kRows; ++p) {
      EXPECT_NEAR(got[2 * p], want[p].first, 1e-6 * std::fabs(want[p].first))
          << "mean, F = " << free_size << ", row " << p;
      EXPECT_NEAR(got[2 * p + 1], want[p].second, 1e-5 * want[p].second)
          << "variance, F = " << free_size << ", row " << p;
    }
  }
}

TEST_F(ReduceTest, BnAggrCombinesChunksOfOneRow) {
  constexpr int kRows = 2, kChunk = 500;
  const std::vector<float> values = Samples(kRows, 2 * kChunk, -40.0f);
  Tile x = Sbuf("x", {kRows, 2 * kChunk}, values);
  Tile stats = core_.AllocateSbuf("stats", {kRows, 12}, DType::kFloat32);
  bn_stats(stats.slice(1, 0, 6), x.slice(1, 0, kChunk));
  bn_stats(stats.slice(1, 6, 12), x.slice(1, kChunk, 2 * kChunk));
  Tile moments = core_.AllocateSbuf("moments", {kRows, 2}, DType::kFloat32);
  bn_aggr(moments, stats);
  const std::vector<float> got = moments.ToFloats();
  const std::vector<std::pair<double, double>> want = RowMoments(values, kRows, 2 * kChunk);
  for (int p = 0; p < kRows; ++p) {
    EXPECT_NEAR(got[2 * p], want[p].first, 1e-6 * std::fabs(want[p].first)) << "row " << p;
    EXPECT_NEAR(got[2 * p + 1], want[p].second, 1e-5 * want[p].second) << "row " << p;
  }
}

TEST_F(ReduceTest, BnStatsRefusesAFreeSizeAbove512) {
  Tile stats = core_.AllocateSbuf("stats", {2, 6}, DType::kFloat32);
  Tile wide = Sbuf("wide", {2, 513}, std::vector<float>(2 * 513, 1.0f));
  const std::string message = InvalidArgumentMessage([&] { bn_stats(stats, wide); });
  EXPECT_TRUE(Contains(message, "513")) << message;
}

}  // namespace
}  // namespace nkisim::nisa
