// Shared helpers of the qkv kernel tests: run one case on a fresh logical core and check it
// against the golden model with the reference suites' tolerance, printing the worst per-element
// error of every numeric check (stdout and the test's XML properties).
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "kernels/qkv/qkv.h"
#include "kernels/qkv/qkv_case.h"
#include "kernels/reference/compare.h"

#include "tests/testing/tolerance.h"

namespace nkisim::kernels::testing {

using nkisim::testing::WithinTolerance;

// A named case of a reference grid: the LNC it runs with, the case, the variant the dispatcher
// must choose.
struct QkvGridCase {
  std::string name;
  int lnc;
  QkvCaseOptions options;
  QkvVariant variant;
};

// The one parameterised test of every grid (defined in qkv_test_util.cc): the case runs through
// the dispatcher, takes the expected variant and matches the golden. A grid file instantiates it:
//   INSTANTIATE_TEST_SUITE_P(Tkg, QkvGridTest, ::testing::ValuesIn(kTkgGrid), GridCaseName);
class QkvGridTest : public ::testing::TestWithParam<QkvGridCase> {};
std::string GridCaseName(const ::testing::TestParamInfo<QkvGridCase>& info);
void PrintTo(const QkvGridCase& c, std::ostream* os);  // the case's name in failure messages

// Runs params on a new logical core of `lnc` cores with the trn2 profile.
QkvResult RunQkv(const QkvParams& params, int lnc, QkvVariant variant = QkvVariant::kAuto);

// The floor of a run on `lnc` cores: the larger of every given input and the output crossing
// HBM once at the cores' HBM share plus the two DMA latencies no stream hides (StreamFloorNs),
// and the projection's flops at their bf16 PE peak.
double RooflineNs(const QkvParams& params, const QkvResult& result, int lnc);

// Runs params on `lnc` cores and expects the simulated time within ratio_limit x the roofline;
// prints and records the ratio under `label`.
void ExpectWithinRoofline(const QkvParams& params, int lnc, double ratio_limit,
                          const std::string& label);


// Checks the output (and fused_hidden when present) against the golden with the tolerance of
// the variant that ran.
::testing::AssertionResult MatchesGolden(const QkvParams& params, const QkvResult& result,
                                         const std::string& label);

}  // namespace nkisim::kernels::testing
