// Every reject of the reference's qkv kernels (reference-kernels.md §2.3, §2.4, §8 negatives)
// and the checks added where the reference would crash or return wrong data: each must throw the
// typed error with a message naming the parameter, the value and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "kernels/qkv/qkv.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "tests/kernels/qkv/qkv_grid.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::kernels::testing {
namespace {

using ::nkisim::testing::ErrorMessageOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A valid decode case (TKG) and a valid prefill case (CTE), LNC 2, mutated by each test.
QkvParams Decode(QkvCaseOptions o = Case(1, 4, 1024, 2, 1, 128, kRms)) { return MakeQkvCase(o); }
QkvParams Prefill(QkvCaseOptions o = Case(1, 256, 1024, 2, 1, 128, kRms)) { return MakeQkvCase(o); }

std::string Rejection(const QkvParams& p, int lnc = 2, QkvVariant v = QkvVariant::kAuto,
                      ErrorCode code = ErrorCode::kInvalidArgument) {
  return ErrorMessageOf(code, [&] { ValidateQkv(p, lnc, v, Trn2Profile()); });
}

TensorView Tensor(const Shape& shape, DType dtype = DType::kBFloat16) {
  return TensorView::Create(shape, dtype, "t");
}

// p with one tensor parameter left out, or replaced.
QkvParams With(QkvParams p, TensorView QkvParams::*field, TensorView value = TensorView()) {
  p.*field = std::move(value);
  return p;
}

void ExpectAccepted(const QkvParams& p, int lnc = 2) {
  EXPECT_NO_THROW(ValidateQkv(p, lnc, QkvVariant::kAuto, Trn2Profile()));
}

TEST(QkvValidateTest, BaseCasesAreAccepted) {
  ExpectAccepted(Decode());
  ExpectAccepted(Prefill());
}

// §8: TKG LNC2 with H = 3968 (H / 128 = 31, odd).
TEST(QkvValidateTest, TkgHSubtilesMustDivideByLnc) {
  EXPECT_EQ(Rejection(Decode(Case(1, 1, 3968, 2, 1, 128, kNo))),
            "qkv: H = 3968: (H / 128) = 31 must be divisible by LNC = 2");
  ExpectAccepted(Decode(Case(1, 1, 3968, 2, 1, 128, kNo)), 1);
}

// §8: TKG LNC2, RMS + fused_add, B * S odd and > 18 (B = 19, S = 1); LayerNorm above 10.
TEST(QkvValidateTest, TkgSplitNormWithFusedAddNeedsEvenTokens) {
  EXPECT_EQ(Rejection(Decode(Case(19, 1, 1024, 2, 1, 128, kRms, kNone, kBsd, true))),
            "qkv: B * S = 19: with fused_residual_add, RMS_NORM and LNC = 2 the TKG variant splits "
            "the tokens (B * S > 18) between the cores, so B * S must be even");
  EXPECT_THAT(Rejection(Decode(Case(11, 1, 1024, 2, 1, 128, kLn, kNone, kBsd, true))),
              HasSubstr("B * S = 11: with fused_residual_add, LAYER_NORM and LNC = 2"));
  // Not split (LNC 1, or B * S <= 18) or no fused add: accepted.
  for (const auto& [o, lnc] : {std::pair{Case(19, 1, 1024, 2, 1, 128, kRms, kNone, kBsd, true), 1},
                               {Case(17, 1, 1024, 2, 1, 128, kRms, kNone, kBsd, true), 2},
                               {Case(19, 1, 1024, 2, 1, 128, kRms), 2}}) {
    ExpectAccepted(Decode(o), lnc);
  }
}

// §8: CTE with NBSd and d = 64.
TEST(QkvValidateTest, CteNbsdNeedsHeadDim128) {
  EXPECT_EQ(Rejection(Prefill(Case(1, 256, 1024, 2, 1, 64, kRms, kNone, kNbsd))),
            "qkv: d_head = 64: the CTE variant (chosen because S = 256 > 96) writes NBSd only for "
            "d_head = 128");
  QkvParams p = Prefill(Case(1, 256, 1024, 2, 1, 128, kRms, kNone, kNbsd));
  p.d_head.reset();
  p.num_q_heads.reset();
  EXPECT_EQ(Rejection(p),
            "qkv: output_layout = NBSd: needs d_head (or num_q_heads and "
            "num_kv_heads to infer it)");
}

// §8: CTE with I = 4224 (> 4096) and S > 96; CTE with H = 24704 (> 24576).
TEST(QkvValidateTest, CteSizeLimits) {
  EXPECT_EQ(Rejection(Prefill(Case(1, 128, 256, 31, 1, 128, kNo))),
            "qkv: I = 4224: the CTE variant (chosen because S = 128 > 96) needs I <= 4096");
  EXPECT_EQ(Rejection(Prefill(Case(1, 97, 24704, 1, 1, 128, kNo))),
            "qkv: H = 24704: the CTE variant (chosen because S = 97 > 96) needs H <= 24576");
  // TKG takes both.
  ExpectAccepted(Decode(Case(1, 1, 256, 31, 1, 128, kNo)));
}

// §8: cos / sin given but fused_rope = false.
TEST(QkvValidateTest, RopeCachesNeedFusedRope) {
  QkvParams p = Prefill(WithRope(Case(1, 256, 1024, 2, 1, 128, kRms)));
  p.fused_rope = false;
  EXPECT_EQ(Rejection(p), "qkv: cos_cache: given without fused_rope");
  p.cos_cache = TensorView();
  EXPECT_EQ(Rejection(p), "qkv: sin_cache: given without fused_rope");
}

// §8: RMS_NORM_SKIP_GAMMA with S <= 96 routes to TKG, which rejects it; CTE takes it.
TEST(QkvValidateTest, SkipGammaRejectedByTkg) {
  EXPECT_EQ(Rejection(Decode(Case(1, 4, 1024, 2, 1, 128, kSkip))),
            "qkv: fused_norm_type = RMS_NORM_SKIP_GAMMA: not supported by the TKG variant (chosen "
            "because S = 4 <= 96 and B * S = 4 <= 128); use RMS_NORM with gamma");
  ExpectAccepted(Prefill(Case(1, 256, 1024, 2, 1, 128, kSkip)));
}

TEST(QkvValidateTest, ShapesOfInputAndWeights) {
  QkvParams p = Decode();
  p.input = TensorView();
  EXPECT_EQ(Rejection(p), "qkv: input: is required");
  p.input = Tensor({4, 1024});
  EXPECT_EQ(Rejection(p), "qkv: input = [4, 1024] bf16: must be a non-empty 3-D [B, S, H] tensor");
  p = Decode();
  p.input = Tensor({1, 4, 1024}, DType::kFp8E4M3);
  EXPECT_EQ(Rejection(p), "qkv: input dtype = fp8_e4m3: must be bf16, fp16 or fp32");
  p = Decode();
  p.fused_qkv_weights = TensorView();
  EXPECT_EQ(Rejection(p), "qkv: fused_qkv_weights: is required");
  p.fused_qkv_weights = Tensor({512, 512});
  EXPECT_EQ(Rejection(p), "qkv: fused_qkv_weights = [512, 512] bf16: its rows must equal H = 1024");
  p = Decode(Case(1, 4, 1000, 2, 1, 128, kNo));
  EXPECT_EQ(Rejection(p), "qkv: H = 1000: must be a multiple of 128 (the partitions)");
}

TEST(QkvValidateTest, BiasShape) {
  QkvParams p = Decode();
  p.bias = Tensor({2, 512});
  EXPECT_EQ(Rejection(p), "qkv: bias = [2, 512] bf16: must be [1, I] = [1, 512]");
  p = Prefill();
  p.bias = Tensor({512});
  EXPECT_EQ(Rejection(p), "qkv: bias = [512] bf16: must be [1, I] = [1, 512]");
}

TEST(QkvValidateTest, HeadGeometry) {
  QkvParams p = Decode();
  p.num_q_heads = 3;
  EXPECT_EQ(Rejection(p),
            "qkv: (num_q_heads + 2 * num_kv_heads) * d_head = (3 + 2 * 1) * 128 = "
            "640: must equal I = 512");
  p = Decode();
  p.d_head = 0;
  EXPECT_EQ(Rejection(p), "qkv: d_head = 0: must be positive");
}

TEST(QkvValidateTest, OutputLayouts) {
  QkvParams p = Decode();
  p.output_layout = QkvOutputLayout::kNBdS;
  EXPECT_EQ(Rejection(p), "qkv: output_layout = NBdS: no qkv kernel supports it; use BSD or NBSd");
  p = Prefill();
  p.output_layout = QkvOutputLayout::kNBdS;
  EXPECT_EQ(Rejection(p), "qkv: output_layout = NBdS: no qkv kernel supports it; use BSD or NBSd");
  p = Decode(Case(1, 4, 1024, 2, 1, 128, kRms, kNone, kNbsd));
  p.d_head.reset();
  EXPECT_EQ(Rejection(p), "qkv: output_layout = NBSd: needs d_head");
  p.num_q_heads.reset();
  p.d_head = 96;
  EXPECT_EQ(Rejection(p), "qkv: I = 512: NBSd needs I % d_head == 0 (d_head = 96)");
}

TEST(QkvValidateTest, NormParameters) {
  QkvParams p = Decode();
  p.gamma_norm_weights = TensorView();
  EXPECT_EQ(Rejection(p), "qkv: gamma_norm_weights: RMS_NORM needs it, shaped [1, H] = [1, 1024]");
  p.gamma_norm_weights = Tensor({1024});
  EXPECT_EQ(Rejection(p), "qkv: gamma_norm_weights = [1024] bf16: must be [1, H] = [1, 1024]");
  p = Prefill(Case(1, 256, 1024, 2, 1, 128, kLn));
  p.gamma_norm_weights = TensorView();
  EXPECT_EQ(Rejection(p),
            "qkv: gamma_norm_weights: LAYER_NORM needs it, shaped [1, H] = [1, 1024]");
  p = Prefill(Case(1, 256, 1024, 2, 1, 128, kNo));
  p.gamma_norm_weights = Tensor({1, 1024});
  EXPECT_EQ(Rejection(p),
            "qkv: gamma_norm_weights: given with fused_norm_type NO_NORM, which "
            "applies none");
  p = Prefill(Case(1, 256, 1024, 2, 1, 128, kSkip));
  p.gamma_norm_weights = Tensor({1, 1024});
  EXPECT_THAT(Rejection(p), HasSubstr("given with fused_norm_type RMS_NORM_SKIP_GAMMA"));
  p = Decode(Case(1, 4, 1024, 2, 1, 128, kRms, kNone, kBsd, false, false, false));
  p.layer_norm_bias = Tensor({1, 1024});
  EXPECT_EQ(Rejection(p),
            "qkv: layer_norm_bias: given with fused_norm_type RMS_NORM; only "
            "LAYER_NORM takes it");
  p = Prefill(Case(1, 256, 1024, 2, 1, 128, kLn, kNone, kBsd, false, false, true));
  p.layer_norm_bias = Tensor({1, 512});
  EXPECT_EQ(Rejection(p), "qkv: layer_norm_bias = [1, 512] bf16: must be [1, H] = [1, 1024]");
  p = Prefill();
  p.norm_eps.reset();
  EXPECT_EQ(Rejection(p), "qkv: norm_eps: RMS_NORM needs it");
  p = Decode();
  p.hidden_actual = 2048;
  EXPECT_EQ(Rejection(p), "qkv: hidden_actual = 2048: must be in [1, H = 1024]");
}

TEST(QkvValidateTest, FusedResidualAdd) {
  QkvParams p = Decode(Case(1, 4, 1024, 2, 1, 128, kRms, kNone, kBsd, true));
  p.attention_prev = TensorView();
  EXPECT_EQ(Rejection(p),
            "qkv: fused_residual_add = true: needs both mlp_prev and "
            "attention_prev; attention_prev is missing");
  p = Prefill(Case(1, 256, 1024, 2, 1, 128, kRms, kNone, kBsd, true));
  p.mlp_prev = Tensor({1, 256, 512});
  EXPECT_EQ(Rejection(p),
            "qkv: mlp_prev = [1, 256, 512] bf16: must be the input's [B, S, H] = "
            "[1, 256, 1024]");
  p.fused_residual_add = false;
  EXPECT_EQ(Rejection(p), "qkv: mlp_prev: given without fused_residual_add");
}

// On trn2 (no MX path) MX is refused naming the profile; STATIC_MX and ROW_MX are o_proj modes.
// The MX rules on an MX profile: tests/kernels/qkv/qkv_mx_test.cc.
TEST(QkvValidateTest, MxNeedsAnMxProfileAndStaticMxRowMxAreOprojModes) {
  for (QkvParams p : {Decode(), Prefill()}) {
    p.quantization_type = QuantizationType::kMx;
    EXPECT_THAT(Rejection(p, 2, QkvVariant::kAuto, ErrorCode::kNotSupported),
                StartsWith("qkv: quantization_type = MX: hardware profile 'trn2' has no MX path "
                           "(pe_mx_speedup = 0)"));
    for (QuantizationType q : {QuantizationType::kStaticMx, QuantizationType::kRowMx}) {
      p.quantization_type = q;
      EXPECT_THAT(Rejection(p, 2, QkvVariant::kAuto, ErrorCode::kNotSupported),
                  StartsWith(StrCat("qkv: quantization_type = ", QuantizationTypeName(q),
                                    ": the qkv kernels' MX path is MX")));
    }
  }
}

TEST(QkvValidateTest, StaticQuantization) {
  const QkvParams p = Decode(Case(1, 4, 1024, 2, 1, 128, kRms, kStatic));
  ExpectAccepted(p);
  EXPECT_EQ(Rejection(With(p, &QkvParams::qkv_w_scale)),
            "qkv: qkv_w_scale: quantization_type STATIC needs it");
  EXPECT_EQ(Rejection(With(p, &QkvParams::qkv_in_scale)),
            "qkv: qkv_in_scale: quantization_type STATIC needs it");
  EXPECT_EQ(Rejection(With(p, &QkvParams::qkv_w_scale, Tensor({2, 3}, DType::kFloat32))),
            "qkv: qkv_w_scale = [2, 3] fp32: STATIC needs [1, 3] or [128, 3] (the Q, K and V "
            "scales)");
  EXPECT_EQ(Rejection(With(p, &QkvParams::qkv_in_scale, Tensor({1, 2}, DType::kFloat32))),
            "qkv: qkv_in_scale = [1, 2] fp32: STATIC needs [1, 1] or [128, 1]");
  QkvParams no_d = p;
  no_d.d_head.reset();
  EXPECT_EQ(Rejection(no_d),
            "qkv: num_q_heads / num_kv_heads / d_head: quantization_type STATIC "
            "needs the head counts and d_head to find the Q, K and V column "
            "segments");
  EXPECT_EQ(Rejection(With(p, &QkvParams::fused_qkv_weights, Tensor({1024, 512}))),
            "qkv: fused_qkv_weights dtype = bf16: quantization_type STATIC needs fp8 weights");
  EXPECT_EQ(Rejection(With(Decode(), &QkvParams::fused_qkv_weights,
                           Tensor({1024, 512}, DType::kFp8E4M3))),
            "qkv: fused_qkv_weights dtype = fp8_e4m3: quantization_type NONE needs bf16, fp16 or "
            "fp32 weights");
}

TEST(QkvValidateTest, RowQuantization) {
  const QkvParams p = Decode(Case(1, 4, 1024, 2, 1, 128, kRms, kRow));
  ExpectAccepted(p);
  EXPECT_EQ(Rejection(With(p, &QkvParams::qkv_w_scale)),
            "qkv: qkv_w_scale: quantization_type ROW needs it");
  EXPECT_EQ(Rejection(With(p, &QkvParams::qkv_w_scale, Tensor({1, 3}, DType::kFloat32))),
            "qkv: qkv_w_scale = [1, 3] fp32: ROW needs [1, 512] or [128, 512] (one scale per "
            "column of I)");
  QkvParams c = Prefill(Case(1, 256, 1024, 2, 1, 128, kRms, kRow));
  EXPECT_EQ(Rejection(c),
            "qkv: quantization_type = ROW: the CTE variant (chosen because S = 256 > "
            "96) supports NONE and STATIC only");
}

TEST(QkvValidateTest, FusedRope) {
  const QkvParams p = Prefill(WithRope(Case(1, 256, 1024, 2, 1, 128, kRms)));
  ExpectAccepted(p);
  EXPECT_EQ(Rejection(With(p, &QkvParams::cos_cache)),
            "qkv: fused_rope = true: needs cos_cache, sin_cache, num_q_heads and num_kv_heads; "
            "cos_cache is missing");
  QkvParams no_kv = p;
  no_kv.num_kv_heads.reset();
  EXPECT_THAT(Rejection(no_kv), HasSubstr("num_kv_heads is missing"));
  EXPECT_EQ(Rejection(With(p, &QkvParams::sin_cache, Tensor({1, 256, 64}))),
            "qkv: sin_cache = [1, 256, 64] bf16: must be [B, S, d_head] = [1, 256, 128]");
  QkvParams odd = Prefill(WithRope(Case(1, 256, 1024, 2, 1, 87, kRms)));
  EXPECT_EQ(Rejection(odd),
            "qkv: d_head = 87: fused RoPE needs an even d_head <= 512 (one PSUM "
            "bank)");
  // fused_rope always dispatches to CTE; forcing TKG is rejected.
  QkvParams decode = Decode(WithRope(Case(1, 4, 1024, 2, 1, 128, kRms)));
  EXPECT_EQ(DispatchQkv(decode, Trn2Profile()).variant, QkvVariant::kCte);
  EXPECT_EQ(Rejection(decode, 2, QkvVariant::kTkg),
            "qkv: fused_rope = true: the TKG variant cannot fuse RoPE; the dispatcher sends it to "
            "CTE");
}

TEST(QkvValidateTest, ForcedTkgNeedsTokensOnThePartitions) {
  EXPECT_EQ(Rejection(Prefill(), 2, QkvVariant::kTkg),
            "qkv: B * S = 256: the TKG variant (requested instead of cte) keeps the tokens on the "
            "partitions, so B * S must be <= 128");
}

TEST(QkvValidateTest, QkvThrowsBeforeRunning) {
  LogicalCore lnc(2, Trn2Profile());
  const std::string m = ErrorMessageOf(ErrorCode::kInvalidArgument,
                                       [&] { Qkv(lnc, Decode(Case(1, 1, 3968, 2, 1, 128, kNo))); });
  EXPECT_EQ(m, "qkv: H = 3968: (H / 128) = 31 must be divisible by LNC = 2");
  EXPECT_EQ(lnc.now(), 0.0) << "nothing ran";
}

}  // namespace
}  // namespace nkisim::kernels::testing
