// Every rejection of the output-projection kernels: the reference's asserts (reference-kernels.md
// §3.2 / §3.3 validation lists and §8 negative cases), the seed's ROW-in-CTE rule, the CTE MX
// modes' rules (and their refusal on a profile without the MX path), TKG's refusal of the MX
// modes, and this simulator's refusals of silently ignored inputs. Each test checks the error
// code and the words naming the parameter, the value and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kernels/output_projection/output_projection_cte.h"
#include "kernels/output_projection/output_projection_tkg.h"
#include "runtime/hardware_profile.h"
#include "tests/kernels/output_projection/oproj_test_util.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::kernels {
namespace {

using ::nkisim::testing::ErrorMessageOf;
using ::nkisim::testing::InvalidArgumentMessage;
using ::testing::AllOf;
using ::testing::HasSubstr;

TensorView T(const Shape& shape, DType dtype = DType::kBFloat16) {
  return TensorView::Create(shape, dtype, "t");
}

// A valid CTE call: B = 1, N heads of D, S rows, H columns; tests break one thing each.
OutputProjectionCteParams Cte(int64_t n = 2, int64_t d = 8, int64_t s = 16, int64_t h = 256) {
  OutputProjectionCteParams p;
  p.attention = T({1, n, d, s});
  p.weight = T({n * d, h});
  p.bias = T({1, h});
  return p;
}

TensorView Run(LogicalCore& core, const OutputProjectionCteParams& p) {
  return OutputProjectionCte(core, p);
}
TensorView Run(LogicalCore& core, const OutputProjectionTkgParams& p) {
  return OutputProjectionTkg(core, p);
}

// The message of the error that running p on lnc cores throws (a test failure when it throws
// none or another code).
template <typename Params>
std::string ErrorOf(const Params& p, int lnc = 2, ErrorCode code = ErrorCode::kInvalidArgument,
                    const HardwareProfile& profile = Trn2Profile()) {
  return ErrorMessageOf(code, [&] {
    LogicalCore core(lnc, profile);
    Run(core, p);
  });
}

OutputProjectionCteParams CteStatic() {
  OutputProjectionCteParams p = Cte();
  p.quantization = QuantizationType::kStatic;
  p.weight = T(p.weight.shape(), DType::kFp8E4M3);
  p.input_scale = T({128, 1}, DType::kFloat32);
  p.weight_scale = T({128, 1}, DType::kFloat32);
  return p;
}

TEST(CteValidationTest, ValidCallRuns) {
  LogicalCore core(2, Trn2Profile());
  EXPECT_EQ(OutputProjectionCte(core, Cte()).shape(), (Shape{1, 16, 256}));
  LogicalCore core2(2, Trn2Profile());
  EXPECT_EQ(OutputProjectionCte(core2, CteStatic()).shape(), (Shape{1, 16, 256}));
}

TEST(CteValidationTest, ReferenceLimits) {
  EXPECT_THAT(ErrorOf(Cte(1, 129)),
              AllOf(HasSubstr("output_projection_cte: D = 129: must be <= 128"),
                    HasSubstr("contraction on the partitions")));
  EXPECT_THAT(ErrorOf(Cte(18, 8)), HasSubstr("output_projection_cte: N = 18: must be <= 17"));
  EXPECT_THAT(ErrorOf(Cte(1, 8, 16, 20707)),
              HasSubstr("output_projection_cte: H = 20707: must be <= 20705"));
  EXPECT_THAT(ErrorOf(Cte(1, 8, 131073, 2)),
              HasSubstr("output_projection_cte: B * S = 131073: must be <= 131072"));
  EXPECT_THAT(ErrorOf(Cte(2, 8, 16, 4097)),
              HasSubstr("output_projection_cte: H = 4097: must be divisible by LNC = 2"));
  LogicalCore one(1, Trn2Profile());
  EXPECT_EQ(OutputProjectionCte(one, Cte(2, 8, 16, 4097)).shape(), (Shape{1, 16, 4097}));
}

TEST(CteValidationTest, RowIsRefusedExplicitly) {
  OutputProjectionCteParams p = CteStatic();
  p.quantization = QuantizationType::kRow;
  EXPECT_THAT(ErrorOf(p), AllOf(HasSubstr("quantization_type = ROW"),
                                HasSubstr("the CTE kernel has no per-row dequantization"),
                                HasSubstr("silently ignores")));
}

TEST(CteValidationTest, MxModesNeedAProfileWithTheMxPath) {
  for (QuantizationType q :
       {QuantizationType::kMx, QuantizationType::kStaticMx, QuantizationType::kRowMx}) {
    OutputProjectionCteParams p = CteStatic();
    p.quantization = q;
    EXPECT_THAT(ErrorOf(p, 2, ErrorCode::kNotSupported),
                AllOf(HasSubstr(StrCat("output_projection_cte: quantization_type = ",
                                       QuantizationTypeName(q), ": hardware profile 'trn2' has no "
                                       "MX path (pe_mx_speedup = 0)")),
                      HasSubstr("configs/hardware/trn3.textproto")));
  }
}

// A valid CTE call of an MX mode on trn3: B = 1, N heads of D, S rows, H columns, zero-filled
// tensors of the mode's dtypes and shapes; tests break one thing each.
OutputProjectionCteParams CteMx(QuantizationType q, int64_t n = 4, int64_t d = 64,
                                int64_t s = 16, int64_t h = 256) {
  OutputProjectionCteParams p;
  p.quantization = q;
  const int64_t k = n * d;
  p.attention = T({1, n, d, s});
  p.bias = T({1, h});
  p.weight = T({k / 4, h}, q == QuantizationType::kMx ? DType::kFp4E2M1FNx4 : DType::kFp8E4M3FNx4);
  switch (q) {
    case QuantizationType::kMx:
      p.weight_scale = T({k / 32, h}, DType::kUInt8);
      break;
    case QuantizationType::kStaticMx:
      p.input_scale = T({128, 1}, DType::kFloat32);
      p.weight_scale = T({128, 1}, DType::kFloat32);
      break;
    default:
      p.weight_scale = T({128, h}, DType::kFloat32);
  }
  return p;
}

std::string MxErrorOf(const OutputProjectionCteParams& p, int lnc = 2) {
  return ErrorOf(p, lnc, ErrorCode::kInvalidArgument, testing::Trn3Profile());
}

constexpr QuantizationType kMxModes[] = {QuantizationType::kMx, QuantizationType::kStaticMx,
                                         QuantizationType::kRowMx};

TEST(CteMxValidationTest, ValidCallsRunAndAllowDAbove128AndNAbove17) {
  for (QuantizationType q : kMxModes) {
    for (const OutputProjectionCteParams& p :
         {CteMx(q), CteMx(q, 1, 256), CteMx(q, 20, 32), CteMx(q, 5, 128, 130, 1000)}) {
      LogicalCore core(2, testing::Trn3Profile());
      const TensorView out = OutputProjectionCte(core, p);
      EXPECT_EQ(out.shape(), (Shape{1, p.attention.dim(3), p.weight.dim(1)}))
          << QuantizationTypeName(q);
      EXPECT_EQ(out.dtype(), DType::kBFloat16);
    }
  }
}

TEST(CteMxValidationTest, ContractionMustBeWholeQuadrantsOf128Values) {
  for (QuantizationType q : kMxModes) {
    const std::string mode = QuantizationTypeName(q);
    EXPECT_THAT(MxErrorOf(CteMx(q, 1, 64)),
                HasSubstr("output_projection_cte: N * D = 64: must be >= 128 for "
                          "quantization_type " + mode));
    EXPECT_THAT(MxErrorOf(CteMx(q, 3, 64)),
                HasSubstr("N * D = 192: must be a multiple of 128 for quantization_type " + mode));
  }
}

TEST(CteMxValidationTest, AttentionMustBeBf16OrFp16AndContiguous) {
  OutputProjectionCteParams p = CteMx(QuantizationType::kMx);
  p.attention = T(p.attention.shape(), DType::kFloat32);
  EXPECT_THAT(MxErrorOf(p), HasSubstr("attention dtype fp32: quantization_type MX needs bf16 or "
                                      "fp16 attention"));
  p = CteMx(QuantizationType::kRowMx);
  p.attention = T({1, 16, 64, 4}).permute({0, 3, 2, 1});
  EXPECT_THAT(MxErrorOf(p), HasSubstr("attention view [1, 4, 64, 16]"));
  LogicalCore core(2, testing::Trn3Profile());
  p = CteMx(QuantizationType::kStaticMx);
  p.attention = T(p.attention.shape(), DType::kFloat16);
  EXPECT_EQ(OutputProjectionCte(core, p).dtype(), DType::kBFloat16);
}

TEST(CteMxValidationTest, WeightDtypeAndShape) {
  OutputProjectionCteParams p = CteMx(QuantizationType::kMx);
  p.weight = T(p.weight.shape(), DType::kFp8E4M3FNx4);
  EXPECT_THAT(MxErrorOf(p), HasSubstr("weight dtype fp8_e4m3fn_x4: quantization_type MX needs "
                                      "fp4_e2m1fn_x4 weights"));
  p = CteMx(QuantizationType::kStaticMx);
  p.weight = T(p.weight.shape(), DType::kFp4E2M1FNx4);
  EXPECT_THAT(MxErrorOf(p), HasSubstr("weight dtype fp4_e2m1fn_x4: quantization_type STATIC_MX "
                                      "needs fp8_e4m3fn_x4 weights"));
  p = CteMx(QuantizationType::kRowMx);
  p.weight = T({256, 256}, DType::kFp8E4M3FN);
  EXPECT_THAT(MxErrorOf(p), HasSubstr("weight dtype fp8_e4m3fn: quantization_type ROW_MX needs "
                                      "fp8_e4m3fn_x4 weights"));
  p = CteMx(QuantizationType::kMx);
  p.weight = T({256, 256}, DType::kFp4E2M1FNx4);
  EXPECT_THAT(MxErrorOf(p), HasSubstr("weight shape [256, 256]: must be [N * D / 4, H] (4 values "
                                      "of N*D per x4 element) = [64, 256]"));
}

TEST(CteMxValidationTest, MxScalesAreUint8BlockScalesAndNoInputScale) {
  OutputProjectionCteParams p = CteMx(QuantizationType::kMx);
  p.weight_scale = TensorView();
  EXPECT_THAT(MxErrorOf(p), HasSubstr("weight_scale is missing: must be [N * D / 32, H] for MX"));
  p = CteMx(QuantizationType::kMx);
  p.weight_scale = T({16, 256}, DType::kUInt8);
  EXPECT_THAT(MxErrorOf(p), HasSubstr("weight_scale shape [16, 256]: must be [N * D / 32, H] for "
                                      "MX (one E8M0 scale per 32 values of N*D and column) = "
                                      "[8, 256]"));
  p = CteMx(QuantizationType::kMx);
  p.weight_scale = T({8, 256}, DType::kFloat32);
  EXPECT_THAT(MxErrorOf(p), HasSubstr("weight_scale dtype fp32: must be uint8 for MX"));
  p = CteMx(QuantizationType::kMx);
  p.input_scale = T({128, 1}, DType::kFloat32);
  EXPECT_THAT(MxErrorOf(p), HasSubstr("input_scale [128, 1] given with quantization_type MX, which "
                                      "does not use it"));
}

TEST(CteMxValidationTest, StaticMxNeedsBothScalesOfShape128By1) {
  OutputProjectionCteParams p = CteMx(QuantizationType::kStaticMx);
  p.input_scale = TensorView();
  EXPECT_THAT(MxErrorOf(p),
              HasSubstr("input_scale is missing: must be (partitions, 1) for STATIC_MX = [128, 1]"));
  p = CteMx(QuantizationType::kStaticMx);
  p.weight_scale = T({128, 2}, DType::kFloat32);
  EXPECT_THAT(MxErrorOf(p), HasSubstr("weight_scale shape [128, 2]: must be (partitions, 1) for "
                                      "STATIC_MX = [128, 1]"));
  p = CteMx(QuantizationType::kStaticMx);
  p.weight_scale = T({128, 1}, DType::kInt32);
  EXPECT_THAT(MxErrorOf(p), HasSubstr("weight_scale dtype int32: must be a float type"));
}

TEST(CteMxValidationTest, RowMxNeedsColumnScalesAndNoInputScale) {
  OutputProjectionCteParams p = CteMx(QuantizationType::kRowMx);
  p.weight_scale = T({128, 1}, DType::kFloat32);
  EXPECT_THAT(MxErrorOf(p), HasSubstr("weight_scale shape [128, 1]: must be (partitions, H) for "
                                      "ROW_MX (s_w[h], rows identical) = [128, 256]"));
  p = CteMx(QuantizationType::kRowMx);
  p.weight_scale = TensorView();
  EXPECT_THAT(MxErrorOf(p), HasSubstr("weight_scale is missing"));
  p = CteMx(QuantizationType::kRowMx);
  p.input_scale = T({128, 1}, DType::kFloat32);
  EXPECT_THAT(MxErrorOf(p), HasSubstr("input_scale [128, 1] given with quantization_type ROW_MX, "
                                      "which does not use it"));
}

TEST(CteMxValidationTest, ReferenceLimitsAndLnc) {
  for (QuantizationType q : kMxModes) {
    EXPECT_THAT(MxErrorOf(CteMx(q, 4, 64, 16, 1025)),
                HasSubstr("H = 1025: must be divisible by LNC = 2"))
        << QuantizationTypeName(q);
    LogicalCore one(1, testing::Trn3Profile());
    EXPECT_EQ(OutputProjectionCte(one, CteMx(q, 4, 64, 16, 1025)).shape(), (Shape{1, 16, 1025}));
  }
  EXPECT_THAT(MxErrorOf(CteMx(QuantizationType::kMx, 2, 64, 131073, 2)),
              HasSubstr("B * S = 131073: must be <= 131072"));
  EXPECT_THAT(MxErrorOf(CteMx(QuantizationType::kMx, 2, 64, 16, 20706)),
              HasSubstr("H = 20706: must be <= 20705"));
  OutputProjectionCteParams p = CteMx(QuantizationType::kMx);
  p.bias = T({1, 255});
  EXPECT_THAT(MxErrorOf(p), HasSubstr("bias shape [1, 255]: must be [1, H] = [1, 256]"));
  p = CteMx(QuantizationType::kMx);
  p.out = T({1, 16, 255});
  EXPECT_THAT(InvalidArgumentMessage(
                  [&] { ValidateOutputProjectionCte(p, 2, testing::Trn3Profile()); }),
              HasSubstr("out shape [1, 16, 255]: must be [B, S, H] = [1, 16, 256]"));
}

TEST(CteValidationTest, StaticNeedsBothScalesOfShape128By1AndFp8Weights) {
  OutputProjectionCteParams p = CteStatic();
  p.input_scale = TensorView();
  EXPECT_THAT(ErrorOf(p), HasSubstr("input_scale is missing: must be (partitions, 1) for STATIC"));
  p = CteStatic();
  p.weight_scale = T({128, 2}, DType::kFloat32);
  EXPECT_THAT(ErrorOf(p), HasSubstr("weight_scale shape [128, 2]: must be (partitions, 1) for "
                                    "STATIC = [128, 1]"));
  p = CteStatic();
  p.weight = T(p.weight.shape());
  EXPECT_THAT(ErrorOf(p),
              HasSubstr("weight dtype bf16: quantization_type STATIC needs fp8 weights"));
}

TEST(CteValidationTest, NoneRefusesWhatItWouldIgnore) {
  OutputProjectionCteParams p = Cte();
  p.weight_scale = T({128, 1}, DType::kFloat32);
  EXPECT_THAT(
      ErrorOf(p),
      HasSubstr("weight_scale [128, 1] given with quantization_type NONE, which does not use it"));
  p = Cte();
  p.weight = T(p.weight.shape(), DType::kFp8E4M3);
  EXPECT_THAT(ErrorOf(p),
              HasSubstr("weight dtype fp8_e4m3: fp8 weights need quantization_type STATIC"));
}

TEST(CteValidationTest, Shapes) {
  OutputProjectionCteParams p = Cte();
  p.weight = T({15, 256});
  EXPECT_THAT(ErrorOf(p), HasSubstr("weight shape [15, 256]: must be [N * D, H] = [16, 256]"));
  p = Cte();
  p.bias = T({2, 256});
  EXPECT_THAT(ErrorOf(p), HasSubstr("bias shape [2, 256]: must be [1, H] = [1, 256]"));
  p = Cte();
  p.attention = T({2, 8, 16});
  EXPECT_THAT(ErrorOf(p), HasSubstr("attention shape [2, 8, 16]: must be [B, N, D, S] (rank 4)"));
  p = Cte();
  p.attention = T({1, 2, 8, 16}, DType::kInt32);
  EXPECT_THAT(ErrorOf(p), HasSubstr("attention dtype int32: must be a float type"));
  p = Cte();
  p.attention = T({1, 16, 8, 2}).permute({0, 3, 2, 1});
  EXPECT_THAT(ErrorOf(p), HasSubstr("attention view [1, 2, 8, 16] with strides [256, 1, 2, 16]: "
                                    "must be contiguous"));
  p = Cte();
  p.out = T({1, 16, 255});
  EXPECT_THAT(InvalidArgumentMessage([&] { ValidateOutputProjectionCte(p, 2, Trn2Profile()); }),
              HasSubstr("out shape [1, 16, 255]: must be [B, S, H] = [1, 16, 256]"));
}

// A valid TKG call: D, B = 4, N, S = 1, H.
OutputProjectionTkgParams Tkg(int64_t n = 2, int64_t d = 64, int64_t h = 512,
                              bool transpose_out = false) {
  OutputProjectionTkgParams p;
  p.attention = T({d, 4, n, 1});
  p.weight = T({n * d, h});
  p.bias = T({1, h});
  p.transpose_out = transpose_out;
  return p;
}

OutputProjectionTkgParams TkgQuantized(QuantizationType q) {
  OutputProjectionTkgParams p = Tkg();
  p.quantization = q;
  p.weight = T(p.weight.shape(), DType::kFp8E4M3);
  const bool row = q == QuantizationType::kRow;
  p.weight_scale = T({128, row ? p.weight.dim(1) : 1}, DType::kFloat32);
  if (!row) p.input_scale = T({128, 1}, DType::kFloat32);
  return p;
}

TEST(TkgValidationTest, ValidCallsRun) {
  for (const OutputProjectionTkgParams& p :
       {Tkg(), TkgQuantized(QuantizationType::kStatic), TkgQuantized(QuantizationType::kRow)}) {
    LogicalCore core(2, Trn2Profile());
    EXPECT_EQ(OutputProjectionTkg(core, p).shape(), (Shape{4, 512}));
  }
}

TEST(TkgValidationTest, ReferenceAsserts) {
  OutputProjectionTkgParams p = Tkg();
  p.weight = T({127, 512});
  EXPECT_THAT(ErrorOf(p), HasSubstr("output_projection_tkg: weight shape [127, 512]: must be "
                                    "[N * D, H] = [128, 512]"));
  p = Tkg();
  p.bias = T({1, 511});
  EXPECT_THAT(ErrorOf(p), HasSubstr("bias shape [1, 511]: must be [1, H] = [1, 512]"));
  EXPECT_THAT(ErrorOf(Tkg(2, 64, 601)), HasSubstr("H = 601: must be divisible by LNC = 2"));
  EXPECT_THAT(ErrorOf(Tkg(1, 129)), HasSubstr("D = 129: must be <= 128"));
}

TEST(TkgValidationTest, MxModesAreRefusedAsTheReferenceDoes) {
  for (QuantizationType q :
       {QuantizationType::kMx, QuantizationType::kStaticMx, QuantizationType::kRowMx}) {
    for (const HardwareProfile* profile : {&Trn2Profile(), &testing::Trn3Profile()}) {
      EXPECT_THAT(ErrorOf(TkgQuantized(q), 2, ErrorCode::kInvalidArgument, *profile),
                  AllOf(HasSubstr(StrCat("output_projection_tkg: quantization_type = ",
                                         QuantizationTypeName(q),
                                         ": the TKG kernel has no MX path")),
                        HasSubstr("output_projection_tkg.py:388-393")));
    }
  }
}

TEST(TkgValidationTest, QuantizationModes) {
  OutputProjectionTkgParams p = TkgQuantized(QuantizationType::kStatic);
  p.input_scale = TensorView();
  EXPECT_THAT(ErrorOf(p), HasSubstr("input_scale is missing: must be (partitions, 1) for STATIC"));
  p = TkgQuantized(QuantizationType::kStatic);
  p.weight_scale = T({64, 1}, DType::kFloat32);
  EXPECT_THAT(ErrorOf(p), HasSubstr("weight_scale shape [64, 1]: must be (partitions, 1)"));
  p = TkgQuantized(QuantizationType::kRow);
  p.weight_scale = T({128, 1}, DType::kFloat32);
  EXPECT_THAT(ErrorOf(p), HasSubstr("weight_scale shape [128, 1]: must be (partitions, H) for "
                                    "ROW = [128, 512]"));
  p = TkgQuantized(QuantizationType::kRow);
  p.weight_scale = TensorView();
  EXPECT_THAT(ErrorOf(p), HasSubstr("weight_scale is missing"));
  p = TkgQuantized(QuantizationType::kRow);
  p.input_scale = T({128, 1}, DType::kFloat32);
  EXPECT_THAT(
      ErrorOf(p),
      HasSubstr("input_scale [128, 1] given with quantization_type ROW, which does not use it"));
  p = TkgQuantized(QuantizationType::kRow);
  p.weight = T(p.weight.shape());
  EXPECT_THAT(ErrorOf(p), HasSubstr("weight dtype bf16: quantization_type ROW needs fp8 weights"));
}

TEST(TkgValidationTest, TransposedOutputLimits) {
  // The reference's manual case: (B, N, S, D) = (4, 10, 8, 128), H = 602.
  auto manual = [](bool transpose_out) {
    OutputProjectionTkgParams p = Tkg(10, 128, 602, transpose_out);
    p.attention = T({128, 4, 10, 8});
    return p;
  };
  EXPECT_THAT(ErrorOf(manual(true)),
              HasSubstr("H = 602: transpose_out needs H divisible by 128 * LNC = 256"));
  EXPECT_THAT(ErrorOf(manual(true), 1),
              HasSubstr("H = 602: transpose_out needs H divisible by 128 * LNC = 128"));
  LogicalCore core(2, Trn2Profile());
  EXPECT_EQ(OutputProjectionTkg(core, manual(false)).shape(), (Shape{32, 602}));

  EXPECT_THAT(
      ErrorOf(Tkg(21, 1, 8192, true)),
      HasSubstr("N * H = 172032: must be <= 163840 (the reference kernel's transpose_out limit)"));
  OutputProjectionTkgParams fp32 = Tkg(11, 1, 8192, true);
  fp32.attention = T(fp32.attention.shape(), DType::kFloat32);
  fp32.weight = T(fp32.weight.shape(), DType::kFloat32);
  EXPECT_THAT(ErrorOf(fp32), HasSubstr("N * H = 90112: must be <= 81920 (the reference kernel's "
                                       "transpose_out limit for fp32 weights)"));
}

TEST(TkgValidationTest, OutputShapeAndDtype) {
  OutputProjectionTkgParams p = Tkg();
  p.out = T({4, 512}, DType::kFloat32);
  EXPECT_THAT(InvalidArgumentMessage([&] { ValidateOutputProjectionTkg(p, 2, Trn2Profile()); }),
              HasSubstr("out dtype fp32: must be the attention dtype bf16"));
  p.out = T({2, 2, 512});
  EXPECT_THAT(InvalidArgumentMessage([&] { ValidateOutputProjectionTkg(p, 2, Trn2Profile()); }),
              HasSubstr("out shape [2, 2, 512]: must be [B*S, H] = [4, 512]"));
}

}  // namespace
}  // namespace nkisim::kernels
