// The reference's QKV CTE grids (reference-kernels.md §2.5 and §8) that fit the CI budget,
// checked against the golden with the reference tolerances (rtol 2e-2, atol 1e-5; STATIC rtol 5e-2,
// atol 2e-2). Rows of many GFLOP run in qkv_slow_tests; "..._small" rows keep a big row's
// structure at a smaller S or H.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "tests/kernels/qkv/qkv_grid.h"
#include "tests/kernels/qkv/qkv_test_util.h"

namespace nkisim::kernels::testing {
namespace {

const QkvGridCase kCteGrid[] = {
    // Fused RoPE (test_qkv_cte.py:610-627): LNC2, B1, the caches' halves duplicated.
    Cte("rope_1_1", 2, WithRope(Case(1, 128, 8192, 1, 1, 128, kNo))),
    Cte("rope_2_1_rms", 2, WithRope(Case(1, 128, 8192, 2, 1, 128, kRms))),
    Cte("rope_s192_h1152_rms_small", 2, WithRope(Case(1, 192, 1152, 8, 1, 128, kRms))),
    Cte("rope_d64", 2, WithRope(Case(1, 128, 8192, 8, 1, 64, kNo))),
    Cte("rope_bias_layer_norm_nbsd", 2,
        WithRope(Case(2, 160, 1024, 4, 2, 128, kLn, kNone, kNbsd, true, true, true))),
    Cte("rope_d88_heads_not_dividing_a_bank", 1, WithRope(Case(1, 200, 512, 3, 1, 88, kRms))),
    // Accuracy grid (683-742): LNC1, B1; the H1024 x S512 rows are in AccuracyGrid below.
    Cte("s127_rms_add", 1, Case(1, 127, 512, 2, 1, 128, kRms, kNone, kBsd, true)),
    Cte("s128_rms_add", 1, Case(1, 128, 512, 2, 1, 128, kRms, kNone, kBsd, true)),
    Cte("s1000_rms_add", 1, Case(1, 1000, 512, 2, 1, 128, kRms, kNone, kBsd, true)),
    Cte("eps77_rms_add", 1,
        Case(1, 512, 1024, 2, 1, 128, kRms, kNone, kBsd, true, false, false, 77.0)),
    Cte("h16384_i768_ha15104_small", 1,
        Case(1, 128, 4096, 4, 1, 128, kRms, kNone, kBsd, false, false, false, 1e-6, 3776)),
    // Performance grid, BSD (788-835), and §8.
    Cte("vision_rms_add_d88_small", 2, Case(2, 578, 1408, 1, 1, 88, kRms, kNone, kBsd, true)),
    Cte("vision_layer_norm_beta_add_d88", 1,
        Case(1, 578, 1408, 1, 1, 88, kLn, kNone, kBsd, true, false, true)),
    Cte("skip_gamma", 2, Case(1, 256, 7168, 1, 1, 128, kSkip)),
    Cte("model_123b_small", 2, Case(2, 640, 1536, 3, 1, 128, kNo)),
    // NBSd, d = 128 (881-898), and §8.
    Cte("nbsd_h256", 2, Case(1, 512, 256, 2, 2, 128, kNo, kNone, kNbsd)),
    Cte("nbsd_b4_h256", 2, Case(4, 512, 256, 8, 2, 128, kNo, kNone, kNbsd)),
    Cte("nbsd_s35520_small", 2, Case(1, 3552, 512, 2, 2, 128, kNo, kNone, kNbsd)),
    Cte("nbsd_h20480_rms_small", 2, Case(1, 256, 2560, 3, 1, 128, kRms, kNone, kNbsd)),
    // STATIC (1034-1045): LNC2, H8192, (8, 1, 128); fp8 double-row matmuls.
    Cte("static_rms_add", 2, Case(1, 128, 8192, 8, 1, 128, kRms, kStatic, kBsd, true)),
    Cte("static_bias_s1024_small", 2,
        Case(1, 1024, 1024, 8, 1, 128, kNo, kStatic, kBsd, false, true)),
    Cte("static_layer_norm_rope_nbsd", 2,
        WithRope(Case(1, 256, 1152, 2, 1, 128, kLn, kStatic, kNbsd, false, true, true))),
    // Other dtypes: fp32 in gives fp32 out (bf16 matmuls), fp16 in and out.
    Cte("fp32_rms_bias", 2,
        WithDType(Case(1, 300, 1024, 2, 1, 128, kRms, kNone, kBsd, false, true), DType::kFloat32)),
    Cte("fp16_rope_add", 2,
        WithDType(WithRope(Case(2, 200, 1024, 2, 1, 64, kRms, kNone, kBsd, true)),
                  DType::kFloat16)),
};

// The accuracy grid's H = 1024, S = 512 rows: I in {256, 384, 512}, each with RMS or NO_NORM,
// with and without the fused add, H_actual None, 1024 or 768 (LNC1, B1).
std::vector<QkvGridCase> AccuracyGrid() {
  struct Width {
    const char* name;
    int64_t n_q, d;
  };
  struct Setting {
    const char* name;
    NormType norm;
    bool add;
    std::optional<int64_t> hidden_actual;
  };
  const Width widths[] = {{"i256", 2, 64}, {"i384", 1, 128}, {"i512", 2, 128}};
  const Setting settings[] = {{"rms_add", kRms, true, std::nullopt},
                              {"rms_ha1024", kRms, false, 1024},
                              {"rms_add_ha768", kRms, true, 768},
                              {"no_norm_add", kNo, true, std::nullopt},
                              {"no_norm", kNo, false, std::nullopt}};
  std::vector<QkvGridCase> rows;
  for (const Width& w : widths) {
    for (const Setting& s : settings) {
      rows.push_back(Cte(std::string(w.name) + "_" + s.name, 1,
                         Case(1, 512, 1024, w.n_q, 1, w.d, s.norm, kNone, kBsd, s.add, false, false,
                              1e-6, s.hidden_actual)));
    }
  }
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Cte, QkvGridTest, ::testing::ValuesIn(kCteGrid), GridCaseName);
INSTANTIATE_TEST_SUITE_P(CteAccuracy, QkvGridTest, ::testing::ValuesIn(AccuracyGrid()),
                         GridCaseName);

}  // namespace
}  // namespace nkisim::kernels::testing
