#include "kernels/qkv/qkv_case.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "kernels/common/case_tensors.h"
#include "kernels/common/mx_weights.h"
#include "runtime/rng.h"

namespace nkisim::kernels {
namespace {

constexpr DType kFp8 = DType::kFp8E4M3;

CounterRng Rng(const QkvCaseOptions& o, const std::string& name) {
  return CounterRng(o.seed, TensorIdFromName(name));
}

TensorView Gaussian(const QkvCaseOptions& o, const std::string& name, const Shape& shape,
                    DType dtype, float clip = 0.0f) {
  return GaussianTensor(o.seed, name, shape, dtype, clip);
}

TensorView Rows(const std::string& name, const std::vector<float>& row, int64_t rows) {
  return RepeatedRows(name, row, rows);
}

// ROW quantisation of Gaussian weights: per-column scale max_h |W[h, i]| / fp8 max.
void RowQuantizedWeights(const QkvCaseOptions& o, QkvParams& p, int64_t h, int64_t i) {
  const std::vector<float> w = Gaussian(o, "fused_qkv_weights", {h, i}, DType::kFloat32).ToFloats();
  const RowQuantized q = RowQuantize(w, h, i, kFp8, "fused_qkv_weights", "qkv_w_scale", 128);
  p.fused_qkv_weights = q.weights;
  p.qkv_w_scale = q.scale;
}

// cos and sin of angles uniform in [0, 2 pi), the first half of each head duplicated.
void RopeCaches(const QkvCaseOptions& o, QkvParams& p) {
  const int64_t half = o.d / 2, rows = o.b * o.s;
  const CounterRng rng = Rng(o, "rope_angles");
  std::vector<float> c(static_cast<size_t>(rows * o.d)), s(c.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < half; ++k) {
      const double angle = rng.Uniform(r * half + k, 0.0f, 2 * std::numbers::pi_v<float>);
      for (int64_t at : {r * o.d + k, r * o.d + k + half}) {
        c[at] = static_cast<float>(std::cos(angle));
        s[at] = static_cast<float>(std::sin(angle));
      }
    }
  }
  p.cos_cache = TensorView::Create({o.b, o.s, o.d}, o.dtype, "cos_cache");
  p.cos_cache.FromFloats(c);
  p.sin_cache = TensorView::Create({o.b, o.s, o.d}, o.dtype, "sin_cache");
  p.sin_cache.FromFloats(s);
}

}  // namespace

QkvParams MakeQkvCase(const QkvCaseOptions& o) {
  const int64_t i = (o.n_q + 2 * o.n_kv) * o.d;
  const bool is_static = o.quant == QuantizationType::kStatic;
  const Shape hidden{o.b, o.s, o.h};
  QkvParams p;
  p.input = Gaussian(o, "input", hidden, o.dtype, is_static ? 1.0f : 0.0f);
  if (o.quant == QuantizationType::kRow) {
    RowQuantizedWeights(o, p, o.h, i);
  } else if (o.quant == QuantizationType::kMx) {
    const MxPackedWeights packed = PackMxWeights(
        Gaussian(o, "fused_qkv_weights", {o.h, i}, DType::kFloat32),
        o.weight_layout == QkvWeightLayout::kMxInterleaved ? MxWeightLayout::kInterleaved
                                                           : MxWeightLayout::kContiguous,
        DType::kFp8E4M3FNx4, "fused_qkv_weights");
    p.fused_qkv_weights = packed.data;
    p.qkv_w_scale = packed.scales;
    p.weight_layout = o.weight_layout;
  } else {
    p.fused_qkv_weights = Gaussian(o, "fused_qkv_weights", {o.h, i}, is_static ? kFp8 : o.dtype,
                                   is_static ? 1.0f : 0.0f);
  }
  if (is_static) {
    const CounterRng rng = Rng(o, "scales");
    const float unit = 1.0f / static_cast<float>(MaxValue(kFp8));
    std::vector<float> w(3);
    for (int j = 0; j < 3; ++j) w[j] = unit * rng.Uniform(j, 0.995f, 1.005f);
    p.qkv_w_scale = Rows("qkv_w_scale", w, 128);
    p.qkv_in_scale = Rows("qkv_in_scale", {unit * rng.Uniform(3, 0.995f, 1.005f)}, 128);
  }
  p.quantization_type = o.quant;
  p.is_h_dim_4h_transposed = o.h_transposed;  // ValidateQkv refuses it without MX
  p.output_layout = o.layout;
  if (o.bias) p.bias = Gaussian(o, "bias", {1, i}, o.dtype);
  p.fused_residual_add = o.fused_add;
  if (o.fused_add) {
    p.mlp_prev = Gaussian(o, "mlp_prev", hidden, o.dtype);
    p.attention_prev = Gaussian(o, "attention_prev", hidden, o.dtype);
  }
  p.fused_norm_type = o.norm;
  if (o.norm == NormType::kRmsNorm || o.norm == NormType::kLayerNorm) {
    p.gamma_norm_weights = Gaussian(o, "gamma_norm_weights", {1, o.h}, o.dtype);
  }
  if (o.norm_bias) p.layer_norm_bias = Gaussian(o, "layer_norm_bias", {1, o.h}, o.dtype);
  p.norm_eps = o.eps;
  p.hidden_actual = o.hidden_actual;
  p.fused_rope = o.rope;
  if (o.rope) RopeCaches(o, p);
  p.d_head = o.d;
  p.num_q_heads = o.n_q;
  p.num_kv_heads = o.n_kv;
  return p;
}

std::vector<std::pair<const char*, TensorView*>> QkvTensors(QkvParams& p) {
  return {{"input", &p.input},
          {"fused_qkv_weights", &p.fused_qkv_weights},
          {"bias", &p.bias},
          {"qkv_w_scale", &p.qkv_w_scale},
          {"qkv_in_scale", &p.qkv_in_scale},
          {"mlp_prev", &p.mlp_prev},
          {"attention_prev", &p.attention_prev},
          {"gamma_norm_weights", &p.gamma_norm_weights},
          {"layer_norm_bias", &p.layer_norm_bias},
          {"cos_cache", &p.cos_cache},
          {"sin_cache", &p.sin_cache}};
}

}  // namespace nkisim::kernels
