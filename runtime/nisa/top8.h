// The Vector engine's top-8 instructions (NKI 0.6 nisa.max8, nisa.nc_find_index8): per
// partition, the 8 largest values of a row and where given values first occur in it. Both read
// 8 to 16384 elements per partition (the free dims flattened) and write a [P, 8] tile.
#pragma once
#include "runtime/tile.h"

namespace nkisim::nisa {

// dst[p, 0..7] = the 8 largest values of src[p, :], in descending order (fp32 compare, rounded
// into dst's dtype). Rules: src has 8..16384 elements per partition; dst is [P, 8] with src's
// partitions. Cost: ComputeOpNs over src's free size on the Vector engine.
void max8(const Tile& dst, const Tile& src);

// dst[p, k] = the index (from 0, over data's flattened free dims) of the first element of
// data[p, :] equal to vals[p, k] and not already taken by an equal val earlier in vals (so
// duplicate vals pair with successive occurrences, in ascending order), or all ones
// (0xFFFFFFFF / 0xFFFF) when there is none. Rules: data
// has 8..16384 elements per partition, vals exactly 8, dst is [P, 8] uint32 or uint16, all with
// the same partitions. Cost: ComputeOpNs over data's free size on the Vector engine.
void nc_find_index8(const Tile& dst, const Tile& data, const Tile& vals);

// dst = data with, for i = 7, 6, ..., 0, the first not yet replaced element equal to vals[p, i]
// replaced by imm; dst_idx (optional, [P, 8] uint32 / uint16 / int32) gets its index (all ones,
// or -1 for int32, when there is none). Processing vals in reverse pairs duplicate vals with
// successive occurrences in descending slot order. Rules as nc_find_index8's; dst has data's
// shape. Cost: ComputeOpNs over data's free size on the Vector engine.
void nc_match_replace8(const Tile& dst, const Tile& data, const Tile& vals, float imm,
                       const Tile& dst_idx);

}  // namespace nkisim::nisa
