// The MX paths of output_projection_cte (MX, STATIC_MX, ROW_MX) on the trn3 profile: golden
// checks on grids like the reference's (reference-kernels.md §3.2: N*D 1024, 512, 128; a
// remainder chunk N*D = 640; D > 128; N > 17; unaligned S; H not a multiple of 512; LNC 1 and
// 2), the tiling's instruction counts, block scales that differ from block to block, fp32
// outputs against the golden to accumulation precision, LNC 1 vs 2, determinism and the
// disjoint-column writes. The rejections are in oproj_validation_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "kernels/common/mx_weights.h"
#include "kernels/output_projection/output_projection_cte.h"
#include "kernels/reference/output_projection_ref.h"
#include "tests/kernels/output_projection/oproj_test_util.h"

namespace nkisim::kernels::testing {
namespace {

// (B, S, H, N, D, bias[, quantization, LNC, dtype]) as the reference lists its CTE cases.
INSTANTIATE_TEST_SUITE_P(
    CteMxCases, OprojCaseTest,
    ::testing::Values(
        // MX (MX-fp4 weights, activations quantized per block online).
        Cte("mx_s128_h3072_n16_d64", 1, 128, 3072, 16, 64, true, kMx),
        Cte("mx_s512_h5120_n8", 1, 512, 5120, 8, 128, true, kMx),
        Cte("mx_s1024_h2048_n4", 1, 1024, 2048, 4, 128, false, kMx),
        Cte("mx_b2_s256_h1024_n1_lnc1", 2, 256, 1024, 1, 128, true, kMx, 1),
        Cte("mx_s128_h8192_n1", 1, 128, 8192, 1, 128, false, kMx),
        Cte("mx_remainder_nd640", 1, 128, 1024, 5, 128, true, kMx),
        Cte("mx_d384_s130_h1000", 1, 130, 1000, 1, 384, true, kMx),
        Cte("mx_n20_d32", 1, 64, 512, 20, 32, true, kMx),
        Cte("mx_fp16_lnc1", 1, 128, 1024, 4, 128, true, kMx, 1, DType::kFloat16),
        // STATIC_MX (per-tensor fp8_e4m3fn on the MX matmul, neutral block scales).
        Cte("static_mx_s128_h3072_n16_d64", 1, 128, 3072, 16, 64, true, kStaticMx),
        Cte("static_mx_s512_h5120_n8", 1, 512, 5120, 8, 128, true, kStaticMx),
        Cte("static_mx_n1_h8192", 1, 128, 8192, 1, 128, false, kStaticMx),
        Cte("static_mx_remainder_b2_lnc1", 2, 130, 1536, 5, 128, true, kStaticMx, 1),
        // ROW_MX (activations as MX, per-column fp8_e4m3fn weights).
        Cte("row_mx_s128_h3072_n16_d64", 1, 128, 3072, 16, 64, true, kRowMx),
        Cte("row_mx_remainder_s256", 1, 256, 2048, 5, 128, true, kRowMx),
        Cte("row_mx_b2_s256_lnc1", 2, 256, 1024, 1, 128, false, kRowMx, 1),
        Cte("row_mx_d256_s200_h1536", 1, 200, 1536, 3, 256, true, kRowMx),
        // N*D = 4096 (8 chunks): a core's 3072 columns take two SBUF weight blocks (2560 + 512),
        // S = 200 two row steps: the block pipeline switches blocks.
        Cte("static_mx_two_blocks_lnc1", 1, 200, 3072, 32, 128, true, kStaticMx, 1),
        Cte("row_mx_two_blocks_lnc1", 1, 200, 3072, 32, 128, true, kRowMx, 1)),
    CaseName);

TEST(CteMxTilingTest, ChunksOf512AccumulateInOnePsumBankPerGroup) {
  // N*D = 1024: 2 chunks of 128 partitions x 4 values; S = 512: 4 subtiles of 128 rows (one
  // quantize_mx per subtile and chunk); H / LNC = 1024: 2 groups of 512 columns per subtile.
  const OprojRun run = RunCase(Cte("mx", 1, 512, 2048, 8, 128, false, kMx));
  EXPECT_EQ(CountInstructions(*run.lnc, "nc_matmul_mx"), 2 * (4 * 2) * 2);
  EXPECT_EQ(CountInstructions(*run.lnc, "quantize_mx"), 2 * 4 * 2);
  EXPECT_EQ(CountInstructions(*run.lnc, "nc_matmul"), 0);  // no bias: no broadcast
}

TEST(CteMxTilingTest, ARemainderChunkTakesFewerPartitions) {
  // N*D = 640 = 512 + 128: a chunk of 128 partitions and one of 32 per group.
  const OprojRun run = RunCase(Cte("mx", 1, 128, 1024, 5, 128, false, kMx));
  EXPECT_EQ(CountInstructions(*run.lnc, "nc_matmul_mx"), 2 * 1 * 2);
  EXPECT_EQ(CountInstructions(*run.lnc, "quantize_mx"), 2 * 1 * 2);
  bool saw_32 = false;
  for (const InstructionRecord& r : run.lnc->core(0).timeline().records()) {
    if (std::string(r.name) == "nc_matmul_mx") {
      saw_32 |= std::string(r.shapes.data()).find("stationary[32,128]") != std::string::npos;
    }
  }
  EXPECT_TRUE(saw_32) << "no matmul on the 32-partition remainder chunk";
}

TEST(CteMxTilingTest, StaticMxQuantizesByTensorScalarNotQuantizeMx) {
  const OprojRun run = RunCase(Cte("static_mx", 1, 256, 1024, 4, 128, false, kStaticMx));
  EXPECT_EQ(CountInstructions(*run.lnc, "quantize_mx"), 0);
  EXPECT_EQ(CountInstructions(*run.lnc, "nc_matmul_mx"), 2 * 2 * 1);
}

// The fp32 output of a case without bias against the golden at fp32 accumulation precision:
// the kernel's only rounding besides the MX quantization (which the golden models) is the
// fp32 PSUM accumulation. Prints the worst element.
void ExpectFp32OutputExact(const OutputProjectionInputs& in, int lnc, const char* what) {
  LogicalCore core(lnc, Trn3Profile());
  OutputProjectionCteParams params;
  static_cast<OutputProjectionInputs&>(params) = in;
  const TensorView out = OutputProjectionCte(core, params, DType::kFloat32);
  const std::vector<float> golden = reference::OutputProjectionCteRef(
      in.attention, ReferenceInputs(in));
  const reference::Comparison cmp = reference::Compare(out.ToFloats(), golden, {0.0, 1e-5});
  std::cout << "    " << what << " fp32 out vs golden: " << cmp.ToString() << "\n";
  EXPECT_TRUE(cmp.pass()) << what << ": " << cmp.ToString();
}

TEST(CteMxExactnessTest, Fp32OutputsMatchTheGoldenToAccumulationPrecision) {
  for (QuantizationType q : {kMx, kStaticMx, kRowMx}) {
    const OprojTestCase c = Cte("exact", 1, 130, 2050, 10, 64, false, q);
    ExpectFp32OutputExact(MakeInputs(c), 2, QuantizationTypeName(q));
  }
}

// Values whose magnitude changes from one 32-value block of the contraction to the next (and
// from column to column for the weights), so every block gets its own E8M0 scale: a scale read
// from the wrong partition or column would show.
TEST(CteMxExactnessTest, BlockScalesFollowTheirBlocks) {
  const int64_t b = 1, n = 5, d = 128, s = 130, h = 1000, k = n * d;
  OutputProjectionInputs in;
  in.quantization = kMx;
  in.attention = TensorView::Create({b, n, d, s}, DType::kBFloat16, "attention");
  std::vector<float> a(static_cast<size_t>(k * s));
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t t = 0; t < s; ++t) {
      const double u = std::fmod(0.618034 * static_cast<double>(c * s + t + 1), 1.0);
      a[c * s + t] = static_cast<float>((u - 0.3) * std::ldexp(1.0, static_cast<int>((c / 32 + t) % 11) - 5));
    }
  }
  in.attention.FromFloats(a);
  TensorView w = TensorView::Create({k, h}, DType::kFloat32, "w");
  std::vector<float> wv(static_cast<size_t>(k * h));
  for (int64_t r = 0; r < k; ++r) {
    for (int64_t c = 0; c < h; ++c) {
      const double u = std::fmod(0.754877 * static_cast<double>(r * h + c + 1), 1.0);
      wv[r * h + c] = static_cast<float>((u - 0.5) * std::ldexp(1.0, static_cast<int>((r / 32 * 3 + c) % 13) - 6));
    }
  }
  w.FromFloats(wv);
  const MxPackedWeights packed =
      PackMxWeights(w, MxWeightLayout::kContiguous, DType::kFp4E2M1FNx4, "weight");
  in.weight = packed.data;
  in.weight_scale = packed.scales;
  ExpectFp32OutputExact(in, 2, "MX varied block scales");
  ExpectFp32OutputExact(in, 1, "MX varied block scales, LNC 1");
}

TEST(CteMxOutputTest, DefaultOutputIsBf16AsTheReference) {
  const OprojTestCase c = Cte("fp16", 1, 128, 512, 1, 128, true, kMx, 2, DType::kFloat16);
  const OprojRun run = RunCase(c);
  EXPECT_EQ(run.out.dtype(), DType::kBFloat16);
  EXPECT_EQ(run.out.shape(), (Shape{1, 128, 512}));
}

TEST(CteMxLncTest, OneAndTwoCoresAgreeBitForBit) {
  for (QuantizationType q : {kMx, kStaticMx, kRowMx}) {
    const OprojTestCase two = Cte("lnc", 1, 320, 3072, 5, 128, true, q);
    OprojTestCase one = two;
    one.lnc = 1;
    const OutputProjectionInputs inputs = MakeInputs(two);
    EXPECT_EQ(RunCase(one, inputs).y, RunCase(two, inputs).y) << QuantizationTypeName(q);
  }
}

TEST(CteMxDeterminismTest, TenRunsAreBitIdentical) {
  const OprojTestCase c = Cte("row_mx", 2, 130, 1000, 5, 128, true, kRowMx);
  const OutputProjectionInputs inputs = MakeInputs(c);
  const std::vector<float> first = RunCase(c, inputs).y;
  for (int run = 1; run < 10; ++run) EXPECT_EQ(RunCase(c, inputs).y, first) << "run " << run;
}

TEST(CteMxLncTest, CoresWriteDisjointColumnsWithoutAnyTransfer) {
  const OprojRun run = RunCase(Cte("mx", 1, 256, 3072, 8, 128, true, kMx));
  ExpectNoCoreToCoreTraffic(*run.lnc);
}

}  // namespace
}  // namespace nkisim::kernels::testing
