// Element-wise math of the nl language. Each op of the unary, binary, bitwise and activation
// families is a callable object holding its op token: calling it calls the family's dispatcher
// (dispatch.h) with that token, as each NKI nl function fetches its dispatcher and token. So
//   Tile y = nl::exp(x);              Tile s = nl::add(a, b, DType::kFloat32);
//   Tile m = nl::maximum(x, 0.0f);    Tile g = nl::gelu(x);
// divide (with its tile-legality check), reciprocal and dropout are plain functions.
// Results are new SBUF tiles on the current core; see docs/nl-ops.md for each op's instructions.
#pragma once

#include "runtime/language/dispatch.h"
#include "runtime/language/operands.h"
#include "runtime/tile.h"

namespace nkisim::nl {

struct UnaryFn {
  Op op;
  Tile operator()(const Tile& x, OptDType dtype = std::nullopt) const {
    return unary_op(x, op, dtype);
  }
};

struct BinaryFn {
  Op op;
  Tile operator()(const Operand& x, const Operand& y, OptDType dtype = std::nullopt) const {
    return binary_op(x, y, op, dtype);
  }
};

struct BitwiseFn {
  Op op;
  Tile operator()(const Operand& x, const Operand& y, OptDType dtype = std::nullopt) const {
    return bitwise_op(x, y, op, dtype);
  }
};

struct ActivationFn {
  Op op;
  Tile operator()(const Tile& x, OptDType dtype = std::nullopt) const {
    return activation(x, op, dtype);
  }
};

// Unary family.
inline constexpr UnaryFn exp{Op::kExp};
inline constexpr UnaryFn log{Op::kLog};
inline constexpr UnaryFn cos{Op::kCos};
inline constexpr UnaryFn sin{Op::kSin};
inline constexpr UnaryFn tan{Op::kTan};
inline constexpr UnaryFn tanh{Op::kTanh};
inline constexpr UnaryFn sqrt{Op::kSqrt};
inline constexpr UnaryFn abs{Op::kAbs};
inline constexpr UnaryFn negative{Op::kNegative};
inline constexpr UnaryFn floor{Op::kFloor};
inline constexpr UnaryFn ceil{Op::kCeil};
inline constexpr UnaryFn trunc{Op::kTrunc};
inline constexpr UnaryFn arctan{Op::kArctan};
inline constexpr UnaryFn sign{Op::kSign};
inline constexpr UnaryFn logical_not{Op::kLogicalNot};
inline constexpr UnaryFn invert{Op::kInvert};

// Binary family (comparisons and logical ops give bool by default).
inline constexpr BinaryFn add{Op::kAdd};
inline constexpr BinaryFn subtract{Op::kSubtract};
inline constexpr BinaryFn multiply{Op::kMultiply};
inline constexpr BinaryFn maximum{Op::kMaximum};
inline constexpr BinaryFn minimum{Op::kMinimum};
inline constexpr BinaryFn power{Op::kPower};
inline constexpr BinaryFn fmod{Op::kFmod};
inline constexpr BinaryFn mod{Op::kMod};
inline constexpr BinaryFn equal{Op::kEqual};
inline constexpr BinaryFn not_equal{Op::kNotEqual};
inline constexpr BinaryFn greater{Op::kGreater};
inline constexpr BinaryFn greater_equal{Op::kGreaterEqual};
inline constexpr BinaryFn less{Op::kLess};
inline constexpr BinaryFn less_equal{Op::kLessEqual};
inline constexpr BinaryFn logical_and{Op::kLogicalAnd};
inline constexpr BinaryFn logical_or{Op::kLogicalOr};
inline constexpr BinaryFn logical_xor{Op::kLogicalXor};

// Bitwise family: integer dtypes only.
inline constexpr BitwiseFn bitwise_and{Op::kBitwiseAnd};
inline constexpr BitwiseFn bitwise_or{Op::kBitwiseOr};
inline constexpr BitwiseFn bitwise_xor{Op::kBitwiseXor};
inline constexpr BitwiseFn left_shift{Op::kLeftShift};
inline constexpr BitwiseFn right_shift{Op::kRightShift};

// Activation family: one Scalar-engine activation each.
inline constexpr ActivationFn square{Op::kSquare};
inline constexpr ActivationFn gelu{Op::kGelu};
inline constexpr ActivationFn gelu_apprx_tanh{Op::kGeluApprxTanh};
inline constexpr ActivationFn gelu_apprx_sigmoid{Op::kGeluApprxSigmoid};
inline constexpr ActivationFn gelu_apprx_sigmoid_dx{Op::kGeluApprxSigmoidDx};
inline constexpr ActivationFn gelu_dx{Op::kGeluDx};
inline constexpr ActivationFn silu{Op::kSilu};
inline constexpr ActivationFn silu_dx{Op::kSiluDx};
inline constexpr ActivationFn relu{Op::kRelu};
inline constexpr ActivationFn erf{Op::kErf};
inline constexpr ActivationFn erf_dx{Op::kErfDx};
inline constexpr ActivationFn softplus{Op::kSoftplus};
inline constexpr ActivationFn mish{Op::kMish};
inline constexpr ActivationFn rsqrt{Op::kRsqrt};
inline constexpr ActivationFn sigmoid{Op::kSigmoid};

// x / y through binary_op, after binop's tile-legality check: the dividend must be a tile (for
// 1 / x use reciprocal), and so, as for every binary op, at least one operand is a tile.
Tile divide(const Operand& x, const Operand& y, OptDType dtype = std::nullopt);

// 1 / x: the Vector engine's reciprocal (a direct nisa passthrough).
Tile reciprocal(const Tile& x, OptDType dtype = std::nullopt);

// x with each element zeroed with probability `rate` (an immediate in [0, 1] or a [P, 1] column),
// drawn from the core's PRNG stream; kept elements are not rescaled. Reproducible after
// random_seed. Throws as nisa::dropout.
Tile dropout(const Tile& x, const Operand& rate, OptDType dtype = std::nullopt);

}  // namespace nkisim::nl
