// What the fp64 goldens share: a row-major fp64 matrix product on OpenBLAS (cblas_dgemm, one BLAS
// thread: many MPI ranks share few host cores) and reads of row blocks of HBM tensors, so a golden
// never holds a full fp64 (or fp32) copy of a big activation. Host code only: no tiles, no ISA, no
// kernel code; the goldens stay independent of the code under test.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/tensor_view.h"

namespace nkisim::reference {

// Token rows the goldens normalize and multiply at a time: peak extra memory is
// O(kRowBlock x (H + I)) plus the fp64 weights, not O(tokens x H).
inline constexpr int64_t kRowBlock = 256;

// C[m, n] = alpha * A[m, k] @ op(B) + beta * C, fp64, row-major with leading dimensions lda, ldb,
// ldc (elements). op(B) is B [k, n], or B^T for B stored [n, k] when transpose_b.
// Any of m, n, k may be 0.
void Dgemm(int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
           const double* b, int64_t ldb, bool transpose_b, double beta, double* c, int64_t ldc);

// The largest piece of a weight the goldens convert to fp64 at once (elements), for a product
// of `rows` token rows. One row block (decode, short prefill) uses every piece once, so a small
// piece that stays in the host's cache costs nothing and keeps the rank's memory low (64 Ki
// elements = 512 KiB); several row blocks convert every piece once per block, so pieces are
// larger (1 Mi = 8 MiB) for the dgemm's sake. Either way a large weight never sits in memory
// whole in fp64, 8x its bf16 size.
inline constexpr int64_t kSmallPieceElements = int64_t{1} << 16;
inline int64_t WeightChunkElements(int64_t rows) {
  return rows <= kRowBlock ? kSmallPieceElements : int64_t{1} << 20;
}

// A [rows, cols] view (any strides) as a row-major fp64 copy, read at most kSmallPieceElements
// (and at least one row) at a time (no full fp32 copy on the way). REQUIRES: t has rank 2.
std::vector<double> MatrixAsDoubles(const TensorView& t);

// Calls fn(b, s0, s1, offset) for the pieces of flat rows [r0, r1) of a [B, S, ...] row order
// (row r = b * S + s): rows s0 .. s1 - 1 of batch b are flat rows r0 + offset onwards.
template <typename Fn>
void ForEachBatchPiece(int64_t r0, int64_t r1, int64_t s, Fn&& fn) {
  for (int64_t r = r0; r < r1;) {
    const int64_t b = r / s, s0 = r % s, s1 = s0 + (r1 - r < s - s0 ? r1 - r : s - s0);
    fn(b, s0, s1, r - r0);
    r += s1 - s0;
  }
}

// Flat token rows [t0, t1) of a [B, S, X] tensor as fp32, row-major [t1 - t0, X].
std::vector<float> TokenRows(const TensorView& t, int64_t t0, int64_t t1);

}  // namespace nkisim::reference
