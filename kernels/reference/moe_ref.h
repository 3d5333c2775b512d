// Independent plain-loop goldens for the mixture-of-experts kernels (kernels/moe/moe.h): fp64
// loops, no BLAS, no tiles, sharing no code with the kernels. The families' router rules:
//   qwen3    softmax over all E logits, top-k, the k weights renormalised to sum 1
//   mixtral  top-k of the logits, softmax over the k selected
//   gpt_oss  top-k of the logits, softmax over the k selected (the same rule as Mixtral)
//   llama4   top-1 of the logits, weight sigmoid(logit)
// Ties: the lower expert index first. Expert MLP: y = (silu(x Wg) * (x Wu)) Wd.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nkisim::reference {

enum class RouterFamily { kQwen3, kMixtral, kGptOss, kLlama4 };
const char* RouterFamilyName(RouterFamily f);
// "qwen3" | "mixtral" | "gpt_oss" | "llama4"; throws Error(kInvalidArgument) naming the value.
RouterFamily ParseRouterFamily(const std::string& name);

struct RoutingRef {
  int64_t tokens = 0, top_k = 0;
  std::vector<int> expert;      // [tokens * top_k]
  std::vector<double> weight;   // [tokens * top_k]
};

// logits[t * E + e] = sum_h x[t * H + h] * w[h * E + e], in fp64.
std::vector<double> RouterLogitsRef(const std::vector<float>& x, const std::vector<float>& w,
                                    int64_t tokens, int64_t hidden, int64_t experts);
// Throws Error(kInvalidArgument) "top_k = 9 ... the rule is top_k <= experts (8)" and for llama4
// unless top_k == 1.
RoutingRef RouteRef(const std::vector<double>& logits, int64_t tokens, int64_t experts,
                    int64_t top_k, RouterFamily family);

// One expert's MLP on rows x [n, H]: returns [n, H] in fp64. wg, wu: [H, I]; wd: [I, H].
std::vector<double> ExpertMlpRef(const std::vector<float>& x, int64_t n, int64_t hidden,
                                 int64_t inter, const std::vector<float>& wg,
                                 const std::vector<float>& wu, const std::vector<float>& wd);

// The whole layer: out[t] = sum_k weight(t, k) * expert_{e(t,k)}(x[t]) (+ shared(x[t]) when
// shared weights are given), dropless; a (t, k) whose expert position in its expert's queue
// (token order) is >= capacity is dropped when capacity >= 0. expert_w(e) gives expert e's
// {wg, wu, wd}. Returns [tokens, H] in fp64.
struct ExpertWeightsRef {
  const std::vector<float>* wg;
  const std::vector<float>* wu;
  const std::vector<float>* wd;
};
std::vector<double> MoeLayerRef(const std::vector<float>& x, int64_t tokens, int64_t hidden,
                                int64_t inter, const RoutingRef& routing,
                                const std::vector<ExpertWeightsRef>& experts, int64_t capacity,
                                const ExpertWeightsRef* shared, int64_t shared_inter);

}  // namespace nkisim::reference
