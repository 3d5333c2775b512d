#include "kernels/reference/attention_ref.h"

#include <algorithm>
#include <cmath>

#include "kernels/reference/blas.h"

namespace nkisim::reference {

std::vector<double> AttentionTkgRef(const TensorView& q, const TensorView& k, const TensorView& v) {
  const int64_t heads = q.dim(0), rows = q.dim(1), d = q.dim(2), tokens = k.dim(2);
  std::vector<double> out(static_cast<size_t>(heads * rows * d), 0.0);
  std::vector<double> p(static_cast<size_t>(heads * tokens)), o(static_cast<size_t>(heads * d));
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t b = 0; tokens > 0 && b < rows; ++b) {  // no tokens: out stays 0
    // Every head of row b shares K[b] [d, T] and V[b] [T, d]: one dgemm for the scores of all
    // heads, one for their weighted sums.
    const std::vector<double> qb = MatrixAsDoubles(q.select(1, b));  // [G, d]
    const std::vector<double> kb = MatrixAsDoubles(k.select(0, b));  // [d, T]
    const std::vector<double> vb = MatrixAsDoubles(v.select(0, b));  // [T, d]
    Dgemm(heads, tokens, d, scale, qb.data(), d, kb.data(), tokens, false, 0.0, p.data(), tokens);
    std::vector<double> sum(static_cast<size_t>(heads), 0.0);
    for (int64_t h = 0; h < heads; ++h) {
      double* ph = &p[static_cast<size_t>(h * tokens)];
      const double max_score = tokens > 0 ? *std::max_element(ph, ph + tokens) : 0.0;
      for (int64_t t = 0; t < tokens; ++t) sum[h] += (ph[t] = std::exp(ph[t] - max_score));
    }
    Dgemm(heads, d, tokens, 1.0, p.data(), tokens, vb.data(), d, false, 0.0, o.data(), d);
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < d; ++i) {
        out[static_cast<size_t>((h * rows + b) * d + i)] =
            o[static_cast<size_t>(h * d + i)] / sum[h];
      }
    }
  }
  return out;
}

}  // namespace nkisim::reference
