// attn_q_batch_shard: moves attention Q from TP (every rank: n heads for all B batch rows) to
// TP x DP (every rank: G * n heads for B / G rows) inside groups of G = gqa_group_size ranks.
//
//   NBSd: input (n, B, S, d) -> all_gather dim 0 into gathered_buf (G, n, B, S, d)
//         -> batch slice [off, off + B/G) -> q_out (G * n, B / G, S, d)
//   dBnS: input (d, B, 1, S) (n must be 1) -> gathered_buf (G, d, B, 1, S)
//         -> batch slice -> q_out (G, d, B / G, S)
// off = iota_workers[0, r] is read at run time by the DMA (no arithmetic on the rank id), with r
// the runtime rank or the value of rank_id_in (a (1, 1) int32 tensor). Unlike the public
// reference, the table entry is checked against r's position p in its group: it must be
// p * B / G, else Error(kInvalidArgument) names the rank, the expected and the found offset
// (a strided group with the r % G table is refused instead of silently returning wrong rows).
// Collective over replica_group: every member calls it.
#pragma once

#include "collectives/communicator.h"
#include "runtime/tensor_view.h"

namespace nkisim::collectives {

enum class BatchShardLayout { kNBSd, kDBnS };

// Parses "NBSd" / "dBnS"; throws Error(kInvalidArgument) naming both on anything else.
BatchShardLayout ParseBatchShardLayout(const std::string& name);

TensorView attn_q_batch_shard(RankContext& ctx, const TensorView& input,
                              const TensorView& iota_workers, const TensorView& gathered_buf,
                              int gqa_group_size, const GroupComm& replica_group,
                              BatchShardLayout layout = BatchShardLayout::kNBSd,
                              const TensorView* rank_id_in = nullptr);

}  // namespace nkisim::collectives
