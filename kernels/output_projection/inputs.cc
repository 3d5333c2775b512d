#include "kernels/output_projection/inputs.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/mx_weights.h"
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
    const bool row =
        c.quantization == QuantizationType::kRow || c.quantization == QuantizationType::kRowMx;
    column_scale[j] = (row ? MaxAbs(real, j, real.size(), c.h) : tensor_max) / fp8_max;
  }
  std::vector<float> q(real.size());
  for (size_t i = 0; i < real.size(); ++i) q[i] = real[i] / column_scale[i % c.h];
  TensorView w = TensorView::Create({k, c.h}, c.fp8_dtype, "weight");
  w.FromFloats(q);
  if (c.quantization == QuantizationType::kRow || c.quantization == QuantizationType::kRowMx) {
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

// One (P, 1) STATIC scale: a U[0, 1) / 256 value repeated.
TensorView StaticScale(uint64_t seed, const char* name, int64_t partitions) {
  const float v = Rng(seed, name).Uniform(0) / 256.0f;
  return Filled({partitions, 1}, std::vector<float>(partitions, v), name);
}

// The CTE weights (and scales) of an MX mode; see inputs.h.
void MakeCteMxWeights(const OprojCase& c, uint64_t seed, int64_t partitions,
                      OutputProjectionInputs* in) {
  const int64_t k = c.n * c.d;
  const bool mx = c.quantization == QuantizationType::kMx;
  const DType x4 = mx ? DType::kFp4E2M1FNx4 : DType::kFp8E4M3FNx4;
  if (k % 32 != 0) {  // not packable: let the kernel name its rule
    in->weight = TensorView::Create({k / 4, c.h}, x4, "weight");
    if (mx) in->weight_scale = TensorView::Create({k / 32, c.h}, DType::kUInt8, "weight_scale");
    return;
  }
  if (mx) {
    const MxPackedWeights packed =
        PackMxWeights(Uniform({k, c.h}, c.dtype, seed, "weight", 0, 1),
                      MxWeightLayout::kContiguous, x4, "weight");
    in->weight = packed.data;
    in->weight_scale = packed.scales;
    return;
  }
  OprojCase fn = c;
  fn.fp8_dtype = DType::kFp8E4M3FN;
  const auto fp8_max = static_cast<float>(MaxValue(fn.fp8_dtype));
  const TensorView w_fp8 = c.quantization == QuantizationType::kStaticMx
                               ? Uniform({k, c.h}, fn.fp8_dtype, seed, "weight", -fp8_max, fp8_max)
                               : QuantizedWeight(fn, seed, partitions, &in->weight_scale);
  in->weight = PackFp8WeightsX4(w_fp8, MxWeightLayout::kContiguous, "weight").data;
  if (c.quantization == QuantizationType::kStaticMx) {
    in->input_scale = StaticScale(seed, "input_scale", partitions);
    in->weight_scale = StaticScale(seed, "weight_scale", partitions);
  }
}

}  // namespace

OutputProjectionInputs MakeCteInputs(const OprojCase& c, uint64_t seed, int64_t partitions) {
  OutputProjectionInputs in;
  in.quantization = c.quantization;
  in.attention = Uniform({c.b, c.n, c.d, c.s}, c.dtype, seed, "attention", 0, 1);
  if (c.bias) in.bias = Normal({1, c.h}, c.dtype, seed, "bias", 100);
  if (oproj::IsMx(c.quantization)) {
    MakeCteMxWeights(c, seed, partitions, &in);
    return in;
  }
  if (c.quantization != QuantizationType::kStatic) {
    in.weight = Uniform({c.n * c.d, c.h}, c.dtype, seed, "weight", 0, 1);
    return in;
  }
  in.weight = Uniform({c.n * c.d, c.h}, c.fp8_dtype, seed, "weight", -240, 240);
  in.input_scale = StaticScale(seed, "input_scale", partitions);
  in.weight_scale = StaticScale(seed, "weight_scale", partitions);
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
  reference::OprojQuant quant = reference::OprojQuant::kNone;
  switch (in.quantization) {
    case QuantizationType::kStatic: quant = reference::OprojQuant::kStatic; break;
    case QuantizationType::kRow: quant = reference::OprojQuant::kRow; break;
    case QuantizationType::kMx: quant = reference::OprojQuant::kMx; break;
    case QuantizationType::kStaticMx: quant = reference::OprojQuant::kStaticMx; break;
    case QuantizationType::kRowMx: quant = reference::OprojQuant::kRowMx; break;
    default: break;
  }
  return {in.weight, in.bias, quant, in.input_scale, in.weight_scale, rounded};
}

}  // namespace nkisim::kernels
