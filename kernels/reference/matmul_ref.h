// Golden reference for plain matmul: C = A @ B with fp64 accumulation over A's and B's stored
// values. fp64, BLAS dgemm over row blocks (kRowBlock rows of A at a time, blas.h); no tiles, no
// ISA: independent of the code under test.
#pragma once

#include <vector>

#include "runtime/tensor_view.h"

namespace nkisim::reference {

// Returns C [M, N] row-major as fp32. REQUIRES: a [M, K], b [K, N].
std::vector<float> Matmul(const TensorView& a, const TensorView& b);

}  // namespace nkisim::reference
