#include "kernels/reference/blas.h"

#include <cblas.h>

#include <algorithm>

namespace nkisim::reference {

void Dgemm(int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
           const double* b, int64_t ldb, bool transpose_b, double beta, double* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0 ? 0.0 : beta * c[i * ldc + j];
    }
    return;
  }
  // One BLAS thread per rank: many MPI ranks share the host's cores (as runtime/nisa/matmul.cc).
  static const bool single_threaded_blas = (openblas_set_num_threads(1), true);
  (void)single_threaded_blas;
  cblas_dgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
              static_cast<blasint>(std::max<int64_t>(lda, 1)), b,
              static_cast<blasint>(std::max<int64_t>(ldb, 1)), beta, c,
              static_cast<blasint>(std::max<int64_t>(ldc, 1)));
}

std::vector<double> MatrixAsDoubles(const TensorView& t) {
  const int64_t rows = t.dim(0), cols = t.dim(1);
  std::vector<double> out(static_cast<size_t>(rows * cols));
  const int64_t block = std::max<int64_t>(1, kSmallPieceElements / std::max<int64_t>(1, cols));
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t r1 = std::min(rows, r0 + block);
    const std::vector<float> part = t.slice(0, r0, r1).ToFloats();
    std::copy(part.begin(), part.end(), out.begin() + r0 * cols);
  }
  return out;
}

std::vector<float> TokenRows(const TensorView& t, int64_t t0, int64_t t1) {
  const int64_t width = t.dim(2);
  std::vector<float> out(static_cast<size_t>((t1 - t0) * width));
  ForEachBatchPiece(t0, t1, t.dim(1), [&](int64_t b, int64_t s0, int64_t s1, int64_t offset) {
    const std::vector<float> part = t.select(0, b).slice(0, s0, s1).ToFloats();
    std::copy(part.begin(), part.end(), out.begin() + offset * width);
  });
  return out;
}

}  // namespace nkisim::reference
