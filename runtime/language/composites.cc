#include "runtime/language/composites.h"

#include "runtime/error.h"
#include "runtime/language/math_ops.h"
#include "runtime/language/reduction_ops.h"

namespace nkisim::nl {

Tile softmax(const Tile& x, const std::vector<int>& axis, const SoftmaxOptions& options) {
  CheckTile("softmax", "x", x);
  CheckFreeAxes("softmax", x, axis);
  const DType compute = options.mixed_precision ? DType::kFloat32 : x.dtype();
  Tile m = max(x, axis, /*keepdims=*/true);
  if (options.zero_max_mode) m = maximum(m, 0.0f);
  if (options.return_max_reduce != nullptr) *options.return_max_reduce = m;
  const Tile e = exp(subtract(x, m, compute), compute);
  const Tile inverse_sum = reciprocal(sum(e, axis, /*keepdims=*/true, compute), compute);
  return multiply(e, inverse_sum, options.dtype.value_or(x.dtype()));
}

Tile rms_norm(const Tile& x, const Tile& w, const std::vector<int>& axis, int64_t n,
              const RmsNormOptions& options) {
  CheckTile("rms_norm", "x", x);
  CheckTile("rms_norm", "w", w);
  const std::vector<int> axes = CheckFreeAxes("rms_norm", x, axis);
  int64_t reduced = 1;
  for (int a : axes) reduced *= x.free_shape()[a - 1];
  if (n != reduced) {
    Fail("rms_norm", StrCat("n = ", n, " but the reduced axes of x ", x.Describe(), " hold ",
                            reduced, " elements per row"));
  }
  if (BroadcastShape("rms_norm", x, w, "x", "w") != x.shape()) {
    Fail("rms_norm",
         StrCat("w ", w.Describe(), " must broadcast to x's shape ", ShapeString(x.shape())));
  }
  const DType compute = options.compute_dtype;
  const Tile mean_square = mean(power(x, 2.0f, compute), axes, /*keepdims=*/true);
  const Tile inverse_rms = reciprocal(sqrt(add(mean_square, options.epsilon)));
  return multiply(multiply(x, inverse_rms, compute), w, options.dtype.value_or(x.dtype()));
}

}  // namespace nkisim::nl
