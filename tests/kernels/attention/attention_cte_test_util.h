// Test helpers of the prefill (CTE) attention kernel: seeded inputs in the QKV CTE output layout,
// one run on a fresh logical core, the fp64 golden check and the roofline bound.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/attention/attention_cte.h"
#include "kernels/reference/compare.h"
#include "runtime/dtype.h"
#include "runtime/logical_core.h"

namespace nkisim::kernels::testing {

struct CteCase {
  const char* name;
  int64_t b, s, n_q, n_kv, d;
  int lnc;
  DType dtype = DType::kBFloat16;
};
std::ostream& operator<<(std::ostream& os, const CteCase& c);
std::string CteCaseName(const ::testing::TestParamInfo<CteCase>& info);

struct CteRun {
  std::unique_ptr<LogicalCore> lnc;
  AttentionCteParams params;
  TensorView out;  // [B, n_q, d, S]
};

// q, k, v [heads, B, S, d]: q and k Uniform[-2, 2), v Uniform[-1, 1), keyed by (seed, name).
AttentionCteParams MakeCteInputs(const CteCase& c, uint64_t seed = 7);
CteRun RunCte(const CteCase& c, const AttentionCteParams& params);
inline CteRun RunCte(const CteCase& c) { return RunCte(c, MakeCteInputs(c)); }

// bf16 / fp16: atol 1e-5, rtol 2e-2; fp32: atol 1e-6, rtol 1e-4 (of max |golden|).
reference::Tolerance CteTolerance(DType dtype);
// Checks run.out against CausalAttentionRef; prints the worst error.
void ExpectCteMatchesGolden(const CteCase& c, const CteRun& run);

// The PE bound of the case, in ns, from runtime/cost_model.h and runtime/pe_throttle.h: the
// matmuls of AttentionCteFlops (the causal triangle in whole 128 x 128 squares, as the kernel
// computes it) at the nc_matmul row's full rate (MatmulNs of 512 moving columns), split over the
// lnc cores, run as one burst from a cold PE (the current ramp: about 750 ns more on trn2).
// exact = true uses AttentionCausalFlops (S (S + 1) / 2 pairs) instead.
double CtePeBoundNs(const CteCase& c, const LogicalCore& lnc, bool exact = false);

class CteCaseTest : public ::testing::TestWithParam<CteCase> {};

}  // namespace nkisim::kernels::testing
