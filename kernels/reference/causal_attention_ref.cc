#include "kernels/reference/causal_attention_ref.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace nkisim::reference {

std::vector<double> CausalAttentionRef(const TensorView& q, const TensorView& k,
                                       const TensorView& v) {
  const int64_t n_q = q.dim(0), batch = q.dim(1), seq = q.dim(2), d = q.dim(3);
  const int64_t n_kv = k.dim(0), ratio = n_q / n_kv;
  const std::vector<float> qv = q.ToFloats(), kv = k.ToFloats(), vv = v.ToFloats();
  std::vector<double> out(static_cast<size_t>(batch * n_q * d * seq), 0.0);
  std::vector<double> p(static_cast<size_t>(seq)), o(static_cast<size_t>(d));
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  auto at = [&](int64_t head, int64_t b, int64_t t) {  // flat index of [head, b, t, 0]
    return static_cast<size_t>(((head * batch + b) * seq + t) * d);
  };
  for (int64_t h = 0; h < n_q; ++h) {
    const int64_t g = h / ratio;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t s = 0; s < seq; ++s) {
        const float* qrow = &qv[at(h, b, s)];
        double max_score = -INFINITY;
        for (int64_t t = 0; t <= s; ++t) {
          const float* krow = &kv[at(g, b, t)];
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += double(qrow[i]) * double(krow[i]);
          p[static_cast<size_t>(t)] = dot * scale;
          max_score = std::max(max_score, p[static_cast<size_t>(t)]);
        }
        double sum = 0;
        std::fill(o.begin(), o.end(), 0.0);
        for (int64_t t = 0; t <= s; ++t) {
          const double w = std::exp(p[static_cast<size_t>(t)] - max_score);
          sum += w;
          const float* vrow = &vv[at(g, b, t)];
          for (int64_t i = 0; i < d; ++i) o[static_cast<size_t>(i)] += w * double(vrow[i]);
        }
        for (int64_t i = 0; i < d; ++i) {
          out[static_cast<size_t>(((b * n_q + h) * d + i) * seq + s)] =
              o[static_cast<size_t>(i)] / sum;
        }
      }
    }
  }
  return out;
}

}  // namespace nkisim::reference
