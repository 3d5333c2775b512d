// tensor_scalar with a reduction of its result along the free axis, on the Vector engine (NKI
// 0.6 nisa.tensor_scalar_reduce).
#pragma once
#include "runtime/nisa/alu.h"
#include "runtime/nisa/elementwise.h"
#include "runtime/tile.h"

namespace nkisim::nisa {

// dst = data <op0> operand0 (fp32, rounded into dst); per partition, acc = init, then acc =
// acc <reduce_op> each stored dst element in order; reduce_res[p, 0] = negate ? -acc : acc.
// init is reduce_op's identity (0 for add, 1 for multiply, -inf for max, +inf for min), or
// reduce_init (an immediate or a [P, 1] column) when load_init. reduce_res may be invalid (no
// result written). Rules: dst has data's shape; op0 arithmetic; reduce_op one of add,
// multiply, max, min; reduce_res and a column operand are [P, 1]. Cost: ComputeOpNs over the
// free size on the Vector engine.
void tensor_scalar_reduce(const Tile& dst, const Tile& data, AluOp op0, const Scalar& operand0,
                          AluOp reduce_op, const Tile& reduce_res, bool load_init,
                          const Scalar& reduce_init, bool negate);

}  // namespace nkisim::nisa
