#include "tests/kernels/attention/attention_tkg_test_util.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>

#include "kernels/reference/attention_ref.h"
#include "runtime/cost_model.h"
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

AttentionTkgParams MakeTkgParamsWithNew(const TkgCase& c, uint64_t seed) {
  AttentionTkgParams p = MakeTkgParams(c, seed);
  for (const char* name : {"k_new", "v_new"}) {
    TensorView t = TensorView::Create({c.bl, c.d}, c.dtype, name);
    FillUniform(t, CounterRng(seed, TensorIdFromName(name)), -1.0f, 1.0f);
    (std::string(name) == "k_new" ? p.k_new : p.v_new) = t;
  }
  for (int64_t b = 0; b < c.bl; ++b) {
    for (int64_t e = 0; e < c.d; ++e) {
      p.k_cache.set({b, e, c.t - 1}, 50.0f);
      p.v_cache.set({b, c.t - 1, e}, 50.0f);
    }
  }
  return p;
}

namespace {

TensorView CopyOf(const TensorView& t) {
  TensorView out = TensorView::Create(t.shape(), t.dtype(), t.name() + "_with_new");
  const std::vector<float> values = t.ToFloats();
  const Shape& shape = t.shape();
  for (int64_t i = 0; i < t.numel(); ++i) {
    out.set({i / (shape[1] * shape[2]), (i / shape[2]) % shape[1], i % shape[2]},
            values[static_cast<size_t>(i)]);
  }
  return out;
}

}  // namespace

TensorView KCacheWithNew(const AttentionTkgParams& p) {
  TensorView k = CopyOf(p.k_cache);
  const int64_t last = k.dim(2) - 1;
  for (int64_t b = 0; b < k.dim(0); ++b) {
    for (int64_t e = 0; e < k.dim(1); ++e) k.set({b, e, last}, p.k_new.get({b, e}));
  }
  return k;
}

TensorView VCacheWithNew(const AttentionTkgParams& p) {
  TensorView v = CopyOf(p.v_cache);
  const int64_t last = v.dim(1) - 1;
  for (int64_t b = 0; b < v.dim(0); ++b) {
    for (int64_t e = 0; e < v.dim(2); ++e) v.set({b, last, e}, p.v_new.get({b, e}));
  }
  return v;
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

namespace {

// Every input and the output crossing HBM once: q in, out (q's shape), K and V.
double TkgHbmBytes(const AttentionTkgParams& p) {
  return static_cast<double>(p.q.size_bytes()) * 2 +
         static_cast<double>(p.k_cache.size_bytes() + p.v_cache.size_bytes());
}

}  // namespace

double TkgRooflineNs(const AttentionTkgParams& p, int lnc) {
  const HardwareProfile& prof = Trn2Profile();
  const double bytes = TkgHbmBytes(p);
  const double flops = 4.0 * p.q.dim(0) * p.q.dim(1) * p.q.dim(2) * p.k_cache.dim(2);
  return std::max(bytes / (lnc * prof.hbm_gbps_per_core()),
                  flops / (lnc * PeakBf16Tflops(prof) * 1000.0));
}

double TkgStreamFloorNs(const AttentionTkgParams& p, int lnc) {
  return StreamFloorNs(Trn2Profile(), TkgHbmBytes(p) / lnc);
}

void ExpectTkgWithinRoofline(const TkgCase& c, double ratio_limit, bool check_golden,
                             bool with_new) {
  const AttentionTkgParams p = with_new ? MakeTkgParamsWithNew(c) : MakeTkgParams(c);
  // The golden's caches: with k_new / v_new, as the kernel leaves them (checked before the run).
  const TensorView k_ref = with_new && check_golden ? KCacheWithNew(p) : p.k_cache;
  const TensorView v_ref = with_new && check_golden ? VCacheWithNew(p) : p.v_cache;
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
  // No kernel beats the stream floor: the roofline plus the first load's and the store's fixed
  // DMA costs (runtime/cost_model.h).
  EXPECT_GE(sim, TkgStreamFloorNs(p, c.lnc)) << c.name;
  EXPECT_LE(ratio, ratio_limit) << c.name;
  if (check_golden) {
    EXPECT_TRUE(WithinTolerance(run.out.ToFloats(),
                                reference::AttentionTkgRef(p.q, k_ref, v_ref),
                                TkgTolerance(c.dtype), c.name));
  }
}

}  // namespace nkisim::kernels::testing
