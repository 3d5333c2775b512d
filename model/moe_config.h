// The scenario side of workload "moe" (one mixture-of-experts layer over expert-parallel and
// expert-TP ranks; the workload itself: model/moe_layer.cc). A plan
// plans { moe_ep: 8 moe_tp: 2 } runs on moe_ep x moe_tp ranks:
//   * rank r is TP position r % moe_tp of EP position r / moe_tp; the "tp" groups are blocks of
//     moe_tp consecutive ranks (one EP position: the same tokens, each member I / moe_tp of every
//     expert's columns), the "ep" groups (kEpGroups) the moe_ep ranks of one TP position
//     (strided: [0, moe_tp, 2 moe_tp, ...], [1, ...]);
//   * EP position q owns experts [q E / moe_ep, (q + 1) E / moe_ep) and routes its own
//     moe.tokens tokens.
// Pure: no MPI (`nkisim validate` and the launcher check a file before any rank starts).
#pragma once

#include <string>
#include <vector>

#include "model/footprint.h"
#include "model/scenario_config.h"
#include "runtime/problem_list.h"

namespace nkisim::launcher {

// The phases of one MoE layer, in order.
const std::vector<std::string>& MoePhases();

// Defaults of a moe scenario, before the generic ones: the plans' tp / replicas from
// moe_tp / moe_ep, lnc 1 (the MoE kernels' only LNC), names "ep8xtp2"; moe.router qwen3,
// moe.skew zipf with s 1.2; the phases' tolerances; the chain tolerance the MoE kernel tests use
// (atol = rtol = 1e-2: the layer output against the whole-layer fp64 golden).
void FillMoeDefaults(proto::Scenario& s);

// The MoE model, the plans (moe_ep x moe_tp = the world, moe_ep dividing the experts, moe_tp
// dividing I, top_k <= experts, ...) and the fault; resolves r.plans. Each problem names the
// field, its value and the rule.
void CheckMoeScenario(ResolvedScenario& r, ProblemList& problems);

// What one rank holds in HBM: the router's weights and its experts' slices (weights), its tokens,
// the logits, the dispatch buffers at their largest (every token of the EP group's choices could
// land on one rank) and the output (activations).
HbmFootprint MoeHbmFootprint(const proto::Scenario& s, DType dtype, const ResolvedPlan& plan,
                             const HardwareProfile& profile);

// `nkisim validate` of a moe scenario: the layer, and per plan its groups and who owns which
// experts.
std::string FormatMoeScenario(const ResolvedScenario& r);

// The Zipf router bias of expert e (0 for skew "uniform"): -zipf_s * ln(e + 1) * kZipfBiasScale.
double MoeRouterBias(const proto::MoeShape& moe, int e);

}  // namespace nkisim::launcher
