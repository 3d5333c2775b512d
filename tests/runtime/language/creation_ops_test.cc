// Creation ops of nl (creation_ops.h): uninitialised float tiles read NaN, fills and their
// dtypes and buffers, rand's range and reproducibility after random_seed, and the HBM constants.
#include "runtime/language/creation_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "tests/runtime/language/nl_test_util.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nl::testing {
namespace {

using ::nkisim::testing::Contains;
using ::nkisim::testing::InvalidArgumentMessage;

bool AllNan(const std::vector<float>& v) {
  for (float f : v) {
    if (!std::isnan(f)) return false;
  }
  return !v.empty();
}

TEST_F(NlTest, UninitialisedFloatTilesReadNan) {
  EXPECT_TRUE(AllNan(ndarray({16, 32}, DType::kFloat32).ToFloats()));
  EXPECT_TRUE(AllNan(ndarray({16, 32}, DType::kBFloat16, Buffer::kPsum).ToFloats()));
  const Tile x = Input({4, 8}, DType::kFloat16, 0, 1);
  const Tile e = empty_like(x);
  EXPECT_EQ(e.shape(), x.shape());
  EXPECT_EQ(e.dtype(), DType::kFloat16);
  EXPECT_TRUE(AllNan(e.ToFloats()));
  EXPECT_EQ(empty_like(x, DType::kInt32).dtype(), DType::kInt32);
  EXPECT_EQ(ndarray({4, 8}, DType::kFloat32, Buffer::kSbuf, "scratch").name(), "scratch");
}

TEST_F(NlTest, FillsHoldTheirValueInTheirDtypeAndBuffer) {
  const Tile f = full({8, 4, 4}, 2.75f, DType::kBFloat16);
  EXPECT_EQ(f.ToFloats(), std::vector<float>(128, 2.75f));
  EXPECT_EQ(f.memory(), MemorySpace::kSbuf);
  const Tile p = zeros({8, 64}, DType::kFloat32, Buffer::kPsum);
  EXPECT_EQ(p.memory(), MemorySpace::kPsum);
  EXPECT_EQ(p.ToFloats(), std::vector<float>(512, 0.0f));
  EXPECT_EQ(ones({2, 3}, DType::kInt8).ToFloats(), std::vector<float>(6, 1.0f));
  EXPECT_EQ(full({1, 2}, 1000.0f, DType::kInt8).ToFloats(), std::vector<float>(2, 127.0f));
  const Tile z = zeros_like(Input({4, 8}, DType::kFloat32, 0, 1), DType::kBFloat16);
  EXPECT_EQ(z.dtype(), DType::kBFloat16);
  EXPECT_EQ(z.ToFloats(), std::vector<float>(32, 0.0f));
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] {
                         zeros({129, 4}, DType::kFloat32);
                       }),
                       "1 <= partitions <= 128"));
}

TEST_F(NlTest, RandIsUniformInUnitIntervalAndRepeatsAfterTheSameSeed) {
  random_seed(7);
  const std::vector<float> a = rand({128, 256}).ToFloats();
  double total = 0;
  for (float v : a) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LT(v, 1.0f);
    total += v;
  }
  std::cout << "  rand mean over 32768 draws: " << total / a.size() << "\n";
  EXPECT_NEAR(total / a.size(), 0.5, 0.01);
  const std::vector<float> next = rand({128, 256}).ToFloats();
  EXPECT_NE(next, a);  // the stream moves on
  random_seed(7);
  EXPECT_EQ(rand({128, 256}).ToFloats(), a);
  random_seed(8);
  EXPECT_NE(rand({128, 256}).ToFloats(), a);
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] {
                         rand({4, 4}, DType::kInt32);
                       }),
                       "random: operand 'dst' 'rand' [4, 4] int32 SBUF: random fills a float "
                       "dtype"));
}

TEST_F(NlTest, SharedConstantsLiveInHbm) {
  const TensorView c = shared_constant({1.5f, 2, 3, 4, 5, 6}, {2, 3}, DType::kBFloat16, "table");
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(c.name(), "table");
  EXPECT_EQ(c.ToFloats(), (std::vector<float>{1.5f, 2, 3, 4, 5, 6}));
  EXPECT_EQ(InvalidArgumentMessage([&] {
              shared_constant({1, 2}, {2, 3}, DType::kFloat32, "t");
            }),
            "shared_constant: 't' [2, 3] needs 6 values, got 2");
  const TensorView eye = shared_identity_matrix(3);
  EXPECT_EQ(eye.dtype(), DType::kUInt8);
  EXPECT_EQ(eye.ToFloats(), (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(shared_identity_matrix(2, DType::kFloat32).dtype(), DType::kFloat32);
}

}  // namespace
}  // namespace nkisim::nl::testing
