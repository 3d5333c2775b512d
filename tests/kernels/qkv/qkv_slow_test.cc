// The big rows of the reference's QKV grids (reference-kernels.md §2.5 and §8): H up to 32768,
// I up to 10240, prefill blocks of several GFLOP, whose golden alone takes seconds. Label slow;
// they must pass when run (`ctest -L slow` or ./tests/kernels/qkv/qkv_slow_tests).
#include <gtest/gtest.h>

#include "tests/kernels/qkv/qkv_grid.h"
#include "tests/kernels/qkv/qkv_test_util.h"

namespace nkisim::kernels::testing {
namespace {

const QkvGridCase kSlowTkgGrid[] = {
    Tkg("row05_h_remainder_i10240", 2, Case(2, 1, 3840, 64, 8, 128, kNo)),
    Tkg("row13_nbsd_i4352", 2, Case(1, 1, 8448, 24, 5, 128, kNo, kNone, kNbsd)),
    Tkg("row14_rms_nbsd_i5120", 1, Case(1, 1, 8192, 32, 4, 128, kRms, kNone, kNbsd)),
    Tkg("row15_rms_i10240", 2, Case(1, 1, 8192, 64, 8, 128, kRms)),
    Tkg("static_bias_nbsd", 2, Case(4, 1, 16384, 24, 5, 128, kNo, kStatic, kNbsd, false, true)),
    Tkg("static_rms_nbsd", 1, Case(1, 1, 8192, 32, 4, 128, kRms, kStatic, kNbsd)),
    Tkg("row_quant_bias_nbsd", 2, Case(4, 1, 16384, 24, 5, 128, kNo, kRow, kNbsd, false, true)),
    Tkg("row_quant_rms_nbsd", 1, Case(1, 1, 8192, 32, 4, 128, kRms, kRow, kNbsd)),
    Tkg("row_quant_rms_i10240", 2, Case(1, 1, 8192, 64, 8, 128, kRms, kRow)),
    Tkg("sweep_b12_s8_h32768_layer_norm_add", 2,
        Case(12, 8, 32768, 4, 2, 64, kLn, kNone, kBsd, true)),
};

const QkvGridCase kSlowCteGrid[] = {
    Cte("rope_8_1", 2, WithRope(Case(1, 128, 8192, 8, 1, 128, kNo))),
    Cte("rope_s192_rms", 2, WithRope(Case(1, 192, 8192, 8, 1, 128, kRms))),
    Cte("rope_s192_h8320", 2, WithRope(Case(1, 192, 8320, 8, 1, 128, kNo))),
    Cte("h16384_i768_s128_ha15104", 1,
        Case(1, 128, 16384, 4, 1, 128, kRms, kNone, kBsd, false, false, false, 1e-6, 15104)),
    Cte("h16384_i256_s512_ha16384", 1,
        Case(1, 512, 16384, 2, 1, 64, kRms, kNone, kBsd, false, false, false, 1e-6, 16384)),
    Cte("vision_rms_add_d88", 2, Case(12, 578, 1408, 1, 1, 88, kRms, kNone, kBsd, true)),
    Cte("vision_layer_norm_b14_d88", 2, Case(14, 578, 1408, 1, 1, 88, kLn)),
    Cte("nbsd_h16384", 2, Case(1, 1024, 16384, 2, 1, 128, kNo, kNone, kNbsd)),
    Cte("nbsd_h20480_rms", 2, Case(1, 1024, 20480, 3, 1, 128, kRms, kNone, kNbsd)),
    Cte("h24576_add_rms", 2, Case(1, 256, 24576, 1, 1, 128, kRms, kNone, kBsd, true)),
    Cte("static_s128", 2, Case(1, 128, 8192, 8, 1, 128, kNo, kStatic)),
    Cte("static_s1024_bias", 2, Case(1, 1024, 8192, 8, 1, 128, kNo, kStatic, kBsd, false, true)),
    Cte("prefill_must_show", 2, WithRope(Case(1, 2048, 4096, 16, 8, 128, kRms))),
};

// The prefill case of docs/qkv.md (B1 S2048 H4096, n_q 16, n_kv 8, d 128, RMS, fused RoPE,
// LNC 2) stays within 1.25x of its roofline.
TEST(QkvPerformanceTest, PrefillWithinRoofline) {
  ExpectWithinRoofline(MakeQkvCase(WithRope(Case(1, 2048, 4096, 16, 8, 128, kRms))), 2, 1.25,
                       "prefill");
}

// The whole-model prefill shape `nkisim predict` runs for Llama-3.3-70B at TP64 (one rank: one Q
// head, one KV head, d 128, H 8192, NBSd, fused RoPE, one 1000-token chunk, LNC 2). The bound is
// the PE (40.0 us; the HBM side, StreamFloorNs, is 33 us + 2.6 us). What the kernel cannot beat at
// this shape, from the cost model's per-instruction rows: the PE's own instructions take 59.4 us
// a core (1.49x: 125-row stationaries, N 384 moving columns, and the 256 transposes of the
// normalised rows), and the first matmul waits for the first tile's load (1.3 us latency + 2 MiB)
// and RMS norm (four 2048-column Scalar activations and one 8192-column scale, ~9 us): about
// 75.5 us = 1.89x. Before the blocked H order and whole-row plan the kernel took 143.1 us = 3.58x
// (weights as 768 B runs, gamma as one descriptor an element, the bank narrowed to 128 columns),
// 87 us = 2.18x under the queue model; now 78.1 us = 1.95x. The bar, 2.1x, is that
// critical-path floor plus 11%: a return of the short runs (>= 2.18x) fails it.
TEST(QkvPerformanceTest, Llama70bTp64PrefillChunkWithinRoofline) {
  ExpectWithinRoofline(MakeQkvCase(WithRope(Case(1, 1000, 8192, 1, 1, 128, kRms, kNone, kNbsd))),
                       2, 2.1, "prefill_70b_tp64");
}

INSTANTIATE_TEST_SUITE_P(SlowTkg, QkvGridTest, ::testing::ValuesIn(kSlowTkgGrid), GridCaseName);
INSTANTIATE_TEST_SUITE_P(SlowCte, QkvGridTest, ::testing::ValuesIn(kSlowCteGrid), GridCaseName);

}  // namespace
}  // namespace nkisim::kernels::testing
