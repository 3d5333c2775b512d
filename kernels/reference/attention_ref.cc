#include "kernels/reference/attention_ref.h"

#include <algorithm>
#include <cmath>

namespace nkisim::reference {

std::vector<double> DecodeAttentionRef(const TensorView& q, const TensorView& k,
                                       const TensorView& v) {
  const int64_t hq = q.dim(0), rows = q.dim(1), d = q.dim(2), tokens = k.dim(1);
  const std::vector<float> qv = q.ToFloats(), kv = k.ToFloats(), vv = v.ToFloats();
  std::vector<double> out(static_cast<size_t>(hq * rows * d), 0.0), p(static_cast<size_t>(tokens));
  for (int64_t h = 0; h < hq; ++h) {
    for (int64_t b = 0; b < rows; ++b) {
      const float* qrow = &qv[(h * rows + b) * d];
      double max_score = -INFINITY;
      for (int64_t t = 0; t < tokens; ++t) {
        double s = 0;
        for (int64_t i = 0; i < d; ++i) s += double(qrow[i]) * kv[(b * tokens + t) * d + i];
        p[t] = s / std::sqrt(static_cast<double>(d));
        max_score = std::max(max_score, p[t]);
      }
      double sum = 0;
      for (double& x : p) sum += (x = std::exp(x - max_score));
      double* o = &out[(h * rows + b) * d];
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t i = 0; i < d; ++i) o[i] += p[t] / sum * vv[(b * tokens + t) * d + i];
      }
    }
  }
  return out;
}

}  // namespace nkisim::reference
