// Cross-partition movement inside 32-partition quadrants on the Vector engine (NKI 0.6
// nisa.nc_stream_shuffle).
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tile.h"

namespace nkisim::nisa {

inline constexpr int kShuffleKeep = 255;  // mask value: leave that dst partition unmodified

// For each quadrant q of 32 partitions and i in [0, 32): dst partition 32 q + i (counted from
// dst's first partition) = src partition 32 q + mask[i] (from src's), unless mask[i] is 255.
// dst may be src (in place). Rules: mask has 32 entries, each < 32 or 255; dst and src have the
// same dtype and elements per partition; with A = 32 * ceil(max(partitions of src, dst) / 32)
// active partitions, a start partition must be 0 (A 96 or 128), 0 / 64 (A 64) or a multiple of
// 32 (A 32); every addressed src partition exists. Cost: ComputeOpNs over the free size on the
// Vector engine.
void nc_stream_shuffle(const Tile& dst, const Tile& src, const std::vector<int>& mask);

}  // namespace nkisim::nisa
