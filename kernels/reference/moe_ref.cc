#include "kernels/reference/moe_ref.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/error.h"

namespace nkisim::reference {

const char* RouterFamilyName(RouterFamily f) {
  switch (f) {
    case RouterFamily::kQwen3: return "qwen3";
    case RouterFamily::kMixtral: return "mixtral";
    case RouterFamily::kGptOss: return "gpt_oss";
    case RouterFamily::kLlama4: return "llama4";
  }
  return "?";
}

RouterFamily ParseRouterFamily(const std::string& name) {
  if (name == "qwen3") return RouterFamily::kQwen3;
  if (name == "mixtral") return RouterFamily::kMixtral;
  if (name == "gpt_oss") return RouterFamily::kGptOss;
  if (name == "llama4") return RouterFamily::kLlama4;
  Raise(ErrorCode::kInvalidArgument, StrCat("router family: '", name,
                                            "' is not one of qwen3, mixtral, gpt_oss, llama4"));
}

std::vector<double> RouterLogitsRef(const std::vector<float>& x, const std::vector<float>& w,
                                    int64_t tokens, int64_t hidden, int64_t experts) {
  std::vector<double> out(static_cast<size_t>(tokens * experts), 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < hidden; ++h) {
      const double xv = x[static_cast<size_t>(t * hidden + h)];
      for (int64_t e = 0; e < experts; ++e) {
        out[static_cast<size_t>(t * experts + e)] += xv * w[static_cast<size_t>(h * experts + e)];
      }
    }
  }
  return out;
}

RoutingRef RouteRef(const std::vector<double>& logits, int64_t tokens, int64_t experts,
                    int64_t top_k, RouterFamily family) {
  if (top_k < 1 || top_k > experts) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("router: top_k = ", top_k, "; the rule is 1 <= top_k <= experts (", experts, ")"));
  }
  if (family == RouterFamily::kLlama4 && top_k != 1) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("router: top_k = ", top_k, "; the rule for llama4 (sigmoid top-1) is top_k = 1"));
  }
  RoutingRef r;
  r.tokens = tokens;
  r.top_k = top_k;
  for (int64_t t = 0; t < tokens; ++t) {
    const double* row = logits.data() + t * experts;
    std::vector<int> order(static_cast<size_t>(experts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
    std::vector<double> w(static_cast<size_t>(top_k));
    if (family == RouterFamily::kQwen3) {
      double mx = row[order[0]], z = 0;
      for (int64_t e = 0; e < experts; ++e) z += std::exp(row[e] - mx);
      double s = 0;
      for (int64_t k = 0; k < top_k; ++k) s += w[k] = std::exp(row[order[k]] - mx) / z;
      for (double& v : w) v /= s;
    } else if (family == RouterFamily::kLlama4) {
      w[0] = 1.0 / (1.0 + std::exp(-row[order[0]]));
    } else {
      double mx = row[order[0]], z = 0;
      for (int64_t k = 0; k < top_k; ++k) z += std::exp(row[order[k]] - mx);
      for (int64_t k = 0; k < top_k; ++k) w[k] = std::exp(row[order[k]] - mx) / z;
    }
    for (int64_t k = 0; k < top_k; ++k) {
      r.expert.push_back(order[k]);
      r.weight.push_back(w[k]);
    }
  }
  return r;
}

std::vector<double> ExpertMlpRef(const std::vector<float>& x, int64_t n, int64_t hidden,
                                 int64_t inter, const std::vector<float>& wg,
                                 const std::vector<float>& wu, const std::vector<float>& wd) {
  std::vector<double> out(static_cast<size_t>(n * hidden), 0.0);
  std::vector<double> g(static_cast<size_t>(inter)), u(static_cast<size_t>(inter));
  for (int64_t t = 0; t < n; ++t) {
    std::fill(g.begin(), g.end(), 0.0);
    std::fill(u.begin(), u.end(), 0.0);
    for (int64_t h = 0; h < hidden; ++h) {
      const double xv = x[static_cast<size_t>(t * hidden + h)];
      const float* gr = wg.data() + h * inter;
      const float* ur = wu.data() + h * inter;
      for (int64_t i = 0; i < inter; ++i) {
        g[i] += xv * gr[i];
        u[i] += xv * ur[i];
      }
    }
    double* o = out.data() + t * hidden;
    for (int64_t i = 0; i < inter; ++i) {
      const double a = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const float* dr = wd.data() + i * hidden;
      for (int64_t h = 0; h < hidden; ++h) o[h] += a * dr[h];
    }
  }
  return out;
}

std::vector<double> MoeLayerRef(const std::vector<float>& x, int64_t tokens, int64_t hidden,
                                int64_t inter, const RoutingRef& routing,
                                const std::vector<ExpertWeightsRef>& experts, int64_t capacity,
                                const ExpertWeightsRef* shared, int64_t shared_inter) {
  std::vector<double> out(static_cast<size_t>(tokens * hidden), 0.0);
  std::vector<int64_t> seen(experts.size(), 0);
  for (int64_t t = 0; t < tokens; ++t) {
    const std::vector<float> row(x.begin() + t * hidden, x.begin() + (t + 1) * hidden);
    for (int64_t k = 0; k < routing.top_k; ++k) {
      const int e = routing.expert[static_cast<size_t>(t * routing.top_k + k)];
      if (capacity >= 0 && seen[e]++ >= capacity) continue;  // dropped
      const ExpertWeightsRef& w = experts[static_cast<size_t>(e)];
      const std::vector<double> y = ExpertMlpRef(row, 1, hidden, inter, *w.wg, *w.wu, *w.wd);
      const double wt = routing.weight[static_cast<size_t>(t * routing.top_k + k)];
      for (int64_t h = 0; h < hidden; ++h) out[static_cast<size_t>(t * hidden + h)] += wt * y[h];
    }
    if (shared != nullptr) {
      const std::vector<double> y =
          ExpertMlpRef(row, 1, hidden, shared_inter, *shared->wg, *shared->wu, *shared->wd);
      for (int64_t h = 0; h < hidden; ++h) out[static_cast<size_t>(t * hidden + h)] += y[h];
    }
  }
  return out;
}

}  // namespace nkisim::reference
