// The mixture-of-experts block of one decoder layer under an expert-parallel plan, priced for
// `nkisim predict` (docs/moe.md). A replica of tp ranks is cut as moe_ep x moe_tp: rank p is in
// EP slot p / moe_tp and MoE-TP position p % moe_tp. EP slot j owns experts
// [j E / ep, (j + 1) E / ep); the moe_tp ranks of a slot each hold I / moe_tp of every one of
// them. After the attention's all-reduce every rank holds the T tokens of the step; EP slot i takes
// its share [i T / ep, (i + 1) T / ep) of them through the rows of kMoePhases (moe_block.cc):
//   router          logits [share, E] = x W_router (RouterLogitsKernel), top-k (host)
//   dispatch        the choices permuted into per-destination-expert blocks (DispatchKernel),
//                   then all_to_all_v over the EP group (rows of H) when ep > 1
//   experts         on the busiest EP rank: each local expert's MLP over the rows it received
//                   (ExpertMlpKernel at I / moe_tp); the slowest rank sets the step
//   shared_expert   (a shared expert) the same MLP over all T tokens at I_shared / tp (split over
//                   the whole TP group, as the attention is)
//   combine         all_to_all_v back (ep > 1), then the weighted sum in token order
//                   (CombineKernel)
//   moe_collectives the all-reduce of the partial outputs over the moe_tp ranks (moe_tp > 1), the
//                   all-gather of the shares over the EP group (ep > 1), so every rank holds the T
//                   tokens for the next layer's attention, and with ep > 1 the shared expert's
//                   all-reduce over the TP group
// The kernels run timing-only on one NeuronCore each; at LNC 2 a rank's two physical cores split
// its local experts (expert e on core e % 2) and its token rows. The routing is drawn by the
// skew (kernels::moe::SkewedRouting: uniform, Zipf, or counts), so a skewed router's extra rows
// land on the EP rank that owns the hot experts and that rank's expert time is the step's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/moe/moe.h"
#include "runtime/hardware_profile.h"

namespace nkisim::launcher {

struct MoeShape {
  int hidden = 0;
  int experts = 0;        // E
  int top_k = 0;
  int expert_inter = 0;   // I of one expert
  int shared_inter = 0;   // I of the shared expert; 0: none
  int dense_inter = 0;    // interleaved models: the dense layers' MLP I (Llama 4's
                          // intermediate_size_mlp); 0: every layer an MoE block
  reference::RouterFamily family = reference::RouterFamily::kQwen3;
};

struct MoePlan {
  int tp = 1;      // ranks of one replica
  int ep = 1;      // moe_ep
  int moe_tp = 1;  // moe_tp; ep x moe_tp = tp
  int lnc = 2;
};

// Every rule the plan breaks ("plan 'x': moe_ep: 3: must divide num_experts (128)", ...), none
// when it fits: ep x moe_tp = tp, ep divides the experts, moe_tp divides the expert's I, tp the
// shared expert's and the dense layers' MLP's (interleaved models).
std::vector<std::string> MoePlanProblems(const MoeShape& shape, const MoePlan& plan,
                                         const std::string& plan_name);

struct MoePhaseCost {
  std::string phase;
  double ns = 0;
};

struct MoeBlockCost {
  std::vector<MoePhaseCost> phases;       // the rows of kMoePhases that ran, in order
  std::vector<int64_t> rank_rows;         // per EP slot: the expert rows it computes
  int busiest = 0;                        // the EP slot whose experts take longest
  std::vector<int64_t> busiest_expert_rows;  // per local expert of that slot
  double total_ns() const;
  double phase_ns(const std::string& name) const;  // 0 when absent
};

// One MoE block of `tokens` tokens (a replica's step) under `plan`. Deterministic in seed.
// REQUIRES: MoePlanProblems(shape, plan) empty, tokens >= 1.
MoeBlockCost PriceMoeBlock(const MoeShape& shape, const MoePlan& plan, int64_t tokens,
                           const kernels::moe::RouterSkew& skew, const HardwareProfile& profile,
                           uint32_t seed = 1);

// A dense layer's MLP in an interleaved MoE model (Llama 4 Maverick: every other layer dense,
// an MLP of I = shape.dense_inter): ExpertMlpKernel over all T tokens at dense_inter / tp a rank
// (split over the whole TP group, as the shared expert is; rows over the LNC's cores), then the
// all-reduce of its [T, H] partials over the TP group (tp > 1). Rows "dense_mlp" and
// "dense_mlp_all_reduce". REQUIRES: shape.dense_inter > 0, tp divides it, tokens >= 1.
MoeBlockCost PriceDenseMlpBlock(const MoeShape& shape, const MoePlan& plan, int64_t tokens,
                                const HardwareProfile& profile);

// HBM one rank holds for one dense layer's MLP: 3 H (dense_inter / tp) 2-byte weights.
int64_t DenseMlpBytesPerRank(const MoeShape& shape, const MoePlan& plan);

// HBM one rank holds for one MoE block: the router, its E / ep experts at I / moe_tp and the
// shared expert at I_shared / tp, 2-byte weights.
int64_t MoeWeightBytesPerRank(const MoeShape& shape, const MoePlan& plan);

// "uniform", "zipf:S" (S in [0, 16]) or "counts:FILE"; throws Error(kBadConfig) naming `what`,
// the value and the rule. FILE (counts of one routed sample, e.g. dumped from a real run): '#'
// starts a comment; an optional "tokens: N" first (the sample's tokens; *sample_tokens, 0 when
// absent), then one count per expert, integers in [0, 1e9], whitespace-separated. Whether they
// fit the model (one per expert, summing to the sample's tokens x top_k) is RouterSkewProblems'.
kernels::moe::RouterSkew ParseRouterSkew(const std::string& text, const std::string& what,
                                         int64_t* sample_tokens = nullptr);

// The rules a counts skew breaks for `shape`, each naming `what`, the value and the rule: one
// count per expert (num_experts); the counts sum to the sample's tokens x num_experts_per_tok
// (with sample_tokens 0: a multiple of num_experts_per_tok, the sample's tokens the quotient), a
// positive sum; no count above the sample's tokens (a token picks an expert once). None for a
// uniform or Zipf skew.
std::vector<std::string> RouterSkewProblems(const kernels::moe::RouterSkew& skew, int64_t sample_tokens,
                                            const MoeShape& shape, const std::string& what);

// A counts skew of a sample carried to a step of `tokens` tokens: the counts scaled to sum to
// tokens x top_k (largest remainders; exactly the counts when the sample had `tokens` tokens),
// none above `tokens` (an expert's overflow goes to the next largest remainders).
// REQUIRES: RouterSkewProblems empty, tokens >= 1, top_k <= counts.size().
std::vector<int64_t> CountsForStep(const std::vector<int64_t>& counts, int64_t tokens, int64_t top_k);

}  // namespace nkisim::launcher
