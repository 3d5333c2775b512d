// The MLP golden grid at the shapes (label slow): TKG at B*S 1, 4, 32, 96 and CTE at S
// 128, 512, 2048, with H 4096 / 8192 and I per rank 448 / 896 / 3584, LNC 2 (and LNC 1, fp32, fp8
// samples).
#include <gtest/gtest.h>

#include "tests/kernels/mlp/mlp_test_util.h"

namespace nkisim::kernels::testing {
namespace {

constexpr DType kFp32 = DType::kFloat32;
constexpr DType kBf16 = DType::kBFloat16;

TEST_P(MlpCaseTest, MatchesGolden) { ExpectMatchesGolden(GetParam()); }

INSTANTIATE_TEST_SUITE_P(
    TkgGrid, MlpCaseTest,
    ::testing::Values(
        Tkg("t1_h4096_i3584", 1, 4096, 3584), Tkg("t4_h8192_i448", 4, 8192, 448),
        Tkg("t32_h8192_i896", 32, 8192, 896), Tkg("t96_h8192_i3584", 96, 8192, 3584),
        Tkg("t96_h4096_i3584_lnc1", 96, 4096, 3584, 1),
        Tkg("t32_h8192_i3584_fp32", 32, 8192, 3584, 2, kFp32),
        Tkg("t32_h8192_i3584_static", 32, 8192, 3584, 2, kBf16, QuantizationType::kStatic),
        Tkg("t96_h8192_i896_row", 96, 8192, 896, 2, kBf16, QuantizationType::kRow),
        Tkg("t1_h8192_i3584_row_lnc1", 1, 8192, 3584, 1, kBf16, QuantizationType::kRow)),
    CaseName);

INSTANTIATE_TEST_SUITE_P(CteGrid, MlpCaseTest,
                         ::testing::Values(Cte("s128_h8192_i3584", 128, 8192, 3584),
                                           Cte("s512_h8192_i896", 512, 8192, 896),
                                           Cte("s2048_h4096_i3584", 2048, 4096, 3584),
                                           Cte("s2048_h8192_i448", 2048, 8192, 448),
                                           Cte("s512_h4096_i3584_lnc1", 512, 4096, 3584, 1),
                                           Cte("s2048_h8192_i896_fp32", 2048, 8192, 896, 2, kFp32),
                                           // two blocks of 256 tokens, gate / up shared banks
                                           Cte("s512_h16384_i832_lnc1", 512, 16384, 832, 1)),
                         CaseName);

}  // namespace
}  // namespace nkisim::kernels::testing
