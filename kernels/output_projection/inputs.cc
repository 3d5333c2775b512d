#include "kernels/output_projection/inputs.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/rng.h"

namespace nkisim::kernels {
namespace {

CounterRng Rng(uint64_t seed, const char* name) { return CounterRng(seed, TensorIdFromName(name)); }

TensorView Uniform(const Shape& shape, DType dtype, uint64_t seed, const char* name, float lo,
                   float hi) {
  TensorView t = TensorView::Create(shape, dtype, name);
  FillUniform(t, Rng(seed, name), lo, hi);
  return t;
}

TensorView Normal(const Shape& shape, DType dtype, uint64_t seed, const char* name, float stddev) {
  TensorView t = TensorView::Create(shape, dtype, name);
  FillNormal(t, Rng(seed, name), 0.0f, stddev);
  return t;
}

TensorView Filled(const Shape& shape, const std::vector<float>& values, const char* name) {
  TensorView t = TensorView::Create(shape, DType::kFloat32, name);
  t.FromFloats(values);
  return t;
}

float MaxAbs(const std::vector<float>& v, size_t begin, size_t end, size_t stride) {
  float m = 0.0f;
  for (size_t i = begin; i < end; i += stride) m = std::max(m, std::fabs(v[i]));
  return m > 0.0f ? m : 1.0f;
}

// TKG STATIC / ROW: real weights U[-1, 1) quantized by a tensor-wide (STATIC) or per-column (ROW)
// scale max|W| / fp8_max; returns the fp8 weight and sets the weight_scale tensor.
TensorView QuantizedWeight(const OprojCase& c, uint64_t seed, int64_t partitions,
                           TensorView* weight_scale) {
  const int64_t k = c.n * c.d;
  const std::vector<float> real =
      Uniform({k, c.h}, DType::kFloat32, seed, "weight_real", -1, 1).ToFloats();
  const auto fp8_max = static_cast<float>(MaxValue(c.fp8_dtype));
  std::vector<float> column_scale(static_cast<size_t>(c.h));
  const float tensor_max = MaxAbs(real, 0, real.size(), 1);
  for (int64_t j = 0; j < c.h; ++j) {
    const bool row = c.quantization == QuantizationType::kRow;
    column_scale[j] = (row ? MaxAbs(real, j, real.size(), c.h) : tensor_max) / fp8_max;
  }
  std::vector<float> q(real.size());
  for (size_t i = 0; i < real.size(); ++i) q[i] = real[i] / column_scale[i % c.h];
  TensorView w = TensorView::Create({k, c.h}, c.fp8_dtype, "weight");
  w.FromFloats(q);
  if (c.quantization == QuantizationType::kRow) {
    std::vector<float> repeated;
    for (int64_t p = 0; p < partitions; ++p) {
      repeated.insert(repeated.end(), column_scale.begin(), column_scale.end());
    }
    *weight_scale = Filled({partitions, c.h}, repeated, "weight_scale");
  } else {
    *weight_scale =
        Filled({partitions, 1}, std::vector<float>(partitions, column_scale[0]), "weight_scale");
  }
  return w;
}

}  // namespace

OutputProjectionInputs MakeCteInputs(const OprojCase& c, uint64_t seed, int64_t partitions) {
  OutputProjectionInputs in;
  in.quantization = c.quantization;
  in.attention = Uniform({c.b, c.n, c.d, c.s}, c.dtype, seed, "attention", 0, 1);
  if (c.bias) in.bias = Normal({1, c.h}, c.dtype, seed, "bias", 100);
  if (c.quantization != QuantizationType::kStatic) {
    in.weight = Uniform({c.n * c.d, c.h}, c.dtype, seed, "weight", 0, 1);
    return in;
  }
  in.weight = Uniform({c.n * c.d, c.h}, c.fp8_dtype, seed, "weight", -240, 240);
  auto scale = [&](const char* name) {
    const float v = Rng(seed, name).Uniform(0) / 256.0f;
    return Filled({partitions, 1}, std::vector<float>(partitions, v), name);
  };
  in.input_scale = scale("input_scale");
  in.weight_scale = scale("weight_scale");
  return in;
}

OutputProjectionInputs MakeTkgInputs(const OprojCase& c, uint64_t seed, int64_t partitions) {
  OutputProjectionInputs in;
  in.quantization = c.quantization;
  const Shape att_shape{c.d, c.b, c.n, c.s};
  if (c.bias) in.bias = Normal({1, c.h}, c.dtype, seed, "bias", 100);
  if (c.quantization == QuantizationType::kNone) {
    in.attention = Normal(att_shape, c.dtype, seed, "attention", 1);
    in.weight = Normal({c.n * c.d, c.h}, c.dtype, seed, "weight", 1);
    return in;
  }
  in.attention = Uniform(att_shape, c.dtype, seed, "attention", -1, 1);
  in.weight = QuantizedWeight(c, seed, partitions, &in.weight_scale);
  if (c.quantization == QuantizationType::kStatic) {
    const std::vector<float> a = in.attention.ToFloats();
    const float s_in = MaxAbs(a, 0, a.size(), 1) / static_cast<float>(MaxValue(c.fp8_dtype)) *
                       Rng(seed, "input_scale").Uniform(0, 0.995f, 1.005f);
    in.input_scale = Filled({partitions, 1}, std::vector<float>(partitions, s_in), "input_scale");
  }
  return in;
}

reference::OprojRefInputs ReferenceInputs(const OutputProjectionInputs& in, bool rounded) {
  const reference::OprojQuant quant =
      in.quantization == QuantizationType::kStatic ? reference::OprojQuant::kStatic
      : in.quantization == QuantizationType::kRow  ? reference::OprojQuant::kRow
                                                   : reference::OprojQuant::kNone;
  return {in.weight, in.bias, quant, in.input_scale, in.weight_scale, rounded};
}

}  // namespace nkisim::kernels
