#include "kernels/reference/qkv_ref.h"

#include <algorithm>
#include <cmath>

namespace nkisim::reference {
namespace {

using kernels::NormType;
using kernels::QkvParams;
using kernels::QuantizationType;

constexpr int64_t kTokenBlock = 8;  // token rows sharing one pass over W

// Steps 1-3 for every token: returns the matmul input [T, H] and fills fused_hidden.
std::vector<double> Prologue(const QkvParams& p, int64_t tokens, int64_t h,
                             std::vector<float>* fused_hidden) {
  const std::vector<float> in = p.input.ToFloats();
  std::vector<double> x(in.begin(), in.end());
  if (p.fused_residual_add) {
    const std::vector<float> mlp = p.mlp_prev.ToFloats(), attn = p.attention_prev.ToFloats();
    for (size_t i = 0; i < x.size(); ++i) x[i] += static_cast<double>(mlp[i]) + attn[i];
    fused_hidden->assign(x.begin(), x.end());
  }
  const NormType norm = p.fused_norm_type;
  const std::vector<float> gamma =
      p.gamma_norm_weights.valid() ? p.gamma_norm_weights.ToFloats() : std::vector<float>(h, 1.0f);
  const std::vector<float> beta =
      p.layer_norm_bias.valid() ? p.layer_norm_bias.ToFloats() : std::vector<float>(h, 0.0f);
  const double eps = p.norm_eps.value_or(0.0);
  const double h_actual = static_cast<double>(p.hidden_actual.value_or(h));
  const bool is_static = p.quantization_type == QuantizationType::kStatic;
  const double s_in = is_static ? p.qkv_in_scale.ToFloats()[0] : 1.0;
  const DType fp8 = p.fused_qkv_weights.dtype();
  const double fp8_max = is_static ? MaxValue(fp8) : 0.0;
  for (int64_t t = 0; t < tokens; ++t) {
    double* row = x.data() + t * h;
    if (norm == NormType::kLayerNorm) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < h; ++k) mean += row[k];
      mean /= h;
      for (int64_t k = 0; k < h; ++k) var += (row[k] - mean) * (row[k] - mean);
      const double r = 1.0 / std::sqrt(var / h + eps);
      for (int64_t k = 0; k < h; ++k) row[k] = (row[k] - mean) * r * gamma[k] + beta[k];
    } else if (norm != NormType::kNoNorm) {
      double sum_sq = 0;
      for (int64_t k = 0; k < h; ++k) sum_sq += row[k] * row[k];
      const double r = 1.0 / std::sqrt(sum_sq / h_actual + eps);
      for (int64_t k = 0; k < h; ++k) row[k] *= r * gamma[k];  // gamma is 1 for SKIP_GAMMA
    }
    if (!is_static) continue;
    for (int64_t k = 0; k < h; ++k) {
      row[k] = RoundTo(fp8, static_cast<float>(std::clamp(row[k] / s_in, -fp8_max, fp8_max)));
    }
  }
  return x;
}

// Step 4's product, token rows in blocks so W streams from memory once per block.
std::vector<double> Project(const std::vector<double>& x, const std::vector<float>& w,
                            int64_t tokens, int64_t h, int64_t i) {
  std::vector<double> y(static_cast<size_t>(tokens * i), 0.0);
  for (int64_t t0 = 0; t0 < tokens; t0 += kTokenBlock) {
    const int64_t t1 = std::min(tokens, t0 + kTokenBlock);
    for (int64_t k = 0; k < h; ++k) {
      const float* w_row = w.data() + k * i;
      for (int64_t t = t0; t < t1; ++t) {
        const double a = x[t * h + k];
        double* out = y.data() + t * i;
        for (int64_t c = 0; c < i; ++c) out[c] += a * w_row[c];
      }
    }
  }
  return y;
}

}  // namespace

QkvGolden QkvReference(const QkvParams& p) {
  const int64_t b = p.input.dim(0), s = p.input.dim(1), h = p.input.dim(2);
  const int64_t i = p.fused_qkv_weights.dim(1), tokens = b * s;
  const int64_t n_q = p.num_q_heads.value_or(0), n_kv = p.num_kv_heads.value_or(0);
  const int64_t d = p.d_head ? *p.d_head : (n_q + 2 * n_kv > 0 ? i / (n_q + 2 * n_kv) : 0);
  QkvGolden g;
  std::vector<double> y = Project(Prologue(p, tokens, h, &g.fused_hidden),
                                  p.fused_qkv_weights.ToFloats(), tokens, h, i);

  std::vector<double> col_scale(static_cast<size_t>(i), 1.0), bias(static_cast<size_t>(i), 0.0);
  if (p.quantization_type == QuantizationType::kStatic) {
    const std::vector<float> sw = p.qkv_w_scale.ToFloats();
    const double s_in = p.qkv_in_scale.ToFloats()[0];
    for (int64_t c = 0; c < i; ++c) {
      const int seg = c < n_q * d ? 0 : (c < (n_q + n_kv) * d ? 1 : 2);
      col_scale[c] = sw[seg] * s_in;
    }
  } else if (p.quantization_type == QuantizationType::kRow) {
    const std::vector<float> sw = p.qkv_w_scale.ToFloats();
    for (int64_t c = 0; c < i; ++c) col_scale[c] = sw[c];
  }
  if (p.bias.valid()) {
    const std::vector<float> bv = p.bias.ToFloats();
    bias.assign(bv.begin(), bv.end());
  }
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < i; ++c) y[t * i + c] = y[t * i + c] * col_scale[c] + bias[c];
  }
  if (p.fused_rope) {
    const std::vector<float> cos = p.cos_cache.ToFloats(), sin = p.sin_cache.ToFloats();
    const int64_t half = d / 2;
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t head = 0; head < n_q + n_kv; ++head) {
        double* x = y.data() + t * i + head * d;
        const float* c = cos.data() + t * d;
        const float* sn = sin.data() + t * d;  // only sin[:d/2] is used
        for (int64_t k = 0; k < half; ++k) {
          const double x1 = x[k], x2 = x[k + half];
          x[k] = x1 * c[k] - x2 * sn[k];
          x[k + half] = x2 * c[k + half] + x1 * sn[k];
        }
      }
    }
  }
  g.output.resize(y.size());
  if (p.output_layout != kernels::QkvOutputLayout::kNBSd) {
    std::copy(y.begin(), y.end(), g.output.begin());
    return g;
  }
  const int64_t heads = i / d;  // out[n, t, k] = y[t, n * d + k]
  for (int64_t n = 0; n < heads; ++n) {
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t k = 0; k < d; ++k)
        g.output[(n * tokens + t) * d + k] = static_cast<float>(y[t * i + n * d + k]);
    }
  }
  return g;
}

Tolerance QkvTolerance(kernels::QkvVariant variant, QuantizationType quant) {
  const bool quantized = quant != QuantizationType::kNone;
  if (variant == kernels::QkvVariant::kCte) {
    return quantized ? Tolerance{2e-2, 5e-2} : Tolerance{1e-5, 2e-2};
  }
  return Tolerance{1e-5, quantized ? 4e-2 : 2e-2};
}

}  // namespace nkisim::reference
