#include "launcher/sweep/predict_sweep.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "launcher/sweep/sweep_config.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"

namespace nkisim::launcher {
namespace {

// More points than this is a typo in an axis; each point takes seconds.
constexpr size_t kMaxPredictPoints = 2000;

std::string Absolute(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

// "configs/models/Llama-3.1-8B.config.json" -> "Llama-3.1-8B".
std::string ModelName(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  for (const char* suffix : {".config.json", ".json"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      return name.substr(0, name.size() - s.size());
    }
  }
  return name;
}

template <typename T>
std::string Values(const google::protobuf::RepeatedField<T>& values) {
  std::string out = "[";
  for (int i = 0; i < values.size(); ++i) out += StrCat(i ? ", " : "", values[i]);
  return out + "]";
}

// A required count axis: present, each value >= 1 and given once.
std::vector<int> CountAxis(const char* axis, const google::protobuf::RepeatedField<uint32_t>& values,
                           const char* example, SweepProblems& problems) {
  std::vector<int> out;
  std::set<uint32_t> seen;
  if (values.empty()) {
    problems.Add(StrCat(axis, ": empty: a predict sweep needs at least one value (", axis, ": ", example, ")"));
  }
  for (uint32_t v : values) {
    if (v == 0 || v > (1u << 24)) {
      problems.Add(StrCat(axis, ": ", v, ": must be in [1, ", 1u << 24, "]"));
    } else if (!seen.insert(v).second) {
      problems.Add(StrCat(axis, ": ", v, " is given twice; each value of an axis once"));
    } else {
      out.push_back(static_cast<int>(v));
    }
  }
  return out;
}

void CheckTarget(const char* field, double v, SweepProblems& problems) {
  if (!std::isfinite(v) || v < 0) {
    problems.Add(StrCat(field, ": ", v, ": must be a finite number of ms > 0 (0 or absent: no target)"));
  }
}

// The fields of a layer sweep, which a predict sweep does not take.
void RefuseLayerFields(const proto::Sweep& spec, SweepProblems& problems) {
  const std::string why = "a sweep with a model axis predicts whole models from their config.json";
  if (spec.has_base() || !spec.base_file().empty()) {
    problems.Add(StrCat(spec.has_base() ? "base" : "base_file", ": given: ", why,
                        " and takes no base scenario (its axes: model, plans, batch, input_tokens, "
                        "output_tokens, lnc, hardware_profile)"));
  }
  if (!spec.kv_length().empty()) {
    problems.Add(StrCat("kv_length: ", Values(spec.kv_length()), ": ", why,
                        "; its lengths are input_tokens and output_tokens"));
  }
  if (!spec.seq_len().empty()) {
    problems.Add(StrCat("seq_len: ", Values(spec.seq_len()), ": ", why, "; its prompt length is input_tokens"));
  }
  if (!spec.algorithm().empty()) {
    problems.Add(StrCat("algorithm: ", spec.algorithm_size(), " values: ", why,
                        "; predict runs each collective's auto choice, so the axis is not taken"));
  }
}

std::vector<PredictPlan> Plans(const proto::Sweep& spec, SweepProblems& problems) {
  if (spec.plans().empty()) {
    problems.Add("plans: none given; a predict sweep needs the plans axis (plans { tp: 8 } plans { tp: 16 })");
  }
  std::vector<PredictPlan> plans;
  for (int i = 0; i < spec.plans_size(); ++i) {
    const proto::Plan& p = spec.plans(i);
    PredictPlan plan{p.name(), static_cast<int>(p.tp()), static_cast<int>(std::max(1u, p.attention_dp())),
                     p.lnc() == 0 ? 2 : static_cast<int>(p.lnc()), static_cast<int>(std::max(1u, p.replicas()))};
    plans.push_back(plan);
  }
  return plans;
}

struct Axes {
  std::vector<std::string> models;    // as written
  std::vector<HfModel> loaded;        // per model; empty source: did not load
  std::vector<std::string> profiles;  // as written; "" the built-in
  std::vector<int> lncs;              // 0: each plan's own
  std::vector<int> batches, inputs, outputs;
  std::vector<PredictPlan> plans;
  std::vector<int> instances;         // per plan
};

Axes ReadAxes(const proto::Sweep& spec, SweepProblems& problems) {
  Axes a;
  std::set<std::string> seen;
  for (const std::string& m : spec.model()) {
    if (!seen.insert(m).second) {
      problems.Add(StrCat("model: '", m, "' is given twice; each value of an axis once"));
      continue;
    }
    a.models.push_back(m);
    try {
      a.loaded.push_back(LoadHfConfig(Absolute(m)));
    } catch (const Error& e) {
      problems.Add(StrCat("model: '", m, "': ", e.what()));
      a.loaded.push_back(HfModel{});
    }
  }
  seen.clear();
  for (const std::string& p : spec.hardware_profile()) {
    if (!seen.insert(p).second) {
      problems.Add(StrCat("hardware_profile: '", p, "' is given twice; each value of an axis once"));
      continue;
    }
    try {
      LoadHardwareProfile(Absolute(p));
      a.profiles.push_back(p);
    } catch (const Error& e) {
      problems.Add(StrCat("hardware_profile: '", p, "': ", e.what()));
    }
  }
  if (spec.hardware_profile().empty()) a.profiles.push_back("");
  std::set<uint32_t> lnc_seen;
  for (uint32_t lnc : spec.lnc()) {
    if (lnc != 1 && lnc != 2) {
      problems.Add(StrCat("lnc: ", lnc, " must be 1 or 2 (physical cores per rank)"));
    } else if (!lnc_seen.insert(lnc).second) {
      problems.Add(StrCat("lnc: ", lnc, " is given twice; each value of an axis once"));
    } else {
      a.lncs.push_back(static_cast<int>(lnc));
    }
  }
  if (spec.lnc().empty()) a.lncs.push_back(0);
  a.batches = CountAxis("batch", spec.batch(), "[1, 8]", problems);
  a.inputs = CountAxis("input_tokens", spec.input_tokens(), "[512, 2048]", problems);
  a.outputs = CountAxis("output_tokens", spec.output_tokens(), "[128]", problems);
  a.plans = Plans(spec, problems);
  for (const proto::Plan& p : spec.plans()) a.instances.push_back(static_cast<int>(std::max(1u, p.instances())));
  CheckTarget("tpot_ms_max", spec.tpot_ms_max(), problems);
  CheckTarget("ttft_ms_max", spec.ttft_ms_max(), problems);
  return a;
}

// The points, model outermost and plan innermost (a shape's plans are consecutive).
void Expand(const Axes& a, PredictSweep& r) {
  for (size_t mi = 0; mi < a.models.size(); ++mi) {
    for (const std::string& profile : a.profiles) {
      for (int lnc : a.lncs) {
        for (int b : a.batches) {
          for (int s : a.inputs) {
            for (int n : a.outputs) {
              PredictSweepShape shape;
              shape.label = StrCat(ModelName(a.models[mi]), " B=", b, " S=", s, " N=", n);
              if (a.lncs.size() > 1) shape.label += StrCat(" lnc=", lnc);
              if (a.profiles.size() > 1) shape.label += StrCat(" ", std::filesystem::path(profile).stem().string());
              const int shape_index = static_cast<int>(r.shapes.size());
              for (size_t pi = 0; pi < a.plans.size(); ++pi) {
                PredictSweepPoint point;
                point.index = static_cast<int>(r.points.size());
                point.shape = shape_index;
                point.model = ModelName(a.models[mi]);
                point.profile = profile.empty() ? "trn2" : profile;
                PredictPlan plan = a.plans[pi];
                if (lnc != 0) plan.lnc = lnc;
                if (plan.name.empty() || lnc != 0) {
                  const std::string given = a.plans[pi].name;
                  plan.name = given.empty() ? DefaultPlanName(plan)
                                            : (plan.lnc == 1 && lnc != 0 ? given + "_lnc1" : given);
                }
                PredictRequest& q = point.request;
                q.model = a.loaded[mi];
                q.profile_path = profile.empty() ? "" : Absolute(profile);
                q.plans = {plan};
                q.instances = a.instances[pi];
                q.batch = b;
                q.input_tokens = s;
                q.output_tokens = n;
                point.key = StrCat("model=", point.model, " plan=", plan.name, " batch=", b, " input_tokens=", s,
                                   " output_tokens=", n, " lnc=", plan.lnc, " profile=", point.profile);
                shape.points.push_back(point.index);
                r.points.push_back(std::move(point));
              }
              r.shapes.push_back(std::move(shape));
            }
          }
        }
      }
    }
  }
}

}  // namespace

bool IsPredictSweep(const proto::Sweep& spec) { return !spec.model().empty(); }

PredictSweep ResolvePredictSweep(const proto::Sweep& spec, const std::string& source) {
  PredictSweep r;
  r.spec = spec;
  r.source = source;
  const std::filesystem::path file(source);
  r.title = !spec.title().empty() ? spec.title() : file.filename().string();
  r.output = !spec.output().empty() ? spec.output() : file.stem().string();
  r.tpot_ms_max = spec.tpot_ms_max();
  r.ttft_ms_max = spec.ttft_ms_max();
  SweepProblems problems;
  RefuseLayerFields(spec, problems);
  const Axes axes = ReadAxes(spec, problems);
  const size_t total = axes.models.size() * axes.profiles.size() * axes.lncs.size() * axes.batches.size() *
                       axes.inputs.size() * axes.outputs.size() * axes.plans.size();
  if (total > kMaxPredictPoints) {
    problems.Add(StrCat("the axes give ", total, " points; at most ", kMaxPredictPoints));
  }
  problems.RaiseIfAny(source, 0);  // the axes must be sound before they expand
  Expand(axes, r);
  std::map<std::string, int> keys;
  for (const PredictSweepPoint& point : r.points) {
    if (auto [it, inserted] = keys.try_emplace(point.key, point.index); !inserted) {
      problems.Add(StrCat("plans: two points have the key '", point.key, "' (points ", it->second, " and ",
                          point.index, "); name the plans apart (plans { name: \"...\" })"));
      continue;
    }
    try {
      CheckPredictRequest(point.request);
    } catch (const Error& e) {
      for (const std::string& p : SweepProblemsOf(e, "predict")) problems.Add(p, point.key);
    }
  }
  problems.RaiseIfAny(source, r.points.size());
  return r;
}

PredictSweepResults RunPredictSweep(const PredictSweep& sweep,
                                    const std::function<void(const PredictSweepResults&)>& after_shape) {
  using Clock = std::chrono::steady_clock;
  PredictSweepResults results(sweep.points.size());
  const Clock::time_point start = Clock::now();
  int done = 0, failed = 0;
  for (const PredictSweepShape& shape : sweep.shapes) {
    for (int pi : shape.points) {
      const PredictSweepPoint& point = sweep.points[pi];
      const Clock::time_point t0 = Clock::now();
      PredictPointResult result;
      try {
        result.prediction = Predict(point.request).front();
        result.ok = true;
      } catch (const Error& e) {
        result.error = e.what();
      }
      result.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
      ++done;
      failed += !result.ok;
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      const double eta = elapsed / done * (sweep.points.size() - done);
      std::fprintf(stderr, "nkisim sweep: point %d/%zu %s %s: %s in %.1f s | %d failed | elapsed %.1f s, ETA %.1f s\n",
                   done, sweep.points.size(), shape.label.c_str(), point.request.plans.front().name.c_str(),
                   result.ok ? "ok" : "FAILED", result.wall_s, failed, elapsed, eta);
      results[pi] = std::move(result);
    }
    after_shape(results);
  }
  return results;
}

double RequestLatencyMs(const PlanOutcome& o, int output_tokens) {
  return o.ttft_ms + (output_tokens - 1) * o.tpot_ms;
}

ShapeVerdict ChooseFastest(const std::vector<PlanOutcome>& outcomes, int output_tokens, double tpot_ms_max,
                           double ttft_ms_max) {
  ShapeVerdict v;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const PlanOutcome& o = outcomes[i];
    std::string why;
    if (!o.simulated) {
      why = "not simulated";
    } else {
      if (!o.fits) why = "does not fit HBM";
      if (tpot_ms_max > 0 && o.tpot_ms > tpot_ms_max) {
        why += StrCat(why.empty() ? "" : ", ", StrPrintf("TPOT %.2f > %.2f ms", o.tpot_ms, tpot_ms_max));
      }
      if (ttft_ms_max > 0 && o.ttft_ms > ttft_ms_max) {
        why += StrCat(why.empty() ? "" : ", ", StrPrintf("TTFT %.1f > %.1f ms", o.ttft_ms, ttft_ms_max));
      }
    }
    v.reasons.push_back(why);
    if (!why.empty()) continue;
    if (v.fastest < 0 || RequestLatencyMs(o, output_tokens) < RequestLatencyMs(outcomes[v.fastest], output_tokens)) {
      v.fastest = static_cast<int>(i);
    }
  }
  return v;
}

}  // namespace nkisim::launcher
