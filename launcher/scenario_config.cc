#include "launcher/scenario_config.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "runtime/config_file.h"
#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

proto::Scenario Parse(const std::string& text, const std::string& source) {
  proto::Scenario s;
  ParseConfigText(text, source, &s);
  return s;
}

void FillDefaults(proto::Scenario& s) {
  if (s.scenarios().empty()) {
    s.add_scenarios(kAttentionDecode);
    s.add_scenarios(kAttentionDecodeTp);
  }
  if (s.dtype().empty()) s.set_dtype("bf16");
  if (s.model().rms_eps() == 0) s.mutable_model()->set_rms_eps(1e-6);
  proto::ControlPlane& c = *s.mutable_control();
  if (c.host().empty()) c.set_host("127.0.0.1");
  if (c.stall_timeout_s() == 0) c.set_stall_timeout_s(30);
  if (c.heartbeat_s() == 0) c.set_heartbeat_s(0.5);
  if (c.startup_timeout_s() == 0) c.set_startup_timeout_s(300);
  // The reference suites' bf16 tolerances; the data movements must be exact.
  struct Default { const char* phase; double atol, rtol; };
  for (const Default& d : {Default{"qkv", 1e-5, 2e-2}, Default{"batch_shard", 0, 0},
                           Default{"attention", 1e-5, 2e-2}, Default{"unshard", 0, 0},
                           Default{"o_proj", 1e-5, 2e-2}, Default{"all_reduce", 1e-5, 2e-2}}) {
    if (!s.tolerances().contains(d.phase)) {
      proto::Tolerance& t = (*s.mutable_tolerances())[d.phase];
      t.set_atol(d.atol);
      t.set_rtol(d.rtol);
    }
  }
}

// Control-plane and numeric fields: finite, in range, no value that would make a loop spin or a
// timeout never fire.
void CheckFields(const proto::Scenario& s, std::vector<std::string>& problems) {
  const proto::ControlPlane& c = s.control();
  const struct {
    const char* field;
    double value, lo, hi;
  } ranges[] = {
      {"control.stall_timeout_s", c.stall_timeout_s(), 0.1, 86400},
      {"control.heartbeat_s", c.heartbeat_s(), 0.01, 60},
      {"control.startup_timeout_s", c.startup_timeout_s(), 1, 86400},
      {"model.rms_eps", s.model().rms_eps(), 0, 1},
  };
  for (const auto& f : ranges) {
    if (!(f.value >= f.lo && f.value <= f.hi)) {
      problems.push_back(StrCat(f.field, ": ", f.value, " must be in [", f.lo, ", ", f.hi, "]"));
    }
  }
  if (c.heartbeat_s() >= c.stall_timeout_s()) {
    problems.push_back(StrCat("control.heartbeat_s: ", c.heartbeat_s(),
                              " must be below stall_timeout_s (", c.stall_timeout_s(), ")"));
  }
  if (c.port() > 65535) {
    problems.push_back(StrCat("control.port: ", c.port(), " must be in [0, 65535] (0: any free port)"));
  }
  for (const auto& [phase, t] : s.tolerances()) {
    static const char* const kPhases[] = {"qkv", "batch_shard", "attention",
                                          "unshard", "o_proj", "all_reduce"};
    if (std::find(std::begin(kPhases), std::end(kPhases), phase) == std::end(kPhases)) {
      problems.push_back(StrCat("tolerances: '", phase, "' is not a phase (qkv, batch_shard, ",
                                "attention, unshard, o_proj, all_reduce)"));
    }
    if (!(t.atol() >= 0 && std::isfinite(t.atol()) && t.rtol() >= 0 && std::isfinite(t.rtol()))) {
      problems.push_back(StrCat("tolerances['", phase, "']: atol ", t.atol(), " and rtol ",
                                t.rtol(), " must be finite and >= 0"));
    }
  }
}

void Check(const ResolvedScenario& r, std::vector<std::string>& problems) {
  const proto::Scenario& s = r.spec;
  const proto::ModelShape& m = s.model();
  CheckFields(s, problems);
  for (int i = 0; i < s.scenarios_size(); ++i) {
    const std::string& name = s.scenarios(i);
    if (name != kAttentionDecode && name != kAttentionDecodeTp) {
      problems.push_back(StrCat("scenarios: '", name, "' is not one of ", kAttentionDecode, ", ",
                                kAttentionDecodeTp));
    }
    for (int j = 0; j < i; ++j) {
      if (s.scenarios(j) == name) {
        problems.push_back(StrCat("scenarios: '", name, "' is listed twice (entries ", j, " and ",
                                  i, ")"));
      }
    }
  }
  if (m.hidden() == 0 || m.hidden() % 128 != 0) {
    problems.push_back(StrCat("model.hidden: ", m.hidden(), " must be a positive multiple of 128"));
  }
  if (m.d_head() == 0 || m.d_head() > 128) {
    problems.push_back(StrCat("model.d_head: ", m.d_head(), " must be in [1, 128]"));
  }
  if (m.n_kv_heads() == 0 || m.n_q_heads() % m.n_kv_heads() != 0) {
    problems.push_back(StrCat("model.n_q_heads: ", m.n_q_heads(), " must be a multiple of n_kv_heads (",
                              m.n_kv_heads(), ")"));
  }
  if (m.n_q_heads() != static_cast<uint32_t>(r.world_size())) {
    problems.push_back(StrCat("model.n_q_heads: ", m.n_q_heads(), " must equal topology.world_size (",
                              r.world_size(), "): one Q head per rank (TP = n_q_heads)"));
  }
  const int g = r.gqa_group_size;
  if (s.batch() == 0 || (g > 0 && s.batch() % g != 0)) {
    problems.push_back(StrCat("batch: ", s.batch(), " must be positive and divisible by the GQA group ",
                              "size n_q_heads / n_kv_heads = ", g));
  }
  if (s.batch() > 128) problems.push_back(StrCat("batch: ", s.batch(), " must be <= 128 (decode, S = 1)"));
  if (s.kv_length() == 0) problems.push_back("kv_length: 0: the KV cache needs at least one token");
  const collectives::ResolvedTopology& t = r.topology;
  bool has_tp = false, has_gqa = false;
  for (const collectives::GroupSet& set : t.group_sets) {
    if (set.name == "tp") {
      has_tp = true;
      if (set.groups.size() != 1) {
        problems.push_back(StrCat("topology.replica_groups 'tp': ", set.groups.size(),
                                  " groups; the TP all_reduce needs one group of every rank"));
      }
    }
    if (set.name == "gqa") {
      has_gqa = true;
      for (const collectives::Group& group : set.groups) {
        for (int rank : group) {
          if (g > 0 && rank / g != group[0] / g) {
            problems.push_back(StrCat("topology.replica_groups 'gqa': ranks ", group[0], " and ", rank,
                                      " share a group but not a KV head (rank / ", g,
                                      "); each group must be the ", g, " ranks of one KV head"));
            break;
          }
        }
      }
    }
  }
  if (!has_tp) problems.push_back("topology.replica_groups: no set named 'tp' (all ranks, for the all_reduce)");
  if (!has_gqa) problems.push_back("topology.replica_groups: no set named 'gqa' (the batch-shard groups)");
  if (t.batch_shard_group != "gqa" || t.batch != static_cast<int>(s.batch())) {
    problems.push_back(StrCat("topology.batch_shard: must name replica group 'gqa' with batch ",
                              s.batch(), " (the scenario's batch); found '", t.batch_shard_group,
                              "' with batch ", t.batch));
  }
}

}  // namespace

proto::Tolerance ResolvedScenario::tolerance(const std::string& phase) const {
  const auto found = spec.tolerances().find(phase);
  return found == spec.tolerances().end() ? proto::Tolerance() : found->second;
}

ResolvedScenario ResolveScenario(const std::string& text, const std::string& source) {
  ResolvedScenario r;
  r.source = source;
  r.spec = Parse(text, source);
  FillDefaults(r.spec);
  r.profile = r.spec.hardware_profile().empty() ? Trn2Profile()
                                                : LoadHardwareProfile(r.spec.hardware_profile());
  r.dtype = ParseDType(r.spec.dtype());
  r.topology = collectives::ResolveTopology(r.spec.topology(), r.profile, source + " (topology)");
  if (r.spec.model().n_kv_heads() > 0) {
    r.gqa_group_size = static_cast<int>(r.spec.model().n_q_heads() / r.spec.model().n_kv_heads());
  }
  std::vector<std::string> problems;
  Check(r, problems);
  if (!problems.empty()) {
    std::string message = StrCat(source, ": ", problems.size(), " problem", problems.size() == 1 ? "" : "s", ":");
    for (const std::string& p : problems) message += "\n  " + p;
    Raise(ErrorCode::kBadConfig, message);
  }
  return r;
}

ResolvedScenario LoadScenario(const std::string& path) {
  return ResolveScenario(ReadConfigFile(path, "scenario file"), path);
}

}  // namespace nkisim::launcher
