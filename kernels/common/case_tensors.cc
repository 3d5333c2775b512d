#include "kernels/common/case_tensors.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "runtime/rng.h"

namespace nkisim::kernels {

void StoreValues(const std::vector<float>& v, const TensorView& t) {
  if (t.dtype() != DType::kFp8E4M3) {
    FromFloat(t.dtype(), v.data(), t.buffer().data(), v.size());
    return;
  }
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> bits(1 << 16);
    for (size_t b = 0; b < bits.size(); ++b) {
      bits[b] = FloatToFp8Bits(DType::kFp8E4M3, Bf16BitsToFloat(static_cast<uint16_t>(b)));
    }
    return bits;
  }();
  auto* out = reinterpret_cast<uint8_t*>(t.buffer().data());
  for (size_t i = 0; i < v.size(); ++i) out[i] = table[FloatToBf16Bits(v[i])];
}

TensorView GaussianTensor(uint64_t seed, const std::string& name, const Shape& shape, DType dtype,
                          float clip, float scale) {
  const CounterRng rng(seed, TensorIdFromName(name));
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  const float two_pi = 2 * std::numbers::pi_v<float>;
  for (size_t i = 0; i < v.size(); i += 2) {
    const uint64_t bits = rng.Bits(i / 2);
    const float u1 = (static_cast<float>(bits >> 40) + 0.5f) * 0x1p-24f;  // (0, 1)
    const float u2 = static_cast<float>((bits >> 16) & 0xFFFFFF) * 0x1p-24f;
    const float r = std::sqrt(-2.0f * std::log(u1));
    v[i] = r * std::cos(two_pi * u2) * scale;
    if (i + 1 < v.size()) v[i + 1] = r * std::sin(two_pi * u2) * scale;
  }
  if (clip > 0.0f) {
    for (float& x : v) x = std::clamp(x, -clip, clip);
  }
  TensorView t = TensorView::Create(shape, dtype, name);
  StoreValues(v, t);
  return t;
}

TensorView RepeatedRows(const std::string& name, const std::vector<float>& row, int64_t rows) {
  TensorView t =
      TensorView::Create({rows, static_cast<int64_t>(row.size())}, DType::kFloat32, name);
  std::vector<float> v;
  for (int64_t r = 0; r < rows; ++r) v.insert(v.end(), row.begin(), row.end());
  t.FromFloats(v);
  return t;
}

RowQuantized RowQuantize(const std::vector<float>& w, int64_t h, int64_t i, DType fp8,
                         const std::string& name, const std::string& scale_name,
                         int64_t scale_rows) {
  std::vector<float> scale(static_cast<size_t>(i), 0.0f), q(w.size());
  for (int64_t k = 0; k < h; ++k) {
    for (int64_t c = 0; c < i; ++c) scale[c] = std::max(scale[c], std::fabs(w[k * i + c]));
  }
  for (float& s : scale) s = s > 0 ? s / static_cast<float>(MaxValue(fp8)) : 1.0f;
  for (int64_t k = 0; k < h; ++k) {
    for (int64_t c = 0; c < i; ++c) q[k * i + c] = w[k * i + c] / scale[c];
  }
  RowQuantized r{TensorView::Create({h, i}, fp8, name),
                 RepeatedRows(scale_name, scale, scale_rows)};
  StoreValues(q, r.weights);
  return r;
}

}  // namespace nkisim::kernels
