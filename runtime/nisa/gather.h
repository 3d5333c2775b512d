// gather_flattened: the GpSimd engine's per-partition gather. Each partition p of dst takes, for
// every index in the same partition of `indices`, the element of data's partition p at that
// position of its flattened free dims (NKI's nl.gather_flattened: 128 gathers in parallel).
// Cost: local_gather's row (GatherCycles) on GpSimd over dst's free size.
#pragma once

#include "runtime/tile.h"

namespace nkisim::nisa {

// dst[p, j...] = data[p].flat[indices[p, j...]], rounded into dst's dtype.
// Rules: all three in SBUF with the same partitions; indices has an integer dtype and dst's free
// shape; every index in [0, data's free size) (the hardware returns garbage; the simulator throws).
void gather_flattened(const Tile& dst, const Tile& data, const Tile& indices);

}  // namespace nkisim::nisa
