// The TKG (decode) norm front end of QKV and the MLP: everything before the first matmul on one
// core.
//
// Layout: the hidden state sits with H on the partitions, the reference's LNC-interleaved
// [P, B*S, LNC, H1s] (norm_tkg_utils.py:165-192): element (p, t, c, j) is x[t, c*H/LNC + p*H1s + j]
// with H1s = H / (P * LNC), so core c's contiguous H shard is the slice [:, :, c, :] and each
// partition reads contiguous runs of HBM.
//
// Steps on core s of L:
//   1. load the tokens and H chunks it needs (all chunks when there is a norm, which spans H);
//   2. fused residual add x + residual [+ residual2] (QKV: mlp_prev and attention_prev; the MLP:
//      its one residual), rounded to the input dtype, and the store of this core's disjoint part
//      of fused_hidden;
//   3. RMS or LayerNorm over the full H: per-partition sums (Vector) then a sum across partitions
//      as a matmul with an all-ones stationary, which also broadcasts the total to every partition;
//   4. with L = 2 and B*S above the split threshold each core normalises half the tokens and the
//      halves of the other core's H shard are swapped with sendrecv (qkv_tkg.py:660-744).
// With FrontEndConfig::short_tkg_front_end (the MLP) the loads are whole rows transposed on the PE
// (kernels/common/transposed_load.h) and
// RMSNorm applies gamma beside the statistics, then 1 / rms per shard, the peer's first (the
// same values up to the order of two fp32 multiplies).
#pragma once

#include "kernels/common/front_end.h"
#include "runtime/logical_core.h"
#include "runtime/tile.h"

namespace nkisim::kernels {

// Returns core ctx.prg_id's matmul input [P, B*S, H1s] in the compute dtype: element (p, t, j) is
// the normalised row h = s*H/L + p*H1s + j of token t. MX: [P, B*S, Q, 4], element (p, t, q, j)
// the row h = s*H/L + q*4P + 4p + j (runs of 4 are x4 elements of chunk q). Writes this core's part of fused_hidden
// (with fused_residual_add, when fused_hidden is valid).
Tile TkgPrologue(const KernelContext& ctx, const FrontEndConfig& cfg, const FrontEndInputs& in,
                 const TensorView& fused_hidden);

}  // namespace nkisim::kernels
