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
// shared expert's.
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

// HBM one rank holds for one MoE block: the router, its E / ep experts at I / moe_tp and the
// shared expert at I_shared / tp, 2-byte weights.
int64_t MoeWeightBytesPerRank(const MoeShape& shape, const MoePlan& plan);

// "uniform" or "zipf:S" (S in [0, 16]); throws Error(kBadConfig) naming `what`, the value and
// the rule. (Per-expert counts fix one step's token count, so predict, which prices steps of
// different sizes, takes a law, not counts; `nkisim kernel moe --skew counts:FILE` takes counts.)
kernels::moe::RouterSkew ParseRouterSkew(const std::string& text, const std::string& what);

}  // namespace nkisim::launcher
