// The table, JSON and verdict of a predict sweep (launcher/sweep/predict_sweep.h).
#include <nlohmann/json.hpp>

#include "launcher/sweep/predict_sweep.h"
#include "runtime/error.h"
#include "runtime/output_file.h"

namespace nkisim::launcher {
namespace {

constexpr double kGiB = 1073741824.0;

std::string CsvField(const std::string& value) {
  if (value.find_first_of(",\"\n") == std::string::npos) return value;
  std::string out = "\"";
  for (char c : value) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

const char* Status(const std::optional<PredictPointResult>& r) {
  if (!r) return "pending";
  return r->ok ? "ok" : "failed";
}

PlanOutcome OutcomeOf(const PredictSweepPoint& point, const std::optional<PredictPointResult>& r) {
  PlanOutcome o;
  o.plan = point.request.plans.front().name;
  if (!r || !r->ok) return o;
  o.simulated = r->prediction.simulated;
  o.fits = r->prediction.fits;
  o.ttft_ms = r->prediction.ttft_ms;
  o.tpot_ms = r->prediction.tpot_ms;
  return o;
}

bool MeetsTargets(const PredictSweep& sweep, const PlanOutcome& o) {
  return ChooseFastest({o}, 1, sweep.tpot_ms_max, sweep.ttft_ms_max).fastest == 0;
}

std::string Num(double v, const char* format) { return StrPrintf(format, v); }

std::string Targets(const PredictSweep& sweep) {
  std::string t;
  if (sweep.tpot_ms_max > 0) t += StrPrintf("TPOT <= %.2f ms", sweep.tpot_ms_max);
  if (sweep.ttft_ms_max > 0) t += StrCat(t.empty() ? "" : ", ", StrPrintf("TTFT <= %.1f ms", sweep.ttft_ms_max));
  return t.empty() ? "no targets" : "targets " + t;
}

// "tp32: TTFT 295.4 ms, TPOT 2.75 ms, latency 644.9 ms, HBM 0.74 of 24.00 GiB"
std::string Described(const PredictSweepPoint& point, const PlanPrediction& p) {
  return StrPrintf("%s: TTFT %.1f ms, TPOT %.3f ms, latency %.1f ms, HBM %.2f of %.2f GiB",
                   p.plan.name.c_str(), p.ttft_ms, p.tpot_ms,
                   p.ttft_ms + (point.request.output_tokens - 1) * p.tpot_ms, p.hbm_bytes / kGiB,
                   p.hbm_capacity / kGiB);
}

std::string ShapeLine(const PredictSweep& sweep, const PredictSweepShape& shape, const PredictSweepResults& results,
                      std::map<std::string, int>& fastest_count) {
  std::vector<PlanOutcome> outcomes;
  for (int pi : shape.points) outcomes.push_back(OutcomeOf(sweep.points[pi], results[pi]));
  const int n = sweep.points[shape.points.front()].request.output_tokens;
  const ShapeVerdict v = ChooseFastest(outcomes, n, sweep.tpot_ms_max, sweep.ttft_ms_max);
  std::string line = shape.label + ": ";
  double best_latency = 0;
  if (v.fastest >= 0) {
    const int bi = shape.points[v.fastest];
    line += StrCat("fastest that fits and meets the targets: ", Described(sweep.points[bi], results[bi]->prediction));
    best_latency = RequestLatencyMs(outcomes[v.fastest], n);
    ++fastest_count[outcomes[v.fastest].plan];
  } else {
    line += "NO PLAN fits and meets the targets";
  }
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (static_cast<int>(i) == v.fastest) continue;
    const PlanOutcome& o = outcomes[i];
    const std::optional<PredictPointResult>& r = results[shape.points[i]];
    line += StrCat("; ", o.plan, " ");
    if (!r) {
      line += "not run";
    } else if (!r->ok) {
      line += StrCat("FAILED (", r->error, ")");
    } else if (!o.simulated) {
      line += StrPrintf("does not fit HBM (over by %.2f GiB; not simulated)",
                        (r->prediction.hbm_bytes - r->prediction.hbm_capacity) / kGiB);
    } else if (v.reasons[i].empty()) {
      line += StrPrintf("%.2fx the latency", RequestLatencyMs(o, n) / best_latency);
    } else {
      line += StrPrintf("TTFT %.1f ms, TPOT %.3f ms: ", o.ttft_ms, o.tpot_ms) + v.reasons[i];
      if (!o.fits) {
        line += StrPrintf(" (over by %.2f GiB)", (r->prediction.hbm_bytes - r->prediction.hbm_capacity) / kGiB);
      }
    }
  }
  return line + "\n";
}

}  // namespace

std::string PredictSweepCsv(const PredictSweep& sweep, const PredictSweepResults& results) {
  std::string out =
      "point,model,plan,tp,attention_dp,lnc,instances,batch,input_tokens,output_tokens,profile,ttft_ms,tpot_ms,"
      "device_tpot_ms,host_ms_per_step,latency_ms,tokens_per_s,tokens_per_s_per_instance,hbm_gib_per_rank,"
      "hbm_capacity_gib_per_rank,fits,meets_targets,status,error,wall_s\n";
  for (const PredictSweepPoint& point : sweep.points) {
    const PredictRequest& q = point.request;
    const PredictPlan& plan = q.plans.front();
    const std::optional<PredictPointResult>& r = results[point.index];
    out += StrCat(CsvField(point.key), ",", CsvField(point.model), ",", CsvField(plan.name), ",", plan.tp, ",",
                  plan.attention_dp, ",", plan.lnc, ",", q.instances, ",", q.batch, ",", q.input_tokens, ",",
                  q.output_tokens, ",", CsvField(point.profile), ",");
    const PlanOutcome o = OutcomeOf(point, r);
    if (o.simulated) {
      const PlanPrediction& p = r->prediction;
      out += StrCat(Num(p.ttft_ms, "%.4f"), ",", Num(p.tpot_ms, "%.5f"), ",", Num(p.device_tpot_ms, "%.5f"), ",",
                    Num(p.host_ms_per_step, "%.4f"), ",", Num(RequestLatencyMs(o, q.output_tokens), "%.3f"), ",",
                    Num(p.tokens_per_s, "%.2f"), ",", Num(p.tokens_per_s_instance, "%.2f"), ",");
    } else {
      out += ",,,,,,,";
    }
    if (r && r->ok) {
      out += StrCat(Num(r->prediction.hbm_bytes / kGiB, "%.4f"), ",", Num(r->prediction.hbm_capacity / kGiB, "%.4f"),
                    ",", r->prediction.fits ? "true" : "false", ",", MeetsTargets(sweep, o) ? "true" : "false", ",");
    } else {
      out += ",,,,";
    }
    out += StrCat(Status(r), ",", CsvField(r ? r->error : ""), ",", r ? Num(r->wall_s, "%.2f") : "", "\n");
  }
  return out;
}

std::string PredictSweepJson(const PredictSweep& sweep, const PredictSweepResults& results) {
  nlohmann::json points = nlohmann::json::array();
  for (const PredictSweepPoint& point : sweep.points) {
    const PredictRequest& q = point.request;
    const std::optional<PredictPointResult>& r = results[point.index];
    const PlanOutcome o = OutcomeOf(point, r);
    nlohmann::json p = {{"point", point.key},
                        {"shape", sweep.shapes[point.shape].label},
                        {"model", point.model},
                        {"model_file", q.model.source},
                        {"plan", q.plans.front().name},
                        {"tp", q.plans.front().tp},
                        {"attention_dp", q.plans.front().attention_dp},
                        {"lnc", q.plans.front().lnc},
                        {"instances", q.instances},
                        {"batch", q.batch},
                        {"input_tokens", q.input_tokens},
                        {"output_tokens", q.output_tokens},
                        {"profile", point.profile},
                        {"status", Status(r)},
                        {"error", r ? r->error : ""},
                        {"meets_targets", MeetsTargets(sweep, o)}};
    if (o.simulated) p["latency_ms"] = RequestLatencyMs(o, q.output_tokens);
    if (r) p["wall_s"] = r->wall_s;
    if (r && r->ok) p["prediction"] = nlohmann::json::parse(PlanPredictionJson(r->prediction));
    points.push_back(p);
  }
  const nlohmann::json doc = {{"sweep", sweep.source},
                              {"title", sweep.title},
                              {"kind", "predict"},
                              {"tpot_ms_max", sweep.tpot_ms_max},
                              {"ttft_ms_max", sweep.ttft_ms_max},
                              {"points", points}};
  return doc.dump(2) + "\n";
}

std::string PredictSweepVerdict(const PredictSweep& sweep, const PredictSweepResults& results) {
  int ok = 0, failed = 0, pending = 0;
  for (const auto& r : results) {
    ok += r && r->ok;
    failed += r && !r->ok;
    pending += !r;
  }
  std::string out = StrCat("nkisim sweep ", sweep.title, ": whole-model predictions per plan (", Targets(sweep),
                           "; fastest = least TTFT + (N - 1) x TPOT); ", sweep.points.size(), " points, ", ok,
                           " ok, ", failed, " failed", pending ? StrCat(", ", pending, " not run") : "", "\n");
  std::map<std::string, int> fastest_count;
  int none = 0, shapes = 0;
  for (const PredictSweepShape& shape : sweep.shapes) {
    bool any = false;
    for (int pi : shape.points) any = any || results[pi].has_value();
    if (!any) continue;
    ++shapes;
    const std::string line = ShapeLine(sweep, shape, results, fastest_count);
    none += line.find("NO PLAN") != std::string::npos;
    out += line;
  }
  if (shapes > 1) {
    std::string summary = "fastest plan that fits and meets the targets:";
    for (const auto& [plan, count] : fastest_count) summary += StrCat(" ", plan, " in ", count, " of ", shapes, " shapes;");
    out += StrCat(summary, " none in ", none, "\n");
  }
  return out;
}

void WritePredictSweepOutputs(const PredictSweep& sweep, const PredictSweepResults& results, const std::string& out) {
  WriteFileAtomically(out + ".csv", PredictSweepCsv(sweep, results), "sweep table");
  WriteFileAtomically(out + ".json", PredictSweepJson(sweep, results), "sweep results");
  WriteFileAtomically(out + ".verdict.txt", PredictSweepVerdict(sweep, results), "sweep verdict");
}

}  // namespace nkisim::launcher
