// StreamingCompare against Compare on the whole tensor: the same counts, maxima and worst index
// whatever the blocks, including an element outside the bound of the first blocks that the
// final bound (a larger |golden| later) takes in, NaNs, and blocks out of order refused.
#include "kernels/reference/compare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/error.h"

namespace nkisim::reference {
namespace {

using ::testing::HasSubstr;

Comparison Streamed(const std::vector<float>& actual, const std::vector<double>& golden,
                    const Tolerance& tol, const std::vector<int64_t>& cuts) {
  StreamingCompare stream(tol);
  int64_t at = 0;
  for (int64_t end : cuts) {
    stream.Add(at, actual.data() + at, golden.data() + at, end - at);
    at = end;
  }
  return stream.Finish();
}

// The rule written out plainly: bound from the largest |golden|, an element fails unless its
// error is within it (NaN fails), the worst index is the first NaN error or else the first
// largest error.
Comparison Rule(const std::vector<float>& actual, const std::vector<double>& golden,
                const Tolerance& tol) {
  Comparison c;
  c.elements = static_cast<int64_t>(golden.size());
  double max_golden = 0;
  for (double g : golden) max_golden = std::max(max_golden, std::fabs(g));
  c.bound = tol.atol + tol.rtol * max_golden;
  bool nan_seen = false;
  for (size_t i = 0; i < golden.size(); ++i) {
    const double err = std::fabs(static_cast<double>(actual[i]) - golden[i]);
    if (std::isnan(err) || err > c.bound) ++c.failures;
    if (!nan_seen && std::isnan(err)) {
      nan_seen = true;
      c.max_abs_error = err;
      c.worst_index = static_cast<int64_t>(i);
    } else if (!nan_seen && err > c.max_abs_error) {
      c.max_abs_error = err;
      c.worst_index = static_cast<int64_t>(i);
    }
    const double rel = err / std::max(std::fabs(golden[i]), 1e-30);
    if (std::isnan(rel) || rel > c.max_rel_error) c.max_rel_error = rel;
  }
  return c;
}

void ExpectSame(const Comparison& a, const Comparison& b) {
  EXPECT_EQ(a.elements, b.elements);
  EXPECT_EQ(a.failures, b.failures);
  EXPECT_EQ(a.worst_index, b.worst_index);
  EXPECT_DOUBLE_EQ(a.bound, b.bound);
  if (std::isnan(b.max_abs_error)) {
    EXPECT_TRUE(std::isnan(a.max_abs_error));
  } else {
    EXPECT_DOUBLE_EQ(a.max_abs_error, b.max_abs_error);
  }
  if (std::isnan(b.max_rel_error)) {
    EXPECT_TRUE(std::isnan(a.max_rel_error));
  } else {
    EXPECT_DOUBLE_EQ(a.max_rel_error, b.max_rel_error);
  }
}

TEST(StreamingCompareTest, AnyBlocksGiveTheWholeTensorsComparison) {
  std::mt19937 rng(7);
  std::normal_distribution<double> value(0, 1);
  const Tolerance tol{1e-5, 2e-2};
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 5000);
    std::vector<double> golden(static_cast<size_t>(n));
    std::vector<float> actual(golden.size());
    for (int64_t i = 0; i < n; ++i) {
      golden[i] = value(rng) * (1 + trial % 4);
      actual[i] = static_cast<float>(golden[i] + value(rng) * 1e-3);
      if (rng() % 997 == 0) actual[i] += 0.5f;  // a few elements outside the bound
    }
    if (trial % 5 == 0) actual[static_cast<size_t>(rng() % n)] = std::nanf("");
    std::vector<int64_t> cuts;
    for (int64_t at = 0; at < n;) {
      at = std::min(n, at + 1 + static_cast<int64_t>(rng() % 700));
      cuts.push_back(at);
    }
    const Comparison whole = Rule(actual, golden, tol);
    ExpectSame(Compare(actual, golden, tol), whole);
    SCOPED_TRACE(testing::Message() << "trial " << trial << ", " << cuts.size() << " blocks");
    ExpectSame(Streamed(actual, golden, tol, cuts), whole);
    ExpectSame(Streamed(actual, golden, tol, {n}), whole);
    if (trial % 5 == 0) {
      EXPECT_TRUE(std::isnan(whole.max_abs_error));
      EXPECT_FALSE(whole.pass());
    }
  }
}

// Block 1's goldens are small, so its error of 0.5 is above the bound seen so far (0.02); block
// 2's |golden| of 100 makes the final bound 2.00001, which takes it in. An error of 3 is out.
TEST(StreamingCompareTest, AnEarlyErrorIsJudgedByTheFinalBound) {
  const Tolerance tol{1e-5, 2e-2};
  const std::vector<double> golden = {1, 1, 100, 1};
  const std::vector<float> inside = {1.5f, 1, 100, 1};
  const Comparison a = Streamed(inside, golden, tol, {2, 4});
  EXPECT_TRUE(a.pass());
  EXPECT_DOUBLE_EQ(a.bound, 1e-5 + 2e-2 * 100);
  EXPECT_EQ(a.worst_index, 0);
  const std::vector<float> outside = {4, 1, 100, 1};
  const Comparison b = Streamed(outside, golden, tol, {2, 4});
  EXPECT_EQ(b.failures, 1);
  ExpectSame(b, Rule(outside, golden, tol));
}

TEST(StreamingCompareTest, BlocksOutOfOrderAreRefused) {
  const std::vector<float> a = {1, 2, 3};
  const std::vector<double> g = {1, 2, 3};
  StreamingCompare stream({0, 0});
  stream.Add(0, a.data(), g.data(), 2);
  try {
    stream.Add(1, a.data() + 1, g.data() + 1, 2);
    ADD_FAILURE() << "an overlapping block was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("at flat index 1; blocks go in flat order and the next one starts at 2"));
  }
}

}  // namespace
// The printed summary names the worst element, or says that none differs (no index -1).
TEST(ComparisonTest, SummaryNamesTheWorstElementOrSaysAllAreExact) {
  const Tolerance tol{1e-5, 2e-2};
  const Comparison off = Streamed({1.0f, 2.5f, 3.0f}, {1.0, 2.0, 3.0}, tol, {3});
  EXPECT_THAT(off.ToString(), HasSubstr("FAIL 3 elements, 1 outside the bound; max abs err "
                                        "5.000e-01 at [1] (bound 6.001e-02)"));
  const Comparison exact = Streamed({1.0f, 2.0f}, {1.0, 2.0}, tol, {2});
  EXPECT_EQ(exact.worst_index, -1);
  EXPECT_THAT(exact.ToString(),
              HasSubstr("PASS 2 elements, 0 outside the bound; max abs err 0.000e+00 (every "
                        "element exact) (bound 4.001e-02)"));
  EXPECT_THAT(exact.ToString(), ::testing::Not(HasSubstr("[-1]")));
}

}  // namespace nkisim::reference
