// The element-wise families of nl (math_ops.h): every unary, binary, bitwise and activation op
// against its own fp64 golden written here, in fp32 and bf16 (tolerances in nl_test_util.h),
// immediates, broadcasting, dtype promotion, bool results, and the legality errors (divide's
// tile check, bitwise_op's integer check, broadcast mismatches). Dropout and reciprocal too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/language/creation_ops.h"
#include "runtime/language/math_ops.h"
#include "tests/runtime/language/nl_test_util.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nl::testing {
namespace {

using ::nkisim::testing::Contains;
using ::nkisim::testing::InvalidArgumentMessage;

constexpr double kPi = 3.14159265358979323846;
constexpr DType kFloatDTypes[] = {DType::kFloat32, DType::kBFloat16};

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }  // the normal CDF

std::vector<double> Map(const std::vector<double>& in, const std::function<double(double)>& f) {
  std::vector<double> out;
  for (double v : in) out.push_back(f(v));
  return out;
}

// An op (a UnaryFn or ActivationFn), its input range and its golden.
template <typename Fn>
struct ValueCase {
  Fn fn;
  float lo, hi;
  std::function<double(double)> golden;
};

class ElementwiseTest : public NlTest {
 protected:
  // Runs every case on fp32 and bf16 inputs in [lo, hi) and checks the results and their dtype.
  template <typename Fn>
  void ExpectGoldens(const std::vector<ValueCase<Fn>>& cases) {
    for (DType dt : kFloatDTypes) {
      for (const ValueCase<Fn>& c : cases) {
        const Tile x = Input({32, 48}, dt, c.lo, c.hi, 9);
        const Tile y = c.fn(x);
        EXPECT_EQ(y.dtype(), dt);
        ExpectClose(StrCat(Info(c.fn.op).name, " ", DTypeName(dt)), y.ToFloats(),
                    Map(Values(x), c.golden), ToleranceFor(dt));
      }
    }
  }
};

TEST_F(ElementwiseTest, UnaryOpsMatchTheirGoldens) {
  ExpectGoldens<UnaryFn>({
      {exp, -3, 3, [](double v) { return std::exp(v); }},
      {log, 0.1f, 8, [](double v) { return std::log(v); }},
      {cos, -4, 4, [](double v) { return std::cos(v); }},
      {sin, -4, 4, [](double v) { return std::sin(v); }},
      {tan, -1.2f, 1.2f, [](double v) { return std::tan(v); }},
      {tanh, -3, 3, [](double v) { return std::tanh(v); }},
      {sqrt, 0, 9, [](double v) { return std::sqrt(v); }},
      {abs, -5, 5, [](double v) { return v < 0 ? -v : v; }},
      {negative, -5, 5, [](double v) { return -v; }},
      {arctan, -6, 6, [](double v) { return std::atan(v); }},
      {sign, -2, 2, [](double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); }},
  });
}

TEST_F(NlTest, FloorCeilTruncAreExactOnFractionsIntegersAndHalves) {
  const std::vector<float> v = {-2.5f, -2.0f, -1.75f, -0.5f, -1e-7f, 0.0f,   1e-7f,   0.5f,
                                1.25f, 2.0f,  2.5f,   7.75f, -7.75f, 100.5f, -100.5f, 255.0f};
  for (DType dt : kFloatDTypes) {
    const Tile x = FromValues({2, 8}, dt, v);
    const std::vector<double> in = Values(x);
    const std::vector<std::pair<UnaryFn, double (*)(double)>> cases = {
        {floor, [](double a) { return std::floor(a); }},
        {ceil, [](double a) { return std::ceil(a); }},
        {trunc, [](double a) { return std::trunc(a); }}};
    for (const auto& [fn, golden] : cases) {
      const std::vector<float> got = fn(x).ToFloats();
      for (size_t i = 0; i < in.size(); ++i) {
        EXPECT_EQ(got[i], golden(in[i]))
            << Info(fn.op).name << "(" << in[i] << ") " << DTypeName(dt);
      }
    }
  }
  // A wide random sweep in fp32, counting mismatches.
  const Tile x = Input({64, 64}, DType::kFloat32, -1000, 1000, 5);
  const std::vector<double> in = Values(x);
  ExpectClose("floor fp32 sweep", floor(x).ToFloats(),
              Map(in, [](double a) { return std::floor(a); }), {0, 0});
  ExpectClose("ceil fp32 sweep", ceil(x).ToFloats(), Map(in, [](double a) { return std::ceil(a); }),
              {0, 0});
  ExpectClose("trunc fp32 sweep", trunc(x).ToFloats(),
              Map(in, [](double a) { return std::trunc(a); }), {0, 0});
}

TEST_F(NlTest, LogicalNotGivesBoolAndInvertFlipsIntegerBits) {
  const Tile x = FromValues({1, 6}, DType::kFloat32, {0, 1, -2, 0, 0.5f, 3});
  const Tile n = logical_not(x);
  EXPECT_EQ(n.dtype(), kBool);
  EXPECT_EQ(n.ToFloats(), (std::vector<float>{1, 0, 0, 1, 0, 0}));
  const std::vector<int32_t> ints = {0, 5, -6, 127, -128, 1000};
  const Tile i32 = FromValues({1, 6}, DType::kInt32, std::vector<float>(ints.begin(), ints.end()));
  const std::vector<float> got = invert(i32).ToFloats();
  for (size_t i = 0; i < ints.size(); ++i)
    EXPECT_EQ(got[i], static_cast<float>(~ints[i])) << ints[i];
  const Tile u8 = FromValues({1, 4}, DType::kUInt8, {0, 5, 200, 255});
  EXPECT_EQ(invert(u8).ToFloats(), (std::vector<float>{255, 250, 55, 0}));
  const Tile u16 = FromValues({1, 2}, DType::kUInt16, {1, 65000});
  EXPECT_EQ(invert(u16).ToFloats(), (std::vector<float>{65534, 535}));
  const Tile i8 = FromValues({1, 3}, DType::kInt8, {0, 7, -128});
  EXPECT_EQ(invert(i8).ToFloats(), (std::vector<float>{-1, -8, 127}));

  const std::string message = InvalidArgumentMessage([&] { invert(x); });
  EXPECT_TRUE(Contains(message,
                       "invert: operand 'x' 'input' [1, 6] fp32 SBUF: invert needs "
                       "integer dtypes"))
      << message;
  const Tile u32 = FromValues({1, 2}, DType::kUInt32, {1, 2});
  EXPECT_TRUE(
      Contains(::nkisim::testing::ErrorMessageOf(ErrorCode::kNotSupported, [&] { invert(u32); }),
               "invert: uint32 is not supported"));
}

struct BinaryCase {
  BinaryFn fn;
  std::function<double(double, double)> golden;
};

TEST_F(NlTest, BinaryOpsMatchTheirGoldens) {
  const std::vector<BinaryCase> cases = {
      {add, [](double a, double b) { return a + b; }},
      {subtract, [](double a, double b) { return a - b; }},
      {multiply, [](double a, double b) { return a * b; }},
      {maximum, [](double a, double b) { return a > b ? a : b; }},
      {minimum, [](double a, double b) { return a < b ? a : b; }},
      {power, [](double a, double b) { return std::pow(a, b); }},
      {fmod, [](double a, double b) { return std::fmod(a, b); }},
      {mod, [](double a, double b) { return a - b * std::floor(a / b); }},
  };
  for (DType dt : kFloatDTypes) {
    const Tile x = Input({16, 40}, dt, 0.5f, 4.0f, 3);
    const Tile y = Input({16, 40}, dt, -2.0f, 2.0f, 4);
    const std::vector<double> a = Values(x), b = Values(y);
    for (const BinaryCase& c : cases) {
      const Tile z = c.fn(x, y);
      EXPECT_EQ(z.dtype(), dt);
      std::vector<double> want;
      for (size_t i = 0; i < a.size(); ++i) want.push_back(c.golden(a[i], b[i]));
      ExpectClose(StrCat(Info(c.fn.op).name, " ", DTypeName(dt)), z.ToFloats(), want,
                  ToleranceFor(dt));
    }
    std::vector<double> quotient;
    for (size_t i = 0; i < a.size(); ++i) quotient.push_back(b[i] / a[i]);
    ExpectClose(StrCat("divide ", DTypeName(dt)), divide(y, x).ToFloats(), quotient,
                ToleranceFor(dt));
  }
}

TEST_F(NlTest, ComparisonsAndLogicalOpsGiveBool) {
  const Tile x = FromValues({2, 4}, DType::kBFloat16, {1, 2, 3, -1, 0, 0, 2.5f, -4});
  const Tile y = FromValues({2, 4}, DType::kBFloat16, {1, 3, 2, -1, 0, 5, 0, -3});
  const std::vector<std::pair<BinaryFn, std::function<bool(float, float)>>> cases = {
      {equal, [](float a, float b) { return a == b; }},
      {not_equal, [](float a, float b) { return a != b; }},
      {greater, [](float a, float b) { return a > b; }},
      {greater_equal, [](float a, float b) { return a >= b; }},
      {less, [](float a, float b) { return a < b; }},
      {less_equal, [](float a, float b) { return a <= b; }},
      {logical_and, [](float a, float b) { return a != 0 && b != 0; }},
      {logical_or, [](float a, float b) { return a != 0 || b != 0; }},
      {logical_xor, [](float a, float b) { return (a != 0) != (b != 0); }},
  };
  const std::vector<float> a = x.ToFloats(), b = y.ToFloats();
  for (const auto& [fn, golden] : cases) {
    const Tile z = fn(x, y);
    EXPECT_EQ(z.dtype(), kBool) << Info(fn.op).name;
    const std::vector<float> got = z.ToFloats();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(got[i], golden(a[i], b[i]) ? 1.0f : 0.0f)
          << Info(fn.op).name << " " << a[i] << ", " << b[i];
    }
  }
}

TEST_F(NlTest, ImmediatesOnEitherSide) {
  const Tile x = FromValues({1, 4}, DType::kFloat32, {1, -2, 3, 0.5f});
  EXPECT_EQ(add(x, 1.5f).ToFloats(), (std::vector<float>{2.5f, -0.5f, 4.5f, 2}));
  EXPECT_EQ(subtract(2.0f, x).ToFloats(), (std::vector<float>{1, 4, -1, 1.5f}));
  EXPECT_EQ(divide(x, 2.0f).ToFloats(), (std::vector<float>{0.5f, -1, 1.5f, 0.25f}));
  const std::vector<float> powers = power(2.0f, x).ToFloats();
  EXPECT_EQ(std::vector<float>(powers.begin(), powers.begin() + 3),
            (std::vector<float>{2, 0.25f, 8}));
  EXPECT_NEAR(powers[3], std::sqrt(2.0), 2e-7);
  const Tile g = greater(x, 0.75f);
  EXPECT_EQ(g.dtype(), kBool);
  EXPECT_EQ(g.ToFloats(), (std::vector<float>{1, 0, 1, 0}));
}

TEST_F(NlTest, BroadcastsSizeOneFreeDimsAndColumns) {
  const Tile x = Input({8, 4, 6}, DType::kFloat32, -1, 1);
  const Tile row = Input({8, 1, 6}, DType::kFloat32, -1, 1, 2);
  const Tile column = Input({8, 1}, DType::kFloat32, -1, 1, 3);
  const std::vector<double> xs = Values(x), rs = Values(row), cs = Values(column);
  std::vector<double> plus_row, times_column;
  for (int p = 0; p < 8; ++p) {
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 6; ++j) {
        plus_row.push_back(xs[p * 24 + i * 6 + j] + rs[p * 6 + j]);
        times_column.push_back(xs[p * 24 + i * 6 + j] * cs[p]);
      }
    }
  }
  const Tile a = add(x, row);
  EXPECT_EQ(a.shape(), (Shape{8, 4, 6}));
  ExpectClose("add [8,4,6] + [8,1,6]", a.ToFloats(), plus_row, kFp32Tolerance);
  ExpectClose("multiply [8,1] * [8,4,6]", multiply(column, x).ToFloats(), times_column,
              kFp32Tolerance);

  const Tile other_partitions = Input({4, 4, 6}, DType::kFloat32, -1, 1);
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { add(x, other_partitions); }),
                       "add: x 'input' [8, 4, 6] fp32 SBUF and y 'input' [4, 4, 6] fp32 SBUF: "
                       "partition counts must match (the partition dim never broadcasts)"));
  const Tile wrong = Input({8, 4, 5}, DType::kFloat32, -1, 1);
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { maximum(x, wrong); }),
                       "free dim 2 is 6 vs 5; each must match or be 1"));
  const Tile flat = Input({8, 24}, DType::kFloat32, -1, 1);
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { add(x, flat); }), "free ranks differ"));
}

TEST_F(NlTest, MixedDtypesPromote) {
  const Tile f32 = Input({2, 4}, DType::kFloat32, -1, 1);
  const Tile b16 = Input({2, 4}, DType::kBFloat16, -1, 1);
  const Tile i32 = FromValues({2, 4}, DType::kInt32, {1, 2, 3, 4, 5, 6, 7, 8});
  const Tile i8 = FromValues({2, 4}, DType::kInt8, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(add(f32, b16).dtype(), DType::kFloat32);
  EXPECT_EQ(add(i32, b16).dtype(), DType::kBFloat16);
  EXPECT_EQ(add(i8, i32).dtype(), DType::kInt32);
  EXPECT_EQ(add(i8, i8).dtype(), DType::kInt8);
  EXPECT_EQ(add(b16, b16, DType::kFloat32).dtype(), DType::kFloat32);
  EXPECT_EQ(PromoteDTypes(DType::kFloat16, DType::kBFloat16), DType::kFloat32);
}

TEST_F(NlTest, DivideRefusesAnImmediateDividendAndTwoImmediatesAreRefused) {
  const Tile x = Input({2, 4}, DType::kFloat32, 1, 2);
  EXPECT_EQ(InvalidArgumentMessage([&] { divide(1.0f, x); }),
            "divide: dividend x is the immediate 1; it must be a tile (use reciprocal for 1 / y, "
            "or multiply)");
  EXPECT_EQ(InvalidArgumentMessage([&] { add(1.0f, 2.0f); }),
            "add: x and y are both immediates (1, 2); at least one must be a tile");
}

TEST_F(NlTest, BitwiseOpsOnIntegersAndTheirDtypeGate) {
  const std::vector<int32_t> a = {12, -8, 0x0F0F, 255, -16, 3, 1 << 20, -1};
  const std::vector<int32_t> b = {10, 3, 0x00FF, 1, 2, 4, 3, 7};
  const Tile x = FromValues({2, 4}, DType::kInt32, std::vector<float>(a.begin(), a.end()));
  const Tile y = FromValues({2, 4}, DType::kInt32, std::vector<float>(b.begin(), b.end()));
  const std::vector<std::pair<BitwiseFn, std::function<int32_t(int32_t, int32_t)>>> cases = {
      {bitwise_and, [](int32_t p, int32_t q) { return p & q; }},
      {bitwise_or, [](int32_t p, int32_t q) { return p | q; }},
      {bitwise_xor, [](int32_t p, int32_t q) { return p ^ q; }},
      // Shift amounts are taken modulo 32, as the ALU does (b holds 255); left shifts wrap.
      {left_shift,
       [](int32_t p, int32_t q) {
         return static_cast<int32_t>(static_cast<uint32_t>(p) * (uint32_t{1} << (q & 31)));
       }},
      {right_shift,
       [](int32_t p, int32_t q) {
         return static_cast<int32_t>(std::floor(p / std::pow(2.0, q & 31)));
       }},
  };
  for (const auto& [fn, golden] : cases) {
    const std::vector<float> got = fn(x, y).ToFloats();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(got[i], static_cast<float>(golden(a[i], b[i]))) << Info(fn.op).name << " " << a[i];
    }
  }
  EXPECT_EQ(left_shift(x, 2.0f).ToFloats()[0], 48.0f);

  const Tile f = Input({2, 4}, DType::kFloat32, 0, 1);
  EXPECT_EQ(InvalidArgumentMessage([&] { bitwise_and(f, y); }),
            "bitwise_and: operand 'x' 'input' [2, 4] fp32 SBUF: bitwise_and needs integer dtypes "
            "(int8, uint8, int32, uint16, uint32), not fp32");
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { right_shift(x, f); }),
                       "right_shift: operand 'y' 'input' [2, 4] fp32 SBUF: right_shift needs "
                       "integer dtypes"));
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { bitwise_or(x, y, DType::kBFloat16); }),
                       "bitwise_or: result dtype: bitwise_or needs integer dtypes"));
}

TEST_F(ElementwiseTest, ActivationsMatchTextbookGoldens) {
  ExpectGoldens<ActivationFn>({
      {square, -3, 3, [](double v) { return v * v; }},
      {gelu, -4, 4, [](double v) { return v * Phi(v); }},
      {gelu_apprx_tanh, -4, 4,
       [](double v) {
         return 0.5 * v * (1 + std::tanh(std::sqrt(2 / kPi) * (v + 0.044715 * v * v * v)));
       }},
      {gelu_apprx_sigmoid, -4, 4, [](double v) { return v * Sigmoid(1.702 * v); }},
      {gelu_apprx_sigmoid_dx, -4, 4,
       [](double v) {
         const double s = Sigmoid(1.702 * v);
         return s + 1.702 * v * s * (1 - s);
       }},
      {gelu_dx, -4, 4,
       [](double v) { return Phi(v) + v * std::exp(-v * v / 2) / std::sqrt(2 * kPi); }},
      {silu, -6, 6, [](double v) { return v * Sigmoid(v); }},
      {silu_dx, -6, 6, [](double v) { return Sigmoid(v) * (1 + v * (1 - Sigmoid(v))); }},
      {relu, -3, 3, [](double v) { return v > 0 ? v : 0; }},
      {erf, -3, 3, [](double v) { return std::erf(v); }},
      {erf_dx, -3, 3, [](double v) { return 2 / std::sqrt(kPi) * std::exp(-v * v); }},
      {softplus, -8, 8, [](double v) { return std::log(1 + std::exp(v)); }},
      {mish, -6, 6, [](double v) { return v * std::tanh(std::log(1 + std::exp(v))); }},
      {rsqrt, 0.05f, 9, [](double v) { return 1 / std::sqrt(v); }},
      {sigmoid, -8, 8, [](double v) { return Sigmoid(v); }},
  });
}

TEST_F(NlTest, ReciprocalAndResultDtypeOverride) {
  const Tile x = Input({16, 32}, DType::kBFloat16, 0.25f, 4);
  const Tile r = reciprocal(x, DType::kFloat32);
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  ExpectClose("reciprocal bf16 -> fp32", r.ToFloats(),
              Map(Values(x), [](double v) { return 1 / v; }), kFp32Tolerance);
  EXPECT_EQ(exp(x, DType::kFloat32).dtype(), DType::kFloat32);
}

TEST_F(NlTest, DropoutZeroesAtTheRateAndRepeatsAfterTheSameSeed) {
  const Tile x = Input({64, 128}, DType::kFloat32, 1, 2);
  const std::vector<float> in = x.ToFloats();
  random_seed(42);
  const std::vector<float> first = dropout(x, 0.3f).ToFloats();
  int64_t dropped = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (first[i] == 0.0f) {
      ++dropped;
    } else {
      EXPECT_EQ(first[i], in[i]) << "kept values are not rescaled, element " << i;
    }
  }
  const double rate = static_cast<double>(dropped) / in.size();
  std::cout << "  dropout 0.3 over 8192 elements dropped " << rate << "\n";
  EXPECT_NEAR(rate, 0.3, 0.03);
  random_seed(42);
  EXPECT_EQ(dropout(x, 0.3f).ToFloats(), first);
  random_seed(43);
  EXPECT_NE(dropout(x, 0.3f).ToFloats(), first);
  EXPECT_EQ(dropout(x, 0.0f).ToFloats(), in);
  EXPECT_EQ(dropout(x, 1.0f).ToFloats(), std::vector<float>(in.size(), 0.0f));

  // A per-partition rate: partitions with rate 1 drop everything, rate 0 nothing.
  std::vector<float> rates(64);
  for (int p = 0; p < 64; ++p) rates[p] = static_cast<float>(p % 2);
  const std::vector<float> per_row =
      dropout(x, FromValues({64, 1}, DType::kFloat32, rates)).ToFloats();
  for (int p = 0; p < 64; ++p) {
    for (int i = 0; i < 128; ++i) {
      EXPECT_EQ(per_row[p * 128 + i], p % 2 ? 0.0f : in[p * 128 + i]) << p << ", " << i;
    }
  }
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { dropout(x, 1.5f); }),
                       "drop probability 1.5 must be in [0, 1]"));
}

}  // namespace
}  // namespace nkisim::nl::testing
