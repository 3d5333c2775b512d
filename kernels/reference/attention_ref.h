// Golden decode attention: fp64 over the stored values, BLAS dgemm per batch row (the scores of
// every head against K[b], then their weights against V[b]); no tiles, no ISA.
//   out[h, b, :] = softmax_t(q[h, b, :] . K[b, :, t] / sqrt(d)) @ V[b, t, :]
// in the decode kernel's cache layout (kernels/attention/attention_tkg.h): K with the head dim
// before the tokens, V with the tokens before the head dim.
#pragma once

#include <vector>

#include "runtime/tensor_view.h"

namespace nkisim::reference {

// q [G, Bl, d], k [Bl, d, T], v [Bl, T, d] -> out [G, Bl, d], row-major.
// REQUIRES: the shapes agree (the kernel's validation); any float dtypes.
std::vector<double> AttentionTkgRef(const TensorView& q, const TensorView& k, const TensorView& v);

}  // namespace nkisim::reference
