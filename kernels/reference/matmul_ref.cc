#include "kernels/reference/matmul_ref.h"

#include <algorithm>

#include "kernels/reference/blas.h"

namespace nkisim::reference {

std::vector<float> Matmul(const TensorView& a, const TensorView& b) {
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  const std::vector<double> bd = MatrixAsDoubles(b);  // [K, N], once
  std::vector<float> c(static_cast<size_t>(m * n));
  std::vector<double> acc;
  for (int64_t r0 = 0; r0 < m; r0 += kRowBlock) {
    const int64_t r1 = std::min(m, r0 + kRowBlock);
    const std::vector<float> af = a.slice(0, r0, r1).ToFloats();
    const std::vector<double> ad(af.begin(), af.end());
    acc.resize(static_cast<size_t>((r1 - r0) * n));
    Dgemm(r1 - r0, n, k, 1.0, ad.data(), k, bd.data(), n, false, 0.0, acc.data(), n);
    std::copy(acc.begin(), acc.end(), c.begin() + r0 * n);
  }
  return c;
}

}  // namespace nkisim::reference
