// Selection by each element's free index against two per-partition bounds, with a max
// reduction, on the Vector engine (NKI 0.6 nisa.range_select: attention masks by position).
#pragma once
#include <cstdint>

#include "runtime/nisa/alu.h"
#include "runtime/tile.h"

namespace nkisim::nisa {

// With j = range_start + the element's index in on_true's flattened free dims (in fp32):
// dst[p, j] = cmp0(j, bound0[p]) && cmp1(j, bound1[p]) ? on_true[p, j] : on_false_value, and,
// when reduce_res is valid, reduce_res[p, 0] = the max of the stored dst row. Rules: cmp0 and
// cmp1 are equal, less, less_equal, greater or greater_equal; on_true and dst have the same
// shape, on_true a float dtype; bound0, bound1 (and reduce_res) are [P, 1], the bounds fp32.
// Cost: ComputeOpNs over the free size on the Vector engine.
void range_select(const Tile& dst, const Tile& on_true, AluOp cmp0, AluOp cmp1,
                  const Tile& bound0, const Tile& bound1, const Tile& reduce_res,
                  int64_t range_start, float on_false_value);

}  // namespace nkisim::nisa
