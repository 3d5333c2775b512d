// The golden model against values worked out by hand on tiny tensors, so the kernels are checked
// against something itself checked: norms, hidden_actual, the fused add, the seed's half-sin RoPE
// (bias first, V untouched), STATIC and ROW dequantisation, the NBSd layout, the tolerances.
#include "kernels/reference/qkv_ref.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace nkisim::kernels::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::Pointwise;

TensorView Make(const Shape& shape, const std::vector<float>& values,
                DType dtype = DType::kFloat32) {
  TensorView t = TensorView::Create(shape, dtype, "t");
  t.FromFloats(values);
  return t;
}

std::vector<float> Identity(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i) v[i * n + i] = 1.0f;
  return v;
}

// One token, H = 2, I = 3 (n_q = n_kv = 1, d = 1); W picks x0, x1 and their sum.
QkvParams Tiny(const std::vector<float>& x) {
  QkvParams p;
  p.input = Make({1, 1, 2}, x);
  p.fused_qkv_weights = Make({2, 3}, {1, 0, 1, 0, 1, 1});
  p.d_head = 1, p.num_q_heads = 1, p.num_kv_heads = 1;
  p.norm_eps = 0.0;
  return p;
}

TEST(QkvReferenceTest, RmsNormWithGammaAndHiddenActual) {
  QkvParams p = Tiny({3, 4});
  p.fused_norm_type = NormType::kRmsNorm;
  p.gamma_norm_weights = Make({1, 2}, {1, 2});
  const float r = static_cast<float>(1 / std::sqrt(12.5));  // mean square (9 + 16) / 2
  EXPECT_THAT(reference::QkvReference(p).output,
              Pointwise(FloatNear(1e-6), std::vector<float>{3 * r, 8 * r, 11 * r}));
  p.hidden_actual = 1;  // sum / 1: rms 5
  EXPECT_THAT(reference::QkvReference(p).output,
              Pointwise(FloatNear(1e-6), std::vector<float>{0.6f, 1.6f, 2.2f}));
  p.fused_norm_type = NormType::kRmsNormSkipGamma;
  p.gamma_norm_weights = TensorView();
  EXPECT_THAT(reference::QkvReference(p).output,
              Pointwise(FloatNear(1e-6), std::vector<float>{0.6f, 0.8f, 1.4f}));
}

TEST(QkvReferenceTest, LayerNormIgnoresHiddenActual) {
  QkvParams p = Tiny({1, 3});  // mean 2, variance 1
  p.fused_norm_type = NormType::kLayerNorm;
  p.gamma_norm_weights = Make({1, 2}, {1, 3});
  p.layer_norm_bias = Make({1, 2}, {0.5f, 0});
  p.hidden_actual = 1;
  EXPECT_THAT(reference::QkvReference(p).output,
              Pointwise(FloatNear(1e-6), std::vector<float>{-0.5f, 3, 2.5f}));
}

TEST(QkvReferenceTest, FusedAddFeedsTheNormAndIsReturned) {
  QkvParams p = Tiny({1, 1});
  p.fused_residual_add = true;
  p.mlp_prev = Make({1, 1, 2}, {1, 2});
  p.attention_prev = Make({1, 1, 2}, {1, 1});
  const reference::QkvGolden g = reference::QkvReference(p);
  EXPECT_THAT(g.fused_hidden, ElementsAre(3, 4));
  EXPECT_THAT(g.output, ElementsAre(3, 4, 7));
}

// H = 12 with W = I: y = x + bias. Heads of d = 4: Q (0-3), K (4-7), V (8-11).
TEST(QkvReferenceTest, HalfSinRopeAfterBiasOnQAndKOnly) {
  QkvParams p;
  std::vector<float> x(12);
  for (int i = 0; i < 12; ++i) x[i] = static_cast<float>(i + 1);
  p.input = Make({1, 1, 12}, x);
  p.fused_qkv_weights = Make({12, 12}, Identity(12));
  std::vector<float> bias(12, 0.0f);
  bias[0] = 1;  // X1 of Q becomes [2, 2]
  p.bias = Make({1, 12}, bias);
  p.d_head = 4, p.num_q_heads = 1, p.num_kv_heads = 1;
  p.fused_rope = true;
  // Halves differ on purpose: the seed uses the full cos and the first half of sin.
  p.cos_cache = Make({1, 1, 4}, {0.5f, 0.25f, 0.75f, 1.0f});
  p.sin_cache = Make({1, 1, 4}, {0.1f, 0.2f, 0.9f, 0.9f});
  // X = [X1 | X2]: out[k] = X1 cos[k] - X2 sin[k], out[k + 2] = X2 cos[k + 2] + X1 sin[k].
  EXPECT_THAT(
      reference::QkvReference(p).output,
      Pointwise(FloatNear(1e-6),
                std::vector<float>{2 * 0.5f - 3 * 0.1f, 2 * 0.25f - 4 * 0.2f, 3 * 0.75f + 2 * 0.1f,
                                   4 * 1.0f + 2 * 0.2f, 5 * 0.5f - 7 * 0.1f, 6 * 0.25f - 8 * 0.2f,
                                   7 * 0.75f + 5 * 0.1f, 8 * 1.0f + 6 * 0.2f, 9, 10, 11, 12}));
}

// STATIC: x / s_in clipped to +-240 and cast to fp8 e4m3, then y * s_w[segment] * s_in.
TEST(QkvReferenceTest, StaticQuantization) {
  QkvParams p;
  p.input = Make({1, 1, 3}, {1.0f, 200.0f, 0.6f});
  p.fused_qkv_weights = Make({3, 3}, Identity(3), DType::kFp8E4M3);
  p.quantization_type = QuantizationType::kStatic;
  p.qkv_in_scale = Make({1, 1}, {0.5f});
  p.qkv_w_scale = Make({1, 3}, {2, 3, 4});
  p.d_head = 1, p.num_q_heads = 1, p.num_kv_heads = 1;
  // x / 0.5 = [2, 400 -> 240, 1.2 -> fp8 1.25]; times s_w * s_in = [1, 1.5, 2].
  EXPECT_THAT(reference::QkvReference(p).output,
              Pointwise(FloatNear(1e-6), std::vector<float>{2, 360, 2.5f}));
}

TEST(QkvReferenceTest, RowQuantizationScalesColumns) {
  QkvParams p = Tiny({3, 4});
  p.fused_qkv_weights = Make({2, 3}, {1, 0, 1, 0, 1, 1}, DType::kFp8E4M3);
  p.quantization_type = QuantizationType::kRow;
  p.qkv_w_scale = Make({1, 3}, {0.5f, 2, 1});
  p.bias = Make({1, 3}, {1, 1, 1});
  EXPECT_THAT(reference::QkvReference(p).output, ElementsAre(2.5f, 9, 8));
}

// out[n, b, s, k] = y[b, s, n * d + k]: B = 2, S = 1, d = 2, 3 heads.
TEST(QkvReferenceTest, NbsdLayout) {
  QkvParams p;
  std::vector<float> x(12);
  for (int i = 0; i < 12; ++i) x[i] = static_cast<float>(i);
  p.input = Make({2, 1, 6}, x);
  p.fused_qkv_weights = Make({6, 6}, Identity(6));
  p.output_layout = QkvOutputLayout::kNBSd;
  p.d_head = 2, p.num_q_heads = 1, p.num_kv_heads = 1;
  EXPECT_THAT(reference::QkvReference(p).output, ElementsAre(0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11));
}

TEST(QkvReferenceTest, ReferenceTolerances) {
  auto tol = [](QkvVariant v, QuantizationType q) {
    const reference::Tolerance t = reference::QkvTolerance(v, q);
    return std::pair{t.atol, t.rtol};
  };
  EXPECT_EQ(tol(QkvVariant::kTkg, QuantizationType::kNone), std::pair(1e-5, 2e-2));
  EXPECT_EQ(tol(QkvVariant::kTkg, QuantizationType::kStatic), std::pair(1e-5, 4e-2));
  EXPECT_EQ(tol(QkvVariant::kTkg, QuantizationType::kRow), std::pair(1e-5, 4e-2));
  EXPECT_EQ(tol(QkvVariant::kCte, QuantizationType::kNone), std::pair(1e-5, 2e-2));
  EXPECT_EQ(tol(QkvVariant::kCte, QuantizationType::kStatic), std::pair(2e-2, 5e-2));
}

}  // namespace
}  // namespace nkisim::kernels::testing
