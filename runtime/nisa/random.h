// The engines' pseudo-random number generator (PRNG) and the instructions that draw from it:
// random (a uniform fill, GpSimd) and dropout (Vector), with random_seed to make draws
// reproducible.
//
// Model: one stream per physical core, a (seed, position) pair. Draw i of the stream is
// CounterRng(seed, kPrngStreamId).Uniform(position + i), in [0, 1). An instruction takes one draw
// per element of its destination, in row-major order over {partition, free...}, and advances the
// position by that count. random_seed(s) restarts the stream at (s, 0), so the same instructions
// after the same seed draw the same values on any core. Streams are kept for the life of the
// process, keyed by the core object's address: a core never seeded starts at (0, 0), or continues
// the stream of an earlier core destroyed at the same address, so a kernel that needs
// reproducible draws seeds first (as NKI requires).
// Thread-safe: the cores of a logical core draw concurrently from their own streams.
#pragma once

#include <cstdint>

#include "runtime/nisa/elementwise.h"
#include "runtime/tile.h"

namespace nkisim::nisa {

// CounterRng tensor id of the PRNG streams ("nisa.prng"), fixed so seeds mean the same everywhere.
inline constexpr uint64_t kPrngStreamId = 0x6E6973612E70726EULL;

// Restarts the current core's stream at (seed, 0). Recorded on GpSimd.
void random_seed(uint32_t seed);

// GpSimd: dst = uniform draws in [0, 1), rounded into dst's dtype.
// Rules: dst has a float dtype.
void random(const Tile& dst);

// Vector: dst = draw < prob ? 0 : data, element-wise (no rescaling of the kept values).
// prob is an immediate in [0, 1] or a per-partition [P, 1] column of drop probabilities.
// Rules: dst has data's shape; an integer data needs dst of the same dtype and an fp32 column.
void dropout(const Tile& dst, const Tile& data, const Scalar& prob);

}  // namespace nkisim::nisa
