// Decode (TKG) attention, the big cases: T = 32768 and Bl = 32 golden checks, and the Bl = 32
// roofline cases (within 1.25x of the HBM bound). Label slow: the fp64 goldens take seconds.
#include <gtest/gtest.h>

#include "kernels/reference/attention_ref.h"
#include "tests/kernels/attention/attention_tkg_test_util.h"

namespace nkisim::kernels::testing {
namespace {

constexpr DType kBf16 = DType::kBFloat16, kFp32 = DType::kFloat32;

class TkgSlowGridTest : public ::testing::TestWithParam<TkgCase> {};

TEST_P(TkgSlowGridTest, MatchesGolden) {
  const TkgCase& c = GetParam();
  const AttentionTkgParams p = MakeTkgParams(c);
  const TkgRun run = RunTkg(p, c.lnc);
  EXPECT_TRUE(WithinTolerance(run.out.ToFloats(),
                              reference::AttentionTkgRef(p.q, p.k_cache, p.v_cache),
                              TkgTolerance(c.dtype), c.name));
}

INSTANTIATE_TEST_SUITE_P(
    TkgSlow, TkgSlowGridTest,
    ::testing::Values(TkgCase{"t32768_g8_b4_d128_lnc2_bf16", 32768, 8, 4, 128, 2, kBf16},
                      TkgCase{"t32768_g1_b1_d64_lnc1_fp32", 32768, 1, 1, 64, 1, kFp32},
                      TkgCase{"t32768_g4_b1_d128_lnc1_bf16", 32768, 4, 1, 128, 1, kBf16},
                      TkgCase{"t1024_g8_b32_d128_lnc1_bf16", 1024, 8, 32, 128, 1, kBf16},
                      TkgCase{"t4096_g8_b32_d128_lnc2_bf16", 4096, 8, 32, 128, 2, kBf16},
                      TkgCase{"t512_g4_b32_d64_lnc2_fp32", 512, 4, 32, 64, 2, kFp32},
                      TkgCase{"t127_g1_b32_d64_lnc1_bf16", 127, 1, 32, 64, 1, kBf16},
                      TkgCase{"t1_g8_b32_d128_lnc2_bf16", 1, 8, 32, 128, 2, kBf16},
                      TkgCase{"t32768_g8_b32_d64_lnc2_bf16", 32768, 8, 32, 64, 2, kBf16}),
    TkgCaseName);

class TkgRooflineTest : public ::testing::TestWithParam<TkgCase> {};

TEST_P(TkgRooflineTest, WithinQuarterOfTheBound) {
  ExpectTkgWithinRoofline(GetParam(), 1.25, /*check_golden=*/GetParam().t <= 8192);
}

// T = 1024 at LNC 2 (512 tokens per core, 23 us of HBM) runs at 1.30x: the first block's scores
// (2 MB of K) must arrive before any P @ V and the PE then trails by that; a known gap, guarded at
// 1.35x until P @ V moves to the V-stationary form (N = G instead of d).
TEST(TkgRooflineGapTest, T1024Lnc2) {
  ExpectTkgWithinRoofline(TkgCase{"t1024_g8_b32_d128_lnc2", 1024, 8, 32, 128, 2, kBf16}, 1.35,
                          /*check_golden=*/true);
}

INSTANTIATE_TEST_SUITE_P(
    Bl32, TkgRooflineTest,
    ::testing::Values(TkgCase{"t1024_g8_b32_d128_lnc1", 1024, 8, 32, 128, 1, kBf16},
                      TkgCase{"t8192_g8_b32_d128_lnc1", 8192, 8, 32, 128, 1, kBf16},
                      TkgCase{"t8192_g8_b32_d128_lnc2", 8192, 8, 32, 128, 2, kBf16},
                      TkgCase{"t8192_g8_b32_d64_lnc2", 8192, 8, 32, 64, 2, kBf16},
                      TkgCase{"t32768_g8_b32_d128_lnc2", 32768, 8, 32, 128, 2, kBf16}),
    TkgCaseName);

}  // namespace
}  // namespace nkisim::kernels::testing
