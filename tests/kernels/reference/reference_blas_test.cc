// The BLAS-based fp64 goldens (QkvReference, OutputProjection{Cte,Tkg}Ref, Matmul, the attention
// goldens) against plain triple loops written here, on random small shapes whose token counts are
// not multiples of the goldens' row block (256) and whose blocks cross batch boundaries. Both sides
// compute in fp64 over the stored values, so they agree to fp32 rounding of the result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/qkv/qkv.h"
#include "kernels/reference/attention_ref.h"
#include "kernels/reference/causal_attention_ref.h"
#include "kernels/reference/matmul_ref.h"
#include "kernels/reference/output_projection_ref.h"
#include "kernels/reference/qkv_ref.h"

namespace nkisim::reference {
namespace {

using kernels::NormType;
using kernels::QkvOutputLayout;
using kernels::QkvParams;
using kernels::QuantizationType;

TensorView Random(const Shape& shape, DType dtype, std::mt19937& rng, float lo = -1, float hi = 1) {
  TensorView t = TensorView::Create(shape, dtype, "t");
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (float& x : v) x = dist(rng);
  t.FromFloats(v);
  return t;
}

// Every element within a few fp32 ulps of the expected value (relative to the tensor's scale).
template <typename T>
void ExpectClose(const std::vector<float>& actual, const std::vector<T>& expected,
                 const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double scale = 0;
  for (T e : expected) scale = std::max(scale, std::abs(static_cast<double>(e)));
  ASSERT_GT(scale, 0) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double e = static_cast<double>(expected[i]);
    if (!(std::abs(actual[i] - e) <= 4e-7 * (std::abs(e) + 1e-3 * scale))) {
      if (++bad <= 5) ADD_FAILURE() << what << ": [" << i << "] " << actual[i] << " vs " << e;
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

template <typename T>
std::vector<float> ToFloatVec(const std::vector<T>& v) {
  return std::vector<float>(v.begin(), v.end());
}

// ---- QKV: the golden's math spelled out with one loop nest per token -------------------------

std::vector<double> LoopQkv(const QkvParams& p, std::vector<double>* fused) {
  const int64_t b = p.input.dim(0), s = p.input.dim(1), h = p.input.dim(2);
  const int64_t n = p.fused_qkv_weights.dim(1), tokens = b * s;
  const int64_t n_q = *p.num_q_heads, n_kv = *p.num_kv_heads, d = *p.d_head;
  const std::vector<float> x = p.input.ToFloats(), w = p.fused_qkv_weights.ToFloats();
  const bool is_static = p.quantization_type == QuantizationType::kStatic;
  const double s_in = is_static ? p.qkv_in_scale.get({0, 0}) : 1.0;
  std::vector<double> y(static_cast<size_t>(tokens * n));
  std::vector<double> row(static_cast<size_t>(h));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t k = 0; k < h; ++k) {
      row[k] = x[t * h + k];
      if (p.fused_residual_add) {
        row[k] += static_cast<double>(p.mlp_prev.get({t / s, t % s, k})) +
                  p.attention_prev.get({t / s, t % s, k});
        fused->push_back(row[k]);
      }
    }
    const double g_default = 1.0;
    auto gamma = [&](int64_t k) {
      return p.gamma_norm_weights.valid() ? p.gamma_norm_weights.get({0, k}) : g_default;
    };
    if (p.fused_norm_type == NormType::kRmsNorm ||
        p.fused_norm_type == NormType::kRmsNormSkipGamma) {
      double ss = 0;
      for (double v : row) ss += v * v;
      const double rms =
          std::sqrt(ss / static_cast<double>(p.hidden_actual.value_or(h)) + p.norm_eps.value_or(0));
      for (int64_t k = 0; k < h; ++k) row[k] = row[k] / rms * gamma(k);
    } else if (p.fused_norm_type == NormType::kLayerNorm) {
      double mean = 0, var = 0;
      for (double v : row) mean += v / h;
      for (double v : row) var += (v - mean) * (v - mean) / h;
      const double sd = std::sqrt(var + p.norm_eps.value_or(0));
      for (int64_t k = 0; k < h; ++k) {
        row[k] = (row[k] - mean) / sd * gamma(k) +
                 (p.layer_norm_bias.valid() ? p.layer_norm_bias.get({0, k}) : 0.0);
      }
    }
    if (is_static) {
      const DType fp8 = p.fused_qkv_weights.dtype();
      for (double& v : row) {
        v = RoundTo(fp8, static_cast<float>(std::clamp(v / s_in, -MaxValue(fp8), MaxValue(fp8))));
      }
    }
    for (int64_t c = 0; c < n; ++c) {
      double acc = 0;
      for (int64_t k = 0; k < h; ++k) acc += row[k] * w[k * n + c];
      if (is_static) {
        acc *= p.qkv_w_scale.get({0, c < n_q * d ? 0 : (c < (n_q + n_kv) * d ? 1 : 2)}) * s_in;
      } else if (p.quantization_type == QuantizationType::kRow) {
        acc *= p.qkv_w_scale.get({0, c});
      }
      if (p.bias.valid()) acc += p.bias.get({0, c});
      y[t * n + c] = acc;
    }
    if (p.fused_rope) {
      for (int64_t head = 0; head < n_q + n_kv; ++head) {
        double* v = &y[t * n + head * d];
        std::vector<double> rotated(static_cast<size_t>(d));
        for (int64_t k = 0; k < d; ++k) {
          const double c = p.cos_cache.get({t / s, t % s, k});
          const double other = k < d / 2 ? -v[k + d / 2] : v[k - d / 2];
          rotated[k] = v[k] * c + other * p.sin_cache.get({t / s, t % s, k % (d / 2)});
        }
        std::copy(rotated.begin(), rotated.end(), v);
      }
    }
  }
  if (p.output_layout != QkvOutputLayout::kNBSd) return y;
  std::vector<double> out(y.size());
  for (int64_t head = 0; head < n / d; ++head) {
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t k = 0; k < d; ++k) out[(head * tokens + t) * d + k] = y[t * n + head * d + k];
    }
  }
  return out;
}

struct QkvCase {
  std::string name;
  int64_t b, s, h, n_q, n_kv, d;
  NormType norm;
  QuantizationType quant;
  QkvOutputLayout layout;
  bool bias, fused_add, rope;
};

void PrintTo(const QkvCase& c, std::ostream* os) { *os << c.name; }

QkvParams MakeQkv(const QkvCase& c, std::mt19937& rng) {
  QkvParams p;
  const int64_t n = (c.n_q + 2 * c.n_kv) * c.d;
  p.input = Random({c.b, c.s, c.h}, DType::kBFloat16, rng);
  const bool fp8 = c.quant != QuantizationType::kNone;
  p.fused_qkv_weights = Random({c.h, n}, fp8 ? DType::kFp8E4M3 : DType::kBFloat16, rng,
                               fp8 ? -8.0f : -1.0f, fp8 ? 8.0f : 1.0f);
  p.num_q_heads = c.n_q, p.num_kv_heads = c.n_kv, p.d_head = c.d;
  p.fused_norm_type = c.norm;
  p.quantization_type = c.quant;
  p.output_layout = c.layout;
  if (c.norm == NormType::kRmsNorm || c.norm == NormType::kLayerNorm) {
    p.gamma_norm_weights = Random({1, c.h}, DType::kBFloat16, rng, 0.5f, 1.5f);
  }
  if (c.norm == NormType::kLayerNorm) p.layer_norm_bias = Random({1, c.h}, DType::kBFloat16, rng);
  if (c.bias) p.bias = Random({1, n}, DType::kBFloat16, rng);
  if (c.fused_add) {
    p.fused_residual_add = true;
    p.mlp_prev = Random({c.b, c.s, c.h}, DType::kBFloat16, rng);
    p.attention_prev = Random({c.b, c.s, c.h}, DType::kBFloat16, rng);
  }
  if (c.quant == QuantizationType::kStatic) {
    p.qkv_in_scale = Random({1, 1}, DType::kFloat32, rng, 0.01f, 0.02f);
    p.qkv_w_scale = Random({1, 3}, DType::kFloat32, rng, 0.5f, 2.0f);
  } else if (c.quant == QuantizationType::kRow) {
    p.qkv_w_scale = Random({1, n}, DType::kFloat32, rng, 0.5f, 2.0f);
  }
  if (c.rope) {
    p.cos_cache = Random({c.b, c.s, c.d}, DType::kFloat32, rng);
    p.sin_cache = Random({c.b, c.s, c.d}, DType::kFloat32, rng);
  }
  return p;
}

class QkvReferenceBlasTest : public ::testing::TestWithParam<QkvCase> {};

TEST_P(QkvReferenceBlasTest, MatchesPlainLoops) {
  const QkvCase& c = GetParam();
  std::mt19937 rng(1234);
  const QkvParams p = MakeQkv(c, rng);
  std::vector<double> fused;
  const std::vector<double> expected = LoopQkv(p, &fused);
  const QkvGolden g = QkvReference(p);
  ExpectClose(g.output, expected, c.name + " output");
  if (c.fused_add) {
    ExpectClose(g.fused_hidden, ToFloatVec(fused), c.name + " fused_hidden");
  } else {
    EXPECT_TRUE(g.fused_hidden.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QkvReferenceBlasTest,
    ::testing::Values(
        // 600 tokens: blocks of 256 cross the batch boundary at 300; 88 rows left over.
        QkvCase{"RmsBias", 2, 300, 256, 2, 1, 32, NormType::kRmsNorm, QuantizationType::kNone,
                QkvOutputLayout::kBSD, true, false, false},
        QkvCase{"LayerNormNbsdRope", 3, 129, 128, 2, 1, 16, NormType::kLayerNorm,
                QuantizationType::kNone, QkvOutputLayout::kNBSd, true, false, true},
        QkvCase{"FusedAddSkipGamma", 1, 513, 128, 1, 1, 32, NormType::kRmsNormSkipGamma,
                QuantizationType::kNone, QkvOutputLayout::kBSD, false, true, false},
        QkvCase{"StaticNoNorm", 2, 200, 256, 2, 1, 32, NormType::kNoNorm, QuantizationType::kStatic,
                QkvOutputLayout::kBSD, true, false, false},
        QkvCase{"RowRms", 1, 7, 384, 4, 2, 16, NormType::kRmsNorm, QuantizationType::kRow,
                QkvOutputLayout::kBSD, false, true, false},
        QkvCase{"DecodeOneToken", 1, 1, 128, 1, 1, 64, NormType::kRmsNorm, QuantizationType::kNone,
                QkvOutputLayout::kBSD, true, false, false},
        // H x I = 2176 x 512 > 1 Mi elements: the fp64 weight in two chunks of H rows (2048 and
        // 128), under both row blocks.
        QkvCase{"ChunkedWeight", 2, 150, 2176, 2, 1, 128, NormType::kRmsNorm,
                QuantizationType::kRow, QkvOutputLayout::kBSD, true, false, false},
        // Decode (one row block): pieces of 64 Ki elements, H x I = 1100 x 256 in five chunks of
        // 256 H rows and one of 76.
        QkvCase{"DecodeChunkedWeight", 4, 1, 1100, 2, 1, 64, NormType::kRmsNorm,
                QuantizationType::kNone, QkvOutputLayout::kNBSd, true, false, false}),
    [](const ::testing::TestParamInfo<QkvCase>& info) { return info.param.name; });

// hidden_actual divides the RMS sum of squares; a block boundary must not change it.
TEST(QkvReferenceBlasTest, HiddenActualAcrossBlocks) {
  std::mt19937 rng(99);
  QkvParams p = MakeQkv({"", 1, 700, 256, 1, 1, 32, NormType::kRmsNorm, QuantizationType::kNone,
                         QkvOutputLayout::kBSD, false, false, false},
                        rng);
  p.hidden_actual = 200;
  std::vector<double> fused;
  ExpectClose(QkvReference(p).output, LoopQkv(p, &fused), "hidden_actual");
}

// ---- Output projection ---------------------------------------------------------------------

// y[r, j] = sum_c a(r, c) w[c, j], then the quantization's scale and the bias.
std::vector<double> LoopOproj(int64_t rows, int64_t k_total, const std::vector<double>& a,
                              const OprojRefInputs& in) {
  const int64_t h = in.weight.dim(1);
  const std::vector<float> w = in.weight.ToFloats();
  std::vector<double> y(static_cast<size_t>(rows * h));
  const double s_in = in.quant == OprojQuant::kStatic ? in.input_scale.get({0, 0}) : 1.0;
  const double fp8_max = MaxValue(in.weight.dtype());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < h; ++j) {
      double acc = 0;
      for (int64_t c = 0; c < k_total; ++c) {
        double x = a[r * k_total + c];
        if (in.quant == OprojQuant::kStatic) {
          x = std::clamp(x / s_in, -fp8_max, fp8_max);
          if (in.round_quantized_input) x = RoundTo(in.weight.dtype(), static_cast<float>(x));
        }
        acc += x * w[c * h + j];
      }
      if (in.quant == OprojQuant::kStatic) acc *= in.weight_scale.get({0, 0}) * s_in;
      if (in.quant == OprojQuant::kRow) acc *= in.weight_scale.get({0, j});
      y[r * h + j] = acc + (in.bias.valid() ? in.bias.get({0, j}) : 0.0);
    }
  }
  return y;
}

OprojRefInputs MakeOproj(int64_t k_total, int64_t h, OprojQuant quant, bool bias,
                         std::mt19937& rng) {
  OprojRefInputs in;
  in.quant = quant;
  const bool fp8 = quant != OprojQuant::kNone;
  in.weight = Random({k_total, h}, fp8 ? DType::kFp8E4M3 : DType::kBFloat16, rng,
                     fp8 ? -8.0f : -1.0f, fp8 ? 8.0f : 1.0f);
  if (bias) in.bias = Random({1, h}, DType::kBFloat16, rng);
  if (quant == OprojQuant::kStatic) {
    in.input_scale = Random({128, 1}, DType::kFloat32, rng, 0.002f, 0.004f);
    in.weight_scale = Random({128, 1}, DType::kFloat32, rng, 0.5f, 2.0f);
    in.round_quantized_input = true;
  } else if (quant == OprojQuant::kRow) {
    in.weight_scale = Random({128, h}, DType::kFloat32, rng, 0.5f, 2.0f);
  }
  return in;
}

// A of an attention output, row b*S + s, column n*D + k: CTE [B, N, D, S] or TKG [D, B, N, S].
std::vector<double> AttentionRows(const TensorView& att, bool cte) {
  const int64_t b = att.dim(cte ? 0 : 1), n = att.dim(cte ? 1 : 2), d = att.dim(cte ? 2 : 0),
                s = att.dim(3);
  std::vector<double> a(static_cast<size_t>(b * s * n * d));
  for (int64_t bb = 0; bb < b; ++bb)
    for (int64_t sq = 0; sq < s; ++sq)
      for (int64_t hd = 0; hd < n; ++hd)
        for (int64_t k = 0; k < d; ++k)
          a[(bb * s + sq) * n * d + hd * d + k] =
              cte ? att.get({bb, hd, k, sq}) : att.get({k, bb, hd, sq});
  return a;
}

TEST(OprojReferenceBlasTest, CteMatchesPlainLoops) {
  for (OprojQuant quant : {OprojQuant::kNone, OprojQuant::kStatic, OprojQuant::kRow}) {
    std::mt19937 rng(5);
    const int64_t b = 2, n = 3, d = 16, s = 300, h = 96;  // 600 rows: blocks cross b = 1
    const TensorView att = Random({b, n, d, s}, DType::kBFloat16, rng);
    const OprojRefInputs in = MakeOproj(n * d, h, quant, quant != OprojQuant::kRow, rng);
    ExpectClose(OutputProjectionCteRef(att, in), LoopOproj(b * s, n * d, AttentionRows(att, true), in),
                "cte quant " + std::to_string(static_cast<int>(quant)));
  }
}

TEST(OprojReferenceBlasTest, TkgMatchesPlainLoops) {
  for (OprojQuant quant : {OprojQuant::kNone, OprojQuant::kStatic, OprojQuant::kRow}) {
    std::mt19937 rng(6);
    const int64_t d = 32, b = 130, n = 2, s = 3, h = 64;  // 390 rows
    const TensorView att = Random({d, b, n, s}, DType::kBFloat16, rng);
    const OprojRefInputs in = MakeOproj(n * d, h, quant, true, rng);
    const std::vector<double> a = AttentionRows(att, false);
    ExpectClose(OutputProjectionTkgRef(att, in), LoopOproj(b * s, n * d, a, in),
                "tkg quant " + std::to_string(static_cast<int>(quant)));
  }
}

// K x H = 256 x 4608 > 1 Mi elements: the fp64 weight in two chunks of H columns (4096 and 512),
// under both row blocks of a 280-row TKG case.
// And a decode case of 16 rows (one row block: pieces of 64 Ki elements), K x H = 256 x 1000 in
// three chunks of 256 H columns and one of 232.
TEST(OprojReferenceBlasTest, ChunkedWeightMatchesPlainLoops) {
  struct OprojShape { int64_t b, s, h; };
  for (const OprojShape& shape : {OprojShape{70, 4, 4608}, OprojShape{16, 1, 1000}}) {
    for (OprojQuant quant : {OprojQuant::kNone, OprojQuant::kRow}) {
      std::mt19937 rng(7);
      const int64_t d = 128, b = shape.b, n = 2, s = shape.s, h = shape.h;
      const TensorView att = Random({d, b, n, s}, DType::kBFloat16, rng);
      const OprojRefInputs in = MakeOproj(n * d, h, quant, true, rng);
      const std::vector<double> a = AttentionRows(att, false);
      ExpectClose(OutputProjectionTkgRef(att, in), LoopOproj(b * s, n * d, a, in),
                  "chunked tkg rows " + std::to_string(b * s) + " quant " +
                      std::to_string(static_cast<int>(quant)));
    }
  }
}

// ---- Matmul and attention ------------------------------------------------------------------

TEST(MatmulReferenceBlasTest, MatchesPlainLoops) {
  std::mt19937 rng(8);
  const int64_t m = 300, k = 70, n = 50;
  const TensorView a = Random({m, k}, DType::kBFloat16, rng),
                   b = Random({k, n}, DType::kFloat32, rng);
  std::vector<double> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t kk = 0; kk < k; ++kk) c[i * n + j] += double(a.get({i, kk})) * b.get({kk, j});
  ExpectClose(Matmul(a, b), c, "matmul");
}

TEST(AttentionReferenceBlasTest, DecodeMatchesPlainLoops) {
  std::mt19937 rng(9);
  const int64_t g = 5, bl = 3, d = 16, t = 300;
  const TensorView q = Random({g, bl, d}, DType::kBFloat16, rng, -2, 2);
  const TensorView k = Random({bl, d, t}, DType::kBFloat16, rng, -2, 2);
  const TensorView v = Random({bl, t, d}, DType::kBFloat16, rng);
  std::vector<double> out(static_cast<size_t>(g * bl * d));
  for (int64_t h = 0; h < g; ++h) {
    for (int64_t b = 0; b < bl; ++b) {
      std::vector<double> p(static_cast<size_t>(t));
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < t; ++j) {
        for (int64_t i = 0; i < d; ++i) p[j] += double(q.get({h, b, i})) * k.get({b, i, j});
        p[j] /= std::sqrt(double(d));
        mx = std::max(mx, p[j]);
      }
      for (double& x : p) sum += (x = std::exp(x - mx));
      for (int64_t j = 0; j < t; ++j)
        for (int64_t i = 0; i < d; ++i) out[(h * bl + b) * d + i] += p[j] / sum * v.get({b, j, i});
    }
  }
  ExpectClose(ToFloatVec(AttentionTkgRef(q, k, v)), out, "decode attention");
}

TEST(AttentionReferenceBlasTest, CausalMatchesPlainLoops) {
  std::mt19937 rng(10);
  const int64_t n_q = 4, n_kv = 2, batch = 2, seq = 300, d = 16;
  const TensorView q = Random({n_q, batch, seq, d}, DType::kBFloat16, rng, -2, 2);
  const TensorView k = Random({n_kv, batch, seq, d}, DType::kBFloat16, rng, -2, 2);
  const TensorView v = Random({n_kv, batch, seq, d}, DType::kBFloat16, rng);
  const std::vector<float> qv = q.ToFloats(), kv = k.ToFloats(), vv = v.ToFloats();
  std::vector<double> out(static_cast<size_t>(batch * n_q * d * seq));
  for (int64_t h = 0; h < n_q; ++h) {
    const int64_t grp = h / (n_q / n_kv);
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t s = 0; s < seq; ++s) {
        std::vector<double> p(static_cast<size_t>(s + 1));
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t <= s; ++t) {
          for (int64_t i = 0; i < d; ++i)
            p[t] += double(qv[((h * batch + b) * seq + s) * d + i]) *
                    kv[((grp * batch + b) * seq + t) * d + i];
          p[t] /= std::sqrt(double(d));
          mx = std::max(mx, p[t]);
        }
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (int64_t t = 0; t <= s; ++t)
          for (int64_t i = 0; i < d; ++i)
            out[((b * n_q + h) * d + i) * seq + s] +=
                p[t] / sum * vv[((grp * batch + b) * seq + t) * d + i];
      }
    }
  }
  ExpectClose(ToFloatVec(CausalAttentionRef(q, k, v)), out, "causal attention");
}

}  // namespace
}  // namespace nkisim::reference
