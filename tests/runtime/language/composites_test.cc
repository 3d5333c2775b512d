// softmax and rms_norm of nl (composites.h) against fp64 goldens written here: fp32 and bf16,
// multi-dim axes, mixed precision on and off, zero_max_mode and return_max_reduce, rms_norm with
// a weight broadcast from HBM, and their legality errors.
#include "runtime/language/composites.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/language/memory_ops.h"
#include "tests/runtime/language/nl_test_util.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nl::testing {
namespace {

using ::nkisim::testing::Contains;
using ::nkisim::testing::InvalidArgumentMessage;

// Softmax of each row of `rows` x `cols` values, in fp64.
std::vector<double> SoftmaxRows(const std::vector<double>& v, int rows, int cols) {
  std::vector<double> out(v.size());
  for (int r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int c = 0; c < cols; ++c) m = std::max(m, v[r * cols + c]);
    for (int c = 0; c < cols; ++c) s += std::exp(v[r * cols + c] - m);
    for (int c = 0; c < cols; ++c) out[r * cols + c] = std::exp(v[r * cols + c] - m) / s;
  }
  return out;
}

TEST_F(NlTest, SoftmaxMatchesTheGolden) {
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    const Tile x = Input({128, 512}, dt, -4, 4);
    const Tile y = softmax(x, {1});
    EXPECT_EQ(y.dtype(), dt);
    ExpectClose(StrCat("softmax ", DTypeName(dt)), y.ToFloats(), SoftmaxRows(Values(x), 128, 512),
                ToleranceFor(dt));
  }
  const Tile x3 = Input({16, 4, 32}, DType::kFloat32, -3, 3, 2);
  ExpectClose("softmax over axis 2 of [16, 4, 32]", softmax(x3, {2}).ToFloats(),
              SoftmaxRows(Values(x3), 64, 32), kFp32Tolerance);
  ExpectClose("softmax over axes {1, 2} of [16, 4, 32]", softmax(x3, {1, 2}).ToFloats(),
              SoftmaxRows(Values(x3), 16, 128), kFp32Tolerance);
}

TEST_F(NlTest, SoftmaxWithoutMixedPrecisionComputesInTheInputDtype) {
  const Tile x = Input({32, 256}, DType::kBFloat16, -4, 4, 3);
  SoftmaxOptions options;
  options.mixed_precision = false;
  // bf16 exp values and a bf16 reciprocal: three bf16 roundings, 2e-2 of the largest output.
  ExpectClose("softmax bf16 compute", softmax(x, {1}, options).ToFloats(),
              SoftmaxRows(Values(x), 32, 256), {1e-6, 2e-2});
}

TEST_F(NlTest, SoftmaxZeroMaxModeAndReturnMaxReduce) {
  // Rows of only negative values: the clamped max is 0, so exp sees x itself; the result is still
  // the softmax (it is shift-invariant).
  const Tile x = Input({8, 64}, DType::kFloat32, -6, -1, 4);
  SoftmaxOptions options;
  options.zero_max_mode = true;
  Tile m;
  options.return_max_reduce = &m;
  ExpectClose("softmax zero_max_mode", softmax(x, {1}, options).ToFloats(),
              SoftmaxRows(Values(x), 8, 64), kFp32Tolerance);
  EXPECT_EQ(m.shape(), (Shape{8, 1}));
  EXPECT_EQ(m.ToFloats(), std::vector<float>(8, 0.0f));

  const Tile mixed = Input({8, 64}, DType::kFloat32, -1, 5, 5);
  options.zero_max_mode = false;
  softmax(mixed, {1}, options);
  const std::vector<double> v = Values(mixed);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(m.ToFloats()[r], *std::max_element(v.begin() + r * 64, v.begin() + (r + 1) * 64));
  }
}

TEST_F(NlTest, SoftmaxRefusesThePartitionAxis) {
  EXPECT_EQ(InvalidArgumentMessage([&] {
              softmax(Input({8, 8}, DType::kFloat32, 0, 1), {0});
            }),
            "softmax: axis 0 of x 'input' [8, 8] fp32 SBUF is the partition axis; nl reduces free "
            "axes only (transpose first, or all_reduce across programs)");
}

std::vector<double> RmsNormRows(const std::vector<double>& x, const std::vector<double>& w,
                                int rows, int cols, double eps) {
  std::vector<double> out(x.size());
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int c = 0; c < cols; ++c) ss += x[r * cols + c] * x[r * cols + c];
    const double inv = 1.0 / std::sqrt(ss / cols + eps);
    for (int c = 0; c < cols; ++c) out[r * cols + c] = x[r * cols + c] * inv * w[c];
  }
  return out;
}

TEST_F(NlTest, RmsNormWithAWeightRowBroadcastFromHbm) {
  constexpr int kH = 256;
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    const Tile x = Input({128, kH}, dt, -2, 2, 6);
    TensorView w_hbm = TensorView::Create({1, kH}, dt, "w");
    std::vector<float> w(kH);
    for (int c = 0; c < kH; ++c) w[c] = 0.5f + static_cast<float>(c % 7) / 8;
    w_hbm.FromFloats(w);
    const Tile w_tile = load(broadcast_to(w_hbm, {128, kH}));
    RmsNormOptions options;
    options.epsilon = 1e-5f;
    const Tile y = rms_norm(x, w_tile, {1}, kH, options);
    EXPECT_EQ(y.dtype(), dt);
    const std::vector<float> wf = w_hbm.ToFloats();
    ExpectClose(StrCat("rms_norm ", DTypeName(dt)), y.ToFloats(),
                RmsNormRows(Values(x), std::vector<double>(wf.begin(), wf.end()), 128, kH, 1e-5),
                ToleranceFor(dt));
  }
}

TEST_F(NlTest, RmsNormChecksNAndTheWeightShape) {
  const Tile x = Input({8, 32}, DType::kFloat32, -1, 1);
  const Tile w = Input({8, 32}, DType::kFloat32, -1, 1, 2);
  EXPECT_EQ(InvalidArgumentMessage([&] { rms_norm(x, w, {1}, 64); }),
            "rms_norm: n = 64 but the reduced axes of x 'input' [8, 32] fp32 SBUF hold 32 elements "
            "per row");
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] {
                         rms_norm(x, Input({8, 32, 2}, DType::kFloat32, -1, 1), {1}, 32);
                       }),
                       "rms_norm: x 'input' [8, 32] fp32 SBUF and w 'input' [8, 32, 2] fp32 SBUF: "
                       "free ranks differ"));
  EXPECT_EQ(InvalidArgumentMessage([&] {
              rms_norm(Input({8, 1, 32}, DType::kFloat32, -1, 1),
                       Input({8, 4, 32}, DType::kFloat32, -1, 1), {2}, 32);
            }),
            "rms_norm: w 'input' [8, 4, 32] fp32 SBUF must broadcast to x's shape [8, 1, 32]");
  EXPECT_TRUE(
      Contains(InvalidArgumentMessage([&] { rms_norm(x, w, {2}, 32); }), "rms_norm: axes [2]"));
}

}  // namespace
}  // namespace nkisim::nl::testing
