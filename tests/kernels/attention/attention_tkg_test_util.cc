#include "tests/kernels/attention/attention_tkg_test_util.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "kernels/reference/attention_ref.h"
#include "runtime/hardware_profile.h"
#include "runtime/rng.h"
#include "runtime/timeline.h"

namespace nkisim::kernels::testing {

void PrintTo(const TkgCase& c, std::ostream* os) { *os << c.name; }
std::string TkgCaseName(const ::testing::TestParamInfo<TkgCase>& info) { return info.param.name; }

AttentionTkgParams MakeTkgParams(const TkgCase& c, uint64_t seed) {
  auto make = [&](const Shape& shape, const char* name, float lo, float hi) {
    TensorView t = TensorView::Create(shape, c.dtype, name);
    FillUniform(t, CounterRng(seed, TensorIdFromName(name)), lo, hi);
    return t;
  };
  return {make({c.g, c.bl, c.d}, "q", -2.0f, 2.0f), make({c.bl, c.d, c.t}, "k_cache", -1.0f, 1.0f),
          make({c.bl, c.t, c.d}, "v_cache", -1.0f, 1.0f)};
}

TkgRun RunTkg(const AttentionTkgParams& params, int lnc) {
  TkgRun run{std::make_unique<LogicalCore>(lnc, Trn2Profile()), TensorView()};
  run.out = AttentionTkg(*run.lnc, params);
  return run;
}

reference::Tolerance TkgTolerance(DType dtype) {
  return dtype == DType::kFloat32 ? reference::Tolerance{1e-5, 1e-4}
                                  : reference::Tolerance{1e-5, 2e-2};
}

double TkgRooflineNs(const AttentionTkgParams& p, int lnc) {
  const HardwareProfile& prof = Trn2Profile();
  const double bytes = static_cast<double>(p.q.size_bytes()) * 2 +  // q in, out (q's shape)
                       static_cast<double>(p.k_cache.size_bytes() + p.v_cache.size_bytes());
  const double flops = 4.0 * p.q.dim(0) * p.q.dim(1) * p.q.dim(2) * p.k_cache.dim(2);
  return std::max(bytes / (lnc * prof.hbm_gbps_per_core()),
                  flops / (lnc * PeakBf16Tflops(prof) * 1000.0));
}

void ExpectTkgWithinRoofline(const TkgCase& c, double ratio_limit, bool check_golden) {
  const AttentionTkgParams p = MakeTkgParams(c);
  const TkgRun run = RunTkg(p, c.lnc);
  const double bound = TkgRooflineNs(p, c.lnc), sim = run.lnc->now(), ratio = sim / bound;
  std::cout << c.name << ": simulated " << sim << " ns = " << ratio << "x the bound (" << bound
            << " ns)\n";
  ::testing::Test::RecordProperty(c.name + "_ratio_to_roofline", std::to_string(ratio));
  if (std::getenv("NKISIM_TKG_SUMMARY") != nullptr) {
    for (int i = 0; i < run.lnc->lnc(); ++i) {
      std::cout << FormatSummary(run.lnc->core(i).Summary());
      if (std::getenv("NKISIM_TKG_TRACE") == nullptr) continue;
      for (const InstructionRecord& r : run.lnc->core(i).timeline().records()) {
        std::cout << "  " << r.name << " " << EngineName(r.engine) << " " << r.start_ns << " "
                  << r.end_ns << " " << r.bytes << " " << r.shapes.data() << "\n";
      }
    }
  }
  EXPECT_GT(ratio, 1.0) << c.name;
  EXPECT_LE(ratio, ratio_limit) << c.name;
  if (check_golden) {
    EXPECT_TRUE(WithinTolerance(run.out.ToFloats(),
                                reference::AttentionTkgRef(p.q, p.k_cache, p.v_cache),
                                TkgTolerance(c.dtype), c.name));
  }
}

}  // namespace nkisim::kernels::testing
