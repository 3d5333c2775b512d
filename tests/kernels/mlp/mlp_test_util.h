// Test helpers of the MLP kernels: run one seeded case on a fresh logical core, check it against
// the fp64 golden (printing the worst element), and the case's roofline figures.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/mlp/mlp.h"
#include "kernels/mlp/mlp_case.h"
#include "kernels/reference/compare.h"
#include "runtime/logical_core.h"

namespace nkisim::kernels::testing {

struct MlpTestCase {
  const char* name;
  MlpCaseOptions options;
  int lnc = 2;
};
std::ostream& operator<<(std::ostream& os, const MlpTestCase& c);
std::string CaseName(const ::testing::TestParamInfo<MlpTestCase>& info);

// Shorthands: B * S tokens as B = tokens, S = 1 (TKG) or B = 1, S = s (CTE).
MlpTestCase Tkg(const char* name, int64_t tokens, int64_t h, int64_t i, int lnc = 2,
                DType dtype = DType::kBFloat16, QuantizationType quant = QuantizationType::kNone);
MlpTestCase Cte(const char* name, int64_t s, int64_t h, int64_t i, int lnc = 2,
                DType dtype = DType::kBFloat16);

struct MlpRun {
  std::unique_ptr<LogicalCore> lnc;
  MlpParams params;
  MlpResult result;
  double sim_ns = 0;
};
// Runs the case (params: built from c.options unless given).
MlpRun RunCase(const MlpTestCase& c);
MlpRun RunCase(const MlpTestCase& c, const MlpParams& params);

// Runs and checks output (and fused_hidden) against the golden at the MLP tolerance.
void ExpectMatchesGolden(const MlpTestCase& c);

// The roofline of a run as `nkisim kernel mlp` reports it: HBM bytes (every input once, a scale
// tensor's row once, the outputs) / (port x cores), FLOPs / (bf16 peak x cores), the stream floor
// and the engine floor (the busiest compute engine's instruction time on any core).
struct Roofline {
  double hbm_ns = 0, pe_ns = 0, stream_floor_ns = 0, engine_floor_ns = 0;
  // The CLI's target: the bound, or the stream floor (HBM-bound) or the engine floor where one
  // is higher.
  double target_ns() const;
};
Roofline RooflineOf(const MlpRun& run);

class MlpCaseTest : public ::testing::TestWithParam<MlpTestCase> {};

}  // namespace nkisim::kernels::testing
