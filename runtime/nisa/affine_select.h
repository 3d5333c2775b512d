// Selection by an affine predicate generated in the engine (NKI 0.6 nisa.affine_select, GpSimd):
// the causal masks of attention without a mask tile.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/nisa/alu.h"
#include "runtime/tile.h"

namespace nkisim::nisa {

// Per partition p and free element (i0, i1, ...) of `pattern` = {step, count} pairs (row-major
// over dst's flattened free dims): v = offset + channel_multiplier * p + sum_d step_d * i_d;
// dst = cmp_op(v, 0) ? on_true : on_false_value. Rules: dst and on_true in SBUF with the same
// partitions; the pattern's counts multiply to dst's and on_true's elements per partition; at
// most 4 pattern dims; cmp_op is a comparison. Cost: ComputeOpNs over the free size on GpSimd.
void affine_select(const Tile& dst, const std::vector<std::pair<int64_t, int64_t>>& pattern,
                   int64_t channel_multiplier, const Tile& on_true, float on_false_value,
                   AluOp cmp_op, int64_t offset);

}  // namespace nkisim::nisa
