// Host speed of the simulator's nc_matmul on one 128x128x512 bf16 tile, side by side with
// OpenBLAS sgemm of the same shape (fp32, single thread) in the same run, and their ratio.
// The simulated instruction converts its bf16 operands to fp32, calls sgemm into PSUM and records
// itself on the timeline, so the ratio measures the simulator's overhead around the math.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "runtime/hardware_profile.h"
#include "runtime/neuron_core.h"
#include "runtime/nisa/matmul.h"
#include "runtime/rng.h"

namespace {

constexpr int kK = 128, kM = 128, kN = 512;
constexpr double kFlops = 2.0 * kK * kM * kN;

void FillTile(const nkisim::Tile& tile, uint64_t id) {
  std::vector<float> values(static_cast<size_t>(tile.numel()));
  nkisim::CounterRng rng(7, id);
  for (size_t i = 0; i < values.size(); ++i) values[i] = rng.Uniform(i, -1.0f, 1.0f);
  tile.FromFloats(values);
}

void BM_NcMatmulBf16(benchmark::State& state) {
  nkisim::NeuronCore core(0, nkisim::Trn2Profile());
  nkisim::ScopedCurrentCore scope(core);
  nkisim::Tile stationary = core.AllocateSbuf("stationary", {kK, kM}, nkisim::DType::kBFloat16);
  nkisim::Tile moving = core.AllocateSbuf("moving", {kK, kN}, nkisim::DType::kBFloat16);
  nkisim::Tile psum = core.AllocatePsum("psum", {kM, kN});
  FillTile(stationary, 1);
  FillTile(moving, 2);
  for (auto _ : state) {
    nkisim::nisa::nc_matmul(psum, stationary, moving);
    benchmark::DoNotOptimize(psum.element_ptr(0, 0));
  }
  state.counters["GFLOP/s"] = benchmark::Counter(kFlops * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_NcMatmulBf16)->MinTime(1.0);

void BM_OpenBlasSgemm(benchmark::State& state) {
  openblas_set_num_threads(1);
  std::vector<float> a(kK * kM), b(kK * kN), c(kM * kN);
  nkisim::CounterRng rng(7, 3);
  for (size_t i = 0; i < a.size(); ++i) a[i] = rng.Uniform(i, -1.0f, 1.0f);
  for (size_t i = 0; i < b.size(); ++i) b[i] = rng.Uniform(i + a.size(), -1.0f, 1.0f);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kM, kN, kK, 1.0f, a.data(), kM, b.data(),
                kN, 0.0f, c.data(), kN);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(kFlops * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}
BENCHMARK(BM_OpenBlasSgemm)->MinTime(1.0);

// Console output as usual, plus the GFLOP/s of each run kept for the ratio line.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) gflops_[run.benchmark_name()] = run.counters.at("GFLOP/s");
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> gflops_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  const auto sim = reporter.gflops_.find("BM_NcMatmulBf16/min_time:1.000");
  const auto blas = reporter.gflops_.find("BM_OpenBlasSgemm/min_time:1.000");
  if (sim != reporter.gflops_.end() && blas != reporter.gflops_.end()) {
    std::printf("nc_matmul bf16 %.1f GFLOP/s, OpenBLAS sgemm %.1f GFLOP/s, ratio %.3f (target >= 0.8)\n",
                sim->second, blas->second, sim->second / blas->second);
  }
  benchmark::Shutdown();
  return 0;
}
