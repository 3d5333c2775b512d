#include "tests/kernels/attention/attention_cte_test_util.h"

#include <iostream>

#include "kernels/reference/causal_attention_ref.h"
#include "runtime/cost_model.h"
#include "runtime/hardware_profile.h"
#include "runtime/pe_throttle.h"
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
  const HardwareProfile& p = lnc.profile();
  const double flops = exact ? AttentionCausalFlops(c.b, c.n_q, c.s, c.d)
                             : AttentionCteFlops(c.b, c.n_q, c.s, c.d);
  // The matmul flops at the nc_matmul row's full rate: a [128 x 128] stationary against 512
  // moving columns, MatmulNs(p, 128, 512, bf16) = 512 PE cycles for 2 x 128 x 128 x 512 flops,
  // spread over the cores.
  const double per_matmul_flops = 2.0 * p.partitions() * p.pe_cols() * p.pe_max_moving_free();
  const double work_ns =
      flops / per_matmul_flops * MatmulNs(p, p.pe_cols(), p.pe_max_moving_free(), DType::kBFloat16) /
      lnc.lnc();
  // That work as one burst on a cold PE (runtime/pe_throttle.h): the current ramp costs a cold
  // start about 750 ns on trn2 (0.5 T + T^2 / 12000 ns of work in the first T <= 3000 ns).
  PeThrottle cold;
  return cold.Run(p, 0.0, work_ns);
}

}  // namespace nkisim::kernels::testing
