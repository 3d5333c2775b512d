// Host time of the simulator on the two QKV cases of docs/qkv.md, each next to its baseline in the
// same run: OpenBLAS sgemm (fp32, one thread) of the same [B*S, H] x [H, I] product, which is
// the arithmetic the simulator must do at the least. The ratio says how much the tiling,
// conversions, DMA copies, norms, RoPE and timeline recording cost on top of it. Times are wall
// clock: the simulator runs one host thread per simulated core (two here), sgemm one thread.
//   decode:  B = 4, S = 1,    H = 8192, n_q = 8,  n_kv = 1, d = 128, RMS, LNC = 2 (TKG)
//   prefill: B = 1, S = 2048, H = 4096, n_q = 16, n_kv = 8, d = 128, RMS, fused RoPE, LNC = 2 (CTE)
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "kernels/qkv/qkv.h"
#include "kernels/qkv/qkv_case.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/rng.h"

namespace {

using nkisim::kernels::NormType;
using nkisim::kernels::QkvCaseOptions;

QkvCaseOptions Decode() {
  QkvCaseOptions o;
  o.b = 4, o.s = 1, o.h = 8192, o.n_q = 8, o.n_kv = 1, o.d = 128, o.norm = NormType::kRmsNorm;
  return o;
}

QkvCaseOptions Prefill() {
  QkvCaseOptions o;
  o.b = 1, o.s = 2048, o.h = 4096, o.n_q = 16, o.n_kv = 8, o.d = 128, o.norm = NormType::kRmsNorm;
  o.rope = true;
  return o;
}

double Flops(const QkvCaseOptions& o) {
  return 2.0 * o.b * o.s * o.h * static_cast<double>((o.n_q + 2 * o.n_kv) * o.d);
}

void SimulateQkv(benchmark::State& state, const QkvCaseOptions& o) {
  const nkisim::kernels::QkvParams params = nkisim::kernels::MakeQkvCase(o);
  double sim_ns = 0;
  for (auto _ : state) {
    nkisim::LogicalCore lnc(2, nkisim::Trn2Profile());
    benchmark::DoNotOptimize(nkisim::kernels::Qkv(lnc, params).output.buffer().data());
    sim_ns = lnc.now();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(Flops(o) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["simulated_us"] = sim_ns / 1000;
}

void SgemmBaseline(benchmark::State& state, const QkvCaseOptions& o) {
  openblas_set_num_threads(1);
  const int m = static_cast<int>(o.b * o.s), k = static_cast<int>(o.h);
  const int n = static_cast<int>((o.n_q + 2 * o.n_kv) * o.d);
  std::vector<float> a(static_cast<size_t>(m) * k), b(static_cast<size_t>(k) * n),
      c(static_cast<size_t>(m) * n);
  const nkisim::CounterRng rng(7, 1);
  for (size_t i = 0; i < a.size(); ++i) a[i] = rng.Uniform(i, -1.0f, 1.0f);
  for (size_t i = 0; i < b.size(); ++i) b[i] = rng.Uniform(a.size() + i, -1.0f, 1.0f);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a.data(), k, b.data(), n,
                0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(Flops(o) * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

// Wall time: the simulator runs one host thread per simulated core, the baseline one thread.
BENCHMARK_CAPTURE(SimulateQkv, decode, Decode())
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
BENCHMARK_CAPTURE(SgemmBaseline, decode, Decode())
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();
BENCHMARK_CAPTURE(SimulateQkv, prefill, Prefill())
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();
BENCHMARK_CAPTURE(SgemmBaseline, prefill, Prefill())
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->UseRealTime();

// Console output as usual; each case's simulator and baseline times are kept for its ratio.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      const std::string& name = run.run_name.function_name;  // "SimulateQkv/decode"
      const std::string kase = name.substr(name.find('/') + 1);
      (name.rfind("Sgemm", 0) == 0 ? baseline_ms_ : simulator_ms_)[kase] =
          run.GetAdjustedRealTime();
    }
  }
  void PrintRatios() const {
    for (const auto& [kase, sim] : simulator_ms_) {
      const auto blas = baseline_ms_.find(kase);
      if (blas == baseline_ms_.end()) continue;
      std::printf("%s: simulator %.1f ms, OpenBLAS sgemm of the same product %.1f ms, ratio %.2f\n",
                  kase.c_str(), sim, blas->second, sim / blas->second);
    }
  }

 private:
  std::map<std::string, double> simulator_ms_, baseline_ms_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  return 0;
}
