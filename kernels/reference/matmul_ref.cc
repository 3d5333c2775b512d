#include "kernels/reference/matmul_ref.h"

namespace nkisim::reference {

std::vector<float> Matmul(const TensorView& a, const TensorView& b) {
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  const std::vector<float> av = a.ToFloats(), bv = b.ToFloats();
  std::vector<double> acc(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk) {
      const double x = av[i * k + kk];
      for (int64_t j = 0; j < n; ++j) acc[i * n + j] += x * bv[kk * n + j];
    }
  }
  return std::vector<float>(acc.begin(), acc.end());
}

}  // namespace nkisim::reference
