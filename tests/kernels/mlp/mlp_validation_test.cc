// ValidateMlp refuses what the kernels cannot run, with Error(kInvalidArgument) naming the operand
// and the rule, before any instruction is issued.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "runtime/error.h"
#include "tests/kernels/mlp/mlp_test_util.h"

namespace nkisim::kernels::testing {
namespace {

MlpParams Base(QuantizationType quant = QuantizationType::kNone, int64_t tokens = 4) {
  MlpCaseOptions o;
  o.b = tokens;
  o.h = 256;
  o.i = 192;
  o.quant = quant;
  return MakeMlpCase(o);
}

// Expects ValidateMlp(p, lnc) to throw kInvalidArgument whose message contains `text`.
void ExpectRejected(const MlpParams& p, const std::string& text, int lnc = 2) {
  try {
    ValidateMlp(p, lnc);
    ADD_FAILURE() << "accepted; expected: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(MlpValidationTest, AcceptsTheBaseCases) {
  EXPECT_NO_THROW(ValidateMlp(Base(), 2));
  EXPECT_NO_THROW(ValidateMlp(Base(QuantizationType::kStatic), 2));
  EXPECT_NO_THROW(ValidateMlp(Base(QuantizationType::kRow), 1));
}

TEST(MlpValidationTest, RefusesShapesNamingOperandAndRule) {
  MlpCaseOptions o;
  o.h = 200;
  ExpectRejected(MakeMlpCase(o), "mlp: H = 200: must be a multiple of 128 (the partitions)");
  MlpParams p = Base();
  p.up_w = TensorView::Create({256, 128}, DType::kBFloat16, "up_w");
  ExpectRejected(p, "mlp: up_w = [256, 128] bf16: must be gate_w's [H, I] = [256, 192]");
  p = Base();
  p.down_w = TensorView::Create({256, 192}, DType::kBFloat16, "down_w");
  ExpectRejected(p, "mlp: down_w = [256, 192] bf16: must be [I, H] = [192, 256]");
  p = Base();
  p.hidden = TensorView::Create({4, 256}, DType::kBFloat16, "hidden");
  ExpectRejected(p, "mlp: hidden = [4, 256] bf16: must be a non-empty 3-D [B, S, H] tensor");
  p = Base();
  p.gate_bias = TensorView::Create({1, 256}, DType::kBFloat16, "gate_bias");
  ExpectRejected(p, "mlp: gate_bias = [1, 256] bf16: must be [1, I] = [1, 192]");
  p = Base();
  p.residual = TensorView::Create({4, 2, 256}, DType::kBFloat16, "residual");
  ExpectRejected(p, "mlp: residual = [4, 2, 256] bf16: must be hidden's [B, S, H]");
}

TEST(MlpValidationTest, RefusesVariantLimits) {
  MlpParams p = Base(QuantizationType::kNone, 200);
  p.variant = MlpVariant::kTkg;
  ExpectRejected(p,
                 "mlp: B * S = 200: the TKG variant (requested instead of cte) keeps the "
                 "tokens on the partitions, so B * S must be <= 128");
  MlpCaseOptions o;
  o.h = 384;  // 3 subtiles do not split over 2 cores
  ExpectRejected(MakeMlpCase(o), "mlp: H = 384: the TKG variant shards H / 128 = 3 subtiles");
  EXPECT_NO_THROW(ValidateMlp(MakeMlpCase(o), 1));
  ExpectRejected(Base(), "mlp: LNC = 3: must be 1 or 2", 3);
}

TEST(MlpValidationTest, RefusesQuantizationMisuse) {
  MlpParams p = Base(QuantizationType::kStatic, 200);  // B * S 200: CTE
  ExpectRejected(p,
                 "mlp: quantization = STATIC: fp8 weights run in the TKG variant only; this "
                 "call runs CTE (B * S = 200 > 96)");
  p = Base(QuantizationType::kRow);
  p.down_w_scale = TensorView();
  ExpectRejected(p, "mlp: down_w_scale: quantization ROW needs it");
  p = Base(QuantizationType::kRow);
  p.down_w_scale = p.up_w_scale;  // [128, I], not [128, H]
  ExpectRejected(p,
                 "mlp: down_w_scale = [128, 192] fp32: ROW needs a float [1, 256] or [128, 256]");
  p = Base(QuantizationType::kStatic);
  p.down_in_scale = TensorView();
  ExpectRejected(p, "mlp: down_in_scale: quantization STATIC needs it");
  p = Base();
  p.quantization = QuantizationType::kRow;
  ExpectRejected(p, "mlp: gate_w dtype = bf16: ROW needs fp8 weights");
  p = Base(QuantizationType::kRow);
  p.quantization = QuantizationType::kNone;
  ExpectRejected(p, "mlp: gate_w dtype = fp8_e4m3: quantization NONE needs bf16, fp16 or fp32");
  p = Base();
  p.quantization = QuantizationType::kMx;
  ExpectRejected(p, "mlp: quantization = MX: the MLP supports NONE, STATIC and ROW");
}

TEST(MlpValidationTest, RefusesNormAndResidualMisuse) {
  MlpParams p = Base();
  p.gamma = TensorView();
  ExpectRejected(p, "mlp: gamma: RMS_NORM needs it, shaped [1, H]");
  p = Base();
  p.beta = p.gamma;
  ExpectRejected(p, "mlp: beta: given with norm_type RMS_NORM; only LAYER_NORM takes it");
  p = Base();
  p.store_fused_hidden = true;
  ExpectRejected(p, "mlp: store_fused_hidden = true: needs residual");
  MlpCaseOptions o;
  o.b = 25;
  o.h = 256;
  o.residual = true;
  ExpectRejected(MakeMlpCase(o), "mlp: B * S = 25: with residual, RMS_NORM and LNC = 2");
}

TEST(MlpValidationTest, MlpRefusesBeforeRunning) {
  MlpCaseOptions o;
  o.h = 200;
  LogicalCore lnc(2, Trn2Profile());
  EXPECT_THROW(Mlp(lnc, MakeMlpCase(o)), Error);
  EXPECT_EQ(lnc.now(), 0.0);
}

}  // namespace
}  // namespace nkisim::kernels::testing
