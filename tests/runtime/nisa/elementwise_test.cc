// Element-wise instructions of runtime/nisa/elementwise.h: values against plain loops and std::
// math written here, legality errors, the engine each instruction records, its cost from the
// hardware profile fields, and the scoreboard (RAW, WAR, independent overlap).
#include "runtime/nisa/elementwise.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/neuron_core.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nisa {
namespace {

using ::nkisim::testing::Contains;
using ::nkisim::testing::InvalidArgumentMessage;

constexpr double kPi = 3.14159265358979323846;

// fp32 -> bf16 round to nearest, ties to even, by the bit trick (finite inputs).
float RoundToBf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return std::bit_cast<float>(bits & 0xFFFF0000u);
}

double Sigmoid(double x) { return 0.5 * (1.0 + std::tanh(0.5 * x)); }
double Phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }  // standard normal CDF

// Each activation function from its textbook definition.
double ReferenceActivation(ActFn fn, double x) {
  switch (fn) {
    case ActFn::kIdentity: return x;
    case ActFn::kExp: return std::exp(x);
    case ActFn::kLog: return std::log(x);
    case ActFn::kTanh: return std::tanh(x);
    case ActFn::kSigmoid: return Sigmoid(x);
    case ActFn::kRelu: return x > 0 ? x : 0.0;
    case ActFn::kGelu: return x * Phi(x);
    case ActFn::kGeluApproxTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * std::pow(x, 3))));
    case ActFn::kGeluApproxSigmoid: return x * Sigmoid(1.702 * x);
    case ActFn::kGeluApproxSigmoidDx:
      return Sigmoid(1.702 * x) + 1.702 * x * Sigmoid(1.702 * x) * Sigmoid(-1.702 * x);
    case ActFn::kGeluDx: return Phi(x) + x * std::exp(-x * x / 2) / std::sqrt(2 * kPi);
    case ActFn::kSilu: return x * Sigmoid(x);
    case ActFn::kSiluDx: return Sigmoid(x) + x * Sigmoid(x) * Sigmoid(-x);
    case ActFn::kErf: return std::erf(x);
    case ActFn::kErfDx: return 2.0 / std::sqrt(kPi) * std::exp(-x * x);
    case ActFn::kSoftplus: return std::log(1.0 + std::exp(x));
    case ActFn::kMish: return x * std::tanh(std::log(1.0 + std::exp(x)));
    case ActFn::kRsqrt: return 1.0 / std::sqrt(x);
    case ActFn::kSqrt: return std::sqrt(x);
    case ActFn::kSquare: return x * x;
    case ActFn::kReciprocal: return 1.0 / x;
    case ActFn::kSin: return std::sin(x);
    case ActFn::kCos: return std::cos(x);
    case ActFn::kTan: return std::tan(x);
    case ActFn::kArctan: return std::atan(x);
    case ActFn::kSign: return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
    case ActFn::kAbs: return std::fabs(x);
  }
  ADD_FAILURE() << "no reference for activation " << static_cast<int>(fn);
  return 0.0;
}

class ElementwiseTest : public ::testing::Test {
 protected:
  ElementwiseTest() : core_(0, Trn2Profile()), scope_(core_) {}

  Tile Sbuf(const std::string& name, const Shape& shape, DType dtype,
            const std::vector<float>& values) {
    Tile t = core_.AllocateSbuf(name, shape, dtype);
    t.FromFloats(values);
    return t;
  }


  const InstructionRecord& LastRecord() const { return core_.timeline().records().back(); }

  NeuronCore core_;
  ScopedCurrentCore scope_;
};

struct BinaryCase {
  AluOp op;
  std::function<float(float, float)> reference;
};

TEST_F(ElementwiseTest, TensorTensorArithmeticMatchesPlainLoops) {
  const std::vector<float> a = {-7, 7, -7, 7.5f, 3, 0, 2.5f, -1, 4, -4, 6, 1, 0.5f, 9, -2, 5};
  const std::vector<float> b = {3, -3, -3, 2, 3, 2, 0.3f, -1, 2, 2.5f, -3, 1, 4, -2, -2, 0.25f};
  const std::vector<BinaryCase> cases = {
      {AluOp::kAdd, [](float x, float y) { return x + y; }},
      {AluOp::kSubtract, [](float x, float y) { return x - y; }},
      {AluOp::kMultiply, [](float x, float y) { return x * y; }},
      {AluOp::kDivide, [](float x, float y) { return x / y; }},
      {AluOp::kMax, [](float x, float y) { return x > y ? x : y; }},
      {AluOp::kMin, [](float x, float y) { return x < y ? x : y; }},
  };
  Tile ta = Sbuf("a", {2, 8}, DType::kFloat32, a);
  Tile tb = Sbuf("b", {2, 8}, DType::kFloat32, b);
  Tile dst = core_.AllocateSbuf("dst", {2, 8}, DType::kFloat32);
  for (const BinaryCase& c : cases) {
    tensor_tensor(dst, ta, tb, c.op);
    const std::vector<float> got = dst.ToFloats();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(got[i], c.reference(a[i], b[i])) << AluOpName(c.op) << " element " << i;
    }
  }
}

TEST_F(ElementwiseTest, TensorTensorPowMatchesStdPow) {
  const std::vector<float> a = {2, 3, 0.5f, 10, 1.5f, 4, -2, -3};
  const std::vector<float> b = {3, 0.5f, -2, 0, 2.5f, -0.5f, 3, 2};
  Tile dst = core_.AllocateSbuf("dst", {1, 8}, DType::kFloat32);
  tensor_tensor(dst, Sbuf("a", {1, 8}, DType::kFloat32, a), Sbuf("b", {1, 8}, DType::kFloat32, b),
                AluOp::kPow);
  const std::vector<float> got = dst.ToFloats();
  for (size_t i = 0; i < a.size(); ++i) {
    const double want = std::pow(static_cast<double>(a[i]), static_cast<double>(b[i]));
    EXPECT_NEAR(got[i], want, 1e-6 * std::fabs(want)) << "element " << i;
  }
}

TEST_F(ElementwiseTest, ModResultTakesTheDivisorsSign) {
  const std::vector<float> a = {-7, 7, -7, 7.5f, -7.5f, 6, -1, 1};
  const std::vector<float> b = {3, -3, -3, 2, 2, -3, 5, -5};
  const std::vector<float> want = {2, -2, -1, 1.5f, 0.5f, 0, 4, -4};  // Python's a % b
  Tile dst = core_.AllocateSbuf("dst", {1, 8}, DType::kFloat32);
  tensor_tensor(dst, Sbuf("a", {1, 8}, DType::kFloat32, a), Sbuf("b", {1, 8}, DType::kFloat32, b),
                AluOp::kMod);
  const std::vector<float> got = dst.ToFloats();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << a[i] << " mod " << b[i];
  }
}

TEST_F(ElementwiseTest, ComparisonsAndLogicalOpsGiveOneOrZero) {
  const std::vector<float> a = {1, 2, 3, -1, 0, 0, 2.5f, -4};
  const std::vector<float> b = {1, 3, 2, -1, 0, 5, 0, -3};
  const std::vector<BinaryCase> cases = {
      {AluOp::kEqual, [](float x, float y) { return x == y ? 1.0f : 0.0f; }},
      {AluOp::kNotEqual, [](float x, float y) { return x != y ? 1.0f : 0.0f; }},
      {AluOp::kGreater, [](float x, float y) { return x > y ? 1.0f : 0.0f; }},
      {AluOp::kGreaterEqual, [](float x, float y) { return x >= y ? 1.0f : 0.0f; }},
      {AluOp::kLess, [](float x, float y) { return x < y ? 1.0f : 0.0f; }},
      {AluOp::kLessEqual, [](float x, float y) { return x <= y ? 1.0f : 0.0f; }},
      {AluOp::kLogicalAnd, [](float x, float y) { return x != 0 && y != 0 ? 1.0f : 0.0f; }},
      {AluOp::kLogicalOr, [](float x, float y) { return x != 0 || y != 0 ? 1.0f : 0.0f; }},
      {AluOp::kLogicalXor, [](float x, float y) { return (x != 0) != (y != 0) ? 1.0f : 0.0f; }},
  };
  Tile ta = Sbuf("a", {2, 4}, DType::kFloat32, a);
  Tile tb = Sbuf("b", {2, 4}, DType::kFloat32, b);
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kFloat32);
  for (const BinaryCase& c : cases) {
    tensor_tensor(dst, ta, tb, c.op);
    const std::vector<float> got = dst.ToFloats();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(got[i], c.reference(a[i], b[i])) << AluOpName(c.op) << " element " << i;
    }
  }
}

TEST_F(ElementwiseTest, BitwiseOpsOnInt32Tiles) {
  const std::vector<int32_t> a = {12, -8, 0x0F0F, 255, -16, 3, 1 << 20, -1};
  const std::vector<int32_t> masks = {10, 12, 0x00FF, 1, 2, -4, 3, 7};
  const std::vector<int32_t> shifts = {1, 3, 4, 0, 2, 5, 3, 7};
  struct IntCase {
    AluOp op;
    const std::vector<int32_t>& b;
    std::function<int32_t(int32_t, int32_t)> reference;
  };
  const std::vector<IntCase> cases = {
      {AluOp::kBitwiseAnd, masks, [](int32_t x, int32_t y) { return x & y; }},
      {AluOp::kBitwiseOr, masks, [](int32_t x, int32_t y) { return x | y; }},
      {AluOp::kBitwiseXor, masks, [](int32_t x, int32_t y) { return x ^ y; }},
      {AluOp::kShiftLeft, shifts, [](int32_t x, int32_t y) { return x * (1 << y); }},
      {AluOp::kShiftRight, shifts, [](int32_t x, int32_t y) {  // arithmetic: rounds toward -inf
         return static_cast<int32_t>(std::floor(x / std::pow(2.0, y)));
       }},
  };
  Tile ta = Sbuf("a", {2, 4}, DType::kInt32, std::vector<float>(a.begin(), a.end()));
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kInt32);
  for (const IntCase& c : cases) {
    Tile tb = Sbuf("b", {2, 4}, DType::kInt32, std::vector<float>(c.b.begin(), c.b.end()));
    tensor_tensor(dst, ta, tb, c.op);
    const std::vector<float> got = dst.ToFloats();
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(got[i], static_cast<float>(c.reference(a[i], c.b[i])))
          << AluOpName(c.op) << " of " << a[i] << " and " << c.b[i];
    }
  }
}

TEST_F(ElementwiseTest, BitwiseOpOnFloatTileIsRefused) {
  Tile a = Sbuf("a", {2, 4}, DType::kFloat32, std::vector<float>(8, 1.0f));
  Tile b = Sbuf("b", {2, 4}, DType::kFloat32, std::vector<float>(8, 3.0f));
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kFloat32);
  const std::string message =
      InvalidArgumentMessage([&] { tensor_tensor(dst, a, b, AluOp::kBitwiseAnd); });
  EXPECT_TRUE(Contains(message, "integer")) << message;
  EXPECT_TRUE(core_.timeline().records().empty());
}

TEST_F(ElementwiseTest, ShapeMismatchIsRefusedNamingTheOperand) {
  Tile a = Sbuf("a", {2, 8}, DType::kFloat32, std::vector<float>(16, 1.0f));
  Tile b = Sbuf("short_b", {2, 4}, DType::kFloat32, std::vector<float>(8, 1.0f));
  Tile dst = core_.AllocateSbuf("dst", {2, 8}, DType::kFloat32);
  const std::string message =
      InvalidArgumentMessage([&] { tensor_tensor(dst, a, b, AluOp::kAdd); });
  EXPECT_TRUE(Contains(message, "operand 'b'")) << message;
  EXPECT_TRUE(Contains(message, "short_b")) << message;
  EXPECT_TRUE(core_.timeline().records().empty());
}

TEST_F(ElementwiseTest, BroadcastColumnAddsToEveryElementOfItsPartition) {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const std::vector<float> column = {100, -50, 0.5f};
  Tile ta = Sbuf("a", {3, 4}, DType::kFloat32, a);
  Tile col = Sbuf("col", {3, 1}, DType::kFloat32, column);
  Tile dst = core_.AllocateSbuf("dst", {3, 4}, DType::kFloat32);
  tensor_tensor(dst, ta, col.broadcast(1, 4), AluOp::kAdd);
  const std::vector<float> got = dst.ToFloats();
  for (int p = 0; p < 3; ++p) {
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[p * 4 + i], a[p * 4 + i] + column[p]);
  }
}

TEST_F(ElementwiseTest, TensorScalarImmediateThenColumn) {
  const std::vector<float> data = {1, -2, 3, 0.25f, 5, 6, -7, 8};
  const std::vector<float> column = {10, -3};
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kFloat32);
  tensor_scalar(dst, Sbuf("data", {2, 4}, DType::kFloat32, data),
                {.op0 = AluOp::kMultiply, .operand0 = 2.5f, .op1 = AluOp::kAdd,
                 .operand1 = Sbuf("col", {2, 1}, DType::kFloat32, column)});
  const std::vector<float> got = dst.ToFloats();
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[p * 4 + i], data[p * 4 + i] * 2.5f + column[p]);
  }
}

TEST_F(ElementwiseTest, TensorScalarSingleColumnOp) {
  const std::vector<float> data = {1, -2, 3, 0.25f, 5, 6, -7, 8};
  const std::vector<float> column = {0.5f, 5.5f};
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kFloat32);
  tensor_scalar(dst, Sbuf("data", {2, 4}, DType::kFloat32, data),
                {.op0 = AluOp::kMax, .operand0 = Sbuf("col", {2, 1}, DType::kFloat32, column)});
  const std::vector<float> got = dst.ToFloats();
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[p * 4 + i], std::max(data[p * 4 + i], column[p]));
  }
}

TEST_F(ElementwiseTest, TensorScalarReverseFlagsSwapTheOperands) {
  const std::vector<float> data = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> column = {3, -6};
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kFloat32);
  // (10 - x) then column / that.
  tensor_scalar(dst, Sbuf("data", {2, 4}, DType::kFloat32, data),
                {.op0 = AluOp::kSubtract, .operand0 = 10.0f, .reverse0 = true,
                 .op1 = AluOp::kDivide, .operand1 = Sbuf("col", {2, 1}, DType::kFloat32, column),
                 .reverse1 = true});
  const std::vector<float> got = dst.ToFloats();
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(got[p * 4 + i], column[p] / (10.0f - data[p * 4 + i])) << p << "," << i;
    }
  }
}

TEST_F(ElementwiseTest, ScalarTensorTensorWithColumnAndImmediate) {
  const std::vector<float> d0 = {1, -2, 3, 4, 5, -6, 7, 8};
  const std::vector<float> d1 = {0.5f, 1, 1.5f, 2, -1, -2, -3, -4};
  const std::vector<float> column = {3, -0.5f};
  Tile t0 = Sbuf("d0", {2, 4}, DType::kFloat32, d0);
  Tile t1 = Sbuf("d1", {2, 4}, DType::kFloat32, d1);
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kFloat32);

  scalar_tensor_tensor(dst, t0, AluOp::kMultiply, Sbuf("col", {2, 1}, DType::kFloat32, column),
                       AluOp::kAdd, t1);
  std::vector<float> got = dst.ToFloats();
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(got[p * 4 + i], d0[p * 4 + i] * column[p] + d1[p * 4 + i]);
    }
  }

  scalar_tensor_tensor(dst, t0, AluOp::kSubtract, 1.5f, AluOp::kMax, t1);
  got = dst.ToFloats();
  for (size_t i = 0; i < d0.size(); ++i) EXPECT_EQ(got[i], std::max(d0[i] - 1.5f, d1[i]));
}

TEST_F(ElementwiseTest, EveryActivationFunctionMatchesItsFormula) {
  constexpr int kN = 16;
  std::vector<float> signed_inputs(kN), positive_inputs(kN);
  for (int i = 0; i < kN; ++i) {
    signed_inputs[i] = -2.35f + 0.31f * static_cast<float>(i);  // never exactly 0
    positive_inputs[i] = 0.05f + 0.3f * static_cast<float>(i);
  }
  for (int f = 0; f <= static_cast<int>(ActFn::kAbs); ++f) {
    const ActFn fn = static_cast<ActFn>(f);
    const bool positive_domain = fn == ActFn::kLog || fn == ActFn::kSqrt || fn == ActFn::kRsqrt;
    const std::vector<float>& x = positive_domain ? positive_inputs : signed_inputs;
    Tile data = Sbuf("data", {2, kN / 2}, DType::kFloat32, x);
    Tile dst = core_.AllocateSbuf("dst", {2, kN / 2}, DType::kFloat32);
    activation(dst, fn, data);
    const std::vector<float> got = dst.ToFloats();
    for (int i = 0; i < kN; ++i) {
      const double want = ReferenceActivation(fn, x[i]);
      EXPECT_NEAR(got[i], want, 1e-5 * std::fabs(want)) << ActFnName(fn) << "(" << x[i] << ")";
    }
  }
}

TEST_F(ElementwiseTest, ActivationScaleBiasAndAddReduction) {
  const std::vector<float> data = {0.1f, -0.4f, 1.2f, 2.0f, -1.5f, 0.3f, 0.9f, -2.2f};
  const std::vector<float> bias = {0.25f, -1.0f};
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kFloat32);
  Tile sums = core_.AllocateSbuf("sums", {2, 1}, DType::kFloat32);
  ActivationOptions options;
  options.scale = 0.5f;
  options.bias = Sbuf("bias", {2, 1}, DType::kFloat32, bias);
  options.reduce_op = AluOp::kAdd;
  options.reduce_res = sums;
  activation(dst, ActFn::kExp, Sbuf("data", {2, 4}, DType::kFloat32, data), options);
  const std::vector<float> got = dst.ToFloats();
  const std::vector<float> got_sums = sums.ToFloats();
  for (int p = 0; p < 2; ++p) {
    double row_sum = 0;
    for (int i = 0; i < 4; ++i) {
      const double want = std::exp(static_cast<double>(data[p * 4 + i] * 0.5f + bias[p]));
      EXPECT_NEAR(got[p * 4 + i], want, 1e-5 * want) << p << "," << i;
      row_sum += want;
    }
    EXPECT_NEAR(got_sums[p], row_sum, 1e-5 * row_sum) << "partition " << p;
  }
}

TEST_F(ElementwiseTest, ActivationColumnScaleAndMaxReduction) {
  const std::vector<float> data = {0.1f, -0.4f, 1.2f, 2.0f, -1.5f, 0.3f, 0.9f, -2.2f};
  const std::vector<float> scale = {2.0f, -3.0f};
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kFloat32);
  Tile maxima = core_.AllocateSbuf("maxima", {2, 1}, DType::kFloat32);
  ActivationOptions options;
  options.scale = Sbuf("scale", {2, 1}, DType::kFloat32, scale);
  options.reduce_op = AluOp::kMax;
  options.reduce_res = maxima;
  activation(dst, ActFn::kSquare, Sbuf("data", {2, 4}, DType::kFloat32, data), options);
  const std::vector<float> got = dst.ToFloats();
  for (int p = 0; p < 2; ++p) {
    float row_max = 0;
    for (int i = 0; i < 4; ++i) {
      const float pre = data[p * 4 + i] * scale[p];
      EXPECT_FLOAT_EQ(got[p * 4 + i], pre * pre);
      row_max = std::max(row_max, pre * pre);
    }
    EXPECT_FLOAT_EQ(maxima.ToFloats()[p], row_max);
  }
}

TEST_F(ElementwiseTest, ActivationRefusesIllegalOperands) {
  Tile data = Sbuf("data", {2, 4}, DType::kFloat32, std::vector<float>(8, 1.0f));
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kFloat32);

  ActivationOptions int_bias;
  int_bias.bias = Sbuf("int_bias", {2, 1}, DType::kInt32, {1, 2});
  std::string message =
      InvalidArgumentMessage([&] { activation(dst, ActFn::kExp, data, int_bias); });
  EXPECT_TRUE(Contains(message, "bias")) << message;
  EXPECT_TRUE(Contains(message, "int32")) << message;

  ActivationOptions bf16_scale;
  bf16_scale.scale = Sbuf("bf16_scale", {2, 1}, DType::kBFloat16, {1, 2});
  message = InvalidArgumentMessage([&] { activation(dst, ActFn::kExp, data, bf16_scale); });
  EXPECT_TRUE(Contains(message, "scale must be fp32")) << message;

  ActivationOptions reduce_nowhere;
  reduce_nowhere.reduce_op = AluOp::kAdd;
  message = InvalidArgumentMessage([&] { activation(dst, ActFn::kExp, data, reduce_nowhere); });
  EXPECT_TRUE(Contains(message, "reduce_res")) << message;

  EXPECT_TRUE(core_.timeline().records().empty());
}

TEST_F(ElementwiseTest, TensorCopyToBf16RoundsToNearestEven) {
  const std::vector<uint32_t> bits = {
      0x3F800000,  // 1.0, exact
      0x3F807FFF,  // just below the tie: down
      0x3F808000,  // tie with even low half: stays
      0x3F808001,  // just above the tie: up
      0x3F818000,  // tie with odd low half: up to even
      0xBF818000,  // negative tie: away from zero to even
      0x3FFF8000,  // tie that carries into the exponent
      0x40490FDB,  // pi
  };
  std::vector<float> values;
  for (uint32_t b : bits) values.push_back(std::bit_cast<float>(b));
  Tile src = Sbuf("src", {2, 4}, DType::kFloat32, values);
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kBFloat16);
  tensor_copy(dst, src);
  const std::vector<float> got = dst.ToFloats();
  const std::vector<uint32_t> want_bits = {0x3F800000, 0x3F800000, 0x3F800000, 0x3F810000,
                                           0x3F820000, 0xBF820000, 0x40000000, 0x40490000};
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(got[i]), want_bits[i]) << std::hex << bits[i];
    EXPECT_EQ(got[i], RoundToBf16(values[i])) << std::hex << bits[i];
  }
}

TEST_F(ElementwiseTest, TensorCopyEvictsPsumToSbufOnTheRequestedEngine) {
  std::vector<float> values(3 * 5);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.75f * static_cast<float>(i) - 4.0f;
  Tile psum = core_.AllocatePsum("acc", {3, 5});
  psum.FromFloats(values);
  Tile dst = core_.AllocateSbuf("dst", {3, 5}, DType::kFloat32);

  tensor_copy(dst, psum, Engine::kScalar);
  EXPECT_EQ(dst.ToFloats(), values);
  EXPECT_EQ(LastRecord().engine, Engine::kScalar);

  tensor_copy(dst, psum);
  EXPECT_EQ(LastRecord().engine, Engine::kVector);
  EXPECT_EQ(dst.ToFloats(), values);
}

// The GpSimd engine cannot access PSUM (NKI ISA): a GpSimd instruction with a PSUM operand, read
// or written, is refused naming the operand, and nothing is recorded; on SBUF it runs.
TEST_F(ElementwiseTest, GpSimdRefusesPsumOperands) {
  Tile psum = core_.AllocatePsum("acc", {3, 5});
  Tile sbuf = core_.AllocateSbuf("sb", {3, 5}, DType::kFloat32);
  const size_t records = core_.timeline().records().size();
  const std::string rule = "is in PSUM, which the GpSimd engine cannot access";
  const std::string read =
      InvalidArgumentMessage([&] { tensor_copy(sbuf, psum, Engine::kGpSimd); });
  EXPECT_NE(read.find("tensor_copy: operand 'src' 'acc' [3, 5] fp32 PSUM: " + rule),
            std::string::npos)
      << read;
  const std::string write = InvalidArgumentMessage([&] { memset(psum, 1.0f, Engine::kGpSimd); });
  EXPECT_NE(write.find("memset: operand 'dst' 'acc' [3, 5] fp32 PSUM: " + rule), std::string::npos)
      << write;
  const std::string scalar = InvalidArgumentMessage([&] {
    tensor_scalar(sbuf, psum, {.op0 = AluOp::kMultiply, .operand0 = 2.0f}, Engine::kGpSimd);
  });
  EXPECT_NE(scalar.find(rule), std::string::npos) << scalar;
  EXPECT_EQ(core_.timeline().records().size(), records);
  tensor_copy(sbuf, psum, Engine::kVector);
  memset(sbuf, 2.0f, Engine::kGpSimd);
  EXPECT_EQ(LastRecord().engine, Engine::kGpSimd);
}

TEST_F(ElementwiseTest, ReciprocalSelectAndMemset) {
  const std::vector<float> x = {2, -4, 0.5f, 3, -0.1f, 7, 1e3f, -8};
  Tile data = Sbuf("data", {2, 4}, DType::kFloat32, x);
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kFloat32);
  reciprocal(dst, data);
  std::vector<float> got = dst.ToFloats();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(got[i], 1.0 / x[i]) << x[i];
  EXPECT_EQ(LastRecord().engine, Engine::kVector);

  const std::vector<float> predicate = {1, 0, -2, 0, 0.5f, 0, 0, 3};
  const std::vector<float> on_false = {10, 20, 30, 40, 50, 60, 70, 80};
  select(dst, Sbuf("predicate", {2, 4}, DType::kFloat32, predicate), data,
         Sbuf("on_false", {2, 4}, DType::kFloat32, on_false));
  got = dst.ToFloats();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(got[i], predicate[i] != 0 ? x[i] : on_false[i]);

  Tile target = Sbuf("target", {2, 6}, DType::kFloat32, std::vector<float>(12, 0.0f));
  memset(target.slice(1, 2, 5), 7.5f);  // columns 2..4 only
  got = target.ToFloats();
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(got[p * 6 + i], i >= 2 && i < 5 ? 7.5f : 0.0f) << p << "," << i;
    }
  }
}

TEST_F(ElementwiseTest, IotaWithBaseChannelMultiplierAndTwoDimPattern) {
  Tile dst = core_.AllocateSbuf("dst", {4, 2, 3}, DType::kInt32);
  iota(dst, 5, 100, {{10, 2}, {-1, 3}});
  const std::vector<float> got = dst.ToFloats();
  size_t k = 0;
  for (int p = 0; p < 4; ++p) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j, ++k) {
        EXPECT_EQ(got[k], static_cast<float>(5 + 100 * p + 10 * i - j))
            << p << "," << i << "," << j;
      }
    }
  }
  EXPECT_EQ(LastRecord().engine, Engine::kGpSimd);
}

TEST_F(ElementwiseTest, Bf16DestinationHoldsTheRoundedFp32Result) {
  std::vector<float> a(16), b(16);
  for (int i = 0; i < 16; ++i) {
    a[i] = 1.2345f + 0.377f * static_cast<float>(i);
    b[i] = 3.1f - 0.713f * static_cast<float>(i);
  }
  Tile ta = Sbuf("a", {2, 8}, DType::kFloat32, a);
  Tile tb = Sbuf("b", {2, 8}, DType::kFloat32, b);
  Tile dst = core_.AllocateSbuf("dst", {2, 8}, DType::kBFloat16);

  tensor_tensor(dst, ta, tb, AluOp::kMultiply);
  std::vector<float> got = dst.ToFloats();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], RoundToBf16(a[i] * b[i])) << "element " << i;

  tensor_scalar(dst, ta, {.op0 = AluOp::kDivide, .operand0 = 3.0f});
  got = dst.ToFloats();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], RoundToBf16(a[i] / 3.0f)) << "element " << i;
}

TEST_F(ElementwiseTest, InstructionsRecordTheirEngines) {
  Tile a = Sbuf("a", {2, 4}, DType::kFloat32, std::vector<float>(8, 0.5f));
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kFloat32);
  tensor_tensor(dst, a, a, AluOp::kAdd);
  EXPECT_EQ(LastRecord().engine, Engine::kVector);
  EXPECT_STREQ(LastRecord().name, "tensor_tensor");
  tensor_tensor(dst, a, a, AluOp::kAdd, Engine::kGpSimd);
  EXPECT_EQ(LastRecord().engine, Engine::kGpSimd);
  activation(dst, ActFn::kTanh, a);
  EXPECT_EQ(LastRecord().engine, Engine::kScalar);
  EXPECT_STREQ(LastRecord().name, "activation");
  tensor_scalar(dst, a, {.op0 = AluOp::kAdd, .operand0 = 1.0f}, Engine::kScalar);
  EXPECT_EQ(LastRecord().engine, Engine::kScalar);
  memset(dst, 0.0f);
  EXPECT_EQ(LastRecord().engine, Engine::kVector);
}

TEST_F(ElementwiseTest, NonComputeEngineIsRefused) {
  Tile a = Sbuf("a", {2, 4}, DType::kFloat32, std::vector<float>(8, 0.5f));
  Tile dst = core_.AllocateSbuf("dst", {2, 4}, DType::kFloat32);
  std::string message =
      InvalidArgumentMessage([&] { tensor_tensor(dst, a, a, AluOp::kAdd, Engine::kPE); });
  EXPECT_TRUE(Contains(message, "PE")) << message;
  message = InvalidArgumentMessage([&] { tensor_copy(dst, a, DmaQueue(0)); });
  EXPECT_TRUE(Contains(message, "DMA queue 0")) << message;
  InvalidArgumentMessage([&] { memset(dst, 1.0f, Engine::kPE); });
  InvalidArgumentMessage([&] { select(dst, a, a, a, Engine::kCollective); });
  EXPECT_TRUE(core_.timeline().records().empty());
}

TEST_F(ElementwiseTest, VectorCostFollowsTheProfile) {
  const HardwareProfile& p = core_.profile();
  Tile a16 = Sbuf("a16", {128, 512}, DType::kBFloat16, std::vector<float>(128 * 512, 1.0f));
  Tile b16 = Sbuf("b16", {128, 512}, DType::kBFloat16, std::vector<float>(128 * 512, 2.0f));
  Tile dst16 = core_.AllocateSbuf("dst16", {128, 512}, DType::kBFloat16);
  tensor_tensor(dst16, a16, b16, AluOp::kAdd);
  const double per_lane_16 = p.vector_elems_per_cycle_16bit() / static_cast<double>(p.partitions());
  // tensor_tensor, all bf16 in SBUF, add: the ISA's max(MIN_II, N) row over N / 4 per lane.
  const double want_16 = std::max<double>(p.engine_min_ii_cycles(), 512 / per_lane_16) /
                         p.vector_freq_ghz();
  EXPECT_DOUBLE_EQ(want_16, (512 / 4) / 0.96);
  EXPECT_DOUBLE_EQ(LastRecord().start_ns, 0.0);
  EXPECT_DOUBLE_EQ(LastRecord().end_ns - LastRecord().start_ns, want_16);
  EXPECT_EQ(LastRecord().bytes, 3 * 128 * 512 * 2);

  // One fp32 operand makes the op wide: half the elements per cycle, and the 2N row.
  Tile dst32 = core_.AllocateSbuf("dst32", {128, 512}, DType::kFloat32);
  const double start = LastRecord().end_ns;
  tensor_tensor(dst32, a16, b16, AluOp::kAdd);
  const double per_lane_32 = p.vector_elems_per_cycle_other() / static_cast<double>(p.partitions());
  const double want_32 = 2 * 512 / per_lane_32 / p.vector_freq_ghz();
  EXPECT_DOUBLE_EQ(want_32, 512 / 0.96);
  EXPECT_DOUBLE_EQ(LastRecord().start_ns, start);
  EXPECT_DOUBLE_EQ(LastRecord().end_ns - LastRecord().start_ns, want_32);
}

TEST_F(ElementwiseTest, ScalarEngineCostFollowsTheProfile) {
  const HardwareProfile& p = core_.profile();
  Tile data = Sbuf("data", {64, 300}, DType::kFloat32, std::vector<float>(64 * 300, 0.5f));
  Tile dst = core_.AllocateSbuf("dst", {64, 300}, DType::kFloat32);
  activation(dst, ActFn::kExp, data);
  const double per_lane = p.scalar_elems_per_cycle() / static_cast<double>(p.partitions());
  // activation: max(MIN_II, N) = 300 Scalar cycles at 1.2 GHz.
  const double want =
      std::max<double>(p.engine_min_ii_cycles(), std::ceil(300 / per_lane)) / p.scalar_freq_ghz();
  EXPECT_DOUBLE_EQ(want, 250.0);
  EXPECT_DOUBLE_EQ(LastRecord().end_ns - LastRecord().start_ns, want);
}

TEST_F(ElementwiseTest, ReaderStartsWhenItsOperandIsWritten) {
  Tile a = core_.AllocateSbuf("a", {8, 64}, DType::kFloat32);
  Tile b = core_.AllocateSbuf("b", {8, 64}, DType::kFloat32);
  memset(a, 2.0f);  // Vector
  activation(b, ActFn::kExp, a);  // Scalar: idle, but must wait for a
  const std::vector<InstructionRecord>& r = core_.timeline().records();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_GT(r[0].end_ns, 0.0);
  EXPECT_GE(r[1].start_ns, r[0].end_ns);
  EXPECT_DOUBLE_EQ(r[1].start_ns, r[0].end_ns);
}

TEST_F(ElementwiseTest, IndependentInstructionsOnDifferentEnginesOverlap) {
  Tile x = core_.AllocateSbuf("x", {8, 64}, DType::kFloat32);
  Tile y = core_.AllocateSbuf("y", {8, 64}, DType::kFloat32);
  memset(x, 1.0f, Engine::kVector);
  memset(y, 2.0f, Engine::kGpSimd);
  const std::vector<InstructionRecord>& r = core_.timeline().records();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[1].start_ns, 0.0);
  EXPECT_LT(r[1].start_ns, r[0].end_ns);
  // A third independent one on a busy engine queues behind it.
  Tile z = core_.AllocateSbuf("z", {8, 64}, DType::kFloat32);
  memset(z, 3.0f, Engine::kVector);
  EXPECT_DOUBLE_EQ(r[2].start_ns, r[0].end_ns);
}

TEST_F(ElementwiseTest, WriteWaitsForAnEarlierReadOfItsTile) {
  Tile a = Sbuf("a", {8, 64}, DType::kFloat32, std::vector<float>(8 * 64, 1.0f));
  Tile b = core_.AllocateSbuf("b", {8, 64}, DType::kFloat32);
  activation(b, ActFn::kExp, a);    // Scalar reads a over [0, t]
  memset(a, 5.0f, Engine::kGpSimd);  // GpSimd is idle but must not overwrite a before t
  const std::vector<InstructionRecord>& r = core_.timeline().records();
  ASSERT_EQ(r.size(), 2u);
  EXPECT_DOUBLE_EQ(r[0].start_ns, 0.0);
  EXPECT_DOUBLE_EQ(r[1].start_ns, r[0].end_ns);
  EXPECT_FLOAT_EQ(b.ToFloats()[0], std::exp(1.0f));
}

}  // namespace
}  // namespace nkisim::nisa
