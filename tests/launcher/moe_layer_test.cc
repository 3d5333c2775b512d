// The MoE job's router check (model/moe_layer.h): a kernel choice that differs from
// the fp64 rule's only at a near tie is accepted and the layer golden follows it, weighted by the
// family's rule; any other difference is a failure; the same set in another order is no change.
#include "model/moe_layer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace nkisim::launcher {
namespace {

using reference::RouterFamily;

kernels::moe::Routing KernelChoices(int64_t tokens, int64_t k, std::vector<int> experts) {
  kernels::moe::Routing r;
  r.tokens = tokens;
  r.top_k = k;
  r.expert = std::move(experts);
  r.weight.assign(r.expert.size(), 0.5f);
  return r;
}

TEST(MoeRouterCheckTest, NearTiesFollowTheKernelOtherDifferencesFail) {
  constexpr int64_t kE = 4, kK = 2;
  const std::vector<double> logits = {
      1.0, 0.5, 0.5 + 0.5 * kMoeRouterTie, -1.0,  // token 0: experts 1 and 2 nearly tied
      1.0, 0.5, 0.3, -1.0,                        // token 1: expert 2 is 0.2 below the 2nd
      0.2, 0.9, -0.5, 0.1};                       // token 2: the same set, another order
  const reference::RoutingRef rule = reference::RouteRef(logits, 3, kE, kK, RouterFamily::kMixtral);
  ASSERT_EQ(rule.expert, (std::vector<int>{0, 2, 0, 1, 1, 0}));
  const kernels::moe::Routing kernel = KernelChoices(3, kK, {0, 1, 0, 2, 0, 1});
  reference::RoutingRef golden;
  EXPECT_EQ(ReconcileRouting(logits, kE, kernel, rule, RouterFamily::kMixtral, &golden), 1);
  // Token 0: the kernel's {0, 1}, softmax over their fp64 logits.
  EXPECT_EQ(golden.expert[0], 0);
  EXPECT_EQ(golden.expert[1], 1);
  const double w0 = 1.0 / (1.0 + std::exp(0.5 - 1.0));
  EXPECT_NEAR(golden.weight[0], w0, 1e-15);
  EXPECT_NEAR(golden.weight[1], 1.0 - w0, 1e-15);
  // Token 1: a real difference keeps the rule's choices (and counted above); token 2 unchanged.
  for (size_t i = 2; i < 6; ++i) {
    EXPECT_EQ(golden.expert[i], rule.expert[i]) << i;
    EXPECT_EQ(golden.weight[i], rule.weight[i]) << i;
  }
}

TEST(MoeRouterCheckTest, Llama4NearTieTakesTheSigmoidOfTheKernelsExpert) {
  const std::vector<double> logits = {0.3, 0.3 - 0.5 * kMoeRouterTie, -2.0};
  const reference::RoutingRef rule = reference::RouteRef(logits, 1, 3, 1, RouterFamily::kLlama4);
  ASSERT_EQ(rule.expert[0], 0);
  reference::RoutingRef golden;
  EXPECT_EQ(ReconcileRouting(logits, 3, KernelChoices(1, 1, {1}), rule, RouterFamily::kLlama4, &golden), 0);
  EXPECT_EQ(golden.expert[0], 1);
  EXPECT_NEAR(golden.weight[0], 1.0 / (1.0 + std::exp(-logits[1])), 1e-15);
  EXPECT_EQ(ReconcileRouting(logits, 3, KernelChoices(1, 1, {2}), rule, RouterFamily::kLlama4, &golden), 1);
}

}  // namespace
}  // namespace nkisim::launcher
