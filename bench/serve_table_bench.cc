// `nkisim serve`'s step-cost table built the old way (one whole predict per entry,
// BuildStepCostTableDirect) and the fast way (each distinct layer job once, 1 and 2 at a time,
// BuildStepCostTable) in the same run, then 10,000 Poisson requests simulated on the table: host
// wall and CPU seconds of each, the ratio, and a check that the tables agree (README,
// docs/serving.md "Benchmark").
//   serve_table_bench CONFIG.json TP [RATE]
// The default buckets of `nkisim serve` (max-num-seqs 8, max-model-len 4096): context encoding
// 128 .. 4096, batch 1 .. 8, KV 512 .. 4096; requests 1,500 +- 300 in, 200 +- 50 out.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>

#include "launcher/commands/serve_step_costs.h"
#include "runtime/error.h"
#include "serving/metrics.h"
#include "serving/requests.h"
#include "serving/simulator.h"

namespace {

using namespace nkisim;

struct Clock {
  double wall_s = 0, cpu_s = 0;
};

Clock Now() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return {std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(),
          t.tv_sec + t.tv_nsec * 1e-9};
}

Clock Time(const std::function<void()>& f) {
  const Clock a = Now();
  f();
  const Clock b = Now();
  return {b.wall_s - a.wall_s, b.cpu_s - a.cpu_s};
}

double WorstRelative(const serving::StepCostTable& a, const serving::StepCostTable& golden) {
  double worst = 0;
  for (size_t i = 0; i < golden.prefill_ms.size(); ++i) {
    worst = std::max(worst, std::abs(a.prefill_ms[i] - golden.prefill_ms[i]) / golden.prefill_ms[i]);
  }
  for (size_t b = 0; b < golden.decode_ms.size(); ++b) {
    for (size_t k = 0; k < golden.decode_ms[b].size(); ++k) {
      worst = std::max(worst, std::abs(a.decode_ms[b][k] - golden.decode_ms[b][k]) / golden.decode_ms[b][k]);
    }
  }
  return a.kv_blocks == golden.kv_blocks ? worst : INFINITY;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: serve_table_bench CONFIG.json TP [RATE]\n");
    return 2;
  }
  try {
    launcher::PredictRequest base;
    base.model = launcher::LoadHfConfig(argv[1]);
    base.plans = {launcher::ParsePlan(std::string("tp=") + argv[2])};
    const double rate = argc > 3 ? std::atof(argv[3]) : 8.0;
    const std::vector<int> cte = serving::PowerOfTwoBuckets(128, 4096), batch = serving::PowerOfTwoBuckets(1, 8),
                           kv = serving::PowerOfTwoBuckets(512, 4096);
    serving::StepCostTable direct, fast1, fast2;
    const Clock d = Time([&] { direct = launcher::BuildStepCostTableDirect(base, cte, batch, kv, 32); });
    const Clock f1 = Time([&] { fast1 = launcher::BuildStepCostTable(base, cte, batch, kv, 32, nullptr, 1); });
    const Clock f2 = Time([&] { fast2 = launcher::BuildStepCostTable(base, cte, batch, kv, 32, nullptr, 2); });
    serving::GeneratorSpec g;
    g.request_rate = rate;
    g.num_prompts = 10000;
    g.input = serving::ParseLengthDist("normal:1500,300", "--input-len");
    g.output = serving::ParseLengthDist("normal:200,50", "--output-len");
    serving::SchedulerConfig c;
    c.max_model_len = 4096;
    c.timeline_interval_ms = 1;
    serving::SimulationResult result;
    const Clock s = Time([&] { result = serving::Simulate(fast2, c, serving::GenerateRequests(g)); });
    const serving::Metrics m = serving::ComputeMetrics(result, serving::Slo{});
    std::printf("model %s, plan %s: %zu prefill x %zu batch x %zu KV buckets\n", argv[1], fast2.plan.c_str(),
                cte.size(), batch.size(), kv.size());
    std::printf("%-34s %10s %10s\n", "", "wall s", "CPU s");
    std::printf("%-34s %10.2f %10.2f\n", "table, direct (predict per entry)", d.wall_s, d.cpu_s);
    std::printf("%-34s %10.2f %10.2f\n", "table, fast, 1 job at a time", f1.wall_s, f1.cpu_s);
    std::printf("%-34s %10.2f %10.2f\n", "table, fast, 2 jobs at a time", f2.wall_s, f2.cpu_s);
    std::printf("%-34s %10.2f %10.2f\n", "10,000 Poisson requests simulated", s.wall_s, s.cpu_s);
    std::printf("speed-up (direct / fast-2): %.2fx wall, %.2fx CPU; table + simulation: %.2f s wall\n",
                d.wall_s / f2.wall_s, d.cpu_s / f2.cpu_s, f2.wall_s + s.wall_s);
    std::printf("worst relative difference fast vs direct: %.3g (1 job: %.3g); %lld requests completed\n",
                WorstRelative(fast2, direct), WorstRelative(fast1, direct), static_cast<long long>(m.completed));
    return WorstRelative(fast2, direct) <= 1e-9 && WorstRelative(fast1, direct) <= 1e-9 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "serve_table_bench: %s\n", e.what());
    return 14;
  }
}
