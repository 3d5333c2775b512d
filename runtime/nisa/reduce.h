// Reductions along free axes (Vector engine) and the batch-norm statistics pair.
#pragma once

#include <vector>

#include "runtime/nisa/alu.h"
#include "runtime/tile.h"
#include "runtime/timeline.h"

namespace nkisim::nisa {

struct ReduceOptions {
  bool mean = false;    // op add only: divide by the reduced element count
  bool negate = false;  // negate the result (used by softmax's max shift)
};

// dst = reduce(op, data) over `axes`, given as tile dims (1 = first free dim). The partition dim
// (0) cannot be reduced. dst has data's partitions and the kept free dims, with or without the
// reduced dims as size 1. op must be a reduction (add, multiply, max, min, abs_max, logical).
void tensor_reduce(const Tile& dst, AluOp op, const Tile& data, const std::vector<int>& axes,
                   const ReduceOptions& options = {}, Engine engine = Engine::kVector);

// dst[P, 6] = per-partition statistics of data[P, F] (F <= 512): (count, mean, variance) of the
// even-indexed elements, then of the odd-indexed ones. Population variance.
void bn_stats(const Tile& dst, const Tile& data);
// dst[P, 2] = (mean, variance) combining the 6-wide groups of bn_stats found in data[P, 6 * k].
void bn_aggr(const Tile& dst, const Tile& data);

}  // namespace nkisim::nisa
