// The arithmetic-logic operations of the Vector / GpSimd ALUs, shared by tensor_tensor,
// tensor_scalar, scalar_tensor_tensor, tensor_reduce and the activation reduce. All compute in
// fp32; comparisons and logical ops give 1.0 / 0.0; bitwise ops and shifts act on the values
// rounded to 32-bit integers (exact below 2^24, the fp32 compute limit).
#pragma once

namespace nkisim::nisa {

enum class AluOp {
  kBypass,  // returns the first operand
  kAdd, kSubtract, kMultiply, kDivide, kMax, kMin, kPow, kFmod, kMod, kAbsMax,
  kEqual, kNotEqual, kGreater, kGreaterEqual, kLess, kLessEqual,
  kLogicalAnd, kLogicalOr, kLogicalXor,
  kBitwiseAnd, kBitwiseOr, kBitwiseXor, kShiftLeft, kShiftRight,
};

const char* AluOpName(AluOp op);
float ApplyAlu(AluOp op, float a, float b);
bool IsBitwise(AluOp op);
// Usable as the reduction of tensor_reduce / activation: add, multiply, max, min, logical and/or.
bool IsReduction(AluOp op);
float ReductionIdentity(AluOp op);

}  // namespace nkisim::nisa
