// The big prefill (CTE) attention cases: S = 2048 with 32 and 64 query heads over 8 KV heads at
// LNC 1 and 2, each checked against the fp64 golden and against the PE bound. The target
// is 1.25x the bound; the kernel is at 2.24x - 2.28x today: the row max of the PSUM scores runs
// on Vector, since GpSimd cannot access PSUM (it ran on GpSimd until 2026-12-02, at 1.49x -
// 1.57x), and Vector also transposes P, so Vector is busy ~82% and sets the pace. The check
// below is a regression guard at 2.4x and the 1.25x target is reported, not asserted.
// The bound is AttentionCteFlops (2 matmuls of 2 x rows x keys x d per (head, 128-row tile),
// keys = min(S, 128 (i + 1)): the causal triangle in whole 128 x 128 squares, as the kernel
// computes it) at the bf16 PE peak of the LNC's cores. The ratio to the exact causal flops
// (S (S + 1) / 2 pairs) is printed too. Label slow: the fp64 goldens take seconds each.
#include <gtest/gtest.h>

#include <iostream>
#include <string>

#include "runtime/timeline.h"
#include "tests/kernels/attention/attention_cte_test_util.h"

namespace nkisim::kernels::testing {
namespace {

TEST_P(CteCaseTest, MatchesGoldenAndStaysWithin2point4xThePeBound) {
  const CteCase& c = GetParam();
  const CteRun run = RunCte(c);
  const double simulated = run.lnc->now();
  const double bound = CtePeBoundNs(c, *run.lnc), exact = CtePeBoundNs(c, *run.lnc, true);
  std::cout << "    " << c << ": simulated " << simulated << " ns, PE bound " << bound
            << " ns = " << simulated / bound << "x the bound (exact causal bound " << exact
            << " ns: " << simulated / exact << "x)\n";
  for (int i = 0; i < run.lnc->lnc(); ++i) std::cout << FormatSummary(run.lnc->core(i).Summary());
  RecordProperty("simulated_over_bound", std::to_string(simulated / bound));
  if (simulated > 1.25 * bound) std::cout << "    NOTE: above the 1.25x target\n";
  EXPECT_LE(simulated, 2.4 * bound);
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
