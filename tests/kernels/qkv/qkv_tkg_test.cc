// The reference's QKV TKG grids (reference-kernels.md §2.5 and §8) that fit the CI budget,
// through the dispatcher, checked against the golden with the reference tolerances (rtol 2e-2 NONE,
// 4e-2 STATIC / ROW, atol 1e-5). The big-H rows run in qkv_slow_tests; where a grid row is big,
// a scaled-down row with the same structure runs here (named "..._small").
#include <gtest/gtest.h>

#include "tests/kernels/qkv/qkv_grid.h"
#include "tests/kernels/qkv/qkv_test_util.h"

namespace nkisim::kernels::testing {
namespace {

const QkvGridCase kTkgGrid[] = {
    // Accuracy grid (test_qkv_tkg.py:696-741), rows 1-17.
    Tkg("row01_rms_add_h16384", 1, Case(1, 4, 16384, 1, 1, 128, kRms, kNone, kBsd, true)),
    Tkg("row02_add_h32768", 1, Case(4, 1, 32768, 1, 1, 128, kNo, kNone, kBsd, true)),
    Tkg("row03_add", 1, Case(1, 4, 4096, 2, 1, 128, kNo, kNone, kBsd, true)),
    Tkg("row04_rms_add_ha_none", 1, Case(4, 1, 4096, 5, 1, 128, kRms, kNone, kBsd, true)),
    Tkg("row04_rms_add_ha4096", 1,
        Case(4, 1, 4096, 5, 1, 128, kRms, kNone, kBsd, true, false, false, 1e-6, 4096)),
    Tkg("row04_rms_add_ha3072", 1,
        Case(4, 1, 4096, 5, 1, 128, kRms, kNone, kBsd, true, false, false, 1e-6, 3072)),
    Tkg("row05_h_remainder_i10240_small", 2, Case(2, 1, 1280, 64, 8, 128, kNo)),
    Tkg("row06_minimal", 1, Case(1, 1, 128, 2, 1, 128, kNo)),
    Tkg("row07_rms_eps1e5", 1,
        Case(1, 7, 8192, 1, 1, 128, kRms, kNone, kBsd, false, false, false, 1e-5)),
    Tkg("row08_layer_norm", 1, Case(1, 5, 8192, 1, 1, 128, kLn)),
    Tkg("row08_layer_norm_beta", 1,
        Case(1, 5, 8192, 1, 1, 128, kLn, kNone, kBsd, false, false, true)),
    Tkg("row09_bias", 1, Case(1, 3, 16384, 5, 1, 128, kNo, kNone, kBsd, false, true)),
    Tkg("row10_rms_bias_d64", 2, Case(8, 5, 3072, 8, 1, 64, kRms, kNone, kBsd, false, true)),
    Tkg("row11_nbsd", 2, Case(1, 1, 16384, 2, 1, 128, kNo, kNone, kNbsd)),
    Tkg("row12_nbsd", 2, Case(1, 1, 8192, 2, 2, 128, kNo, kNone, kNbsd)),
    Tkg("row13_nbsd_i4352_small", 2, Case(1, 1, 1024, 24, 5, 128, kNo, kNone, kNbsd)),
    Tkg("row14_rms_nbsd_i5120_small", 1, Case(1, 1, 1024, 32, 4, 128, kRms, kNone, kNbsd)),
    Tkg("row15_rms_i10240_small", 2, Case(1, 1, 1024, 64, 8, 128, kRms)),
    Tkg("row16_nbsd", 2, Case(1, 1, 8448, 5, 5, 128, kNo, kNone, kNbsd)),
    Tkg("row17_rms_add_eps77", 2,
        Case(1, 1, 8192, 2, 1, 128, kRms, kNone, kBsd, true, false, false, 77.0)),
    // STATIC rows.
    Tkg("static_rms", 2, Case(1, 5, 8192, 8, 1, 128, kRms, kStatic)),
    Tkg("static_bias_nbsd_small", 2,
        Case(4, 1, 2048, 24, 5, 128, kNo, kStatic, kNbsd, false, true)),
    Tkg("static_rms_nbsd_small", 1, Case(1, 1, 1024, 32, 4, 128, kRms, kStatic, kNbsd)),
    // ROW rows (734-741).
    Tkg("row_quant_rms", 2, Case(1, 5, 8192, 8, 1, 128, kRms, kRow)),
    Tkg("row_quant_bias_nbsd_small", 2,
        Case(4, 1, 2048, 24, 5, 128, kNo, kRow, kNbsd, false, true)),
    Tkg("row_quant_rms_nbsd_small", 1, Case(1, 1, 1024, 32, 4, 128, kRms, kRow, kNbsd)),
    Tkg("row_quant_rms_add", 2, Case(1, 3, 8192, 8, 1, 128, kRms, kRow, kBsd, true)),
    Tkg("row_quant_h16384", 2, Case(2, 1, 16384, 2, 1, 128, kNo, kRow)),
    Tkg("row_quant_rms_i10240_small", 2, Case(1, 1, 1024, 64, 8, 128, kRms, kRow)),
    // §8 and the performance grid: I not a multiple of 128 with B*S = 80 (the norm's tokens split
    // between the cores), LayerNorm rows, and the token split with a fused add.
    Tkg("i104_d26_rms_split", 2, Case(16, 5, 8192, 2, 1, 26, kRms)),
    Tkg("perf_layer_norm_h8448", 2, Case(2, 4, 8448, 9, 1, 128, kLn)),
    Tkg("perf_layer_norm_h4096", 2, Case(4, 2, 4096, 6, 1, 128, kLn)),
    Tkg("layer_norm_split_add_beta", 2,
        Case(4, 5, 4096, 2, 1, 128, kLn, kNone, kBsd, true, false, true)),
    Tkg("rms_split_add_bias", 2, Case(4, 5, 2048, 2, 1, 128, kRms, kNone, kBsd, true, true)),
    Tkg("static_rms_split_add_bias", 2,
        Case(4, 6, 2048, 4, 1, 128, kRms, kStatic, kBsd, true, true)),
    Tkg("fp32_rms_add_bias", 2,
        WithDType(Case(2, 3, 2048, 2, 1, 128, kRms, kNone, kBsd, true, true), DType::kFloat32)),
    Tkg("fp16_layer_norm_nbsd", 1,
        WithDType(Case(2, 2, 1024, 3, 1, 64, kLn, kNone, kNbsd, false, false, true),
                  DType::kFloat16)),
};

INSTANTIATE_TEST_SUITE_P(Tkg, QkvGridTest, ::testing::ValuesIn(kTkgGrid), GridCaseName);

}  // namespace
}  // namespace nkisim::kernels::testing
