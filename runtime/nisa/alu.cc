#include "runtime/nisa/alu.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace nkisim::nisa {
namespace {
int32_t AsInt(float v) { return static_cast<int32_t>(std::nearbyint(v)); }
}  // namespace

const char* AluOpName(AluOp op) {
  switch (op) {
    case AluOp::kBypass: return "bypass";
    case AluOp::kAdd: return "add";
    case AluOp::kSubtract: return "subtract";
    case AluOp::kMultiply: return "multiply";
    case AluOp::kDivide: return "divide";
    case AluOp::kMax: return "max";
    case AluOp::kMin: return "min";
    case AluOp::kPow: return "pow";
    case AluOp::kFmod: return "fmod";
    case AluOp::kMod: return "mod";
    case AluOp::kAbsMax: return "abs_max";
    case AluOp::kEqual: return "equal";
    case AluOp::kNotEqual: return "not_equal";
    case AluOp::kGreater: return "greater";
    case AluOp::kGreaterEqual: return "greater_equal";
    case AluOp::kLess: return "less";
    case AluOp::kLessEqual: return "less_equal";
    case AluOp::kLogicalAnd: return "logical_and";
    case AluOp::kLogicalOr: return "logical_or";
    case AluOp::kLogicalXor: return "logical_xor";
    case AluOp::kBitwiseAnd: return "bitwise_and";
    case AluOp::kBitwiseOr: return "bitwise_or";
    case AluOp::kBitwiseXor: return "bitwise_xor";
    case AluOp::kShiftLeft: return "left_shift";
    case AluOp::kShiftRight: return "right_shift";
  }
  return "?";
}

float ApplyAlu(AluOp op, float a, float b) {
  switch (op) {
    case AluOp::kBypass: return a;
    case AluOp::kAdd: return a + b;
    case AluOp::kSubtract: return a - b;
    case AluOp::kMultiply: return a * b;
    case AluOp::kDivide: return a / b;
    case AluOp::kMax: return std::fmax(a, b);
    case AluOp::kMin: return std::fmin(a, b);
    case AluOp::kPow: return std::pow(a, b);
    case AluOp::kFmod: return std::fmod(a, b);
    case AluOp::kMod: {  // Python / NumPy mod: the result takes the divisor's sign
      float r = std::fmod(a, b);
      return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    }
    case AluOp::kAbsMax: return std::fmax(std::fabs(a), std::fabs(b));
    case AluOp::kEqual: return a == b;
    case AluOp::kNotEqual: return a != b;
    case AluOp::kGreater: return a > b;
    case AluOp::kGreaterEqual: return a >= b;
    case AluOp::kLess: return a < b;
    case AluOp::kLessEqual: return a <= b;
    case AluOp::kLogicalAnd: return (a != 0) && (b != 0);
    case AluOp::kLogicalOr: return (a != 0) || (b != 0);
    case AluOp::kLogicalXor: return (a != 0) != (b != 0);
    case AluOp::kBitwiseAnd: return static_cast<float>(AsInt(a) & AsInt(b));
    case AluOp::kBitwiseOr: return static_cast<float>(AsInt(a) | AsInt(b));
    case AluOp::kBitwiseXor: return static_cast<float>(AsInt(a) ^ AsInt(b));
    case AluOp::kShiftLeft:
      return static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(AsInt(a)) << (AsInt(b) & 31)));
    case AluOp::kShiftRight: return static_cast<float>(AsInt(a) >> (AsInt(b) & 31));
  }
  return std::numeric_limits<float>::quiet_NaN();
}

bool IsBitwise(AluOp op) {
  return op == AluOp::kBitwiseAnd || op == AluOp::kBitwiseOr || op == AluOp::kBitwiseXor ||
         op == AluOp::kShiftLeft || op == AluOp::kShiftRight;
}

bool IsReduction(AluOp op) {
  return op == AluOp::kAdd || op == AluOp::kMultiply || op == AluOp::kMax || op == AluOp::kMin ||
         op == AluOp::kLogicalAnd || op == AluOp::kLogicalOr || op == AluOp::kAbsMax;
}

float ReductionIdentity(AluOp op) {
  switch (op) {
    case AluOp::kMultiply: case AluOp::kLogicalAnd: return 1.0f;
    case AluOp::kMax: return -std::numeric_limits<float>::infinity();
    case AluOp::kMin: return std::numeric_limits<float>::infinity();
    default: return 0.0f;
  }
}

}  // namespace nkisim::nisa
