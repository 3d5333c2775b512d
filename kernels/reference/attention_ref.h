// Golden decode attention: plain fp64 loops over the stored values, no tiles, no ISA.
//   out[h, b, :] = softmax_t(q[h, b, :] . K[b, t, :] / sqrt(d)) @ V[b, t, :]
#pragma once

#include <vector>

#include "runtime/tensor_view.h"

namespace nkisim::reference {

// q [Hq, Bl, d], k and v [Bl, T, d] -> out [Hq, Bl, d], row-major.
std::vector<double> DecodeAttentionRef(const TensorView& q, const TensorView& k,
                                       const TensorView& v);

}  // namespace nkisim::reference
