// runtime/rng: purity (slices agree with the whole), independence of seeds and tensor ids, and
// loose statistical checks of the distributions.
#include "runtime/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"

namespace nkisim {
namespace {

constexpr int kSamples = 100000;

TEST(RngTest, SameInputsGiveSameBits) {
  const CounterRng a(42, 7), b(42, 7);
  for (uint64_t i : {0ull, 1ull, 2ull, 1000ull, 0xFFFFFFFFFFFFFFFFull}) {
    EXPECT_EQ(a.Bits(i), b.Bits(i)) << i;
    EXPECT_EQ(a.Bits(i), a.Bits(i)) << i;
    EXPECT_EQ(std::bit_cast<uint32_t>(a.Uniform(i)), std::bit_cast<uint32_t>(b.Uniform(i)));
    EXPECT_EQ(std::bit_cast<uint32_t>(a.Normal(i)), std::bit_cast<uint32_t>(b.Normal(i)));
  }
  // Order of calls does not matter: backwards equals forwards.
  std::vector<uint64_t> forward, backward(100);
  for (uint64_t i = 0; i < 100; ++i) forward.push_back(a.Bits(i));
  for (uint64_t i = 100; i-- > 0;) backward[i] = b.Bits(i);
  EXPECT_EQ(forward, backward);
  EXPECT_EQ(a.seed(), 42u);
  EXPECT_EQ(a.tensor_id(), 7u);
}

TEST(RngTest, DistinctIndicesGiveDistinctBits) {
  const CounterRng rng(1, 2);
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < kSamples; ++i) seen.insert(rng.Bits(i));
  EXPECT_EQ(seen.size(), static_cast<size_t>(kSamples));
}

int CountEqual(const CounterRng& a, const CounterRng& b) {
  int equal = 0;
  for (uint64_t i = 0; i < 1000; ++i) equal += a.Bits(i) == b.Bits(i);
  return equal;
}

TEST(RngTest, SeedsAndTensorIdsGiveDifferentStreams) {
  const CounterRng base(5, 9);
  EXPECT_EQ(CountEqual(base, CounterRng(6, 9)), 0);
  EXPECT_EQ(CountEqual(base, CounterRng(5, 10)), 0);
  EXPECT_EQ(CountEqual(base, CounterRng(9, 5)), 0);  // the two inputs are not interchangeable
  EXPECT_EQ(CountEqual(CounterRng(0, 0), CounterRng(0, 1)), 0);
  // Not shifted copies of each other either: tensor 10's index i is not tensor 9's index i + k.
  std::set<uint64_t> first;
  for (uint64_t i = 0; i < 10000; ++i) first.insert(base.Bits(i));
  const CounterRng other(5, 10);
  int shared = 0;
  for (uint64_t i = 0; i < 10000; ++i) shared += first.count(other.Bits(i));
  EXPECT_EQ(shared, 0);
}

TEST(RngTest, BitsAreBalanced) {
  const CounterRng rng(123, TensorIdFromName("weights"));
  int ones[64] = {};
  for (uint64_t i = 0; i < kSamples; ++i) {
    const uint64_t bits = rng.Bits(i);
    for (int b = 0; b < 64; ++b) ones[b] += (bits >> b) & 1;
  }
  // Each bit is Binomial(1e5, 1/2): sd 158; 1500 is over 9 sd.
  for (int b = 0; b < 64; ++b) EXPECT_NEAR(ones[b], kSamples / 2, 1500) << "bit " << b;
}

// A change of one input (index, seed or tensor id) flips about half the output bits.
TEST(RngTest, InputsAvalanche) {
  const CounterRng rng(10, 20), next_seed(11, 20), next_id(10, 21);
  double index_flips = 0, seed_flips = 0, id_flips = 0;
  constexpr int kPairs = 10000;
  for (uint64_t i = 0; i < kPairs; ++i) {
    index_flips += std::popcount(rng.Bits(i) ^ rng.Bits(i + 1));
    seed_flips += std::popcount(rng.Bits(i) ^ next_seed.Bits(i));
    id_flips += std::popcount(rng.Bits(i) ^ next_id.Bits(i));
  }
  // Each count is Binomial(64, 1/2): mean 32, sd 4, so the sd of the average is 0.04.
  EXPECT_NEAR(index_flips / kPairs, 32.0, 0.4);
  EXPECT_NEAR(seed_flips / kPairs, 32.0, 0.4);
  EXPECT_NEAR(id_flips / kPairs, 32.0, 0.4);
}

// Pairs of neighbouring values fill the unit square evenly (a serial test): an unmixed counter,
// even a well-spread one, puts them on a few lines.
TEST(RngTest, NeighbouringValuesAreIndependent) {
  const CounterRng rng(3, 14);
  constexpr int kCells = 10;
  int cells[kCells][kCells] = {};
  double sum_xy = 0, sum_x = 0, sum_xx = 0;
  for (uint64_t i = 0; i < kSamples; ++i) {
    const double x = rng.Uniform(i), y = rng.Uniform(i + 1);
    ++cells[static_cast<int>(x * kCells)][static_cast<int>(y * kCells)];
    sum_xy += x * y;
    sum_x += x;
    sum_xx += x * x;
  }
  double chi_square = 0;
  const double expected = static_cast<double>(kSamples) / (kCells * kCells);
  for (const auto& row : cells) {
    for (int count : row) chi_square += (count - expected) * (count - expected) / expected;
  }
  EXPECT_LT(chi_square, 200.0);  // 99 degrees of freedom: mean 99, sd 14
  const double mean = sum_x / kSamples;
  const double correlation = (sum_xy / kSamples - mean * mean) / (sum_xx / kSamples - mean * mean);
  EXPECT_NEAR(correlation, 0.0, 0.02);  // sd 0.003
}

TEST(RngTest, UniformMeanVarianceAndRange) {
  const CounterRng rng(2024, 3);
  double sum = 0, sum_sq = 0;
  float low = 1, high = 0;
  int buckets[10] = {};
  for (uint64_t i = 0; i < kSamples; ++i) {
    const float u = rng.Uniform(i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
    sum_sq += static_cast<double>(u) * u;
    low = std::min(low, u);
    high = std::max(high, u);
    ++buckets[static_cast<int>(u * 10)];
  }
  const double mean = sum / kSamples;
  const double variance = sum_sq / kSamples - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.01);           // sd of the mean is 0.0009
  EXPECT_NEAR(variance, 1.0 / 12, 0.005);  // 1/12 = 0.0833
  EXPECT_LT(low, 0.001f);
  EXPECT_GT(high, 0.999f);
  for (int b = 0; b < 10; ++b) EXPECT_NEAR(buckets[b], kSamples / 10, 600) << "bucket " << b;
}

TEST(RngTest, UniformRespectsArbitraryRanges) {
  const CounterRng rng(8, 8);
  const std::pair<float, float> kRanges[] = {
      {-3.0f, 5.0f}, {-1e-3f, 1e-3f}, {100.0f, 100.5f}, {-1e30f, 1e30f}};
  for (const auto& [lo, hi] : kRanges) {
    double sum = 0;
    for (uint64_t i = 0; i < 20000; ++i) {
      const float u = rng.Uniform(i, lo, hi);
      ASSERT_GE(u, lo) << lo << ".." << hi;
      ASSERT_LT(u, hi) << lo << ".." << hi;
      sum += u;
    }
    const double width = static_cast<double>(hi) - lo;
    EXPECT_NEAR(sum / 20000, (static_cast<double>(lo) + hi) / 2, 0.02 * width) << lo << ".." << hi;
  }
  EXPECT_EQ(rng.Uniform(5, 2.5f, 2.5f), 2.5f);
  // A range one float wide holds only lo, though lo + (hi - lo) * u often rounds to hi.
  const float next = std::nextafter(1.0f, 2.0f);
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(rng.Uniform(i, 1.0f, next), 1.0f) << i;
  // Uniform(lo, hi) is the unit uniform scaled: same index, same position in the range.
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_NEAR(rng.Uniform(i, -2.0f, 2.0f), -2.0f + 4.0f * rng.Uniform(i), 1e-6f);
  }
}

TEST(RngTest, UniformRejectsBadRanges) {
  const CounterRng rng(1, 1);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& [lo, hi] : {std::pair{1.0f, 0.0f}, std::pair{0.0f, inf},
                               std::pair{-inf, 0.0f}, std::pair{nan, 1.0f}}) {
    try {
      rng.Uniform(0, lo, hi);
      ADD_FAILURE() << "accepted [" << lo << ", " << hi << ")";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("lo <= hi"), std::string::npos) << e.what();
    }
  }
  const TensorView empty = TensorView::Create({0}, DType::kFloat32);
  EXPECT_THROW(FillUniform(empty, rng, 1.0f, 0.0f), Error);  // checked even with nothing to fill
}

TEST(RngTest, NormalMeanVarianceAndShape) {
  const CounterRng rng(77, TensorIdFromName("activations"));
  double sum = 0, sum_sq = 0, sum_4 = 0;
  int within_one = 0;
  for (uint64_t i = 0; i < kSamples; ++i) {
    const double z = rng.Normal(i);
    ASSERT_TRUE(std::isfinite(z));
    ASSERT_LT(std::fabs(z), 6.8);
    sum += z;
    sum_sq += z * z;
    sum_4 += z * z * z * z;
    within_one += std::fabs(z) < 1.0;
  }
  const double mean = sum / kSamples;
  EXPECT_NEAR(mean, 0.0, 0.02);                      // sd of the mean is 0.003
  EXPECT_NEAR(sum_sq / kSamples - mean * mean, 1.0, 0.03);
  EXPECT_NEAR(sum_4 / kSamples, 3.0, 0.15);          // kurtosis of a normal
  EXPECT_NEAR(within_one / static_cast<double>(kSamples), 0.6827, 0.01);
  for (uint64_t i = 0; i < 100; ++i) {
    EXPECT_NEAR(rng.Normal(i, 10.0f, 0.5f), 10.0f + 0.5f * rng.Normal(i), 1e-5f);
  }
}

TEST(RngTest, SliceAgreesWithWhole) {
  const CounterRng rng(31337, TensorIdFromName("w1"));
  const TensorView whole = TensorView::Create({8, 16}, DType::kFloat32, "whole");
  FillUniform(whole, rng, -1.0f, 1.0f);

  // Row 3 made alone, as a rank owning that row would.
  const TensorView row = TensorView::Create({16}, DType::kFloat32, "row");
  FillUniform(row, rng, -1.0f, 1.0f, 3 * 16);
  std::vector<float> whole_row = whole.select(0, 3).ToFloats();
  EXPECT_EQ(row.ToFloats(), whole_row);

  // Rows 2..5 written through a view of another tensor of the same shape.
  const TensorView other = TensorView::Create({8, 16}, DType::kFloat32, "other");
  FillUniform(other.slice(0, 2, 6), rng, -1.0f, 1.0f, 2 * 16);
  EXPECT_EQ(other.slice(0, 2, 6).ToFloats(), whole.slice(0, 2, 6).ToFloats());
  EXPECT_EQ(other.select(0, 0).ToFloats(), std::vector<float>(16, 0.0f)) << "outside untouched";

  // Element [r, c] holds the value of flat index r * 16 + c.
  for (int64_t r = 0; r < 8; ++r) {
    for (int64_t c = 0; c < 16; ++c) {
      EXPECT_EQ(whole.get({r, c}), rng.Uniform(static_cast<uint64_t>(r * 16 + c), -1.0f, 1.0f));
    }
  }
}

TEST(RngTest, FillFollowsTheViewsRowMajorOrder) {
  const CounterRng rng(4, 4);
  const TensorView t = TensorView::Create({3, 5}, DType::kFloat32);
  FillNormal(t.permute({1, 0}), rng, 0.0f, 1.0f, 10);
  // The transposed view is [5, 3]: its element [i, j] is t[j, i] and has flat index 10 + 3i + j.
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      EXPECT_EQ(t.get({j, i}), rng.Normal(static_cast<uint64_t>(10 + 3 * i + j)));
    }
  }
}

TEST(RngTest, FillRoundsIntoTheViewsDType) {
  const CounterRng rng(9, 1);
  for (DType dtype : {DType::kBFloat16, DType::kFloat16, DType::kFp8E4M3, DType::kInt8,
                      DType::kUInt16}) {
    const TensorView t = TensorView::Create({64}, dtype);
    FillUniform(t, rng, 0.0f, 100.0f);
    for (int64_t i = 0; i < 64; ++i) {
      const float expected = RoundTo(dtype, rng.Uniform(static_cast<uint64_t>(i), 0.0f, 100.0f));
      EXPECT_EQ(t.get({i}), expected) << DTypeName(dtype) << " [" << i << "]";
    }
  }
}

TEST(RngTest, FillRejectsBadArguments) {
  const CounterRng rng(1, 1);
  const TensorView t = TensorView::Create({4}, DType::kFloat32);
  EXPECT_THROW(FillUniform(t, rng, 0.0f, 1.0f, -1), Error);
  EXPECT_THROW(FillNormal(t, rng, 0.0f, 1.0f, -1), Error);
  EXPECT_THROW(FillUniform(TensorView(), rng, 0.0f, 1.0f), Error);
}

TEST(RngTest, TensorIdFromNameIsFnv1a64) {
  // Published FNV-1a 64-bit test vectors.
  EXPECT_EQ(TensorIdFromName(""), 0xCBF29CE484222325ull);
  EXPECT_EQ(TensorIdFromName("a"), 0xAF63DC4C8601EC8Cull);
  EXPECT_EQ(TensorIdFromName("foobar"), 0x85944171F73967E8ull);
  EXPECT_NE(TensorIdFromName("w1"), TensorIdFromName("w2"));
  // Bytes above 0x7F hash as unsigned: the result does not depend on char's signedness.
  const std::string high = "\xE9";
  EXPECT_EQ(TensorIdFromName(high), (0xCBF29CE484222325ull ^ 0xE9ull) * 0x100000001B3ull);
}


// The bulk form gives Uniform's values bit for bit (whichever vector path the CPU takes),
// including a degenerate range and one so narrow that rounding lands on hi.
TEST(RngTest, UniformManyEqualsUniform) {
  const CounterRng rng(77, 5);
  std::vector<uint64_t> indices;
  for (uint64_t i = 0; i < 5000; ++i) indices.push_back(i * 7919 + (i % 3 == 0 ? uint64_t{1} << 40 : 0));
  const std::pair<float, float> ranges[] = {
      {0.0f, 1.0f}, {-0.02f, 0.02f}, {0.5f, 1.5f}, {3.0f, 3.0f}, {1.0f, std::nextafter(1.0f, 2.0f)}};
  for (const auto& [lo, hi] : ranges) {
    std::vector<float> many(indices.size());
    rng.UniformMany(indices.data(), static_cast<int64_t>(indices.size()), lo, hi, many.data());
    for (size_t j = 0; j < indices.size(); ++j) {
      ASSERT_EQ(many[j], rng.Uniform(indices[j], lo, hi)) << "index " << indices[j] << " range ["
                                                          << lo << ", " << hi << ")";
    }
  }
  float out = 0;
  EXPECT_THROW(rng.UniformMany(indices.data(), 1, 2.0f, 1.0f, &out), Error);
}

}  // namespace
}  // namespace nkisim
