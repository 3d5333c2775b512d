// Stream compaction on GpSimd (NKI 0.6 nisa.nonzero_with_count): the indices of a row's nonzero
// elements, padded, followed by their count.
#pragma once
#include <cstdint>

#include "runtime/tile.h"

namespace nkisim::nisa {

// For each partition p whose SBUF partition index is a multiple of 16 (the first partition of
// each of GpSimd's eight cores; other partitions are neither read nor written): with T elements
// in src[p] and N of them nonzero, dst[p] = [their indices + index_offset in order, then
// padding_val for the T - N remaining slots, then N]. Rules: src and dst in SBUF with the same
// partitions; src fp32 or int32; dst int32 with T + 1 elements per partition. Cost: ComputeOpNs
// over T on GpSimd.
void nonzero_with_count(const Tile& dst, const Tile& src, int32_t index_offset,
                        int32_t padding_val);

}  // namespace nkisim::nisa
