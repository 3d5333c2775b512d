// What the MoE workload (model/moe_layer.cc, RunMoe in workload.h) exposes for its
// tests: how the router's choices are held against the fp64 rule's.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/moe/moe.h"
#include "kernels/reference/moe_ref.h"

namespace nkisim::launcher {

// The fp64 distance from the k-th logit within which either of two experts may be chosen (the
// kernel's fp32 logits can order them differently).
inline constexpr double kMoeRouterTie = 1e-4;

// The routing the layer golden uses: `rule` (the fp64 rule on `ref`, the [tokens, experts] fp64
// logits), except for a token whose kernel choices differ from the rule's only among experts
// within kMoeRouterTie of the rule's k-th logit: there the kernel's experts stand, weighted by the
// family's rule over the fp64 logits. Returns the tokens whose choices differ beyond a near tie
// (each a failure of the router phase; their golden keeps the rule's choices).
int64_t ReconcileRouting(const std::vector<double>& ref, int64_t experts,
                         const kernels::moe::Routing& kernel, const reference::RoutingRef& rule,
                         reference::RouterFamily family, reference::RoutingRef* golden);

}  // namespace nkisim::launcher
