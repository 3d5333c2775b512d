#include "kernels/reference/qkv_ref.h"

#include <algorithm>
#include <cmath>

#include "kernels/reference/blas.h"
#include "kernels/reference/mx_ref.h"

namespace nkisim::reference {
namespace {

using kernels::NormType;
using kernels::QkvParams;
using kernels::QuantizationType;

// What steps 1-3 need, read once per call (scales from row 0).
struct PrologueConstants {
  NormType norm = NormType::kNoNorm;
  std::vector<float> gamma, beta;  // [H]
  double eps = 0, h_actual = 0;
  bool is_static = false;
  double s_in = 1, fp8_max = 0;
  DType fp8 = DType::kFloat32;
  // MX: the activations are quantized to fp8 per block, where one bf16 rounding more or less can
  // move a value to the next fp8 code; so the golden rounds where the kernel stores: the fused
  // residual sum (CTE: after each add, in the compute dtype; TKG: once, in the input dtype) and,
  // in CTE, the normalised value before gamma. 0 when not MX.
  int mx_variant = 0;  // 1: TKG, 2: CTE
  DType round_dtype = DType::kBFloat16;
};

PrologueConstants ReadPrologueConstants(const QkvParams& p, int64_t h) {
  PrologueConstants c;
  c.norm = p.fused_norm_type;
  c.gamma =
      p.gamma_norm_weights.valid() ? p.gamma_norm_weights.ToFloats() : std::vector<float>(h, 1.0f);
  c.beta = p.layer_norm_bias.valid() ? p.layer_norm_bias.ToFloats() : std::vector<float>(h, 0.0f);
  c.eps = p.norm_eps.value_or(0.0);
  c.h_actual = static_cast<double>(p.hidden_actual.value_or(h));
  c.is_static = p.quantization_type == QuantizationType::kStatic;
  c.s_in = c.is_static ? p.qkv_in_scale.ToFloats()[0] : 1.0;
  c.fp8 = p.fused_qkv_weights.dtype();
  c.fp8_max = c.is_static ? MaxValue(c.fp8) : 0.0;
  if (p.quantization_type == QuantizationType::kMx) {
    // The dispatcher's rule (kernels/qkv/qkv.h), restated: CTE for RoPE, S > 96 or B * S > 128.
    const int64_t b = p.input.dim(0), s = p.input.dim(1);
    const bool cte = p.fused_rope || s > 96 || b * s > 128;
    c.mx_variant = cte ? 2 : 1;
    const DType io = p.input.dtype();
    c.round_dtype = cte && io == DType::kFloat32 ? DType::kBFloat16 : io;
  }
  return c;
}

// Steps 1-3 for token rows [t0, t1): fills x [t1 - t0, H] (the matmul input) and, with
// fused_residual_add, rows t0 .. t1 - 1 of fused_hidden [T, H].
void Prologue(const QkvParams& p, const PrologueConstants& c, int64_t t0, int64_t t1, int64_t h,
              std::vector<double>* x, std::vector<float>* fused_hidden) {
  const std::vector<float> in = TokenRows(p.input, t0, t1);
  x->assign(in.begin(), in.end());
  if (p.fused_residual_add) {
    const std::vector<float> mlp = TokenRows(p.mlp_prev, t0, t1);
    const std::vector<float> attn = TokenRows(p.attention_prev, t0, t1);
    for (size_t i = 0; i < x->size(); ++i) {
      double& v = (*x)[i];
      if (c.mx_variant == 2) {
        v = RoundTo(c.round_dtype, static_cast<float>(v + mlp[i]));
        v = RoundTo(c.round_dtype, static_cast<float>(v + attn[i]));
      } else if (c.mx_variant == 1) {
        v = RoundTo(c.round_dtype, static_cast<float>(v + mlp[i] + attn[i]));
      } else {
        v += static_cast<double>(mlp[i]) + attn[i];
      }
    }
    std::copy(x->begin(), x->end(), fused_hidden->begin() + t0 * h);
  }
  for (int64_t t = 0; t < t1 - t0; ++t) {
    double* row = x->data() + t * h;
    if (c.norm == NormType::kLayerNorm) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < h; ++k) mean += row[k];
      mean /= h;
      for (int64_t k = 0; k < h; ++k) var += (row[k] - mean) * (row[k] - mean);
      const double r = 1.0 / std::sqrt(var / h + c.eps);
      for (int64_t k = 0; k < h; ++k) {
        const double normed = (row[k] - mean) * r;
        const double stored = c.mx_variant == 2 ? RoundTo(c.round_dtype, static_cast<float>(normed))
                                                : normed;
        row[k] = stored * c.gamma[k] + c.beta[k];
      }
    } else if (c.norm != NormType::kNoNorm) {
      double sum_sq = 0;
      for (int64_t k = 0; k < h; ++k) sum_sq += row[k] * row[k];
      const double r = 1.0 / std::sqrt(sum_sq / c.h_actual + c.eps);
      for (int64_t k = 0; k < h; ++k) {  // gamma is 1 for SKIP_GAMMA
        row[k] = c.mx_variant == 2 ? RoundTo(c.round_dtype, static_cast<float>(row[k] * r)) * c.gamma[k]
                                   : row[k] * r * c.gamma[k];
      }
    }
    if (!c.is_static) continue;
    for (int64_t k = 0; k < h; ++k) {
      const double q = std::clamp(row[k] / c.s_in, -c.fp8_max, c.fp8_max);
      row[k] = RoundTo(c.fp8, static_cast<float>(q));
    }
  }
}

// MX weights [H / 4, I] x4 with scales [H / 32, I] (or the neutral 127) as fp64 [H, I].
std::vector<double> MxWeightsAsDoubles(const QkvParams& p, bool interleaved) {
  const TensorView& w = p.fused_qkv_weights;
  const int64_t k = 4 * w.dim(0), n = w.dim(1);
  const MxFormatRef format =
      w.dtype() == DType::kFp8E5M2x4 ? MxFormatRef::kE5M2 : MxFormatRef::kE4M3FN;
  const auto* data = reinterpret_cast<const uint8_t*>(w.buffer().data()) + w.offset() * 4;
  std::vector<uint8_t> scales(static_cast<size_t>(k / 32 * n), 127);
  if (p.qkv_w_scale.valid()) {
    const std::vector<float> sv = p.qkv_w_scale.ToFloats();
    for (size_t e = 0; e < scales.size(); ++e) scales[e] = static_cast<uint8_t>(sv[e]);
  }
  return MxUnpackWeightsRef(format, interleaved, data, scales.data(), k, n);
}

// The kernel quantizes the normalised input as stored in its compute dtype (bf16 for fp32 input)
// into fp8_e4m3fn x4 per 32-value block: each row of x [rows, H] rounded, then round-tripped.
void MxRoundTripRows(const QkvParams& p, bool interleaved, int64_t rows, int64_t h,
                     std::vector<double>* x) {
  const DType compute = p.input.dtype() == DType::kFloat16 ? DType::kFloat16 : DType::kBFloat16;
  std::vector<double> row(static_cast<size_t>(h));
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t k = 0; k < h; ++k) {
      row[k] = RoundTo(compute, static_cast<float>((*x)[t * h + k]));
    }
    const std::vector<double> q = MxQuantizeDequantizeRef(MxFormatRef::kE4M3FN, interleaved, row);
    std::copy(q.begin(), q.end(), x->begin() + t * h);
  }
}

}  // namespace

QkvGolden QkvReference(const QkvParams& p) {
  const int64_t b = p.input.dim(0), s = p.input.dim(1), h = p.input.dim(2);
  const int64_t i = p.fused_qkv_weights.dim(1), tokens = b * s;
  const int64_t n_q = p.num_q_heads.value_or(0), n_kv = p.num_kv_heads.value_or(0);
  const int64_t d = p.d_head ? *p.d_head : (n_q + 2 * n_kv > 0 ? i / (n_q + 2 * n_kv) : 0);
  QkvGolden g;
  if (p.fused_residual_add) g.fused_hidden.resize(static_cast<size_t>(tokens * h));
  g.output.resize(static_cast<size_t>(tokens * i));

  const PrologueConstants pc = ReadPrologueConstants(p, h);
  // W [H, I] in fp64 a chunk of rows of H at a time, so a large weight never sits in memory whole
  // in fp64 (8x its bf16 size); with one chunk it is converted once per call.
  const int64_t w_chunk =
      std::max<int64_t>(1, WeightChunkElements(tokens) / std::max<int64_t>(1, i));
  const bool one_chunk = w_chunk >= h;
  const bool mx = p.quantization_type == QuantizationType::kMx;
  // MX: the weights dequantized into the input's H order (packed order when the input is given
  // transposed, else the layout's source order), and the activations' per-block round trip.
  const bool mx_interleaved = mx && p.weight_layout == kernels::QkvWeightLayout::kMxInterleaved &&
                              !p.is_h_dim_4h_transposed;
  const std::vector<double> w_whole =
      mx ? MxWeightsAsDoubles(p, mx_interleaved)
         : (one_chunk ? MatrixAsDoubles(p.fused_qkv_weights) : std::vector<double>());
  std::vector<double> col_scale(static_cast<size_t>(i), 1.0), bias(static_cast<size_t>(i), 0.0);
  if (p.quantization_type == QuantizationType::kStatic) {
    const std::vector<float> sw = p.qkv_w_scale.ToFloats();
    for (int64_t c = 0; c < i; ++c) {
      const int seg = c < n_q * d ? 0 : (c < (n_q + n_kv) * d ? 1 : 2);
      col_scale[c] = sw[seg] * pc.s_in;
    }
  } else if (p.quantization_type == QuantizationType::kRow) {
    const std::vector<float> sw = p.qkv_w_scale.ToFloats();
    for (int64_t c = 0; c < i; ++c) col_scale[c] = sw[c];
  }
  if (p.bias.valid()) {
    const std::vector<float> bv = p.bias.ToFloats();
    bias.assign(bv.begin(), bv.end());
  }
  const bool nbsd = p.output_layout == kernels::QkvOutputLayout::kNBSd;
  const int64_t heads = nbsd ? i / d : 0;

  std::vector<double> x, y;  // one block: x [rows, H], y [rows, I]
  for (int64_t t0 = 0; t0 < tokens; t0 += kRowBlock) {
    const int64_t t1 = std::min(tokens, t0 + kRowBlock), rows = t1 - t0;
    Prologue(p, pc, t0, t1, h, &x, &g.fused_hidden);  // steps 1-3
    if (mx) MxRoundTripRows(p, mx_interleaved, rows, h, &x);
    y.resize(static_cast<size_t>(rows * i));
    if (one_chunk || mx) {  // step 4
      Dgemm(rows, i, h, 1.0, x.data(), h, w_whole.data(), i, false, 0.0, y.data(), i);
    } else {
      for (int64_t k0 = 0; k0 < h; k0 += w_chunk) {
        const int64_t k1 = std::min(h, k0 + w_chunk);
        const std::vector<double> w = MatrixAsDoubles(p.fused_qkv_weights.slice(0, k0, k1));
        Dgemm(rows, i, k1 - k0, 1.0, x.data() + k0, h, w.data(), i, false, k0 == 0 ? 0.0 : 1.0,
              y.data(), i);
      }
    }
    for (int64_t t = 0; t < rows; ++t) {
      for (int64_t c = 0; c < i; ++c) y[t * i + c] = y[t * i + c] * col_scale[c] + bias[c];
    }
    if (p.fused_rope) {
      const std::vector<float> cos = TokenRows(p.cos_cache, t0, t1);  // [rows, d]
      const std::vector<float> sin = TokenRows(p.sin_cache, t0, t1);
      const int64_t half = d / 2;
      for (int64_t t = 0; t < rows; ++t) {
        for (int64_t head = 0; head < n_q + n_kv; ++head) {
          double* xh = y.data() + t * i + head * d;
          const float* c = cos.data() + t * d;
          const float* sn = sin.data() + t * d;  // only sin[:d/2] is used
          for (int64_t k = 0; k < half; ++k) {
            const double x1 = xh[k], x2 = xh[k + half];
            xh[k] = x1 * c[k] - x2 * sn[k];
            xh[k + half] = x2 * c[k + half] + x1 * sn[k];
          }
        }
      }
    }
    if (!nbsd) {
      std::copy(y.begin(), y.end(), g.output.begin() + t0 * i);
      continue;
    }
    for (int64_t n = 0; n < heads; ++n) {  // out[n, t, k] = y[t, n * d + k]
      for (int64_t t = 0; t < rows; ++t) {
        for (int64_t k = 0; k < d; ++k)
          g.output[(n * tokens + t0 + t) * d + k] = static_cast<float>(y[t * i + n * d + k]);
      }
    }
  }
  return g;
}

Tolerance QkvTolerance(kernels::QkvVariant variant, QuantizationType quant) {
  if (quant == QuantizationType::kMx) return kQkvMxTolerance;
  const bool quantized = quant != QuantizationType::kNone;
  if (variant == kernels::QkvVariant::kCte) {
    return quantized ? Tolerance{2e-2, 5e-2} : Tolerance{1e-5, 2e-2};
  }
  return Tolerance{1e-5, quantized ? 4e-2 : 2e-2};
}

}  // namespace nkisim::reference
