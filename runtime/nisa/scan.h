// Scans along the free axis on the Vector engine (NKI 0.6 nisa.tensor_tensor_scan): each
// partition's elements are combined in order with a running state, so one row is a recurrence
// (prefix sums, linear recurrences) rather than independent element-wise results.
#pragma once
#include "runtime/nisa/alu.h"
#include "runtime/nisa/elementwise.h"
#include "runtime/tile.h"

namespace nkisim::nisa {

// Per partition p, over the free elements i in order (data0, data1 and dst flattened):
//   state = initial[p] (an immediate or a [P, 1] column)
//   state = (data0[p, i] <op0> state) <op1> data1[p, i];  dst[p, i] = state
// reverse0 swaps op0's sides (state <op0> data0), reverse1 op1's (data1 <op1> ...). Values in
// fp32, rounded into dst's dtype. Rules: data0, data1 and dst have dst's shape; data0 and data1
// are not both in PSUM; a column initial is [P, 1]. Cost: ComputeOpNs over the free size on the
// Vector engine.
void tensor_tensor_scan(const Tile& dst, const Tile& data0, const Tile& data1,
                        const Scalar& initial, AluOp op0, AluOp op1, bool reverse0 = false,
                        bool reverse1 = false);

}  // namespace nkisim::nisa
