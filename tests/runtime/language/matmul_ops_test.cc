// matmul and transpose of nl (matmul_ops.h): values against fp64 loops in fp32 and bf16, both
// layouts of x, results in PSUM fp32, and the seed's shape limits (x: partitions <= 128, free <=
// 128; y: partitions <= 128, free <= 512) with the contraction sizes matching.
#include "runtime/language/matmul_ops.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/error.h"
#include "tests/runtime/language/nl_test_util.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nl::testing {
namespace {

using ::nkisim::testing::Contains;
using ::nkisim::testing::InvalidArgumentMessage;

// a [m, k] (or its transpose [k, m] when a_is_km) times b [k, n], in fp64.
std::vector<double> MatmulGolden(const std::vector<double>& a, bool a_is_km,
                                 const std::vector<double>& b, int m, int k, int n) {
  std::vector<double> c(static_cast<size_t>(m) * n, 0.0);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      for (int q = 0; q < k; ++q)
        c[i * n + j] += (a_is_km ? a[q * m + i] : a[i * k + q]) * b[q * n + j];
    }
  }
  return c;
}

TEST_F(NlTest, MatmulOfBothLayoutsMatchesTheGolden) {
  constexpr int kM = 96, kK = 128, kN = 300;
  for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
    const Tile x = Input({kM, kK}, dt, -1, 1, 1);
    const Tile x_km = Input({kK, kM}, dt, -1, 1, 2);
    const Tile y = Input({kK, kN}, dt, -1, 1, 3);
    const Tile c = matmul(x, y);
    EXPECT_EQ(c.shape(), (Shape{kM, kN}));
    EXPECT_EQ(c.memory(), MemorySpace::kPsum);
    EXPECT_EQ(c.dtype(), DType::kFloat32);
    // fp32 accumulation of 128 products of |v| < 1: 1e-5 of the largest result is ample.
    const reference::Tolerance tol{1e-5, 1e-5};
    ExpectClose(StrCat("matmul ", DTypeName(dt)), c.ToFloats(),
                MatmulGolden(Values(x), false, Values(y), kM, kK, kN), tol);
    ExpectClose(StrCat("matmul transpose_x ", DTypeName(dt)),
                matmul(x_km, y, /*transpose_x=*/true).ToFloats(),
                MatmulGolden(Values(x_km), true, Values(y), kM, kK, kN), tol);
  }
}

TEST_F(NlTest, MatmulShapeLimits) {
  const Tile y = Input({128, 64}, DType::kBFloat16, -1, 1);
  EXPECT_EQ(InvalidArgumentMessage([&] {
              matmul(Input({64, 256}, DType::kBFloat16, -1, 1), y);
            }),
            "matmul: x 'input' [64, 256] bf16 SBUF: must be [M, K] with one free dim, partitions "
            "<= 128 and free size <= 128");
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] {
                         matmul(Input({128, 200}, DType::kBFloat16, -1, 1), y, true);
                       }),
                       "x 'input' [128, 200] bf16 SBUF: must be [K, M] (transpose_x) with one free "
                       "dim, partitions <= 128 and free size <= 128"));
  const Tile x = Input({32, 128}, DType::kBFloat16, -1, 1);
  EXPECT_EQ(InvalidArgumentMessage([&] {
              matmul(x, Input({128, 600}, DType::kBFloat16, -1, 1));
            }),
            "matmul: y 'input' [128, 600] bf16 SBUF: must be [K, N] with one free dim, partitions "
            "<= 128 and free size <= 512");
  EXPECT_EQ(InvalidArgumentMessage([&] {
              matmul(x, Input({64, 64}, DType::kBFloat16, -1, 1));
            }),
            "matmul: y 'input' [64, 64] bf16 SBUF has 64 partitions but x 'input' [32, 128] bf16 "
            "SBUF contracts over K = 128");
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] {
                         matmul(Input({8, 4, 4}, DType::kBFloat16, -1, 1), y);
                       }),
                       "with one free dim"));
}

TEST_F(NlTest, TransposeSwapsPartitionAndFreeIntoPsum) {
  const Tile x = Input({48, 100}, DType::kBFloat16, -1, 1);
  const Tile t = transpose(x);
  EXPECT_EQ(t.shape(), (Shape{100, 48}));
  EXPECT_EQ(t.memory(), MemorySpace::kPsum);
  EXPECT_EQ(t.dtype(), DType::kBFloat16);
  const std::vector<float> in = x.ToFloats(), out = t.ToFloats();
  for (int p = 0; p < 48; ++p) {
    for (int f = 0; f < 100; ++f) ASSERT_EQ(out[f * 48 + p], in[p * 100 + f]) << p << ", " << f;
  }
  EXPECT_EQ(transpose(x, DType::kFloat32).dtype(), DType::kFloat32);
  EXPECT_EQ(InvalidArgumentMessage([&] {
              transpose(Input({16, 129}, DType::kFloat32, 0, 1));
            }),
            "transpose: x 'input' [16, 129] fp32 SBUF: must be [P, F] with one free dim, "
            "partitions <= 128 and free size <= 128");
}

}  // namespace
}  // namespace nkisim::nl::testing
