// Shared helpers of the decode (TKG) attention tests: build a case, run it on a fresh logical
// core, check it against the fp64 golden with the reference suites' rule
// (|actual - golden| <= atol + rtol * max|golden|), and compute the roofline bound.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/attention/attention_tkg.h"
#include "kernels/reference/compare.h"
#include "runtime/dtype.h"
#include "runtime/logical_core.h"

#include "tests/testing/tolerance.h"

namespace nkisim::kernels::testing {

using nkisim::testing::WithinTolerance;

struct TkgCase {
  std::string name;
  int64_t t, g, bl, d;
  int lnc;
  DType dtype;
};
void PrintTo(const TkgCase& c, std::ostream* os);
std::string TkgCaseName(const ::testing::TestParamInfo<TkgCase>& info);

// Random q [G, Bl, d] in [-2, 2], k_cache [Bl, d, T] and v_cache [Bl, T, d] in [-1, 1], stored in
// c.dtype; the same seed gives the same tensors.
AttentionTkgParams MakeTkgParams(const TkgCase& c, uint64_t seed = 7);

// As MakeTkgParams, plus k_new and v_new [Bl, d] in [-1, 1]; position T - 1 of the caches holds
// 50.0 (a value the kernel must ignore: it takes that token from k_new / v_new).
AttentionTkgParams MakeTkgParamsWithNew(const TkgCase& c, uint64_t seed = 7);

// Copies of the caches with k_new / v_new written at position T - 1 (what the golden sees).
TensorView KCacheWithNew(const AttentionTkgParams& params);
TensorView VCacheWithNew(const AttentionTkgParams& params);

struct TkgRun {
  std::unique_ptr<LogicalCore> lnc;
  TensorView out;
};
TkgRun RunTkg(const AttentionTkgParams& params, int lnc);

// bf16 (and other 16-bit) atol 1e-5, rtol 2e-2; fp32 atol 1e-5, rtol 1e-4.
reference::Tolerance TkgTolerance(DType dtype);


// The roofline of a run on `lnc` cores: every input and the output crossing HBM once at the
// cores' HBM share (K and V dominate), or the matmul flops at the cores' bf16 PE peak.
double TkgRooflineNs(const AttentionTkgParams& params, int lnc);
// The stream floor of the same traffic, shared evenly by the cores (runtime/cost_model.h
// StreamFloorNs): the least time any kernel takes under the profile's DMA costs.
double TkgStreamFloorNs(const AttentionTkgParams& params, int lnc);

// Runs the case (with k_new / v_new when with_new; the bound is the same, the caches holding
// this step's token once), checks the golden when check_golden, and expects the simulated time
// within ratio_limit x the roofline; prints "<name>: simulated N ns = R x the bound (B ns)".
void ExpectTkgWithinRoofline(const TkgCase& c, double ratio_limit, bool check_golden,
                             bool with_new = false);

}  // namespace nkisim::kernels::testing
