// Test helpers of the output-projection kernels: run one case on a fresh logical core and check
// it against the golden references, printing the worst per-element error of every check.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/output_projection/inputs.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/output_projection_ref.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels::testing {

using Variant = reference::OprojKernel;
inline constexpr QuantizationType kNone = QuantizationType::kNone;
inline constexpr QuantizationType kStatic = QuantizationType::kStatic;
inline constexpr QuantizationType kRow = QuantizationType::kRow;
inline constexpr QuantizationType kMx = QuantizationType::kMx;
inline constexpr QuantizationType kStaticMx = QuantizationType::kStaticMx;
inline constexpr QuantizationType kRowMx = QuantizationType::kRowMx;

// configs/hardware/trn3.textproto (NeuronCore-v4, with the MX path), loaded once.
const HardwareProfile& Trn3Profile();

struct OprojTestCase {
  const char* name;
  Variant variant;
  OprojCase shape;
  bool transpose_out = false;  // TKG only
  int lnc = 2;
};
std::ostream& operator<<(std::ostream& os, const OprojTestCase& c);

// The profile a case runs on: trn3 for the MX modes, else the built-in trn2.
const HardwareProfile& ProfileFor(const OprojTestCase& c);

// Cases in the order the reference lists them: CTE (B, S, H, N, D, bias), TKG (B, N, S, D, H,
// quant, bias, transpose_out).
OprojTestCase Cte(const char* name, int64_t b, int64_t s, int64_t h, int64_t n, int64_t d,
                  bool bias, QuantizationType q = QuantizationType::kNone, int lnc = 2,
                  DType dtype = DType::kBFloat16);
OprojTestCase Tkg(const char* name, int64_t b, int64_t n, int64_t s, int64_t d, int64_t h,
                  QuantizationType q, bool bias, bool transpose_out, int lnc = 2);

struct OprojRun {
  std::unique_ptr<LogicalCore> lnc;
  OutputProjectionInputs inputs;
  TensorView out;
  // out as y [B*S, H] (the transposed TKG layout mapped back), fp32.
  std::vector<float> y;
};

OutputProjectionInputs MakeInputs(const OprojTestCase& c, uint64_t seed = 0);
OprojRun RunCase(const OprojTestCase& c, const OutputProjectionInputs& inputs);
inline OprojRun RunCase(const OprojTestCase& c) { return RunCase(c, MakeInputs(c)); }

// The golden y [B*S, H]; rounded = true models the kernel's fp8 rounding of the quantized input.
std::vector<float> Golden(const OprojTestCase& c, const OutputProjectionInputs& inputs,
                          bool rounded);

// Checks y against the reference golden with the reference tolerance, and against the
// rounding-aware golden with rtol 2^-7 (bf16 output rounding plus margin), so a wrong column
// cannot hide under a bias of std 100. (The MX modes' goldens model their quantization exactly,
// so for them both checks use the one golden.) Prints both worst errors; adds failures on
// mismatch.
void ExpectMatchesGolden(const OprojTestCase& c, const OprojRun& run);

// The golden check of one case, defined once in oproj_test_util.cc; each binary instantiates it
// over its case lists with INSTANTIATE_TEST_SUITE_P(..., OprojCaseTest, Values(...), CaseName).
class OprojCaseTest : public ::testing::TestWithParam<OprojTestCase> {};
std::string CaseName(const ::testing::TestParamInfo<OprojTestCase>& info);

// Instruction records named `name` over every physical core.
int64_t CountInstructions(const LogicalCore& lnc, const std::string& name);

// The H-shard property: no sendrecv, no core_barrier and no link time on any core.
void ExpectNoCoreToCoreTraffic(const LogicalCore& lnc);

}  // namespace nkisim::kernels::testing
