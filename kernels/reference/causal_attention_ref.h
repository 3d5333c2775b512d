// Golden causal prefill attention: fp64 over the stored values, BLAS dgemm over row blocks
// (kRowBlock query rows of one head at a time against the keys they can see, masked, then against
// the values); no tiles, no ISA. Peak extra memory O(kRowBlock x S + S x d).
//   out[b, h, :, s] = sum_{t <= s} softmax_t(q[h, b, s, :] . k[g, b, t, :] / sqrt(d)) v[g, b, t, :]
//   with g = h / (n_q / n_kv),
// in the layouts of kernels/attention/attention_cte.h: q [n_q, B, S, d], k and v [n_kv, B, S, d]
// (NBSd, as the QKV CTE kernel writes them), out [B, n_q, d, S] (output_projection_cte's input).
#pragma once

#include <vector>

#include "runtime/tensor_view.h"

namespace nkisim::reference {

// Returns out [B, n_q, d, S] row-major. REQUIRES: the shapes agree and n_q % n_kv == 0 (the
// kernel's validation); any float dtypes.
std::vector<double> CausalAttentionRef(const TensorView& q, const TensorView& k,
                                       const TensorView& v);

}  // namespace nkisim::reference
