// Gather within GpSimd's 16-partition groups (NKI 0.6 nisa.local_gather).
#pragma once
#include <cstdint>

#include "runtime/tile.h"

namespace nkisim::nisa {

// GpSimd's eight cores each own 16 SBUF partitions. For each 16-partition group g of index
// (partitions [16g, 16g + 16) of the operands), indices_1d = the group's indices flattened
// partition dim first (indices_1d[j] = index[16g + j % 16, j / 16]), its first `valid` taken;
// then for every partition p of the group and every j < valid, e < elems_per_index:
//   dst[p, j * elems_per_index + e] = src[p, indices_1d[j] + e]   (free dims flattened)
// (the NKI 0.6 reference's numpy semantics: each index is an element offset into the
// partition's own row, shared by the group's 16 partitions). valid < 0 means all of the group's
// indices: 16 x index's free size.
// Rules (errors name the operand): src, index and dst in SBUF with the same partition count, a
// multiple of 16, starting at a partition that is a multiple of 16; index uint16; dst src's
// dtype (no cast) with valid x elems_per_index elements per partition; elems_per_index in
// {1, 2, 4, 8, 16, 32}; 1 <= valid <= min(16 x index's free size, 4096); every index + e inside
// src's flattened free size (the hardware leaves it undefined; refused here).
// Cost: the local_gather row (GatherCycles over valid, elems_per_index, src's dtype) on GpSimd.
void local_gather(const Tile& dst, const Tile& src, const Tile& index, int64_t elems_per_index,
                  int64_t valid);

}  // namespace nkisim::nisa
