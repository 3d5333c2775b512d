// Reductions of the nl language: max, min, sum, prod, mean and all as callable op objects over
// tensor_reduce (free axes only, see CheckFreeAxes), the var composite, and the two reductions
// that cross tiles: all_reduce across the programs of a logical core and loop_reduce across the
// iterations of a loop.
//   Tile s = nl::sum(x, {1}, /*keepdims=*/true);   Tile m = nl::mean(x, {1});
#pragma once

#include <vector>

#include "runtime/language/dispatch.h"
#include "runtime/language/operands.h"
#include "runtime/tile.h"

namespace nkisim::nl {

struct ReduceFn {
  Op op;
  Tile operator()(const Tile& x, const std::vector<int>& axis, bool keepdims = false,
                  OptDType dtype = std::nullopt) const {
    return tensor_reduce(x, op, axis, keepdims, dtype);
  }
};

inline constexpr ReduceFn max{Op::kMax};
inline constexpr ReduceFn min{Op::kMin};
inline constexpr ReduceFn sum{Op::kSum};
inline constexpr ReduceFn prod{Op::kProd};
inline constexpr ReduceFn mean{Op::kMean};  // integer x gives an fp32 result
inline constexpr ReduceFn all{Op::kAll};    // logical and, bool result

// Population variance mean((x - mean(x))^2) over `axis`: mean, subtract, power 2, mean.
Tile var(const Tile& x, const std::vector<int>& axis, bool keepdims = false,
         OptDType dtype = std::nullopt);

// Combines x element-wise across the programs of the current logical core with `op`, a binary
// token that is a reduction (add, multiply, maximum, minimum, logical_and, logical_or); every
// program gets the same result. LNC = 2: one sendrecv with the peer, then tensor_tensor.
// LNC = 1 (or a core outside a LogicalCore): x itself (a copy when dtype asks for another).
// REQUIRES: every program calls it, in the same order, with tiles of the same shape and dtype.
Tile all_reduce(const Tile& x, Op op, OptDType dtype = std::nullopt);

// Folds x into *carried, the accumulator a loop carries across its iterations: while *carried is
// null (the first iteration) it becomes a copy of x (in dtype, default x's), afterwards
// *carried = *carried <op> x in place. Returns *carried. op as for all_reduce.
Tile loop_reduce(const Tile& x, Op op, Tile* carried, OptDType dtype = std::nullopt);

}  // namespace nkisim::nl
