#include "launcher/sweep/sweep_config.h"

#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "collectives/algorithms.h"
#include "runtime/config_file.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"

namespace nkisim::launcher {
namespace {

// More points than this is a typo in an axis, not a sweep anyone waits for.
constexpr size_t kMaxPoints = 10000;

// Points a problem names before "and N more".
constexpr size_t kPointsShown = 3;

std::string Absolute(const std::string& path) {
  if (path.empty()) return path;
  return std::filesystem::absolute(path).lexically_normal().string();
}

// FNV-1a, 64 bits, as 16 hex digits: stable across runs and builds (std::hash is not promised to be).
std::string Digest(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// The name a plan gets: its own, or the default scenario_config.cc gives it ("tp8xdp8", "tp8r2",
// "tp64_lnc1"). Used for points whose scenario does not resolve, and for keys before resolving.
std::string PlanName(const proto::Plan& p, const proto::Scenario& s, int index) {
  if (!p.name().empty()) return p.name();
  if (p.tp() == 0) return StrCat("plans[", index, "]");
  const uint32_t g = std::max(1u, p.attention_dp()), replicas = std::max(1u, p.replicas());
  const uint32_t lnc = p.lnc() != 0 ? p.lnc() : (s.topology().lnc() != 0 ? s.topology().lnc() : 2);
  std::string name = g > 1 && p.tp() % g == 0 ? StrCat("tp", p.tp() / g, "xdp", g) : StrCat("tp", p.tp());
  if (replicas > 1) name += StrCat("r", replicas);
  if (lnc != 2) name += StrCat("_lnc", lnc);
  return name;
}

std::string FormatGroup(const collectives::Group& g) {
  bool consecutive = true;
  for (size_t i = 1; i < g.size(); ++i) consecutive = consecutive && g[i] == g[i - 1] + 1;
  if (consecutive && g.size() > 2) return StrCat("[", g.front(), "..", g.back(), "]");
  std::string out = "[";
  for (size_t i = 0; i < g.size(); ++i) out += StrCat(i ? " " : "", g[i]);
  return out + "]";
}

template <typename T>
std::string Values(const google::protobuf::RepeatedField<T>& values) {
  std::string out = "[";
  for (int i = 0; i < values.size(); ++i) out += StrCat(i ? ", " : "", values[i]);
  return out + "]";
}

using Problems = SweepProblems;

std::vector<std::string> ProblemsOf(const Error& e, const std::string& source) {
  return SweepProblemsOf(e, source);
}

template <typename T>
void CheckUnique(const char* axis, const google::protobuf::RepeatedField<T>& values, Problems& problems) {
  std::set<T> seen;
  for (const T& v : values) {
    if (!seen.insert(v).second) {
      problems.Add(StrCat(axis, ": ", v, " is given twice; each value of an axis once"));
    }
  }
}

void CheckUnique(const char* axis, const google::protobuf::RepeatedPtrField<std::string>& values,
                 Problems& problems) {
  std::set<std::string> seen;
  for (const std::string& v : values) {
    if (!seen.insert(v).second) {
      problems.Add(StrCat(axis, ": '", v, "' is given twice; each value of an axis once"));
    }
  }
}

proto::ReplicaGroupSet& TpSet(proto::Topology& t) {
  for (proto::ReplicaGroupSet& set : *t.mutable_replica_groups()) {
    if (set.name() == kTpGroups) return set;
  }
  proto::ReplicaGroupSet& set = *t.add_replica_groups();
  set.set_name(kTpGroups);  // by name only: the plan's derived groups
  return set;
}

std::string BaseAlgorithm(const proto::Scenario& s) {
  for (const proto::ReplicaGroupSet& set : s.topology().replica_groups()) {
    if (set.name() == kTpGroups && !set.algorithm().empty()) return set.algorithm();
  }
  return "auto";
}

// A forced algorithm on the "tp" set must implement the TP reduction and fit every group:
// `nkisim run` would otherwise fail on it at run time, after the points before it ran. False
// when it does not (the problem added).
bool CheckTpAlgorithm(const ResolvedScenario& r, const SweepPoint& point, Problems& problems) {
  const ResolvedPlan& plan = r.plans.front();
  const collectives::GroupSet& set = plan.topology.group_set(kTpGroups);
  if (set.algorithm.empty() || set.algorithm == "auto") return true;
  const collectives::AlgorithmRow* row = collectives::FindAlgorithm(set.algorithm);
  if (row == nullptr) return true;  // the topology check named it already
  const collectives::CollectiveOp op = r.workload == Workload::kPrefill && r.spec.sequence_parallel()
                                           ? collectives::CollectiveOp::kReduceScatter
                                           : collectives::CollectiveOp::kAllReduce;
  if (!row->serves(op)) {
    problems.Add(StrCat("algorithm: '", set.algorithm, "' does not implement ", collectives::OpName(op),
                        ", the TP reduction (", row->name, ": ", row->summary, ")"),
                 point.key);
    return false;
  }
  for (const collectives::Group& group : set.groups) {
    if (group.size() < 2) continue;
    const std::string why = row->accepts(collectives::PlaceGroup(plan.topology, r.profile, group));
    if (!why.empty()) {
      problems.Add(StrCat("algorithm: '", set.algorithm, "' cannot run ", collectives::OpName(op),
                          " on the tp groups of plan '", plan.name, "' (group ", FormatGroup(group),
                          "): ", why),
                   point.key);
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<std::string> SweepProblemsOf(const Error& e, const std::string& source) {
  std::string message = e.what();
  if (message.rfind(source + ": ", 0) == 0) message = message.substr(source.size() + 2);
  const size_t newline = message.find('\n');
  if (newline == std::string::npos || message.find(" problem") > newline) return {message};
  std::vector<std::string> problems;
  size_t start = newline + 1;
  while (start < message.size()) {
    size_t end = message.find('\n', start);
    if (end == std::string::npos) end = message.size();
    std::string line = message.substr(start, end - start);
    if (line.rfind("  ", 0) == 0) line = line.substr(2);
    if (!line.empty()) problems.push_back(line);
    start = end + 1;
  }
  return problems;
}

void SweepProblems::Add(const std::string& problem, const std::string& point) {
  auto [it, inserted] = points_.try_emplace(problem);
  if (inserted) order_.push_back(problem);
  if (!point.empty()) it->second.push_back(point);
}

void SweepProblems::RaiseIfAny(const std::string& source, size_t total_points) const {
  if (order_.empty()) return;
  std::string message = StrCat(source, ": ", order_.size(), " problem", order_.size() == 1 ? "" : "s",
                               " (no point was run):");
  for (const std::string& p : order_) {
    message += StrCat("\n  ", p);
    const std::vector<std::string>& at = points_.at(p);
    if (at.empty()) continue;
    if (at.size() == total_points && total_points > 1) {
      message += StrCat("\n    at every point (", total_points, ")");
      continue;
    }
    message += StrCat("\n    at ", at.size() == 1 ? "point " : StrCat(at.size(), " points: "));
    for (size_t i = 0; i < at.size() && i < kPointsShown; ++i) message += StrCat(i ? "; " : "", at[i]);
    if (at.size() > kPointsShown) message += StrCat("; and ", at.size() - kPointsShown, " more");
  }
  Raise(ErrorCode::kBadConfig, message);
}

std::string ScenarioText(const proto::Scenario& scenario) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(scenario, &text);
  return text;
}

proto::Scenario JobScenario(const ResolvedSweep& sweep, const std::vector<int>& points) {
  proto::Scenario s = sweep.points.at(points.at(0)).scenario;
  s.clear_plans();
  for (int i : points) *s.add_plans() = sweep.points.at(i).scenario.plans(0);
  return s;
}

ResolvedSweep ResolveSweep(const std::string& text, const std::string& source) {
  ResolvedSweep r;
  r.source = source;
  ParseConfigText(text, source, &r.spec);
  const proto::Sweep& spec = r.spec;
  const std::filesystem::path file(source);
  r.title = !spec.title().empty() ? spec.title() : file.filename().string();
  r.output = !spec.output().empty() ? spec.output() : file.stem().string();

  Problems problems;
  // The predict sweep's fields (launcher/sweep/predict_sweep.h) need its model axis.
  if (!spec.input_tokens().empty()) {
    problems.Add(StrCat("input_tokens: ", Values(spec.input_tokens()), ": an axis of a predict sweep; give a model axis "
                        "(model: [\"configs/models/...json\"]) or use kv_length / seq_len"));
  }
  if (!spec.output_tokens().empty()) {
    problems.Add(StrCat("output_tokens: ", Values(spec.output_tokens()), ": an axis of a predict sweep; give a model "
                        "axis (model: [\"configs/models/...json\"])"));
  }
  if (spec.tpot_ms_max() != 0 || spec.ttft_ms_max() != 0) {
    problems.Add(StrCat(spec.tpot_ms_max() != 0 ? "tpot_ms_max" : "ttft_ms_max", ": ",
                        spec.tpot_ms_max() != 0 ? spec.tpot_ms_max() : spec.ttft_ms_max(),
                        ": a target of a predict sweep; give a model axis (model: [\"configs/models/...json\"])"));
  }
  bool have_base = spec.has_base();
  if (spec.has_base()) {
    r.base = spec.base();
  } else if (!spec.base_file().empty()) {
    try {
      ParseConfigText(ReadConfigFile(spec.base_file(), "base scenario file"), spec.base_file(), &r.base);
      have_base = true;
    } catch (const Error& e) {
      problems.Add(StrCat("base_file: '", spec.base_file(), "': ", e.what()));
    }
  } else {
    problems.Add("base: none given; give the scenario every point starts from, inline "
                 "(base { model { ... } }) or as base_file: \"scenario.textproto\"");
  }
  r.base.set_hardware_profile(Absolute(r.base.hardware_profile()));
  r.base.set_hostfile(Absolute(r.base.hostfile()));
  r.workload = r.base.workload() == "prefill" ? Workload::kPrefill : Workload::kDecode;
  const bool decode = r.workload == Workload::kDecode;
  if (r.base.workload() == "moe") {
    problems.Add("base.workload: 'moe': the sweep runs decode and prefill layers; run the MoE layer "
                 "with nkisim run (docs/moe.md)");
  }

  // The axes; an empty axis is the base's value.
  std::vector<proto::Plan> plans(spec.plans().begin(), spec.plans().end());
  if (plans.empty()) plans.assign(r.base.plans().begin(), r.base.plans().end());
  if (plans.empty() && have_base) {
    problems.Add("plans: none given; give the plans axis (plans { tp: 64 } plans { tp: 64 "
                 "attention_dp: 8 }) or plans in the base scenario");
  }
  const auto& length_values = decode ? spec.kv_length() : spec.seq_len();
  const auto& other_length = decode ? spec.seq_len() : spec.kv_length();
  if (!other_length.empty()) {
    problems.Add(StrCat(decode ? "seq_len" : "kv_length", ": ", Values(other_length), ": the base's ",
                        "workload is ", decode ? "decode" : "prefill", "; its length axis is ",
                        decode ? "kv_length" : "seq_len"));
  }
  std::vector<uint32_t> batches(spec.batch().begin(), spec.batch().end());
  if (batches.empty()) batches.push_back(r.base.batch());
  std::vector<uint32_t> lengths(length_values.begin(), length_values.end());
  if (lengths.empty()) lengths.push_back(decode ? r.base.kv_length() : r.base.seq_len());
  std::vector<uint32_t> lncs(spec.lnc().begin(), spec.lnc().end());
  if (lncs.empty()) lncs.push_back(0);  // each plan's own
  std::vector<std::string> algorithms(spec.algorithm().begin(), spec.algorithm().end());
  if (algorithms.empty()) algorithms.push_back("");
  std::vector<std::string> profiles(spec.hardware_profile().begin(), spec.hardware_profile().end());
  if (profiles.empty()) profiles.push_back("");
  CheckUnique("batch", spec.batch(), problems);
  CheckUnique(decode ? "kv_length" : "seq_len", length_values, problems);
  CheckUnique("lnc", spec.lnc(), problems);
  CheckUnique("algorithm", spec.algorithm(), problems);
  CheckUnique("hardware_profile", spec.hardware_profile(), problems);
  std::set<uint32_t> bad_lnc;
  for (uint32_t lnc : spec.lnc()) {
    if (lnc != 1 && lnc != 2) {
      problems.Add(StrCat("lnc: ", lnc, " must be 1 or 2 (physical cores per rank)"));
      bad_lnc.insert(lnc);
    }
  }
  std::set<std::string> bad_profiles;
  for (const std::string& profile : spec.hardware_profile()) {
    try {
      LoadHardwareProfile(Absolute(profile));
    } catch (const Error& e) {
      problems.Add(StrCat("hardware_profile: '", profile, "': ", e.what()));
      bad_profiles.insert(profile);
    }
  }
  for (uint32_t lnc : lncs) {
    std::map<std::string, int> first_of;
    for (size_t i = 0; i < plans.size(); ++i) {
      proto::Plan p = plans[i];
      if (lnc != 0) p.set_lnc(lnc);
      const std::string name = PlanName(p, r.base, static_cast<int>(i));
      if (auto [it, inserted] = first_of.try_emplace(name, static_cast<int>(i)); !inserted) {
        problems.Add(StrCat("plans: name '", name, "' is given to plans[", it->second, "] and plans[", i,
                            "]", lnc != 0 ? StrCat(" at lnc ", lnc) : "",
                            "; name them apart (plans { name: \"...\" })"));
      }
    }
  }
  const size_t total = plans.size() * batches.size() * lengths.size() * lncs.size() *
                       algorithms.size() * profiles.size();
  if (total > kMaxPoints) {
    problems.Add(StrCat("the axes give ", total, " points (", plans.size(), " plans x ", batches.size(),
                        " batch x ", lengths.size(), " ", r.length_axis(), " x ", lncs.size(), " lnc x ",
                        algorithms.size(), " algorithm x ", profiles.size(),
                        " hardware_profile); at most ", kMaxPoints));
  }
  problems.RaiseIfAny(source, 0);  // the axes must be sound before they expand

  // Expand: profile outermost, plan innermost, so that a shape's plans are consecutive.
  const auto label_of = [&](uint32_t b, uint32_t len, uint32_t lnc, const std::string& alg,
                            const std::string& profile) {
    std::string label = StrCat("B=", b, decode ? " L=" : " S=", len);
    if (lncs.size() > 1) label += StrCat(" lnc=", lnc);
    if (algorithms.size() > 1) label += StrCat(" ", alg);
    if (profiles.size() > 1) label += StrCat(" ", std::filesystem::path(profile).stem().string());
    return label;
  };
  for (const std::string& profile : profiles) {
    for (const std::string& algorithm : algorithms) {
      for (uint32_t lnc : lncs) {
        for (uint32_t b : batches) {
          for (uint32_t len : lengths) {
            SweepShape shape;
            shape.label = label_of(b, len, lnc, algorithm.empty() ? BaseAlgorithm(r.base) : algorithm,
                                   profile);
            const int shape_index = static_cast<int>(r.shapes.size());
            for (size_t pi = 0; pi < plans.size(); ++pi) {
              SweepPoint point;
              point.index = static_cast<int>(r.points.size());
              point.shape = shape_index;
              proto::Scenario& s = point.scenario;
              s = r.base;
              s.clear_plans();
              proto::Plan& plan = *s.add_plans();
              plan = plans[pi];
              if (lnc != 0) {
                plan.set_lnc(lnc);
                s.mutable_topology()->clear_lnc();  // the axis decides
              }
              s.set_batch(b);
              if (decode) {
                s.set_kv_length(len);
              } else {
                s.set_seq_len(len);
              }
              if (!algorithm.empty()) TpSet(*s.mutable_topology()).set_algorithm(algorithm);
              if (!profile.empty()) s.set_hardware_profile(Absolute(profile));
              point.plan = PlanName(plan, s, static_cast<int>(pi));
              point.batch = b;
              point.length = len;
              point.algorithm = algorithm.empty() ? BaseAlgorithm(r.base) : algorithm;
              point.profile = !profile.empty()                     ? profile
                              : !r.base.hardware_profile().empty() ? r.base.hardware_profile()
                                                                   : "trn2";
              point.lnc = static_cast<int>(
                  plan.lnc() != 0 ? plan.lnc() : (s.topology().lnc() != 0 ? s.topology().lnc() : 2));
              point.key = StrCat("plan=", point.plan, " batch=", b, " ", r.length_axis(), "=", len,
                                 " lnc=", point.lnc, " algorithm=", point.algorithm,
                                 " profile=", point.profile);
              shape.points.push_back(point.index);
              r.points.push_back(std::move(point));
            }
            r.shapes.push_back(std::move(shape));
          }
        }
      }
    }
  }

  // Every point through the scenario rules, and its forced TP algorithm through the table's.
  std::vector<bool> valid(r.points.size(), false);
  for (SweepPoint& point : r.points) {
    const std::string text = ScenarioText(point.scenario);
    const std::string profile = r.spec.hardware_profile().empty() ? "" : point.profile;
    if (bad_profiles.contains(profile) || bad_lnc.contains(static_cast<uint32_t>(point.lnc))) continue;
    try {
      const ResolvedScenario resolved = ResolveScenario(text, "point");
      const ResolvedPlan& plan = resolved.plans.front();
      point.plan = plan.name;
      point.tp = plan.tp;
      point.attention_dp = plan.attention_dp;
      point.lnc = plan.lnc;
      point.instances = plan.instances;
      point.replicas = plan.replicas;
      point.world_size = plan.world_size();
      point.fingerprint = Digest(ScenarioText(resolved.spec) + "\n--- profile\n" +
                                 resolved.profile.ShortDebugString());
      valid[point.index] = CheckTpAlgorithm(resolved, point, problems);
    } catch (const Error& e) {
      for (const std::string& p : ProblemsOf(e, "point")) problems.Add(p, point.key);
    }
  }
  // Keys must tell the points apart (--resume matches by them).
  std::map<std::string, int> keys;
  for (const SweepPoint& point : r.points) {
    if (auto [it, inserted] = keys.try_emplace(point.key, point.index); !inserted) {
      problems.Add(StrCat("plans: two points have the key '", point.key, "' (points ", it->second, " and ",
                          point.index, "); name the plans apart"));
    }
  }

  // Jobs: the points of a shape by world size, in plan order; each job's scenario must resolve
  // with its plans side by side, as `nkisim run` will resolve it.
  for (size_t si = 0; si < r.shapes.size(); ++si) {
    std::vector<int> worlds;
    for (int pi : r.shapes[si].points) {
      if (std::find(worlds.begin(), worlds.end(), r.points[pi].world_size) == worlds.end()) {
        worlds.push_back(r.points[pi].world_size);
      }
    }
    for (int world : worlds) {
      SweepJob job;
      job.index = static_cast<int>(r.jobs.size());
      job.shape = static_cast<int>(si);
      job.world_size = world;
      bool all_valid = true;
      for (int pi : r.shapes[si].points) {
        if (r.points[pi].world_size != world) continue;
        job.points.push_back(pi);
        all_valid = all_valid && valid[pi];
      }
      if (all_valid && job.points.size() > 1) {
        try {
          ResolveScenario(ScenarioText(JobScenario(r, job.points)), "job");
        } catch (const Error& e) {
          for (const std::string& p : ProblemsOf(e, "job")) {
            problems.Add(StrCat("the plans of shape ", r.shapes[si].label, " side by side: ", p));
          }
        }
      }
      r.jobs.push_back(std::move(job));
    }
  }
  problems.RaiseIfAny(source, r.points.size());
  return r;
}

ResolvedSweep LoadSweep(const std::string& path) {
  return ResolveSweep(ReadConfigFile(path, "sweep file"), path);
}

}  // namespace nkisim::launcher
