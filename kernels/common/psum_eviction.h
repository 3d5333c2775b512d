// PSUM -> SBUF eviction with the per-column and per-row terms of a projection's epilogue (the
// output projection's and the MLP's down projection): out = psum * scale + bias, each term
// optional, computed in fp32 and rounded once into the destination's dtype. Issues instructions
// on the calling thread's current core.
#pragma once

#include "runtime/tile.h"
#include "runtime/timeline.h"

namespace nkisim::kernels {

// The terms of out = psum * scale + bias for one PSUM group, each optional (an invalid Tile) and
// each either a per-partition column [P, 1] or a tile of the psum's shape along the free axis.
struct EvictionTerms {
  Tile scale_column;
  Tile scale_row;
  Tile bias_column;
  Tile bias_row;
};

// dst = psum * scale + bias (fp32 arithmetic, one rounding into dst's dtype per instruction) on
// engine: one instruction for every combination but a row scale with a bias (two).
void Evict(const Tile& dst, const Tile& psum, const EvictionTerms& terms, Engine engine);

}  // namespace nkisim::kernels
