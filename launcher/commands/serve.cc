#include "launcher/commands/serve.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

#include "launcher/commands/common_options.h"
#include "launcher/commands/serve_step_costs.h"
#include "launcher/sweep/plots.h"
#include "runtime/error.h"
#include "runtime/output_file.h"
#include "serving/capacity.h"
#include "serving/metrics.h"
#include "serving/requests.h"
#include "serving/simulator.h"

namespace nkisim::launcher {
namespace {

using serving::StepCostTable;

void Progress(const std::string& line) {
  std::fprintf(stderr, "serve: %s\n", line.c_str());
  std::fflush(stderr);
}

struct Options {
  std::string model, json, csv, plots, gnuplot = "gnuplot", save_costs, load_costs;
  std::vector<std::string> plans;
  int tp = 0, attention_dp = 1, lnc = 2, instances = 1;
  // requests
  std::string trace_file, arrival = "poisson", input_len = "1024", output_len = "128";
  double request_rate = 0;
  double target_rate = 0;  // --target-rate: the load the fleet must serve (several plans)
  int concurrency = 0, prefix_groups = 0, prefix_tokens = 0;
  int64_t num_prompts = 1000;
  uint64_t seed = 0;
  // buckets and scheduler
  std::string cte_buckets, tkg_buckets, batch_buckets;
  int max_model_len = 4096;
  bool max_model_len_given = false;  // --max-model-len on the command line (else the table's)
  serving::SchedulerConfig sched;
  std::string load_balance = "round_robin";
  // SLOs
  std::string slo;
  bool find_max_rate = false;
  double rate_tolerance = 0.02;
  int max_points = 24;
  CommonOptions common;
};

std::vector<std::string> Assumptions(const Options& o, const StepCostTable& t) {
  const serving::SchedulerConfig& c = o.sched;
  std::vector<std::string> a = {
      StrCat("step costs of plan '", t.plan, "' from predict's simulation, built once: prefill = predict's TTFT of ",
             "the bucket's tokens at batch 1; decode step = predict's L decode layers simulated at the KV bucket's ",
             "length + its LM head at the batch bucket (no interpolation); the first layer's extra ",
             "(its QKV not overlapped) not charged per step"),
      StrCat("host time ", t.host_ms_per_step, " ms per step (profile host_ms_per_step), ",
             c.async_mode ? "async mode: overlapped, a step takes max(device, host)" : "added to every step"),
      "a prefill pays its context-encoding bucket; several prompts admitted in one step are prefilled one after "
      "another (batch 1 each)",
      "a decode step pays the smallest compiled batch bucket >= the live sequences and KV bucket >= the longest "
      "sequence, however many slots are live",
      c.enable_chunked_prefill
          ? "chunked prefill: a step = the decodes + prompt chunks (max_num_batched_tokens, at most the largest "
            "bucket) in one bucket; a chunk's attention over earlier chunks is not priced"
          : "prefill first (vLLM's default): a step with a prompt to admit prefills, else decodes",
      StrCat("KV cache: ", t.kv_blocks, " blocks of ", c.block_size, " tokens per replica (HBM per logical core ",
             "left after weights, activations, scratch and embedding / LM head share, at the largest batch bucket)"),
      c.enable_prefix_caching ? "prefix caching: full blocks of a shared prefix kept in an LRU of unreferenced blocks"
                              : "no prefix caching",
      "preemption by recompute: the latest-admitted sequence is freed when a decode needs a block and none is free",
      StrCat(c.replicas, " replica(s) of the plan, ", o.load_balance, " load balancing; replicas share nothing"),
      "refused (counted, not served): a prompt over the largest context-encoding bucket (no chunked prefill) or over "
      "max_num_batched_tokens, prompt + output over max_model_len, more KV blocks than a replica holds",
      "TPOT = (e2e - TTFT) / (output tokens - 1), as vllm bench serve; the first token comes from the prefill; "
      "sampling, detokenization and network not modeled",
  };
  return a;
}

std::string Header(const std::vector<std::string>& assumptions) {
  std::string s = "assumptions:\n";
  for (const std::string& a : assumptions) s += StrCat("  - ", a, "\n");
  return s;
}

std::string Num(double v) { return StrPrintf("%.6g", v); }

// The plots (PNG and SVG): latency CDFs, occupancy over time, and with --find-max-rate the
// throughput and p99 latencies against the offered rate with the SLO knee.
std::vector<std::string> DrawPlots(const std::string& prefix, const serving::SimulationResult& r,
                                   const serving::Slo& slo, const serving::CapacityResult* cap, int64_t kv_blocks,
                                   const std::string& gnuplot) {
  std::vector<double> ttft, tpot, e2el;
  for (const auto& x : r.records) {
    if (x.rejected || x.finish_ms < 0) continue;
    ttft.push_back(x.ttft_ms());
    e2el.push_back(x.e2e_ms());
    if (x.tpot_ms() >= 0) tpot.push_back(x.tpot_ms());
  }
  std::string cdf;
  for (std::vector<double>* v : {&ttft, &tpot, &e2el}) {
    std::sort(v->begin(), v->end());
    const size_t n = v->size(), stride = std::max<size_t>(1, n / 2000);
    for (size_t i = 0; i < n; i += stride) cdf += StrCat(Num((*v)[i]), " ", Num(double(i + 1) / n), "\n");
    if (n > 0) cdf += StrCat(Num(v->back()), " 1\n");
    if (n == 0) cdf += "1 0\n";
    cdf += "\n\n";
  }
  std::string timeline;
  for (const auto& s : r.timeline) {
    timeline += StrCat(Num(s.t_ms / 1000.0), " ", s.running, " ", s.waiting, " ",
                       Num(kv_blocks > 0 ? 100.0 * s.kv_blocks_used / kv_blocks : 0), "\n");
  }
  if (timeline.empty()) timeline = "0 0 0 0\n";
  const std::string base = std::filesystem::path(prefix).filename().string();
  auto term = [&](const std::string& name, int w, int h) {
    return StrCat("set terminal pngcairo size ", w, ",", h, " noenhanced font 'sans,10'\nset output ",
                  GnuplotQuote(base + "." + name + ".png"), "\n");
  };
  auto svg = [&](const std::string& name, int w, int h) {
    return StrCat("set terminal svg size ", w, ",", h, " noenhanced font 'sans,10' background '#ffffff'\nset output ",
                  GnuplotQuote(base + "." + name + ".svg"), "\nreplot\nset output\n");
  };
  std::string gp = "# nkisim serve plots: rerun with `gnuplot " + base + ".plots.gp` in this directory\n";
  gp += term("latency_cdf", 1200, 700);
  gp += "set title 'Latency CDFs (per request)'\nset xlabel 'ms (log scale)'\nset ylabel 'fraction of requests'\n";
  gp += "set logscale x\nset grid\nset key bottom right\nset yrange [0:1.02]\n";
  if (slo.ttft_p99_ms > 0) gp += StrCat("set arrow from ", Num(slo.ttft_p99_ms), ",0 to ", Num(slo.ttft_p99_ms),
                                        ",1.02 nohead dt 2 lc rgb '#1f77b4'\n");
  if (slo.tpot_p99_ms > 0) gp += StrCat("set arrow from ", Num(slo.tpot_p99_ms), ",0 to ", Num(slo.tpot_p99_ms),
                                        ",1.02 nohead dt 2 lc rgb '#d62728'\n");
  gp += "set arrow from graph 0, first 0.99 to graph 1, first 0.99 nohead dt 3 lc rgb '#888888'\n";
  gp += StrCat("plot ", GnuplotQuote(base + ".cdf.dat"), " index 0 using 1:2 with steps lw 2 lc rgb '#1f77b4' title 'TTFT', ",
               "'' index 1 using 1:2 with steps lw 2 lc rgb '#d62728' title 'TPOT', ",
               "'' index 2 using 1:2 with steps lw 2 lc rgb '#2ca02c' title 'end-to-end'\n");
  gp += svg("latency_cdf", 1200, 700);
  gp += "unset arrow\nunset logscale x\nset yrange [*:*]\n";
  gp += term("occupancy", 1200, 700);
  gp += "set title 'Occupancy over time (all replicas)'\nset xlabel 'time (s)'\nset ylabel 'sequences'\n";
  gp += "set y2label 'KV blocks used (% of one replica x replicas)'\nset y2range [0:105]\nset ytics nomirror\nset y2tics\n";
  gp += "set key top left\n";
  gp += StrCat("plot ", GnuplotQuote(base + ".timeline.dat"), " using 1:2 with lines lw 2 title 'running (slots)', ",
               "'' using 1:3 with lines lw 2 title 'waiting (queue)', ",
               "'' using 1:4 axes x1y2 with lines lw 1 dt 2 title 'KV blocks %'\n");
  gp += svg("occupancy", 1200, 700);
  gp += "unset y2label\nunset y2tics\nset ytics mirror\n";
  std::vector<std::string> images;
  for (const char* n : {"latency_cdf", "occupancy"}) {
    images.push_back(StrCat(prefix, ".", n, ".png"));
    images.push_back(StrCat(prefix, ".", n, ".svg"));
  }
  std::string capacity;
  if (cap != nullptr) {
    std::vector<serving::RatePoint> pts = cap->points;
    std::sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) { return a.request_rate < b.request_rate; });
    for (const auto& p : pts) {
      capacity += StrCat(Num(p.request_rate), " ", Num(p.metrics.request_throughput), " ",
                         Num(p.metrics.latency_ms.at("p99_ttft_ms")), " ", Num(p.metrics.latency_ms.at("p99_tpot_ms")),
                         " ", p.meets ? 1 : 0, "\n");
    }
    gp += "unset title\nunset y2range\nset autoscale y\n";
    gp += term("capacity", 1200, 900);
    gp += "set multiplot layout 2,1 title 'Throughput and p99 latency against offered load'\n";
    gp += "set xlabel 'offered request rate (req/s)'\nset ylabel 'completed req/s'\nset key top left\n";
    gp += StrCat("set arrow from ", Num(cap->max_rate), ", graph 0 to ", Num(cap->max_rate),
                 ", graph 1 nohead dt 2 lc rgb '#000000'\n");
    gp += StrCat("set label 'max rate meeting SLOs: ", Num(cap->max_rate), " req/s' at ", Num(cap->max_rate),
                 ", graph 0.92 offset 1,0\n");
    gp += StrCat("plot ", GnuplotQuote(base + ".capacity.dat"), " using 1:2 with linespoints pt 7 lw 2 title 'throughput', ",
                 "x with lines dt 3 lc rgb '#888888' title 'offered'\n");
    gp += "unset label\nset ylabel 'p99 (ms, log scale)'\nset logscale y\n";
    gp += StrCat("plot ", GnuplotQuote(base + ".capacity.dat"), " using 1:3 with linespoints pt 7 lw 2 title 'p99 TTFT', ",
                 "'' using 1:4 with linespoints pt 5 lw 2 title 'p99 TPOT'",
                 slo.ttft_p99_ms > 0 ? StrCat(", ", Num(slo.ttft_p99_ms), " with lines dt 2 title 'TTFT SLO'") : "",
                 slo.tpot_p99_ms > 0 ? StrCat(", ", Num(slo.tpot_p99_ms), " with lines dt 2 title 'TPOT SLO'") : "",
                 "\n");
    gp += "unset multiplot\nunset logscale y\nunset arrow\n";
    // SVG: the multiplot drawn again.
    gp += StrCat("set terminal svg size 1200,900 noenhanced font 'sans,10' background '#ffffff'\nset output ",
                 GnuplotQuote(base + ".capacity.svg"), "\n");
    gp += "set multiplot layout 2,1 title 'Throughput and p99 latency against offered load'\nset ylabel 'completed req/s'\n";
    gp += StrCat("set arrow from ", Num(cap->max_rate), ", graph 0 to ", Num(cap->max_rate),
                 ", graph 1 nohead dt 2 lc rgb '#000000'\n");
    gp += StrCat("plot ", GnuplotQuote(base + ".capacity.dat"), " using 1:2 with linespoints pt 7 lw 2 title 'throughput', ",
                 "x with lines dt 3 lc rgb '#888888' title 'offered'\n");
    gp += "set ylabel 'p99 (ms, log scale)'\nset logscale y\n";
    gp += StrCat("plot ", GnuplotQuote(base + ".capacity.dat"), " using 1:3 with linespoints pt 7 lw 2 title 'p99 TTFT', ",
                 "'' using 1:4 with linespoints pt 5 lw 2 title 'p99 TPOT'\n");
    gp += "unset multiplot\nset output\n";
    images.push_back(prefix + ".capacity.png");
    images.push_back(prefix + ".capacity.svg");
  }
  WriteFileAtomically(prefix + ".cdf.dat", cdf, "--plots");
  WriteFileAtomically(prefix + ".timeline.dat", timeline, "--plots");
  if (cap != nullptr) WriteFileAtomically(prefix + ".capacity.dat", capacity, "--plots");
  WriteFileAtomically(prefix + ".plots.gp", gp, "--plots");
  RunGnuplotScript(prefix, images, gnuplot);
  return images;
}

serving::LoadBalance ParseLoadBalance(const std::string& s) {
  if (s == "round_robin") return serving::LoadBalance::kRoundRobin;
  if (s == "least_outstanding") return serving::LoadBalance::kLeastOutstanding;
  Raise(ErrorCode::kBadConfig,
        StrCat("--load-balance: '", s, "': unknown; the policies are round_robin, least_outstanding"));
}

serving::GeneratorSpec Generator(const Options& o, double rate) {
  serving::GeneratorSpec g;
  g.arrival = o.concurrency > 0 ? serving::GeneratorSpec::Arrival::kConcurrency
              : o.arrival == "fixed" ? serving::GeneratorSpec::Arrival::kFixedRate
                                     : serving::GeneratorSpec::Arrival::kPoisson;
  g.request_rate = rate;
  g.concurrency = o.concurrency;
  g.num_prompts = o.num_prompts;
  g.input = serving::ParseLengthDist(o.input_len, "--input-len");
  g.output = serving::ParseLengthDist(o.output_len, "--output-len");
  g.prefix_groups = o.prefix_groups;
  g.prefix_tokens = o.prefix_tokens;
  g.seed = o.seed;
  return g;
}

// Every problem of the flags that needs no file read, at once.
void CheckFlags(const Options& o, bool rate_given) {
  std::vector<std::string> p;
  const bool trace = !o.trace_file.empty();
  if (o.model.empty() && o.load_costs.empty()) p.push_back("--model: missing: required (or --step-costs FILE)");
  if (trace && (rate_given || o.concurrency > 0)) {
    p.push_back("--trace-file: given with --request-rate / --concurrency: the trace sets the arrivals; give one");
  }
  if (!trace && !rate_given && o.concurrency == 0) {
    p.push_back("--request-rate / --concurrency / --trace-file: none given: one is required");
  }
  if (rate_given && o.concurrency > 0) p.push_back("--request-rate and --concurrency: give one (open or closed loop)");
  if (rate_given && !(o.request_rate > 0)) p.push_back(StrCat("--request-rate: ", o.request_rate, ": must be > 0"));
  if (o.concurrency < 0) p.push_back(StrCat("--concurrency: ", o.concurrency, ": must be >= 1"));
  if (o.arrival != "poisson" && o.arrival != "fixed") {
    p.push_back(StrCat("--arrival: '", o.arrival, "': unknown; the arrivals are poisson, fixed"));
  }
  if (o.num_prompts < 1) p.push_back(StrCat("--num-prompts: ", o.num_prompts, ": must be >= 1"));
  if (o.max_model_len < 1) p.push_back(StrCat("--max-model-len: ", o.max_model_len, ": must be >= 1"));
  if (o.find_max_rate && o.slo.empty()) p.push_back("--find-max-rate: needs --slo NAME=MS[,...]");
  if (o.find_max_rate && (trace || o.concurrency > 0)) {
    p.push_back("--find-max-rate: needs generated open-loop arrivals (--request-rate, the first rate tried)");
  }
  if (!(o.rate_tolerance > 0 && o.rate_tolerance < 1)) {
    p.push_back(StrCat("--rate-tolerance: ", o.rate_tolerance, ": must be in (0, 1)"));
  }
  if (!o.model.empty() && o.load_costs.empty() && o.tp == 0 && o.plans.empty()) {
    p.push_back("--tp / --plan: none given: the plan to serve is required with --model");
  }
  if (o.plans.size() + (o.tp != 0 ? 1 : 0) > 1) {
    if (!o.find_max_rate) p.push_back("--plan: several plans: compared only with --find-max-rate");
    if (o.model.empty() || !o.load_costs.empty()) p.push_back("--plan: several plans: need --model, not --step-costs");
    if (!o.csv.empty() || !o.plots.empty() || !o.save_costs.empty()) {
      p.push_back("--plan: several plans: --csv, --plots and --save-step-costs take one plan");
    }
  }
  if (o.target_rate < 0 || !std::isfinite(o.target_rate)) {
    p.push_back(StrCat("--target-rate: ", o.target_rate, ": must be > 0"));
  }
  if (o.target_rate > 0 && o.plans.size() + (o.tp != 0 ? 1 : 0) < 2) {
    p.push_back("--target-rate: needs several plans (--plan ... --plan ... --find-max-rate) to compare");
  }
  if (o.max_points < 2) p.push_back(StrCat("--max-points: ", o.max_points, ": must be >= 2"));
  if (p.size() == 1) Raise(ErrorCode::kBadConfig, "serve: " + p.front());
  if (!p.empty()) {
    std::string s = StrCat("serve: ", p.size(), " problems:");
    for (const auto& x : p) s += "\n  " + x;
    Raise(ErrorCode::kBadConfig, s);
  }
}

// The step-cost table of one plan of o.model (buckets from the flags), built from predict.
StepCostTable PlanTable(const Options& o, const std::string& plan_text) {
  PredictRequest base;
  base.model = LoadHfConfig(o.model);
  base.profile_path = o.common.profile_path;
  base.instances = o.instances;
  PredictPlan plan = plan_text.empty() ? PredictPlan{"", o.tp, o.attention_dp, o.lnc, 1} : ParsePlan(plan_text);
  if (plan.name.empty()) plan.name = DefaultPlanName(plan);
  if (plan.replicas > 1) {
    Raise(ErrorCode::kBadConfig, StrCat("--plan ", plan_text, ": replicas: give the serving replicas as --replicas"));
  }
  base.plans = {plan};
  // The replicas' ranks within the instances (as predict checks its plan's replicas).
  const HardwareProfile hw = LoadProfile(o.common);
  const int64_t per_instance =
      plan.lnc >= 1 ? int64_t{hw.physical_cores_per_chip()} / plan.lnc * hw.chips_per_instance() : 0;
  if (per_instance > 0 && int64_t{plan.tp} * o.sched.replicas > per_instance * o.instances) {
    Raise(ErrorCode::kBadConfig,
          StrCat("--replicas: ", o.sched.replicas, " x tp ", plan.tp, " = ", int64_t{plan.tp} * o.sched.replicas,
                 " ranks: more than ", o.instances, o.instances == 1 ? " instance holds (" : " instances hold (",
                 per_instance, " ranks each at LNC ", plan.lnc, "; raise --instances)"));
  }
  if (base.model.max_positions > 0 && o.max_model_len > base.model.max_positions) {
    Raise(ErrorCode::kBadConfig, StrCat("--max-model-len: ", o.max_model_len, ": must be <= the model's ",
                                        "max_position_embeddings (", base.model.max_positions, ")"));
  }
  const std::vector<int> kv = o.tkg_buckets.empty()
                                  ? serving::PowerOfTwoBuckets(std::min(512, o.max_model_len), o.max_model_len)
                                  : serving::ParseBuckets(o.tkg_buckets, "--token-generation-buckets");
  if (kv.back() > o.max_model_len) {
    Raise(ErrorCode::kBadConfig, StrCat("--token-generation-buckets: ", kv.back(), ": must be <= --max-model-len (",
                                        o.max_model_len, ")"));
  }
  const std::vector<int> cte = o.cte_buckets.empty()
                                   ? serving::PowerOfTwoBuckets(std::min(128, o.max_model_len), o.max_model_len)
                                   : serving::ParseBuckets(o.cte_buckets, "--context-encoding-buckets");
  if (cte.back() > o.max_model_len) {
    Raise(ErrorCode::kBadConfig, StrCat("--context-encoding-buckets: ", cte.back(), ": must be <= --max-model-len (",
                                        o.max_model_len, ")"));
  }
  const int g = plan.attention_dp;
  const std::vector<int> batch = o.batch_buckets.empty()
                                     ? serving::PowerOfTwoBuckets(g, std::max(g, (o.sched.max_num_seqs + g - 1) / g * g))
                                     : serving::ParseBuckets(o.batch_buckets, "--batch-buckets");
  for (int b : batch) {
    if (b % g != 0) {
      Raise(ErrorCode::kBadConfig, StrCat("--batch-buckets: ", b, ": must be a multiple of the plan's attention_dp (",
                                          g, ")"));
    }
  }
  serving::CheckSchedulerConfig(o.sched, StepCostTable{"", cte, {}, batch, kv, {}, 0, 0});
  return BuildStepCostTable(base, cte, batch, kv, o.sched.block_size, Progress);
}

// Several plans with --find-max-rate: each plan's table and max rate under the SLOs, and the
// cheapest: the most requests per second per physical NeuronCore (tp x lnc x replicas); with
// --target-rate R, the fewest chips serving R: copies = ceil(R / max rate) of the plan's
// replicas, chips = ceil(copies x physical cores / cores per chip) (each copy then gets R / copies
// of the arrivals, round-robin: no burstier than the Poisson load its max rate was found at).
void ComparePlans(Options& o, const serving::Slo& slo) {
  std::vector<std::string> texts = o.plans;
  if (o.tp != 0) texts.insert(texts.begin(), StrCat("tp=", o.tp, ",attention_dp=", o.attention_dp, ",lnc=", o.lnc));
  for (const std::string& t : texts) ParsePlan(t);  // every plan checked before any is built
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::string best, fewest_chips_plan;
  double best_per_core = 0, fewest_chips_rate = 0;
  int64_t fewest_chips = 0;
  const int64_t cores_per_chip = std::max<int64_t>(1, LoadProfile(o.common).physical_cores_per_chip());
  std::printf("%-16s %8s %14s %16s %14s %14s%s\n", "plan", "cores", "max req/s", "req/s per core", "p99 TTFT ms",
              "p99 TPOT ms", o.target_rate > 0 ? StrPrintf(" %8s %8s", "copies", "chips").c_str() : "");
  for (const std::string& text : texts) {
    const PredictPlan plan = ParsePlan(text);
    const StepCostTable table = PlanTable(o, text);
    serving::SchedulerConfig c = o.sched;
    c.max_model_len = std::min(o.max_model_len, table.kv_buckets.back());
    serving::CheckSchedulerConfig(c, table);
    auto run = [&](double rate) {
      return serving::ComputeMetrics(serving::Simulate(table, c, serving::GenerateRequests(Generator(o, rate))), slo);
    };
    const serving::CapacityResult cap =
        serving::FindMaxRate(run, slo, o.request_rate, o.rate_tolerance, o.max_points, [&](const serving::RatePoint& p) {
          Progress(StrPrintf("%s: rate %.4g req/s: p99 TTFT %.2f ms, p99 TPOT %.3f ms, %lld refused: %s",
                             plan.name.c_str(), p.request_rate, p.metrics.latency_ms.at("p99_ttft_ms"),
                             p.metrics.latency_ms.at("p99_tpot_ms"), static_cast<long long>(p.metrics.rejected),
                             p.meets ? "meets" : "fails"));
        });
    const int cores = plan.tp * plan.lnc * o.sched.replicas;
    const double per_core = cap.max_rate / cores;
    double ttft = 0, tpot = 0;
    for (const auto& p : cap.points) {
      if (p.request_rate == cap.max_rate) {
        ttft = p.metrics.latency_ms.at("p99_ttft_ms");
        tpot = p.metrics.latency_ms.at("p99_tpot_ms");
      }
    }
    // --target-rate: the copies of this plan (x --replicas) and chips that serve it; 0: none can.
    const int64_t copies = cap.max_rate > 0 ? static_cast<int64_t>(std::ceil(o.target_rate / cap.max_rate - 1e-12)) : 0;
    const int64_t chips = (copies * cores + cores_per_chip - 1) / cores_per_chip;
    std::printf("%-16s %8d %14.4g %16.4g %14.2f %14.3f%s\n", plan.name.c_str(), cores, cap.max_rate, per_core, ttft,
                tpot, o.target_rate > 0 ? StrPrintf(" %8lld %8lld", static_cast<long long>(copies),
                                                    static_cast<long long>(chips)).c_str() : "");
    if (o.target_rate > 0 && copies > 0 &&
        (fewest_chips_plan.empty() || chips < fewest_chips ||
         (chips == fewest_chips && copies * cap.max_rate > fewest_chips_rate))) {
      fewest_chips_plan = plan.name;
      fewest_chips = chips;
      fewest_chips_rate = copies * cap.max_rate;
    }
    std::fflush(stdout);
    if (cap.max_rate > 0 && per_core > best_per_core) {
      best_per_core = per_core;
      best = plan.name;
    }
    rows.push_back({{"plan", plan.name}, {"physical_cores", cores}, {"max_request_rate", cap.max_rate},
                    {"request_rate_per_core", per_core}, {"p99_ttft_ms", ttft}, {"p99_tpot_ms", tpot},
                    {"runs", cap.points.size()},
                    {"copies_for_target_rate", copies}, {"chips_for_target_rate", chips}, {"step_costs", nlohmann::ordered_json::parse(
                                                                    serving::StepCostTableJson(table))}});
  }
  const std::string verdict =
      best.empty() ? StrCat("no plan meets ", o.slo, " at any rate tried")
                   : StrCat("cheapest plan meeting ", o.slo, ": ", best, " (", StrPrintf("%.4g", best_per_core),
                            " req/s per physical NeuronCore, ", o.sched.replicas, " replica(s))");
  std::printf("verdict: %s\n", verdict.c_str());
  std::string target_verdict;
  if (o.target_rate > 0) {
    target_verdict = fewest_chips_plan.empty()
                         ? StrCat("no plan serves ", Num(o.target_rate), " req/s within ", o.slo)
                         : StrCat("fewest chips serving ", Num(o.target_rate), " req/s within ", o.slo, ": ",
                                  fewest_chips_plan, " (", fewest_chips, " chip(s))");
    std::printf("verdict: %s\n", target_verdict.c_str());
  }
  if (!o.json.empty()) {
    nlohmann::ordered_json j;
    j["model"] = o.model;
    j["slo"] = o.slo;
    j["plans"] = rows;
    j["verdict"] = verdict;
    j["cheapest_plan"] = best;
    if (o.target_rate > 0) {
      j["target_rate"] = o.target_rate;
      j["physical_cores_per_chip"] = cores_per_chip;
      j["target_verdict"] = target_verdict;
      j["fewest_chips_plan"] = fewest_chips_plan;
      j["fewest_chips"] = fewest_chips;
    }
    WriteFileAtomically(o.json, j.dump(2) + "\n", "--json");
    std::printf("json: %s\n", o.json.c_str());
  }
}

void RunServe(Options& o, bool rate_given) {
  CheckFlags(o, rate_given);
  for (const auto& [path, what] : {std::pair{o.json, "--json"}, {o.csv, "--csv"}, {o.save_costs, "--save-step-costs"}}) {
    if (!path.empty()) CheckWritable(path, what);
  }
  if (!o.plots.empty()) {
    CheckWritable(o.plots + ".plots.gp", "--plots");
    CheckGnuplot(o.gnuplot);
  }
  const serving::Slo slo = o.slo.empty() ? serving::Slo{} : serving::ParseSlo(o.slo);
  o.sched.load_balance = ParseLoadBalance(o.load_balance);
  // Requests first: a bad trace is refused before any simulation.
  std::vector<serving::Request> requests;
  if (!o.trace_file.empty()) {
    requests = serving::ReadTrace(o.trace_file);
  } else if (!o.find_max_rate) {
    requests = serving::GenerateRequests(Generator(o, o.request_rate));
  } else {
    serving::GenerateRequests(Generator(o, o.request_rate));  // its checks
  }
  if (o.concurrency > 0) o.sched.closed_loop_users = o.concurrency;
  if (o.plans.size() + (o.tp != 0 ? 1 : 0) > 1) {
    ComparePlans(o, slo);
    return;
  }

  StepCostTable table;
  std::string model_name;
  const auto t0 = std::chrono::steady_clock::now();
  if (!o.load_costs.empty()) {
    std::ifstream in(o.load_costs);
    if (!in) Raise(ErrorCode::kBadConfig, StrCat("--step-costs: '", o.load_costs, "': cannot be read"));
    std::stringstream text;
    text << in.rdbuf();
    table = serving::ParseStepCostTable(text.str(), o.load_costs);
    // The table was built for contexts up to its largest KV bucket (<= the model's
    // max_position_embeddings then): a longer --max-model-len is refused, not clamped.
    if (o.max_model_len_given && o.max_model_len > table.kv_buckets.back()) {
      Raise(ErrorCode::kBadConfig,
            StrCat("--max-model-len: ", o.max_model_len, ": must be <= the largest token_generation_bucket of --step-costs '",
                   o.load_costs, "' (", table.kv_buckets.back(), "), the context its plan was built for"));
    }
    if (o.max_model_len_given && !o.model.empty()) {
      const int max_positions = LoadHfConfig(o.model).max_positions;
      if (max_positions > 0 && o.max_model_len > max_positions) {
        Raise(ErrorCode::kBadConfig, StrCat("--max-model-len: ", o.max_model_len, ": must be <= the model's ",
                                            "max_position_embeddings (", max_positions, ")"));
      }
    }
    if (o.max_model_len > table.kv_buckets.back()) o.max_model_len = table.kv_buckets.back();
  } else {
    table = PlanTable(o, o.plans.empty() ? "" : o.plans.front());
    model_name = o.model;
  }
  const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  o.sched.max_model_len = std::min(o.max_model_len, table.kv_buckets.back());
  serving::CheckSchedulerConfig(o.sched, table);
  if (!o.save_costs.empty()) WriteFileAtomically(o.save_costs, serving::StepCostTableJson(table), "--save-step-costs");

  const std::vector<std::string> assumptions = Assumptions(o, table);
  std::printf("nkisim serve: plan %s%s, %d replica(s), max_num_seqs %d, max_num_batched_tokens %d, "
              "max_model_len %d, block_size %d%s%s%s\n",
              table.plan.c_str(), model_name.empty() ? "" : (" of " + model_name).c_str(), o.sched.replicas,
              o.sched.max_num_seqs, o.sched.max_num_batched_tokens, o.sched.max_model_len, o.sched.block_size,
              o.sched.enable_chunked_prefill ? ", chunked prefill" : "",
              o.sched.enable_prefix_caching ? ", prefix caching" : "", o.sched.async_mode ? ", async mode" : "");
  std::printf("step costs (built in %.1f s): prefill ms by bucket:", build_s);
  for (size_t i = 0; i < table.prefill_buckets.size(); ++i) {
    std::printf(" %d: %.3f;", table.prefill_buckets[i], table.prefill_ms[i]);
  }
  std::printf("\n  decode step ms (batch bucket x KV bucket");
  for (int k : table.kv_buckets) std::printf(" %d", k);
  std::printf("):\n");
  for (size_t b = 0; b < table.batch_buckets.size(); ++b) {
    std::printf("    batch %3d:", table.batch_buckets[b]);
    for (double v : table.decode_ms[b]) std::printf(" %8.3f", v);
    std::printf("\n");
  }
  std::printf("  host %.3f ms/step; %lld KV blocks of %d tokens per replica\n%s", table.host_ms_per_step,
              static_cast<long long>(table.kv_blocks), o.sched.block_size, Header(assumptions).c_str());

  auto simulate = [&](const std::vector<serving::Request>& q, bool progress) {
    serving::SchedulerConfig c = o.sched;
    const double span = q.empty() ? 0 : q.back().arrival_ms;
    c.timeline_interval_ms = std::max(1.0, span / 2000.0);
    std::function<void(int64_t, int64_t)> report;
    if (progress && q.size() >= 5000) {
      report = [](int64_t done, int64_t total) { Progress(StrCat(done, "/", total, " requests done")); };
    }
    return serving::Simulate(table, c, q, report);
  };

  serving::CapacityResult cap;
  nlohmann::ordered_json extra;
  extra["model"] = model_name;
  extra["plan"] = table.plan;
  extra["assumptions"] = assumptions;
  extra["config"] = {{"max_num_seqs", o.sched.max_num_seqs},
                     {"max_num_batched_tokens", o.sched.max_num_batched_tokens},
                     {"max_model_len", o.sched.max_model_len},
                     {"block_size", o.sched.block_size},
                     {"enable_chunked_prefill", o.sched.enable_chunked_prefill},
                     {"enable_prefix_caching", o.sched.enable_prefix_caching},
                     {"async_mode", o.sched.async_mode},
                     {"replicas", o.sched.replicas},
                     {"load_balance", o.load_balance},
                     {"seed", o.seed}};
  extra["step_costs"] = nlohmann::ordered_json::parse(serving::StepCostTableJson(table));
  if (o.find_max_rate) {
    auto run = [&](double rate) {
      return serving::ComputeMetrics(simulate(serving::GenerateRequests(Generator(o, rate)), false), slo);
    };
    cap = serving::FindMaxRate(run, slo, o.request_rate, o.rate_tolerance, o.max_points, [](const serving::RatePoint& p) {
      Progress(StrPrintf("rate %.4g req/s: p99 TTFT %.2f ms, p99 TPOT %.3f ms, %lld refused: %s", p.request_rate,
                         p.metrics.latency_ms.at("p99_ttft_ms"), p.metrics.latency_ms.at("p99_tpot_ms"),
                         static_cast<long long>(p.metrics.rejected), p.meets ? "meets" : "fails"));
    });
    std::printf("find-max-rate: %s: max request rate %.4g req/s (%zu runs, tolerance %.3g)\n", o.slo.c_str(),
                cap.max_rate, cap.points.size(), o.rate_tolerance);
    nlohmann::ordered_json pts = nlohmann::ordered_json::array();
    for (const auto& p : cap.points) {
      pts.push_back({{"request_rate", p.request_rate}, {"meets", p.meets},
                     {"request_throughput", p.metrics.request_throughput},
                     {"output_throughput", p.metrics.output_throughput},
                     {"p99_ttft_ms", p.metrics.latency_ms.at("p99_ttft_ms")},
                     {"p99_tpot_ms", p.metrics.latency_ms.at("p99_tpot_ms")}});
    }
    extra["find_max_rate"] = {{"slo", o.slo}, {"max_request_rate", cap.max_rate}, {"points", pts}};
    if (cap.max_rate <= 0) {
      std::printf("find-max-rate: no rate tried meets the SLOs; the report below is at the lowest rate tried\n");
    }
    double at = cap.max_rate;
    if (at <= 0) {
      at = o.request_rate;
      for (const auto& p : cap.points) at = std::min(at, p.request_rate);
    }
    requests = serving::GenerateRequests(Generator(o, at));
    std::printf("report at %.4g req/s:\n", at);
  }
  const auto s0 = std::chrono::steady_clock::now();
  const serving::SimulationResult result = simulate(requests, true);
  const double sim_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
  const serving::Metrics m = serving::ComputeMetrics(result, slo);
  std::printf("%s", serving::FormatMetrics(m).c_str());
  int shown = 0;
  for (const auto& x : result.records) {
    if (!x.rejected) continue;
    if (shown++ < 3) {
      std::printf("refused: request %lld: %s\n", static_cast<long long>(x.request.id), x.reject_reason.c_str());
    }
  }
  if (shown > 3) std::printf("refused: ... and %d more (--csv lists them)\n", shown - 3);
  std::printf("simulated %zu requests in %.2f s host time\n", requests.size(), sim_s);
  if (!o.slo.empty()) {
    std::printf("SLOs %s: %s\n", o.slo.c_str(), serving::MeetsSlo(m, slo) ? "met" : "not met");
  }
  extra["simulation_host_s"] = sim_s;
  extra["step_costs_build_host_s"] = build_s;
  // Outputs last, each whole or not at all.
  std::vector<std::string> images;
  if (!o.plots.empty()) {
    images = DrawPlots(o.plots, result, slo, o.find_max_rate ? &cap : nullptr,
                       table.kv_blocks * o.sched.replicas, o.gnuplot);
  }
  if (!o.csv.empty()) {
    WriteFileAtomically(o.csv, serving::RequestsCsv(result), "--csv");
    std::printf("csv: %s\n", o.csv.c_str());
  }
  if (!o.json.empty()) {
    WriteFileAtomically(o.json, serving::MetricsJson(m, extra.dump()), "--json");
    std::printf("json: %s\n", o.json.c_str());
  }
  for (const std::string& i : images) {
    if (i.size() > 4 && i.substr(i.size() - 4) == ".png") std::printf("plot: %s\n", i.c_str());
  }
}

}  // namespace

void AddServeCommand(CLI::App* cmd, int* exit_code) {
  auto o = std::make_shared<Options>();
  auto rate = cmd->add_option("--request-rate", o->request_rate,
                              "requests per second (Poisson unless --arrival fixed); with --find-max-rate the first tried");
  cmd->add_option("--model", o->model, "Hugging Face config.json (configs/models/)");
  cmd->add_option("--plan", o->plans,
                  "the plan tp=N[,attention_dp=G][,lnc=L] (or --tp); repeated with --find-max-rate: each plan's max "
                  "rate and the cheapest per NeuronCore");
  cmd->add_option("--target-rate", o->target_rate,
                  "with several plans and --find-max-rate: the load (req/s) to serve; the verdict names the plan "
                  "serving it within the SLOs on the fewest chips (copies of the plan x --replicas)");
  cmd->add_option("--tp", o->tp, "TP degree of the plan (or give --plan)");
  cmd->add_option("--attention-dp", o->attention_dp, "attention-DP G of the --tp plan (decode)")->capture_default_str();
  cmd->add_option("--lnc", o->lnc, "physical cores per rank of the --tp plan, 1 or 2")->capture_default_str();
  cmd->add_option("--instances", o->instances, "instances the plan may span")->capture_default_str();
  cmd->add_option("--trace-file", o->trace_file,
                  "JSON Lines requests: arrival_ms (or arrival_s / timestamp), input_tokens (prompt_len, input_len), "
                  "output_tokens (output_len), optional prefix_id and prefix_tokens");
  cmd->add_option("--arrival", o->arrival, "arrivals of --request-rate: poisson or fixed")->capture_default_str();
  cmd->add_option("--concurrency", o->concurrency, "closed loop: N users, each sends its next request when one ends");
  cmd->add_option("--num-prompts", o->num_prompts, "requests generated")->capture_default_str();
  cmd->add_option("--input-len", o->input_len, "prompt length: N, normal:MEAN,STD, uniform:LO,HI or histogram:FILE")
      ->capture_default_str();
  cmd->add_option("--output-len", o->output_len, "output length (same forms)")->capture_default_str();
  cmd->add_option("--prefix-groups", o->prefix_groups, "generated requests share prefix i % N (0: none)")
      ->capture_default_str();
  cmd->add_option("--prefix-tokens", o->prefix_tokens, "tokens of each shared prefix")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the generators")->capture_default_str();
  auto max_len = cmd->add_option("--max-model-len", o->max_model_len,
                                 "longest prompt + output served (vLLM max_model_len; with --step-costs at most the "
                                 "table's largest token_generation_bucket, its default)")
                      ->capture_default_str();
  cmd->add_option("--context-encoding-buckets", o->cte_buckets,
                  "prefill buckets, ascending (default: powers of two from 128 to --max-model-len)");
  cmd->add_option("--token-generation-buckets", o->tkg_buckets,
                  "decode KV-length buckets, ascending (default: powers of two from 512 to --max-model-len)");
  cmd->add_option("--batch-buckets", o->batch_buckets,
                  "decode batch buckets, ascending (default: powers of two up to --max-num-seqs)");
  cmd->add_option("--max-num-seqs", o->sched.max_num_seqs, "sequences a replica runs at once (slots)")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->sched.max_num_batched_tokens, "tokens one step may schedule")
      ->capture_default_str();
  cmd->add_flag("--enable-chunked-prefill", o->sched.enable_chunked_prefill, "mix prompt chunks into decode steps");
  cmd->add_flag("--enable-prefix-caching", o->sched.enable_prefix_caching, "keep shared prefixes' KV blocks (LRU)");
  cmd->add_option("--block-size", o->sched.block_size, "tokens per KV block")->capture_default_str();
  cmd->add_flag("--async-mode", o->sched.async_mode, "overlap the host time of a step with the device");
  cmd->add_option("--replicas", o->sched.replicas, "data-parallel replicas of the plan")->capture_default_str();
  cmd->add_option("--load-balance", o->load_balance, "round_robin or least_outstanding")->capture_default_str();
  cmd->add_option("--slo", o->slo, "SLOs for goodput and --find-max-rate: ttft_p99_ms=MS,tpot_p99_ms=MS,e2el_p99_ms=MS");
  cmd->add_flag("--find-max-rate", o->find_max_rate, "bisect the highest Poisson rate meeting --slo");
  cmd->add_option("--rate-tolerance", o->rate_tolerance, "--find-max-rate stops within this fraction")
      ->capture_default_str();
  cmd->add_option("--max-points", o->max_points, "--find-max-rate: at most this many runs")->capture_default_str();
  cmd->add_option("--json", o->json, "metrics JSON (vllm bench serve keys) here");
  cmd->add_option("--csv", o->csv, "one line per request here");
  cmd->add_option("--plots", o->plots, "PREFIX: PREFIX.latency_cdf, .occupancy (and .capacity) .png/.svg via gnuplot");
  cmd->add_option("--gnuplot", o->gnuplot, "the gnuplot program")->capture_default_str();
  cmd->add_option("--save-step-costs", o->save_costs, "write the plan's step-cost table (JSON) here");
  cmd->add_option("--step-costs", o->load_costs, "read the step-cost table from here instead of predicting it");
  AddCommonOptions(cmd, &o->common, kProfileFlag, {});
  cmd->callback([o, exit_code, rate, max_len] {
    o->max_model_len_given = max_len->count() > 0;
    RunServe(*o, rate->count() > 0);
    *exit_code = 0;
  });
}

}  // namespace nkisim::launcher
