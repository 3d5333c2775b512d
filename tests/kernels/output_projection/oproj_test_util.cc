#include "tests/kernels/output_projection/oproj_test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <iostream>

#include "kernels/output_projection/output_projection_cte.h"
#include "kernels/output_projection/output_projection_tkg.h"
#include "runtime/hardware_profile.h"

namespace nkisim::kernels::testing {
namespace {

int64_t Partitions() { return Trn2Profile().partitions(); }  // trn3's too

void Report(const char* what, const reference::Comparison& cmp) {
  std::cout << "    " << what << ": " << cmp.ToString() << "\n";
  ::testing::Test::RecordProperty(what, cmp.ToString());
}

}  // namespace

const HardwareProfile& Trn3Profile() {
  static const HardwareProfile profile =
      LoadHardwareProfile(std::string(NKISIM_SOURCE_DIR) + "/configs/hardware/trn3.textproto");
  return profile;
}

const HardwareProfile& ProfileFor(const OprojTestCase& c) {
  return oproj::IsMx(c.shape.quantization) ? Trn3Profile() : Trn2Profile();
}

std::ostream& operator<<(std::ostream& os, const OprojTestCase& c) {
  const OprojCase& s = c.shape;
  return os << c.name << (c.variant == Variant::kCte ? " CTE" : " TKG") << " B=" << s.b
            << " N=" << s.n << " D=" << s.d << " S=" << s.s << " H=" << s.h << " "
            << QuantizationTypeName(s.quantization) << (s.bias ? " bias" : "")
            << (c.transpose_out ? " transpose_out" : "") << " LNC=" << c.lnc;
}

OprojTestCase Cte(const char* name, int64_t b, int64_t s, int64_t h, int64_t n, int64_t d,
                  bool bias, QuantizationType q, int lnc, DType dtype) {
  return {name, Variant::kCte, {b, n, d, s, h, q, bias, dtype}, false, lnc};
}

OprojTestCase Tkg(const char* name, int64_t b, int64_t n, int64_t s, int64_t d, int64_t h,
                  QuantizationType q, bool bias, bool transpose_out, int lnc) {
  return {name, Variant::kTkg, {b, n, d, s, h, q, bias}, transpose_out, lnc};
}

OutputProjectionInputs MakeInputs(const OprojTestCase& c, uint64_t seed) {
  return c.variant == Variant::kCte ? MakeCteInputs(c.shape, seed, Partitions())
                                    : MakeTkgInputs(c.shape, seed, Partitions());
}

OprojRun RunCase(const OprojTestCase& c, const OutputProjectionInputs& in) {
  OprojRun run;
  run.lnc = std::make_unique<LogicalCore>(c.lnc, ProfileFor(c));
  run.inputs = in;
  if (c.variant == Variant::kCte) {
    OutputProjectionCteParams params;
    static_cast<OutputProjectionInputs&>(params) = in;
    run.out = OutputProjectionCte(*run.lnc, params);
    run.y = run.out.ToFloats();
    return run;
  }
  OutputProjectionTkgParams params;
  static_cast<OutputProjectionInputs&>(params) = in;
  params.transpose_out = c.transpose_out;
  run.out = OutputProjectionTkg(*run.lnc, params);
  const std::vector<float> raw = run.out.ToFloats();
  if (!c.transpose_out) {
    run.y = raw;
    return run;
  }
  const int64_t rows = c.shape.b * c.shape.s, h = c.shape.h;
  run.y.resize(raw.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t col = 0; col < h; ++col) {
      run.y[r * h + col] = raw[reference::TransposedOutIndex(r, col, rows, h, c.lnc, Partitions())];
    }
  }
  return run;
}

std::vector<float> Golden(const OprojTestCase& c, const OutputProjectionInputs& in, bool rounded) {
  return reference::OutputProjectionRef(c.variant, in.attention, ReferenceInputs(in, rounded));
}

void ExpectMatchesGolden(const OprojTestCase& c, const OprojRun& run) {
  std::cout << "  " << c << "\n";
  const reference::OprojRefInputs ref_inputs = ReferenceInputs(run.inputs);
  const std::vector<float> golden = Golden(c, run.inputs, false);
  const reference::Comparison ref =
      reference::Compare(run.y, golden, reference::OprojTolerance(c.variant, ref_inputs.quant));
  Report("reference_golden", ref);
  EXPECT_TRUE(ref.pass()) << c << ": " << ref.ToString();
  // Only STATIC rounds an input the reference golden keeps exact.
  const bool rounding_differs = c.shape.quantization == QuantizationType::kStatic;
  const reference::Comparison tight = reference::Compare(
      run.y, rounding_differs ? Golden(c, run.inputs, true) : golden, {1e-5, 1.0 / 128});
  Report("rounding_aware_golden", tight);
  EXPECT_TRUE(tight.pass()) << c << ": " << tight.ToString();
}

TEST_P(OprojCaseTest, MatchesGolden) { ExpectMatchesGolden(GetParam(), RunCase(GetParam())); }

std::string CaseName(const ::testing::TestParamInfo<OprojTestCase>& info) {
  return info.param.name;
}

void ExpectNoCoreToCoreTraffic(const LogicalCore& lnc) {
  EXPECT_EQ(CountInstructions(lnc, "sendrecv"), 0);
  EXPECT_EQ(CountInstructions(lnc, "core_barrier"), 0);
  for (int i = 0; i < lnc.lnc(); ++i) {
    EXPECT_EQ(lnc.core(i).Summary().busy_ns[EngineIndex(Engine::kLink)], 0.0) << "core " << i;
  }
}

int64_t CountInstructions(const LogicalCore& lnc, const std::string& name) {
  int64_t count = 0;
  for (int i = 0; i < lnc.lnc(); ++i) {
    for (const InstructionRecord& r : lnc.core(i).timeline().records()) {
      if (name == r.name) ++count;
    }
  }
  return count;
}

}  // namespace nkisim::kernels::testing
