// The decode attention block of `nkisim run`, one rank's part. Scenario attention_decode:
//   qkv          QKV TKG with RMSNorm for the rank's Q head and its KV head (TP; LNC 2 reduces
//                over H with sendrecv)
//   batch_shard  attn_q_batch_shard over the 'gqa' group: TP -> TP x DP (G heads, B / G rows)
//   attention    decode attention (nl) for those heads and rows against the rank's batch-sharded
//                KV cache, this step's K / V appended
//   unshard      all_to_all inside the group: back to one head for all B rows
//   o_proj       output projection TKG (LNC 2 writes disjoint H halves)
//   all_reduce   the TP sum of the o_proj partials over the 'tp' group
// attention_decode_tp keeps TP throughout: every rank holds the full-batch KV cache of its KV
// head and attends its one Q head over all B rows (no batch_shard, no unshard).
// Inputs come from the counter-based RNG, so each rank makes exactly its slice of the global
// weights and caches. Every phase is checked against a plain reference applied to that phase's
// inputs (kernels/reference; the data movements against raw MPI calls).
#pragma once

#include <cstdint>
#include <vector>

#include "collectives/communicator.h"
#include "launcher/phase_runner.h"
#include "launcher/scenario_config.h"

namespace nkisim::launcher {

// What both scenarios of one rank share: the inputs of the QKV and o_proj phases (the same
// global tensors) and the QKV golden, made once per rank.
struct SharedInputs {
  TensorView x, gamma, w_qkv, w_o;
  std::vector<double> qkv_golden;
};

struct ScenarioFootprint {
  int64_t kv_cache_bytes = 0;  // this rank's K and V cache
  int64_t weight_bytes = 0;    // this rank's QKV and o_proj weights
};

// `shared` starts empty and is filled by the first scenario run on this rank.
ScenarioFootprint RunAttentionDecode(const ResolvedScenario& scenario,
                                     collectives::RankContext& ctx, PhaseRunner& runner,
                                     bool tp_only, SharedInputs& shared);

}  // namespace nkisim::launcher
