// The traced composites of the nl language, softmax and rms_norm: each checks that its axes are
// free axes (NKI's check_free_axis) and expands into nl ops, so its instruction sequence is that
// of its parts (docs/nl-ops.md lists it).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/language/operands.h"
#include "runtime/tile.h"

namespace nkisim::nl {

struct SoftmaxOptions {
  OptDType dtype = std::nullopt;      // result dtype; default x's
  bool mixed_precision = true;        // shift, exp, sum and reciprocal in fp32 (else in x's dtype)
  bool zero_max_mode = false;         // clamp the max at 0 before the shift: max(max(x), 0)
  Tile* return_max_reduce = nullptr;  // when set, receives the (clamped) max, reduced dims size 1
};

// softmax over `axis`: m = max(x); e = exp(x - m); out = e * (1 / sum(e)). Emits tensor_reduce(max)
// [, tensor_scalar(max 0)], tensor_tensor(subtract), activation(exp), tensor_reduce(add),
// reciprocal, tensor_tensor(multiply). Throws "softmax: ..." for axes that are not free.
Tile softmax(const Tile& x, const std::vector<int>& axis, const SoftmaxOptions& options = {});

struct RmsNormOptions {
  float epsilon = 1e-6f;
  OptDType dtype = std::nullopt;          // result dtype; default x's
  DType compute_dtype = DType::kFloat32;  // of x^2, the mean, the rms and x / rms
};

// x / sqrt(mean(x^2 over axis) + epsilon) * w. n is the number of elements reduced (NKI passes
// it with axis) and must match; w must broadcast to x's shape (e.g. [P, H], or the weight loaded
// across partitions with broadcast_to). Emits tensor_scalar(pow 2), tensor_reduce(add, mean),
// tensor_scalar(add eps), activation(sqrt), reciprocal, tensor_tensor(multiply) twice.
Tile rms_norm(const Tile& x, const Tile& w, const std::vector<int>& axis, int64_t n,
              const RmsNormOptions& options = {});

}  // namespace nkisim::nl
