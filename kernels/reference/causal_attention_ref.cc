#include "kernels/reference/causal_attention_ref.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/reference/blas.h"

namespace nkisim::reference {

std::vector<double> CausalAttentionRef(const TensorView& q, const TensorView& k,
                                       const TensorView& v) {
  const int64_t n_q = q.dim(0), batch = q.dim(1), seq = q.dim(2), d = q.dim(3);
  const int64_t n_kv = k.dim(0), ratio = n_q / n_kv;
  std::vector<double> out(static_cast<size_t>(batch * n_q * d * seq), 0.0);
  const int64_t block = std::min(kRowBlock, seq);
  std::vector<double> p(static_cast<size_t>(block * seq)), o(static_cast<size_t>(block * d));
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  for (int64_t g = 0; g < n_kv; ++g) {
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<double> kb = MatrixAsDoubles(k.select(0, g).select(0, b));  // [S, d]
      const std::vector<double> vb = MatrixAsDoubles(v.select(0, g).select(0, b));  // [S, d]
      for (int64_t h = g * ratio; h < (g + 1) * ratio; ++h) {
        const std::vector<double> qb = MatrixAsDoubles(q.select(0, h).select(0, b));  // [S, d]
        for (int64_t s0 = 0; s0 < seq; s0 += kRowBlock) {
          // Query rows s0 .. s1 - 1 see keys 0 .. s1 - 1: scores [rows, s1] = Q K^T, then row s
          // keeps t <= s.
          const int64_t s1 = std::min(seq, s0 + kRowBlock), rows = s1 - s0;
          Dgemm(rows, s1, d, scale, &qb[static_cast<size_t>(s0 * d)], d, kb.data(), d, true, 0.0,
                p.data(), s1);
          std::vector<double> sum(static_cast<size_t>(rows), 0.0);
          for (int64_t r = 0; r < rows; ++r) {
            double* pr = &p[static_cast<size_t>(r * s1)];
            const int64_t visible = s0 + r + 1;
            const double max_score = *std::max_element(pr, pr + visible);
            for (int64_t t = 0; t < visible; ++t) sum[r] += (pr[t] = std::exp(pr[t] - max_score));
            std::fill(pr + visible, pr + s1, 0.0);
          }
          Dgemm(rows, d, s1, 1.0, p.data(), s1, vb.data(), d, false, 0.0, o.data(), d);
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t i = 0; i < d; ++i) {
              out[static_cast<size_t>(((b * n_q + h) * d + i) * seq + s0 + r)] =
                  o[static_cast<size_t>(r * d + i)] / sum[r];
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace nkisim::reference
