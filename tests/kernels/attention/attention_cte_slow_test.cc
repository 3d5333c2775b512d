// The big prefill (CTE) attention cases: S = 2048 with 32 and 64 query heads over 8 KV heads at
// LNC 1 and 2, each checked against the fp64 golden and against the PE bound. The target
// is 1.25x the bound; the kernel is at 1.73x - 1.80x today. Vector sets the pace: it takes the
// row max of every PSUM score block (GpSimd cannot access PSUM) and transposes P, 1.43x the
// bound's time in instructions (the engine floor), and it is 80-83% busy. The checks below are
// regression guards: at most 2.1x the bound, and at most 1.27x the busiest compute engine's
// instruction time; the 1.25x target is reported, not asserted.
// Re-set 2026-12-04 (issue 40): under the DMA engine model the K^T and Q^T loads, permuted
// dma_copy views (one descriptor an element), took dev40 to 33.9x / 40.6x / 33.0x / 36.0x the
// bound (22.5 - 28.3x the busiest engine); loaded as transposing DMAs of contiguous rows the
// cases run at 1.75x / 1.80x / 1.73x / 1.76x the bound and 1.20 - 1.25x the busiest engine
// (Vector). The 1.12x guard of the old cost model (60 cycles of access overhead on every
// instruction, which made Vector 92-97% busy) became 1.27x: since the ISA rows Vector's work
// fell more than the PE's, and the chain QK^T (PE) -> row max (Vector) -> running max
// (GpSimd) -> exp (Scalar) that frees one of the three score tiles PSUM holds now paces the
// pipeline (the lag between the stages, 5, 8 and 12 units, gave 1.23x, 1.22x and 1.25x).
// The bound (CtePeBoundNs): AttentionCteFlops (2 matmuls of 2 x rows x keys x d per (head,
// 128-row tile), keys = min(S, 128 (i + 1)): the causal triangle in whole 128 x 128 squares, as
// the kernel computes it) at MatmulNs's full rate over the LNC's cores, as one burst from a cold
// PE (the current ramp: +750 ns). The ratio to the exact causal flops (S (S + 1) / 2 pairs) is
// printed too. Label slow: the fp64 goldens take seconds each.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>

#include "runtime/timeline.h"
#include "tests/kernels/attention/attention_cte_test_util.h"

namespace nkisim::kernels::testing {
namespace {

TEST_P(CteCaseTest, MatchesGoldenAndStaysWithin2point1xThePeBound) {
  const CteCase& c = GetParam();
  const CteRun run = RunCte(c);
  const double simulated = run.lnc->now();
  const double bound = CtePeBoundNs(c, *run.lnc), exact = CtePeBoundNs(c, *run.lnc, true);
  std::cout << "    " << c << ": simulated " << simulated << " ns, PE bound " << bound
            << " ns = " << simulated / bound << "x the bound (exact causal bound " << exact
            << " ns: " << simulated / exact << "x)\n";
  double busiest_ns = 0;
  for (int i = 0; i < run.lnc->lnc(); ++i) {
    const CoreSummary summary = run.lnc->core(i).Summary();
    std::cout << FormatSummary(summary);
    for (Engine e : {Engine::kPE, Engine::kVector, Engine::kScalar, Engine::kGpSimd}) {
      busiest_ns = std::max(busiest_ns, summary.busy_ns[EngineIndex(e)]);
    }
  }
  std::cout << "    busiest compute engine: " << busiest_ns << " ns = " << busiest_ns / bound
            << "x the bound; simulated = " << simulated / busiest_ns << "x that\n";
  RecordProperty("simulated_over_bound", std::to_string(simulated / bound));
  if (simulated > 1.25 * bound) std::cout << "    NOTE: above the 1.25x target\n";
  EXPECT_LE(simulated, 2.1 * bound);
  EXPECT_LE(simulated, 1.27 * busiest_ns);
  ExpectCteMatchesGolden(c, run);
}

INSTANTIATE_TEST_SUITE_P(
    Prefill2048, CteCaseTest,
    ::testing::Values(CteCase{"s2048_h32_8_lnc1", 1, 2048, 32, 8, 128, 1},
                      CteCase{"s2048_h32_8_lnc2", 1, 2048, 32, 8, 128, 2},
                      CteCase{"s2048_h64_8_lnc1", 1, 2048, 64, 8, 128, 1},
                      CteCase{"s2048_h64_8_lnc2", 1, 2048, 64, 8, 128, 2}),
    CteCaseName);

}  // namespace
}  // namespace nkisim::kernels::testing
