// A [B, S, H] HBM tensor's tokens loaded into the TKG front end's partition-major layout
// [P, T, L, H1s] (element (p, t, c, j) = x[t, c*H/L + p*H1s + j], kernels/common/tkg_prologue.h)
// without an element-strided DMA: a direct load of that layout reads runs of H1s elements (32 B
// at H 4096, LNC 2, bf16), one DMA descriptor each (B*S x L x 128 of them: 7.4 us of all 16 DMA
// engines at B*S 16, H 4096), where this loads whole rows and transposes on the PE.
//   1. one DMA per H shard c: the tokens' rows of shard c, contiguous (H / L elements a partition),
//      onto partitions [c T, (c + 1) T);
//   2. per (c, j) a PE transpose of those T partitions' elements c*H/L + p*H1s + j (p = 0 .. 127,
//      a free-axis stride of H1s) into [128, T] of a PSUM bank in the tensor's dtype (exact),
//      as many to a bank as fit;
//   3. each bank evicted into the result by Vector or Scalar in turn.
// Used by the MLP's front end (FrontEndConfig::short_tkg_front_end), which then holds the same
// values as with the direct load.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/common/front_end.h"
#include "runtime/neuron_core.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::kernels {

// Step 1: [(c1 - c0) (t1 - t0), H / L] in src's dtype, partition (c - c0) T + t holding shard c
// of token t0 + t, for tokens [t0, t1) and H shards [c0, c1) of src [B, S, H] (B*S =
// cfg.tokens). REQUIRES: (c1 - c0) * (t1 - t0) <= P.
Tile LoadTokenRows(NeuronCore& core, const FrontEndConfig& cfg, const std::string& name,
                   const TensorView& src, int64_t t0, int64_t t1, int64_t c0, int64_t c1);

// Steps 2 and 3: rows from LoadTokenRows (tokens T = nt, shards nc) as [P, nt, nc, H1s].
// REQUIRES: not MX.
Tile TransposeTokenRows(NeuronCore& core, const FrontEndConfig& cfg, const std::string& name,
                        const Tile& rows, int64_t nt, int64_t nc);

// Both: [P, t1 - t0, c1 - c0, H1s] in src's dtype.
Tile LoadPartitionMajorByTranspose(NeuronCore& core, const FrontEndConfig& cfg,
                                   const std::string& name, const TensorView& src, int64_t t0,
                                   int64_t t1, int64_t c0, int64_t c1);

}  // namespace nkisim::kernels
