#include "tests/kernels/attention/attention_cte_test_util.h"

#include <iostream>

#include "kernels/reference/causal_attention_ref.h"
#include "runtime/hardware_profile.h"
#include "runtime/rng.h"

namespace nkisim::kernels::testing {

std::ostream& operator<<(std::ostream& os, const CteCase& c) {
  return os << c.name << " (B " << c.b << ", S " << c.s << ", n_q " << c.n_q << ", n_kv "
            << c.n_kv << ", d " << c.d << ", LNC " << c.lnc << ", " << DTypeName(c.dtype) << ")";
}

std::string CteCaseName(const ::testing::TestParamInfo<CteCase>& info) { return info.param.name; }

AttentionCteParams MakeCteInputs(const CteCase& c, uint64_t seed) {
  auto make = [&](const char* name, int64_t heads, float lo, float hi) {
    TensorView t = TensorView::Create({heads, c.b, c.s, c.d}, c.dtype, name);
    FillUniform(t, CounterRng(seed, TensorIdFromName(name)), lo, hi);
    return t;
  };
  AttentionCteParams p;
  p.q = make("q", c.n_q, -2.0f, 2.0f);
  p.k = make("k", c.n_kv, -2.0f, 2.0f);
  p.v = make("v", c.n_kv, -1.0f, 1.0f);
  return p;
}

CteRun RunCte(const CteCase& c, const AttentionCteParams& params) {
  CteRun run;
  run.lnc = std::make_unique<LogicalCore>(c.lnc, Trn2Profile());
  run.params = params;
  run.out = AttentionCte(*run.lnc, params);
  return run;
}

reference::Tolerance CteTolerance(DType dtype) {
  return dtype == DType::kFloat32 ? reference::Tolerance{1e-6, 1e-4}
                                  : reference::Tolerance{1e-5, 2e-2};
}

void ExpectCteMatchesGolden(const CteCase& c, const CteRun& run) {
  const std::vector<double> golden =
      reference::CausalAttentionRef(run.params.q, run.params.k, run.params.v);
  const reference::Comparison cmp =
      reference::Compare(run.out.ToFloats(), golden, CteTolerance(c.dtype));
  std::cout << "    " << c << ": " << cmp.ToString() << "\n";
  EXPECT_TRUE(cmp.pass()) << c << ": " << cmp.ToString();
}

double CtePeBoundNs(const CteCase& c, const LogicalCore& lnc, bool exact) {
  const double flops = exact ? AttentionCausalFlops(c.b, c.n_q, c.s, c.d)
                             : AttentionCteFlops(c.b, c.n_q, c.s, c.d);
  return flops / (PeakBf16Tflops(lnc.profile()) * 1000.0 * lnc.lnc());
}

}  // namespace nkisim::kernels::testing
