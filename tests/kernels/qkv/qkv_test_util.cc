#include "tests/kernels/qkv/qkv_test_util.h"

#include <algorithm>
#include <iostream>

#include "kernels/reference/qkv_ref.h"
#include "runtime/cost_model.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"

namespace nkisim::kernels::testing {

QkvResult RunQkv(const QkvParams& params, int lnc, QkvVariant variant) {
  LogicalCore core(lnc, Trn2Profile());
  return Qkv(core, params, variant);
}

double RooflineNs(const QkvParams& params, const QkvResult& result, int lnc) {
  QkvParams p = params;
  double bytes = static_cast<double>(result.output.size_bytes());
  for (const auto& [name, t] : QkvTensors(p)) {
    if (t->valid()) bytes += static_cast<double>(t->size_bytes());
  }
  const Shape& x = params.input.shape();
  const double flops = 2.0 * x[0] * x[1] * x[2] * params.fused_qkv_weights.dim(1);
  const HardwareProfile& prof = Trn2Profile();
  // The HBM side is StreamFloorNs (runtime/cost_model.h): each core's bytes through its port
  // plus the two fixed DMA latencies no stream hides (the first load's, the last store's).
  return std::max(StreamFloorNs(prof, bytes / lnc), flops / (lnc * PeakBf16Tflops(prof) * 1000));
}

void ExpectWithinRoofline(const QkvParams& params, int lnc, double ratio_limit,
                          const std::string& label) {
  LogicalCore core(lnc, Trn2Profile());
  const QkvResult result = Qkv(core, params);
  const double bound = RooflineNs(params, result, lnc), ratio = core.now() / bound;
  std::cout << label << ": simulated " << core.now() << " ns, roofline " << bound << " ns, ratio "
            << ratio << "\n";
  ::testing::Test::RecordProperty(label + "_ratio_to_roofline", std::to_string(ratio));
  EXPECT_GT(ratio, 1.0) << label;
  EXPECT_LT(ratio, ratio_limit) << label;
}

::testing::AssertionResult MatchesGolden(const QkvParams& params, const QkvResult& result,
                                         const std::string& label) {
  const reference::QkvGolden golden = reference::QkvReference(params);
  const reference::Tolerance tol =
      reference::QkvTolerance(result.variant, params.quantization_type);
  ::testing::AssertionResult out =
      WithinTolerance(result.output.ToFloats(), golden.output, tol, label + " output");
  if (!out || !result.fused_hidden.valid()) return out;
  return WithinTolerance(result.fused_hidden.ToFloats(), golden.fused_hidden, tol,
                         label + " fused_hidden");
}

std::string GridCaseName(const ::testing::TestParamInfo<QkvGridCase>& info) {
  return info.param.name;
}

void PrintTo(const QkvGridCase& c, std::ostream* os) { *os << c.name << " (LNC " << c.lnc << ")"; }

TEST_P(QkvGridTest, MatchesGolden) {
  const QkvGridCase& c = GetParam();
  const QkvParams params = MakeQkvCase(c.options);
  const QkvResult result = RunQkv(params, c.lnc);
  EXPECT_EQ(result.variant, c.variant) << c.name;
  EXPECT_TRUE(MatchesGolden(params, result, c.name));
  if (params.fused_residual_add && result.variant == QkvVariant::kTkg) {
    EXPECT_TRUE(result.fused_hidden.valid())
        << c.name << ": TKG with fused add returns fused_hidden";
  }
}

}  // namespace nkisim::kernels::testing
