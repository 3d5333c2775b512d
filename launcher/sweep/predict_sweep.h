// A predict sweep of `nkisim sweep`: a sweep file with a `model` axis (Hugging Face config.json
// files), whose every point is one `nkisim predict` evaluation (model/predict.h: the
// whole model's TTFT, TPOT and HBM under one plan) instead of a `nkisim run` of one layer. Its axes
// are model x hardware_profile x lnc x batch x input_tokens x output_tokens x plans (plans
// innermost); its shape is every axis value but the plan. Targets tpot_ms_max / ttft_ms_max make
// the verdict name, per shape, the fastest plan that fits HBM and meets them. The points run in
// this process (the predict library, ranks as threads), one at a time. docs/predict.md, "Sweeps".
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/predict.h"
#include "proto/sweep.pb.h"

namespace nkisim::launcher {

struct PredictSweepPoint {
  int index = 0;
  int shape = 0;
  // Every axis value: "model=Llama-3.1-8B plan=tp8 batch=4 input_tokens=512 output_tokens=128
  // lnc=2 profile=trn2". Unique within a sweep.
  std::string key;
  std::string model;    // the config file's name without ".json" / ".config.json"
  std::string profile;  // the axis value as written, "trn2" for the built-in
  PredictRequest request;  // exactly one plan
};

struct PredictSweepShape {
  // "Llama-3.1-8B B=4 S=512 N=128", then the lnc and profile when their axes have several values.
  std::string label;
  std::vector<int> points;  // in plan order
};

struct PredictSweep {
  proto::Sweep spec;
  std::string source, title, output;
  double tpot_ms_max = 0, ttft_ms_max = 0;  // 0: no target
  std::vector<PredictSweepPoint> points;
  std::vector<PredictSweepShape> shapes;
};

// A sweep with a model axis is a predict sweep.
bool IsPredictSweep(const proto::Sweep& spec);

// Resolves and checks the whole sweep before any point runs: the fields of a layer sweep (base,
// base_file, kv_length, seq_len, algorithm) refused, the required axes present, every axis value
// (batch, input_tokens, output_tokens >= 1, lnc 1 or 2, each once; targets >= 0 and finite), every
// model file and profile loadable, the plans' fields, then every point's request with predict's
// rules (CheckPredictRequest). Throws Error(kBadConfig) listing every problem with the points it
// concerns (exit 14).
PredictSweep ResolvePredictSweep(const proto::Sweep& spec, const std::string& source);

struct PredictPointResult {
  bool ok = false;
  std::string error;  // why the point failed
  PlanPrediction prediction;
  double wall_s = 0;  // host time of the point
};
using PredictSweepResults = std::vector<std::optional<PredictPointResult>>;  // per point; empty: not run

// Runs the points in order, one at a time, with a progress line per point on stderr, and calls
// after_shape(results) when a shape's points are done. A point that throws is recorded as failed
// with its error and the sweep goes on.
PredictSweepResults RunPredictSweep(const PredictSweep& sweep,
                                    const std::function<void(const PredictSweepResults&)>& after_shape);

// The verdict's choice among one shape's plans. A plan is a candidate when it was simulated, fits
// HBM and meets the targets set (TPOT <= tpot_ms_max, TTFT <= ttft_ms_max); the fastest is the
// candidate with the least request latency, TTFT + (N - 1) x TPOT (the time to a request's last
// token), the first in plan order on a tie.
struct PlanOutcome {
  std::string plan;
  bool simulated = false, fits = false;
  double ttft_ms = 0, tpot_ms = 0;
};
struct ShapeVerdict {
  int fastest = -1;                 // index into the outcomes; -1: no plan qualifies
  std::vector<std::string> reasons;  // per outcome: "" (a candidate) or why not ("TPOT 5.10 > 4.00 ms")
};
double RequestLatencyMs(const PlanOutcome& o, int output_tokens);
ShapeVerdict ChooseFastest(const std::vector<PlanOutcome>& outcomes, int output_tokens, double tpot_ms_max,
                           double ttft_ms_max);

// Outputs (predict_sweep_output.cc): <out>.csv, one row per point (point, model, plan, tp,
// attention_dp, lnc, instances, batch, input_tokens, output_tokens, profile, ttft_ms, tpot_ms,
// device_tpot_ms, host_ms_per_step, latency_ms, tokens_per_s, tokens_per_s_per_instance,
// hbm_gib_per_rank, hbm_capacity_gib_per_rank, fits, meets_targets, status, error, wall_s);
// <out>.json (the same per point plus predict's JSON of the plan under "prediction");
// <out>.verdict.txt (the verdict per shape, also printed).
std::string PredictSweepCsv(const PredictSweep& sweep, const PredictSweepResults& results);
std::string PredictSweepJson(const PredictSweep& sweep, const PredictSweepResults& results);
std::string PredictSweepVerdict(const PredictSweep& sweep, const PredictSweepResults& results);
void WritePredictSweepOutputs(const PredictSweep& sweep, const PredictSweepResults& results,
                              const std::string& out);

// Plots (predict_sweep_plots.cc, gnuplot as the layer sweep's): <out>.tpot.{png,svg}, TPOT
// against batch, one panel per model, input and output length (and lnc / profile), a line per
// plan; <out>.ttft.{png,svg}, TTFT against input length, one panel per model and batch, a line
// per plan. The targets as dashed lines; points that do not fit HBM hollow. Script and data:
// <out>.plots.gp, <out>.tpot.dat, <out>.ttft.dat. Returns the images written.
std::vector<std::string> WritePredictSweepPlots(const PredictSweep& sweep, const PredictSweepResults& results,
                                                const std::string& out, const std::string& gnuplot = "gnuplot");

}  // namespace nkisim::launcher
