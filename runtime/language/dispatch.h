// The four dispatchers of the nl language (NKI's module-global unary_op, binary_op / bitwise_op,
// activation and tensor_reduce). Every per-op function of the families calls one of them with
// its op token; the dispatcher looks the token up in the routing table (op_table.h) and emits the
// row's nisa instructions on the row's engines. A token of another family is an internal error.
//
// All run on the current core and return a new SBUF tile. dtype overrides the result dtype
// (default: x's; bool for comparisons and logical ops; promoted for two tiles). Errors are
// Error(kInvalidArgument) worded "<op>: ...", e.g. "bitwise_and: operand 'x' ... fp32 ...".
#pragma once

#include <vector>

#include "runtime/language/op_table.h"
#include "runtime/language/operands.h"
#include "runtime/tile.h"

namespace nkisim::nl {

// Unary family: an activation, a tensor_scalar, or tensor_scalar + tensor_tensor (floor / ceil /
// trunc), as the row says. Integer-only tokens (invert) refuse other dtypes.
Tile unary_op(const Tile& x, Op op, OptDType dtype = std::nullopt);

// Binary family: tensor_tensor over the broadcast shape of two tiles, or one tensor_scalar for a
// tile and an immediate (reverse when the immediate is x). Two immediates are refused.
Tile binary_op(const Operand& x, const Operand& y, Op op, OptDType dtype = std::nullopt);

// Bitwise family: binary_op's lowering, after checking that every tile operand and the result
// have integer dtypes (the one place that rule lives for and / or / xor / shifts).
Tile bitwise_op(const Operand& x, const Operand& y, Op op, OptDType dtype = std::nullopt);

// Activation family: one activation(fn) on the Scalar engine.
Tile activation(const Tile& x, Op op, OptDType dtype = std::nullopt);

// Reductions: one tensor_reduce over `axis` (free axes, see CheckFreeAxes), keeping the reduced
// dims as size 1 when keepdims. Only mean promotes an integer x (to an fp32 result).
Tile tensor_reduce(const Tile& x, Op op, const std::vector<int>& axis, bool keepdims = false,
                   OptDType dtype = std::nullopt);

}  // namespace nkisim::nl
