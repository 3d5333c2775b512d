// output_projection_cte on the reference's case list (docs: reference-kernels.md §3.2, §8):
// packing g = 8 / 1 / 4, unaligned S, H not a multiple of 128, STATIC with double-row pairs and
// an odd head; plus LNC 1 vs 2, determinism and the tiling's matmul counts.
#include <gtest/gtest.h>

#include "kernels/output_projection/output_projection_cte.h"
#include "tests/kernels/output_projection/oproj_test_util.h"

namespace nkisim::kernels::testing {
namespace {

// (B, S, H, N, D, bias) as the reference lists them.
INSTANTIATE_TEST_SUITE_P(
    CteReferenceCases, OprojCaseTest,
    ::testing::Values(Cte("s16_h5120_n10", 1, 16, 5120, 10, 128, true),
                      Cte("pack_g8", 1, 128, 3072, 16, 10, true),
                      Cte("pack_g1_n17", 1, 128, 3072, 17, 10, true),
                      Cte("pack_g4", 1, 128, 3072, 8, 32, true),
                      Cte("unaligned_s192", 1, 192, 1024, 1, 128, false),
                      Cte("unaligned_s320_h2050", 1, 320, 2050, 2, 128, false),
                      Cte("draft_d64", 1, 1024, 1024, 1, 64, false),
                      Cte("n16_d64_lnc1", 1, 128, 3072, 16, 64, true, kNone, 1),
                      Cte("batches3_fp32", 3, 100, 768, 4, 32, true, kNone, 2, DType::kFloat32),
                      Cte("static_n1", 1, 128, 8192, 1, 128, false, kStatic),
                      Cte("static_pairs_unaligned", 2, 130, 1000, 4, 64, true, kStatic),
                      Cte("static_odd_heads", 1, 64, 1536, 3, 128, true, kStatic)),
    CaseName);

TEST(CteTilingTest, PackedHeadsAccumulateInOnePsumBankPerGroup) {
  // N = 16, D = 10 packs g = 8: N' = 2 matmuls per (128-row, 512-column) group; H / LNC = 1536
  // gives 3 groups per core. (No bias: its on-chip broadcast adds K = 1 matmuls.)
  const OprojRun run = RunCase(Cte("pack_g8", 1, 128, 3072, 16, 10, false));
  EXPECT_EQ(CountInstructions(*run.lnc, "nc_matmul"), 2 * 2 * 3);
}

TEST(CteTilingTest, StaticPairsHeadsInDoubleRowMatmuls) {
  // N' = 3 fp8 heads: one double-row pair and one plain matmul per group; S = 64 and
  // H / LNC = 768 give 2 groups per core.
  const OprojRun run = RunCase(Cte("static_odd_heads", 1, 64, 1536, 3, 128, false, kStatic));
  EXPECT_EQ(CountInstructions(*run.lnc, "nc_matmul"), 2 * 2 * 2);
}

TEST(CteLncTest, OneAndTwoCoresAgreeBitForBit) {
  const OprojTestCase two = Cte("pack_g4", 1, 320, 3072, 8, 32, true);
  OprojTestCase one = two;
  one.lnc = 1;
  const OutputProjectionInputs inputs = MakeInputs(two);
  EXPECT_EQ(RunCase(one, inputs).y, RunCase(two, inputs).y);
}

TEST(CteDeterminismTest, TenRunsAreBitIdentical) {
  const OprojTestCase c = Cte("static_pairs_unaligned", 2, 130, 1000, 4, 64, true, kStatic);
  const OutputProjectionInputs inputs = MakeInputs(c);
  const std::vector<float> first = RunCase(c, inputs).y;
  for (int run = 1; run < 10; ++run) EXPECT_EQ(RunCase(c, inputs).y, first) << "run " << run;
}

TEST(CteLncTest, CoresWriteDisjointColumnsWithoutAnyTransfer) {
  const OprojRun run = RunCase(Cte("s16_h5120_n10", 1, 16, 5120, 10, 128, true));
  ExpectNoCoreToCoreTraffic(*run.lnc);
}

}  // namespace
}  // namespace nkisim::kernels::testing
