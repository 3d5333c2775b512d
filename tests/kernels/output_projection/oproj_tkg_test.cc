// output_projection_tkg on the reference's case list (reference-kernels.md §3.3, §8): head
// packing (D % 32 == 0 only), H not a multiple of 128, B*S > 128 and > 512, S > 128, the
// transposed output, STATIC (double-row pairs) and ROW; plus LNC 1 vs 2 in both layouts, the
// reference's ten-run determinism check and the absence of any core-to-core transfer.
#include <gtest/gtest.h>

#include "kernels/output_projection/output_projection_tkg.h"
#include "tests/kernels/output_projection/oproj_test_util.h"

namespace nkisim::kernels::testing {
namespace {

INSTANTIATE_TEST_SUITE_P(
    TkgReferenceCases, OprojCaseTest,
    ::testing::Values(Tkg("d64_packed_transposed", 4, 8, 4, 64, 3072, kNone, true, true),
                      Tkg("h5378_not_multiple_of_128", 4, 8, 4, 64, 5378, kNone, false, false),
                      Tkg("bs576", 192, 8, 3, 128, 3072, kNone, true, false),
                      Tkg("h602_lnc2", 4, 10, 8, 128, 602, kNone, true, false),
                      Tkg("n2_transposed", 4, 2, 4, 64, 7168, kNone, false, true),
                      Tkg("bs640_transposed_g4", 160, 8, 4, 32, 1024, kNone, true, true),
                      Tkg("d26_unpacked", 16, 5, 2, 26, 1024, kNone, true, false),
                      Tkg("s200_splits_sequence", 2, 2, 200, 64, 512, kNone, true, false),
                      Tkg("lnc1_transposed", 4, 8, 4, 64, 3072, kNone, true, true, 1),
                      Tkg("static_transposed", 16, 8, 1, 128, 8192, kStatic, true, true),
                      Tkg("static_double_row", 32, 6, 3, 128, 3072, kStatic, false, false),
                      Tkg("static_double_row_transposed", 32, 6, 3, 128, 3072, kStatic, false,
                          true),
                      Tkg("static_bs384", 128, 8, 3, 128, 3072, kStatic, true, false),
                      Tkg("static_odd_heads", 8, 3, 2, 128, 1024, kStatic, true, false),
                      Tkg("row", 16, 8, 1, 128, 3072, kRow, true, false),
                      Tkg("row_transposed", 64, 8, 1, 128, 8192, kRow, true, true),
                      Tkg("row_no_bias", 16, 8, 1, 128, 3072, kRow, false, false)),
    CaseName);

TEST(TkgTilingTest, PacksHeadsOnlyWhenDIsAMultipleOf32) {
  // D = 64: g = 2 packs N = 8 into N' = 4 matmuls per group; 3072 / 2 = 1536 columns per core
  // are 3 groups of 512. (No bias: its on-chip broadcast adds K = 1 matmuls.)
  EXPECT_EQ(CountInstructions(*RunCase(Tkg("packed", 4, 8, 4, 64, 3072, kNone, false, false)).lnc,
                              "nc_matmul"),
            4 * 3 * 2);
  // D = 48 would fit g = 2 but is not a multiple of 32: all 8 heads take a matmul.
  EXPECT_EQ(CountInstructions(*RunCase(Tkg("unpacked", 4, 8, 4, 48, 3072, kNone, false, false)).lnc,
                              "nc_matmul"),
            8 * 3 * 2);
}

TEST(TkgTilingTest, TransposedKeepsWeightsStationaryOneGroupPerH2) {
  // H / (128 LNC) = 12 groups per core, each N' = 4 packed heads; B*S = 16 moving columns.
  const OprojRun run = RunCase(Tkg("t", 4, 8, 4, 64, 3072, kNone, true, true));
  EXPECT_EQ(CountInstructions(*run.lnc, "nc_matmul"), 4 * 12 * 2);
}

TEST(TkgLncTest, OneAndTwoCoresAgreeBitForBitInBothLayouts) {
  for (bool transpose_out : {false, true}) {
    const OprojTestCase two = Tkg("lnc", 24, 8, 2, 128, 2048, kStatic, true, transpose_out);
    OprojTestCase one = two;
    one.lnc = 1;
    const OutputProjectionInputs inputs = MakeInputs(two);
    EXPECT_EQ(RunCase(one, inputs).y, RunCase(two, inputs).y) << "transpose_out " << transpose_out;
  }
}

TEST(TkgDeterminismTest, TenRunsAreBitIdentical) {
  for (bool transpose_out : {false, true}) {
    const OprojTestCase c = Tkg("det", 16, 8, 1, 128, 2048, kRow, true, transpose_out);
    const OutputProjectionInputs inputs = MakeInputs(c);
    const std::vector<float> first = RunCase(c, inputs).y;
    for (int run = 1; run < 10; ++run) EXPECT_EQ(RunCase(c, inputs).y, first) << "run " << run;
  }
}

TEST(TkgLncTest, NoSendrecvOrBarrierInEitherLayout) {
  for (bool transpose_out : {false, true}) {
    const OprojRun run = RunCase(Tkg("x", 8, 8, 1, 128, 2048, kStatic, true, transpose_out));
    EXPECT_GT(CountInstructions(*run.lnc, "nc_matmul"), 0);
    EXPECT_EQ(CountInstructions(*run.lnc, "sendrecv"), 0) << "transpose_out " << transpose_out;
    EXPECT_EQ(CountInstructions(*run.lnc, "core_barrier"), 0);
  }
}

TEST(TkgLayoutTest, TransposedOutputIsTheReferenceLayoutOfY) {
  // Compares the raw 4-D output with the golden laid out by the reference formula.
  const OprojTestCase c = Tkg("t", 4, 8, 4, 64, 3072, kNone, true, true);
  const OprojRun run = RunCase(c);
  ASSERT_EQ(run.out.shape(), (Shape{128, 2, 12, 16}));
  const reference::Comparison cmp = reference::Compare(
      run.out.ToFloats(),
      reference::TransposedOutLayout(Golden(c, run.inputs, true), 16, 3072, 2, 128),
      {1e-5, 1.0 / 128});
  std::cout << "    transposed layout: " << cmp.ToString() << "\n";
  EXPECT_TRUE(cmp.pass()) << cmp.ToString();
}

}  // namespace
}  // namespace nkisim::kernels::testing
