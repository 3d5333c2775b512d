#include "runtime/mx.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/error.h"

namespace nkisim::mx {

float E8M0ToFloat(uint8_t scale) {
  if (scale == kNaNScale) return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(std::ldexp(1.0, static_cast<int>(scale) - 127));
}

int X4MaxExponent(DType x4) {
  int e = 0;
  std::frexp(X4MaxValue(x4), &e);  // max = m * 2^e with m in [0.5, 1)
  return e - 1;
}

uint8_t BlockScale(DType x4, float amax, bool has_non_finite) {
  if (has_non_finite || std::isnan(amax) || std::isinf(amax)) return kNaNScale;
  if (amax == 0.0f) return 0;
  int e = 0;
  std::frexp(static_cast<double>(std::fabs(amax)), &e);  // |amax| in [2^(e-1), 2^e)
  const int exponent = (e - 1) - X4MaxExponent(x4) + 1;
  return static_cast<uint8_t>(std::clamp(exponent + 127, 0, 254));
}

uint8_t QuantizeValue(DType x4, float value, uint8_t scale) {
  if (scale == kNaNScale) return X4EncodeValue(x4, std::numeric_limits<float>::quiet_NaN());
  const double scaled = std::ldexp(static_cast<double>(value), 127 - static_cast<int>(scale));
  // value / 2^k is exact in double for every float value and k in [-127, 127].
  return X4EncodeValue(x4, static_cast<float>(scaled));
}

}  // namespace nkisim::mx
