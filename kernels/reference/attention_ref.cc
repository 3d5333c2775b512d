#include "kernels/reference/attention_ref.h"

#include <algorithm>
#include <cmath>

namespace nkisim::reference {

std::vector<double> AttentionTkgRef(const TensorView& q, const TensorView& k, const TensorView& v) {
  const int64_t heads = q.dim(0), rows = q.dim(1), d = q.dim(2), tokens = k.dim(2);
  const std::vector<float> qv = q.ToFloats(), kv = k.ToFloats(), vv = v.ToFloats();
  std::vector<double> out(static_cast<size_t>(heads * rows * d), 0.0), p(static_cast<size_t>(tokens));
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t b = 0; b < rows; ++b) {
      const float* qrow = &qv[static_cast<size_t>((h * rows + b) * d)];
      double max_score = -INFINITY;
      for (int64_t t = 0; t < tokens; ++t) {
        double s = 0;
        for (int64_t i = 0; i < d; ++i) {
          s += double(qrow[i]) * kv[static_cast<size_t>((b * d + i) * tokens + t)];  // K[b, i, t]
        }
        p[static_cast<size_t>(t)] = s * scale;
        max_score = std::max(max_score, p[static_cast<size_t>(t)]);
      }
      double sum = 0;
      for (double& x : p) sum += (x = std::exp(x - max_score));
      double* o = &out[static_cast<size_t>((h * rows + b) * d)];
      for (int64_t t = 0; t < tokens; ++t) {
        const double w = p[static_cast<size_t>(t)] / sum;
        for (int64_t i = 0; i < d; ++i) {
          o[i] += w * vv[static_cast<size_t>((b * tokens + t) * d + i)];  // V[b, t, i]
        }
      }
    }
  }
  return out;
}

}  // namespace nkisim::reference
