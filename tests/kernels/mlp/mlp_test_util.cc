#include "tests/kernels/mlp/mlp_test_util.h"

#include <algorithm>
#include <iostream>

#include "kernels/reference/mlp_ref.h"
#include "runtime/cost_model.h"

namespace nkisim::kernels::testing {

std::ostream& operator<<(std::ostream& os, const MlpTestCase& c) { return os << c.name; }

std::string CaseName(const ::testing::TestParamInfo<MlpTestCase>& info) { return info.param.name; }

namespace {

MlpTestCase Case(const char* name, int64_t b, int64_t s, int64_t h, int64_t i, int lnc, DType dtype,
                 QuantizationType quant, MlpVariant variant) {
  MlpCaseOptions o;
  o.b = b;
  o.s = s;
  o.h = h;
  o.i = i;
  o.dtype = dtype;
  o.quant = quant;
  o.variant = variant;
  o.seed = 7;
  return {name, o, lnc};
}

}  // namespace

MlpTestCase Tkg(const char* name, int64_t tokens, int64_t h, int64_t i, int lnc, DType dtype,
                QuantizationType quant) {
  return Case(name, tokens, 1, h, i, lnc, dtype, quant, MlpVariant::kTkg);
}

MlpTestCase Cte(const char* name, int64_t s, int64_t h, int64_t i, int lnc, DType dtype) {
  return Case(name, 1, s, h, i, lnc, dtype, QuantizationType::kNone, MlpVariant::kCte);
}

MlpRun RunCase(const MlpTestCase& c) { return RunCase(c, MakeMlpCase(c.options)); }

MlpRun RunCase(const MlpTestCase& c, const MlpParams& params) {
  MlpRun run;
  run.lnc = std::make_unique<LogicalCore>(c.lnc, Trn2Profile());
  run.params = params;
  run.result = Mlp(*run.lnc, run.params);
  run.sim_ns = run.lnc->now();
  return run;
}

void ExpectMatchesGolden(const MlpTestCase& c) {
  const MlpRun run = RunCase(c);
  const reference::MlpGolden golden = reference::MlpReference(run.params);
  const reference::Tolerance tol = reference::MlpTolerance(run.params.quantization);
  const reference::Comparison out =
      reference::Compare(run.result.output.ToFloats(), golden.output, tol);
  std::cout << "    " << c.name << " (" << MlpVariantName(run.result.variant) << ", LNC " << c.lnc
            << ", " << run.sim_ns << " ns): " << out.ToString() << "\n";
  EXPECT_TRUE(out.pass()) << c.name << ": " << out.ToString();
  if (run.result.fused_hidden.valid()) {
    const reference::Comparison fused = reference::Compare(
        run.result.fused_hidden.ToFloats(), golden.fused_hidden, reference::kMlpTolerance);
    EXPECT_TRUE(fused.pass()) << c.name << " fused_hidden: " << fused.ToString();
  }
}

Roofline RooflineOf(const MlpRun& run) {
  const MlpParams& p = run.params;
  const HardwareProfile& prof = run.lnc->profile();
  const int cores = run.lnc->lnc();
  double bytes = 0;
  for (const TensorView* t :
       {&p.hidden, &p.residual, &p.gamma, &p.beta, &p.gate_w, &p.up_w, &p.down_w, &p.gate_bias,
        &p.up_bias, &p.down_bias, &run.result.output, &run.result.fused_hidden}) {
    if (t->valid()) bytes += static_cast<double>(t->size_bytes());
  }
  for (const TensorView* t :
       {&p.gate_w_scale, &p.up_w_scale, &p.down_w_scale, &p.gate_up_in_scale, &p.down_in_scale}) {
    if (t->valid()) bytes += static_cast<double>(t->size_bytes() / t->dim(0));  // rows identical
  }
  const double flops = 6.0 * static_cast<double>(p.hidden.numel()) * p.gate_w.dim(1);
  Roofline r;
  r.hbm_ns = bytes / (prof.hbm_gbps_per_core() * cores);
  r.pe_ns = flops / (PeakBf16Tflops(prof) * 1000.0 * cores);
  r.stream_floor_ns = StreamFloorNs(prof, bytes / cores);
  for (int c = 0; c < cores; ++c) {
    const CoreSummary s = run.lnc->core(c).Summary();
    for (Engine e : {Engine::kPE, Engine::kVector, Engine::kScalar, Engine::kGpSimd}) {
      r.engine_floor_ns = std::max(r.engine_floor_ns, s.busy_ns[EngineIndex(e)]);
    }
  }
  return r;
}

double Roofline::target_ns() const {
  double target = std::max(hbm_ns, pe_ns);
  if (hbm_ns >= pe_ns) target = std::max(target, stream_floor_ns);
  return std::max(target, engine_floor_ns);
}

}  // namespace nkisim::kernels::testing
