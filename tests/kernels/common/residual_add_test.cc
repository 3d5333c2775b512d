// kernels/common/residual_add.h: out = a + b element by element (fp32, rounded into out's dtype)
// against plain code, at LNC 1 and 2, for decode- and prefill-like shapes whose element counts do
// not divide into whole pieces; its time stays near the HBM stream floor; bad operands are refused
// naming the operand and the rule.
#include "kernels/common/residual_add.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::kernels {
namespace {

TensorView Filled(const Shape& shape, DType dt, const char* name, float scale) {
  TensorView t = TensorView::Create(shape, dt, name);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>((i * 37) % 101) - 50 * scale;
  t.FromFloats(v);
  return t;
}

struct Case {
  int64_t rows, cols;
  int lnc;
  DType dtype;
};

class ResidualAddTest : public ::testing::TestWithParam<Case> {};

TEST_P(ResidualAddTest, EqualsThePlainSumBitForBit) {
  const Case c = GetParam();
  LogicalCore lnc(c.lnc, Trn2Profile(), 0);
  const TensorView a = Filled({c.rows, c.cols}, c.dtype, "a", 0.25f);
  const TensorView b = Filled({c.rows, c.cols}, c.dtype, "b", 0.125f);
  const TensorView out = TensorView::Create({c.rows, c.cols}, c.dtype, "out");
  ResidualAdd(lnc, a, b, out);
  const std::vector<float> x = a.ToFloats(), y = b.ToFloats(), got = out.ToFloats();
  TensorView want = TensorView::Create({c.rows, c.cols}, c.dtype, "want");
  std::vector<float> sum(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + y[i];
  want.FromFloats(sum);  // rounded into the dtype as the kernel's store rounds
  const std::vector<float> w = want.ToFloats();
  int64_t wrong = 0;
  for (size_t i = 0; i < w.size(); ++i) wrong += std::memcmp(&got[i], &w[i], sizeof(float)) != 0;
  EXPECT_EQ(wrong, 0);
  // Time: three streams of the tensor's bytes split over the cores. No piece's store waits for
  // another piece's bytes, so the least time is the HBM time plus one fixed DMA cost (the first
  // load's); the kernel stays within 1.6x the stream floor (which adds the last store's).
  const HardwareProfile& p = Trn2Profile();
  const double bytes = 3.0 * static_cast<double>(out.size_bytes()) / c.lnc;
  EXPECT_GE(lnc.now(), bytes / p.hbm_gbps_per_core() + p.dma_latency_ns() - 1e-6);
  const double floor = StreamFloorNs(p, bytes);
  EXPECT_LE(lnc.now(), 1.6 * floor) << lnc.now() << " ns against a stream floor of " << floor;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ResidualAddTest,
                         ::testing::Values(Case{32, 8192, 2, DType::kBFloat16},   // the 70B decode
                                           Case{8, 512, 1, DType::kBFloat16},
                                           Case{3, 1000, 2, DType::kFloat32},    // ragged pieces
                                           Case{512, 4096, 2, DType::kBFloat16},  // prefill-like
                                           Case{129, 2048, 1, DType::kFloat32}));

TEST(ResidualAddTest, BadOperandsAreRefusedNamingThem) {
  LogicalCore lnc(1, Trn2Profile(), 0);
  const TensorView a = TensorView::Create({4, 128}, DType::kBFloat16, "a");
  const TensorView wide = TensorView::Create({4, 256}, DType::kBFloat16, "wide");
  const TensorView ints = TensorView::Create({4, 128}, DType::kInt32, "ints");
  EXPECT_THAT(testing::InvalidArgumentMessage([&] { ResidualAdd(lnc, a, wide, a); }),
              ::testing::HasSubstr("residual_add: operand 'b' is [4, 256] bf16"));
  EXPECT_THAT(testing::InvalidArgumentMessage([&] { ResidualAdd(lnc, a, a, ints); }),
              ::testing::HasSubstr("must be contiguous 2-D float views"));
  EXPECT_THAT(testing::InvalidArgumentMessage([&] { ResidualAdd(lnc, wide.slice(1, 0, 128), a, a); }),
              ::testing::HasSubstr("operand 'a'"));
}

}  // namespace
}  // namespace nkisim::kernels
