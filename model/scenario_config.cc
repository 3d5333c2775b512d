#include "model/scenario_config.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

#include "model/footprint.h"
#include "model/moe_config.h"
#include "runtime/config_file.h"
#include "runtime/error.h"
#include "runtime/problem_list.h"

namespace nkisim::launcher {
namespace {

// Host memory one rank may hold for its slice of the layer (weights, caches, activations);
// past it the job would swap or be killed on a 24 GiB machine, so the file is refused instead.
constexpr double kMaxBytesPerRank = 4.0 * (1 << 30);
constexpr uint32_t kMaxSteps = 1024;
constexpr uint32_t kMaxLayers = 1024;
constexpr uint32_t kMaxRanks = 16384;  // a job's ranks (tp x replicas of a plan)

proto::Scenario Parse(const std::string& text, const std::string& source) {
  proto::Scenario s;
  ParseConfigText(text, source, &s);
  return s;
}

const std::vector<std::string>& DecodePhases() {
  static const std::vector<std::string> phases = {
      "qkv",        "batch_shard", "attention",      "unshard",
      "o_proj",     "all_reduce",  "mlp",            "mlp_all_reduce", "residual"};
  return phases;
}
const std::vector<std::string>& PrefillPhases() {
  static const std::vector<std::string> phases = {
      "qkv",        "attention",      "o_proj",             "all_reduce",     "reduce_scatter",
      "all_gather", "mlp",            "mlp_all_reduce",     "mlp_reduce_scatter",
      "mlp_all_gather", "residual"};
  return phases;
}

void FillDefaults(proto::Scenario& s) {
  if (s.workload().empty()) s.set_workload("decode");
  if (s.workload() == "moe") FillMoeDefaults(s);  // before the plans' and tolerances' defaults
  if (s.workload() == "decode" && s.steps() == 0) s.set_steps(1);
  if (s.dtype().empty()) s.set_dtype("bf16");
  if (s.model().rms_eps() == 0) s.mutable_model()->set_rms_eps(1e-6);
  if (s.layers() == 0) s.set_layers(1);
  if (!s.attention_only()) {
    if (s.model().activation().empty()) s.mutable_model()->set_activation("silu");
    if (s.model().norm().empty()) s.mutable_model()->set_norm("rms");
  } else if (s.model().norm().empty()) {
    s.mutable_model()->set_norm("rms");
  }
  if (!s.has_chain_tolerance()) {
    s.mutable_chain_tolerance()->set_atol(1e-5);
    s.mutable_chain_tolerance()->set_rtol(0.1);
  }
  proto::ControlPlane& c = *s.mutable_control();
  if (c.host().empty()) c.set_host("127.0.0.1");
  if (c.stall_timeout_s() == 0) c.set_stall_timeout_s(30);
  if (c.heartbeat_s() == 0) c.set_heartbeat_s(0.5);
  if (c.startup_timeout_s() == 0) c.set_startup_timeout_s(300);
  // The reference suites' bf16 tolerances; the data movements must be exact.
  struct Default { const char* phase; double atol, rtol; };
  for (const Default& d :
       {Default{"qkv", 1e-5, 2e-2}, Default{"batch_shard", 0, 0}, Default{"attention", 1e-5, 2e-2},
        Default{"unshard", 0, 0}, Default{"o_proj", 1e-5, 2e-2}, Default{"all_reduce", 1e-5, 2e-2},
        Default{"reduce_scatter", 1e-5, 2e-2}, Default{"all_gather", 0, 0},
        Default{"mlp", 1e-5, 2e-2}, Default{"mlp_all_reduce", 1e-5, 2e-2},
        Default{"mlp_reduce_scatter", 1e-5, 2e-2}, Default{"mlp_all_gather", 0, 0},
        Default{"residual", 1e-5, 2e-2}}) {
    if (!s.tolerances().contains(d.phase)) {
      proto::Tolerance& t = (*s.mutable_tolerances())[d.phase];
      t.set_atol(d.atol);
      t.set_rtol(d.rtol);
    }
  }
  for (proto::Plan& p : *s.mutable_plans()) {
    if (p.attention_dp() == 0) p.set_attention_dp(1);
    if (p.replicas() == 0) p.set_replicas(1);
    if (p.lnc() == 0) p.set_lnc(s.topology().lnc() != 0 ? s.topology().lnc() : 2);
    if (p.name().empty() && p.tp() > 0) {
      std::string name = p.attention_dp() > 1 && p.tp() % p.attention_dp() == 0
                             ? StrCat("tp", p.tp() / p.attention_dp(), "xdp", p.attention_dp())
                             : StrCat("tp", p.tp());
      if (p.replicas() > 1) name += StrCat("r", p.replicas());
      if (p.lnc() != 2) name += StrCat("_lnc", p.lnc());
      p.set_name(name);
    }
  }
}

// 8x the widest hidden size of a published dense model (16,384); keeps every product in range.
constexpr uint32_t kMaxHidden = 131072;
constexpr double kMaxTolerance = 1e6;

// Control-plane and numeric fields: finite, in range, no value that would make a loop spin or a
// timeout never fire.
void CheckFields(const proto::Scenario& s, ProblemList& problems) {
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
  std::set<std::string> phases(DecodePhases().begin(), DecodePhases().end());
  phases.insert(PrefillPhases().begin(), PrefillPhases().end());
  phases.insert(MoePhases().begin(), MoePhases().end());
  for (const auto& [phase, t] : s.tolerances()) {
    if (!phases.contains(phase)) {
      std::string known;
      for (const std::string& p : phases) known += (known.empty() ? "" : ", ") + p;
      problems.push_back(StrCat("tolerances: '", phase, "' is not a phase (", known, ")"));
    }
    if (!(t.atol() >= 0 && t.atol() <= kMaxTolerance && t.rtol() >= 0 && t.rtol() <= kMaxTolerance)) {
      problems.push_back(StrCat("tolerances['", phase, "']: atol ", t.atol(), " and rtol ",
                                t.rtol(), " must be in [0, 1e6] (a wider tolerance checks nothing)"));
    }
  }
  const proto::Tolerance& chain = s.chain_tolerance();
  if (!(chain.atol() >= 0 && chain.atol() <= kMaxTolerance && chain.rtol() >= 0 && chain.rtol() <= kMaxTolerance)) {
    problems.push_back(StrCat("chain_tolerance: atol ", chain.atol(), " and rtol ", chain.rtol(),
                              " must be in [0, 1e6] (a wider tolerance checks nothing)"));
  }
}

// The decoder layer's MLP and norms, and the number of layers.
void CheckLayer(const proto::Scenario& s, ProblemList& problems) {
  const proto::ModelShape& m = s.model();
  if (s.layers() > kMaxLayers) {
    problems.push_back(StrCat("layers: ", s.layers(), " must be in [1, ", kMaxLayers, "]"));
  }
  if (m.norm() != "rms" && m.norm() != "layer") {
    problems.push_back(StrCat("model.norm: '", m.norm(), "' is not one of rms, layer"));
  }
  if (s.attention_only()) {
    if (m.intermediate() != 0 || !m.activation().empty()) {
      problems.push_back(StrCat("model.intermediate: ", m.intermediate(), " / model.activation: '",
                                m.activation(), "': attention_only runs no MLP; drop them or ",
                                "attention_only"));
    }
    if (s.sequence_parallel() && s.layers() > 1) {
      problems.push_back(StrCat("layers: ", s.layers(), ": attention_only with sequence_parallel ",
                                "leaves each rank its rows only; the next layer needs them all ",
                                "(run the whole layer, or one layer)"));
    }
    return;
  }
  if (m.intermediate() == 0 || m.intermediate() > (1u << 20)) {
    problems.push_back(StrCat("model.intermediate: ", m.intermediate(), " must be in [1, 1048576] ",
                              "(the MLP's I; or set attention_only: true)"));
  }
  if (m.activation() != "silu" && m.activation() != "gelu" && m.activation() != "relu") {
    problems.push_back(StrCat("model.activation: '", m.activation(), "' is not one of silu, gelu, relu"));
  }
}

void CheckModelAndWorkload(const proto::Scenario& s, ProblemList& problems) {
  const proto::ModelShape& m = s.model();
  CheckLayer(s, problems);
  if (m.hidden() == 0 || m.hidden() % 128 != 0 || m.hidden() > kMaxHidden) {
    problems.push_back(StrCat("model.hidden: ", m.hidden(), " must be a positive multiple of 128, ",
                              "at most ", kMaxHidden));
  }
  if (m.d_head() == 0 || m.d_head() > 128) {
    problems.push_back(StrCat("model.d_head: ", m.d_head(), " must be in [1, 128]"));
  }
  if (m.n_q_heads() == 0 || m.n_q_heads() > 4096) {
    problems.push_back(StrCat("model.n_q_heads: ", m.n_q_heads(), " must be in [1, 4096]"));
  }
  if (m.n_kv_heads() == 0 || m.n_q_heads() % m.n_kv_heads() != 0) {
    problems.push_back(StrCat("model.n_kv_heads: ", m.n_kv_heads(), " must be positive and divide ",
                              "n_q_heads (", m.n_q_heads(), ")"));
  }
  if (s.batch() == 0) problems.push_back("batch: 0: must be positive");
  if (s.workload() == "decode") {
    if (s.batch() > 128) {
      problems.push_back(StrCat("batch: ", s.batch(), " must be <= 128 for decode (B x S = B rows ",
                                "on the 128 partitions)"));
    }
    if (s.kv_length() == 0) problems.push_back("kv_length: 0: the KV cache needs at least one token");
    if (s.kv_length() > (1u << 20)) {
      problems.push_back(StrCat("kv_length: ", s.kv_length(), " must be <= 1048576"));
    }
    if (s.steps() > kMaxSteps) {
      problems.push_back(StrCat("steps: ", s.steps(), " must be in [1, ", kMaxSteps, "]"));
    }
    if (s.seq_len() != 0) {
      problems.push_back(StrCat("seq_len: ", s.seq_len(), ": only the prefill workload has a ",
                                "prompt length (decode uses kv_length and steps)"));
    }
    if (s.sequence_parallel()) {
      problems.push_back("sequence_parallel: true: only the prefill workload reduces over S");
    }
  } else if (s.workload() == "prefill") {
    if (s.seq_len() == 0) problems.push_back("seq_len: 0: prefill needs the prompt length S >= 1");
    if (static_cast<uint64_t>(s.batch()) * s.seq_len() > 131072) {
      problems.push_back(StrCat("seq_len: B x S = ", static_cast<uint64_t>(s.batch()) * s.seq_len(),
                                " must be <= 131072 (the o_proj CTE limit)"));
    }
    if (m.d_head() != 128) {
      problems.push_back(StrCat("model.d_head: ", m.d_head(), ": prefill needs 128 (the QKV CTE ",
                                "kernel writes the NBSd heads attention reads only for d = 128)"));
    }
    if (s.steps() != 0) {
      problems.push_back(StrCat("steps: ", s.steps(), ": only the decode workload has steps"));
    }
    if (s.kv_length() != 0) {
      problems.push_back(StrCat("kv_length: ", s.kv_length(), ": prefill starts with an empty ",
                                "cache (its length is seq_len)"));
    }
  } else {
    problems.push_back(StrCat("workload: '", s.workload(), "' is not one of decode, prefill, moe"));
  }
  if (s.plans().empty()) {
    problems.push_back("plans: none given; add at least one, e.g. plans { tp: 8 }");
  }
}

std::string FormatGroup(const collectives::Group& g) {
  bool consecutive = true;
  for (size_t i = 1; i < g.size(); ++i) consecutive = consecutive && g[i] == g[i - 1] + 1;
  if (consecutive && g.size() > 2) return StrCat("[", g.front(), "..", g.back(), "]");
  std::string out = "[";
  for (size_t i = 0; i < g.size() && i < 8; ++i) out += StrCat(i ? " " : "", g[i]);
  return out + (g.size() > 8 ? " ...]" : "]");
}

// The groups `set_name` of `t` must be blocks of `size` consecutive ranks.
void CheckDerivedGroups(const collectives::ResolvedTopology& t, const std::string& set_name,
                        int size, const std::string& plan, ProblemList& problems) {
  const auto set = std::find_if(t.group_sets.begin(), t.group_sets.end(),
                                [&](const collectives::GroupSet& s) { return s.name == set_name; });
  if (set == t.group_sets.end()) return;
  for (size_t i = 0; i < set->groups.size(); ++i) {
    collectives::Group expected(static_cast<size_t>(size));
    for (int j = 0; j < size; ++j) expected[j] = static_cast<int>(i) * size + j;
    if (set->groups[i] != expected || set->groups.size() * size != static_cast<size_t>(t.world_size)) {
      problems.push_back(StrCat("plan '", plan, "': topology.replica_groups '", set_name, "': group ",
                                i, " is ", FormatGroup(set->groups[i]), "; the plan needs blocks of ",
                                size, " consecutive ranks (group ", i, " = ", FormatGroup(expected),
                                ")"));
      return;
    }
  }
}

// The plan's topology: the scenario's topology (placement, algorithms, extra sets) with the
// plan's world, LNC and derived group sets.
proto::Topology PlanTopology(const proto::Scenario& s, const proto::Plan& p,
                             ProblemList& problems) {
  proto::Topology t = s.topology();
  const uint32_t world = p.tp() * p.replicas();
  const std::string where = StrCat("plan '", p.name(), "': ");
  if (t.world_size() != 0 && t.world_size() != world) {
    problems.push_back(StrCat(where, "topology.world_size: ", t.world_size(), " contradicts the plan ",
                              "(tp ", p.tp(), " x replicas ", p.replicas(), " = ", world, " ranks)"));
  }
  if (t.lnc() != 0 && t.lnc() != p.lnc()) {
    problems.push_back(StrCat(where, "topology.lnc: ", t.lnc(), " contradicts the plan's lnc ",
                              p.lnc()));
  }
  t.set_world_size(world);
  t.set_lnc(p.lnc());
  const bool dp = p.attention_dp() > 1;
  bool has_tp = false, has_dp = false;
  for (int i = t.replica_groups_size() - 1; i >= 0; --i) {
    proto::ReplicaGroupSet& set = *t.mutable_replica_groups(i);
    const std::string& name = set.name();
    // A derived set given by name only (no groups) sets its algorithm and reduction: the groups
    // are the plan's, so one file serves plans of different tp and G.
    const bool no_groups = set.groups_case() == proto::ReplicaGroupSet::GROUPS_NOT_SET;
    if (name == kTpGroups) {
      has_tp = true;
      if (no_groups) set.mutable_contiguous()->set_group_size(p.tp());
    }
    if (name == kAttentionDpGroups) {
      if (dp) {
        has_dp = true;
        if (no_groups) set.mutable_contiguous()->set_group_size(p.attention_dp());
      } else {
        t.mutable_replica_groups()->DeleteSubrange(i, 1);  // unused by a G = 1 plan
      }
    }
  }
  if (!has_tp) {
    proto::ReplicaGroupSet& set = *t.add_replica_groups();
    set.set_name(kTpGroups);
    set.mutable_contiguous()->set_group_size(p.tp());
  }
  if (dp && !has_dp) {
    proto::ReplicaGroupSet& set = *t.add_replica_groups();
    set.set_name(kAttentionDpGroups);
    set.mutable_contiguous()->set_group_size(p.attention_dp());
  }
  if (!dp) {
    t.clear_batch_shard();
  } else if (!t.batch_shard().replica_group().empty()) {
    if (t.batch_shard().replica_group() != kAttentionDpGroups || t.batch_shard().batch() != s.batch()) {
      problems.push_back(StrCat(where, "topology.batch_shard: replica group '",
                                t.batch_shard().replica_group(), "' with batch ", t.batch_shard().batch(),
                                " contradicts the plan (group set '", kAttentionDpGroups, "', batch ",
                                s.batch(), ")"));
    }
  } else {
    t.mutable_batch_shard()->set_replica_group(kAttentionDpGroups);
    t.mutable_batch_shard()->set_batch(s.batch());
  }
  return t;
}

void ResolvePlan(const ResolvedScenario& r, const proto::Plan& p, ProblemList& problems,
                 std::vector<ResolvedPlan>& plans) {
  const proto::ModelShape& m = r.spec.model();
  const std::string where = StrCat("plan '", p.name(), "': ");
  const size_t before = problems.size();
  const uint32_t nq = m.n_q_heads(), nkv = m.n_kv_heads(), g = p.attention_dp();
  if (p.tp() == 0 || p.tp() > 16384) {
    problems.push_back(StrCat(where, "tp: ", p.tp(), " must be in [1, 16384]"));
    return;
  }
  if (nq == 0 || nkv == 0 || nq % nkv != 0) return;  // the model's problem, named already
  if (nq % p.tp() != 0) {
    problems.push_back(StrCat(where, "tp: ", p.tp(), " must divide model.n_q_heads (", nq,
                              "): every rank holds the same number of Q heads"));
  }
  if (nkv % p.tp() != 0 && p.tp() % nkv != 0) {
    problems.push_back(StrCat(where, "tp: ", p.tp(), " and model.n_kv_heads (", nkv,
                              ") must divide one another: KV heads are divided among the ranks or ",
                              "replicated on tp / n_kv_heads ranks"));
  }
  if (p.lnc() != 1 && p.lnc() != 2) {
    problems.push_back(StrCat(where, "lnc: ", p.lnc(), " must be 1 or 2"));
  }
  if (!r.spec.attention_only() && m.intermediate() > 0 && m.intermediate() % p.tp() != 0) {
    problems.push_back(StrCat(where, "tp: ", p.tp(), " must divide model.intermediate (",
                              m.intermediate(), "): every rank holds I / tp of the MLP's columns"));
  }
  if (p.replicas() > kMaxRanks || static_cast<uint64_t>(p.tp()) * p.replicas() > kMaxRanks) {
    problems.push_back(StrCat(where, "replicas: ", p.replicas(), ": tp x replicas must be <= ", kMaxRanks, " ranks"));
  }
  if (p.tp() % g != 0) {
    problems.push_back(StrCat(where, "attention_dp: ", g, " must divide tp (", p.tp(),
                              "): the batch-shard groups are blocks of G ranks of one TP group"));
  }
  if (r.spec.batch() % g != 0) {
    problems.push_back(StrCat(where, "attention_dp: ", g, " must divide batch (", r.spec.batch(),
                              "): each of the G ranks attends B / G rows"));
  }
  if (g > 1 && r.workload == Workload::kPrefill) {
    problems.push_back(StrCat(where, "attention_dp: ", g, ": batch-sharded attention is a decode ",
                              "plan; prefill plans use attention_dp 1"));
  }
  const std::string& name = p.name();
  if (name.empty() || name.size() > 64 ||
      !std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; })) {
    problems.push_back(StrCat("plans: name '", name, "' must be 1 to 64 letters, digits, '_', '-' or '.'"));
  }
  if (problems.size() != before) return;

  ResolvedPlan plan;
  plan.name = name;
  plan.tp = static_cast<int>(p.tp());
  plan.attention_dp = static_cast<int>(g);
  plan.lnc = static_cast<int>(p.lnc());
  plan.replicas = static_cast<int>(p.replicas());
  plan.heads_per_rank = static_cast<int>(nq / p.tp());
  plan.q_per_kv = static_cast<int>(nq / nkv);
  plan.kv_per_rank = nkv >= p.tp() ? static_cast<int>(nkv / p.tp()) : 1;
  plan.kv_replication = nkv >= p.tp() ? 1 : static_cast<int>(p.tp() / nkv);
  if (r.workload == Workload::kPrefill && plan.heads_per_rank > 17) {
    problems.push_back(StrCat(where, "tp: ", p.tp(), " gives ", plan.heads_per_rank, " Q heads per ",
                              "rank; the o_proj CTE kernel takes at most 17 (raise tp)"));
  }
  if (r.workload == Workload::kPrefill && r.spec.sequence_parallel() && r.spec.seq_len() % p.tp() != 0) {
    problems.push_back(StrCat(where, "sequence_parallel: seq_len ", r.spec.seq_len(),
                              " must be a multiple of tp (", p.tp(), ") to scatter S evenly"));
  }

  // Instances: the ranks one instance holds at this LNC.
  const int per_instance = static_cast<int>(r.profile.physical_cores_per_chip() / p.lnc() *
                                            r.profile.chips_per_instance());
  const int world = plan.world_size();
  const int needed = per_instance > 0 ? (world + per_instance - 1) / per_instance : 1;
  if (p.instances() == 0) {
    plan.instances = needed;
  } else if (p.instances() > kMaxRanks) {
    // Every instance holds at least one rank, and a job has at most kMaxRanks.
    plan.instances = needed;
    problems.push_back(StrCat(where, "instances: ", p.instances(), " must be in [0, ", kMaxRanks,
                              "] (0: as many as the ranks need)"));
  } else {
    plan.instances = static_cast<int>(p.instances());
    if (p.instances() == 1 && world > per_instance) {
      problems.push_back(StrCat(where, "instances: 1 holds ", per_instance, " ranks at LNC ", p.lnc(),
                                "; ", world, " ranks need ", needed));
    } else if (p.instances() > 1 && world != int64_t{plan.instances} * per_instance) {
      problems.push_back(StrCat(where, "instances: ", p.instances(), ": ", world, " ranks do not fill ",
                                p.instances(), " instances of ", per_instance, " ranks at LNC ", p.lnc(),
                                " (need ", int64_t{plan.instances} * per_instance, ")"));
    }
  }

  // Memory per rank, before anything is allocated: the HBM of a logical core, and the host
  // memory the simulating process would need (it holds what the HBM holds).
  const HbmFootprint hbm = PlanHbmFootprint(r.spec, r.dtype, r.workload, plan, r.profile);
  if (!hbm.fits()) {
    problems.push_back(StrCat(where, "does not fit HBM: ", FormatHbmFootprint(hbm), "; over by ",
                              StrPrintf("%.2f GiB", (hbm.total() - hbm.capacity) / 1073741824.0),
                              ": raise tp, or shrink batch, kv_length, seq_len or layers"));
  } else if (static_cast<double>(hbm.total()) > kMaxBytesPerRank) {
    problems.push_back(StrCat(where, "needs about ", hbm.total() / 1073741824.0, " GiB per rank (",
                              FormatHbmFootprint(hbm), "); this machine simulates at most ",
                              kMaxBytesPerRank / (1 << 30), " GiB per rank: raise tp or shrink ",
                              "batch, kv_length, seq_len or layers"));
  }

  const proto::Topology t = PlanTopology(r.spec, p, problems);
  if (problems.size() != before) return;
  std::vector<std::string> topology_problems = collectives::CheckTopology(t, r.profile);
  for (const std::string& tp : topology_problems) problems.push_back(StrCat(where, "topology: ", tp));
  if (!topology_problems.empty()) return;
  plan.topology = collectives::ResolveTopology(t, r.profile, r.source);
  CheckDerivedGroups(plan.topology, kTpGroups, plan.tp, name, problems);
  if (plan.attention_dp > 1) CheckDerivedGroups(plan.topology, kAttentionDpGroups, plan.attention_dp, name, problems);
  std::set<int> instances;
  for (int chip : plan.topology.chip_of_rank) {
    instances.insert(chip / static_cast<int>(std::max(1u, r.profile.chips_per_instance())));
  }
  if (p.instances() != 0 && static_cast<int>(instances.size()) != plan.instances) {
    problems.push_back(StrCat(where, "instances: ", p.instances(), " but topology.placement puts the ",
                              "ranks on ", instances.size(), " instances"));
  }
  plans.push_back(std::move(plan));
}

// Whether a job of `s` runs a phase named `name` ("qkv.L2[3]": some layer and step of it).
bool RunsPhase(const proto::Scenario& s, const std::string& name) {
  const std::string base = PhaseBase(name);
  const int layers = static_cast<int>(std::clamp(s.layers(), 1u, 4096u));
  const int steps = s.workload() == "prefill" ? 1 : static_cast<int>(std::clamp(s.steps(), 1u, 4096u));
  for (int l = 0; l < layers; ++l) {
    for (int k = 0; k < steps; ++k) {
      if (PhaseName(base.c_str(), l, layers, k, steps) == name) return true;
    }
  }
  return false;
}

void Check(ResolvedScenario& r, ProblemList& problems) {
  const proto::Scenario& s = r.spec;
  CheckFields(s, problems);
  if (r.workload == Workload::kMoe) {
    CheckMoeScenario(r, problems);  // its model, plans and fault (moe_config.h)
    return;
  }
  CheckModelAndWorkload(s, problems);
  if (s.has_moe()) {
    problems.push_back(StrCat("moe: set, but workload is '", s.workload(), "'; the MoE layer is ",
                              "workload: \"moe\""));
  }
  for (const proto::Plan& p : s.plans()) {
    if (p.moe_ep() != 0 || p.moe_tp() != 0) {
      problems.push_back(StrCat("plan '", p.name(), "': moe_ep ", p.moe_ep(), " / moe_tp ", p.moe_tp(),
                                ": expert parallelism is a plan of workload \"moe\""));
    }
  }
  if (!s.scenarios().empty()) {
    problems.push_back(StrCat("scenarios: '", s.scenarios(0), "': the scenario list is replaced by ",
                              "plans; write e.g. plans { tp: 64 attention_dp: 8 } plans { tp: 64 } ",
                              "(docs/scenarios.md)"));
  }
  for (int i = 0; i < s.plans_size(); ++i) {
    for (int j = 0; j < i; ++j) {
      if (s.plans(j).name() == s.plans(i).name()) {
        problems.push_back(StrCat("plans: name '", s.plans(i).name(), "' is used twice (plans ", j,
                                  " and ", i, "); name the plans"));
      }
    }
    ResolvePlan(r, s.plans(i), problems, r.plans);
  }
  for (const proto::Plan& p : s.plans()) {
    const uint64_t world = static_cast<uint64_t>(p.tp()) * p.replicas();
    const proto::Plan& first = s.plans(0);
    if (world != static_cast<uint64_t>(first.tp()) * first.replicas()) {
      problems.push_back(StrCat("plans: '", p.name(), "' has ", world, " ranks (tp ", p.tp(),
                                " x replicas ", p.replicas(), ") but '", first.name(), "' has ",
                                static_cast<uint64_t>(first.tp()) * first.replicas(),
                                "; the plans of one job share its ranks"));
    }
  }
  // The test fault must name a rank of the job and a phase of the workload, or it never fires.
  const proto::Fault& f = s.fault();
  if (f.kind() != proto::Fault::NONE && !s.plans().empty()) {
    const uint64_t world = static_cast<uint64_t>(s.plans(0).tp()) * s.plans(0).replicas();
    if (f.rank() >= world) {
      problems.push_back(StrCat("fault.rank: ", f.rank(), " is outside the job's ", world, " ranks"));
    }
    const std::vector<std::string> phases = r.workload == Workload::kDecode ? DecodePhases()
                                                                            : PrefillPhases();
    if (f.kind() == proto::Fault::CORRUPT_INPUT && PhaseBase(f.phase()) != "qkv") {
      problems.push_back(StrCat("fault.phase: '", f.phase(), "': CORRUPT_INPUT corrupts the layer input ",
                                "a qkv phase reads (\"qkv\", \"qkv.L2\", ...)"));
    } else if (std::find(phases.begin(), phases.end(), PhaseBase(f.phase())) == phases.end()) {
      std::string names;
      for (const std::string& n : phases) names += (names.empty() ? "" : ", ") + n;
      problems.push_back(StrCat("fault.phase: '", f.phase(), "' is not a phase of the ",
                                s.workload(), " workload (", names, ")"));
    } else if (f.phase() != PhaseBase(f.phase()) && !RunsPhase(s, f.phase())) {
      problems.push_back(StrCat("fault.phase: '", f.phase(), "' is not a phase this job runs (layers: ",
                                std::max(1u, s.layers()), ", steps: ", std::max(1u, s.steps()),
                                "; names as \"qkv.L2\", \"qkv[3]\", \"qkv.L2[3]\")"));
    }
  }
}

std::string Ranges(int first, int count) {
  return count == 1 ? StrCat(first) : StrCat(first, "..", first + count - 1);
}

}  // namespace

std::vector<int> ResolvedPlan::group_kv_heads(int rank) const {
  const int g = attention_dp;
  const int first_rank = rank - tp_position(rank) % g;
  std::vector<int> heads;
  for (int q = first_q_head(first_rank); q < first_q_head(first_rank) + g * heads_per_rank; ++q) {
    if (heads.empty() || heads.back() != q / q_per_kv) heads.push_back(q / q_per_kv);
  }
  return heads;
}

std::vector<std::string> PhaseNames(Workload workload) {
  if (workload == Workload::kMoe) return MoePhases();
  return workload == Workload::kDecode ? DecodePhases() : PrefillPhases();
}

std::string PhaseBase(const std::string& phase) { return phase.substr(0, phase.find_first_of(".[")); }

std::string PhaseName(const char* phase, int layer, int layers, int step, int steps) {
  std::string name = phase;
  if (layers > 1) name += StrCat(".L", layer + 1);
  if (steps > 1) name += StrCat("[", step + 1, "]");
  return name;
}

proto::Tolerance ResolvedScenario::tolerance(const std::string& phase) const {
  const std::string base = PhaseBase(phase);
  const auto found = spec.tolerances().find(base);
  return found == spec.tolerances().end() ? proto::Tolerance() : found->second;
}

ResolvedScenario ResolveScenario(const std::string& text, const std::string& source) {
  ResolvedScenario r;
  r.source = source;
  r.spec = Parse(text, source);
  FillDefaults(r.spec);
  r.profile = r.spec.hardware_profile().empty() ? Trn2Profile()
                                                : LoadHardwareProfile(r.spec.hardware_profile());
  r.workload = r.spec.workload() == "prefill" ? Workload::kPrefill
               : r.spec.workload() == "moe"   ? Workload::kMoe
                                              : Workload::kDecode;
  ProblemList problems;
  // The layer's activations and weights: the float dtypes the kernels take.
  const std::string& dt = r.spec.dtype();
  if (dt == "bf16" || dt == "fp16" || dt == "fp32") {
    r.dtype = ParseDType(dt);
  } else {
    problems.push_back(StrCat("dtype: '", dt, "' is not one of bf16, fp16, fp32 (the layer's ",
                              "activations and weights)"));
    r.dtype = DType::kBFloat16;  // so the other checks can go on
  }
  Check(r, problems);
  if (!problems.empty()) Raise(ErrorCode::kBadConfig, problems.Message(source));
  return r;
}

ResolvedScenario LoadScenario(const std::string& path) {
  return ResolveScenario(ReadConfigFile(path, "scenario file"), path);
}

std::string FormatScenario(const ResolvedScenario& r) {
  if (r.workload == Workload::kMoe) return FormatMoeScenario(r);
  const proto::Scenario& s = r.spec;
  const proto::ModelShape& m = s.model();
  std::string out = StrCat("workload ", s.workload(), ": H ", m.hidden(), ", ", m.n_q_heads(),
                           " Q heads, ", m.n_kv_heads(), " KV heads, d ", m.d_head(), ", B ", s.batch());
  if (r.workload == Workload::kDecode) {
    out += StrCat(", ", s.kv_length(), " cached tokens, ", s.steps(), " step", s.steps() == 1 ? "" : "s");
  } else {
    out += StrCat(", S ", s.seq_len(), s.sequence_parallel() ? ", sequence parallel" : "");
  }
  out += StrCat("; ", s.layers(), s.attention_only() ? " attention block" : " decoder layer",
                s.layers() == 1 ? "" : "s", "; ", r.world_size(), " ranks\n");
  for (const ResolvedPlan& p : r.plans) {
    out += StrCat("\nplan '", p.name, "': tp ", p.tp, ", attention_dp ", p.attention_dp, ", lnc ",
                  p.lnc, ", replicas ", p.replicas, ", instances ", p.instances, "\n");
    out += StrCat("  HBM per logical core: ",
                  FormatHbmFootprint(PlanHbmFootprint(s, r.dtype, r.workload, p, r.profile)), "\n");
    if (!s.attention_only()) {
      out += StrCat("  MLP: I ", m.intermediate(), " / tp ", p.tp, " = ", m.intermediate() / p.tp,
                    " columns per rank, ", m.activation(), ", ", m.norm(), " norm\n");
    }
    out += StrCat("  ", p.heads_per_rank, " Q head", p.heads_per_rank == 1 ? "" : "s", " and ",
                  p.kv_per_rank, " KV head", p.kv_per_rank == 1 ? "" : "s", " per rank",
                  p.kv_replication > 1 ? StrCat(" (each KV head replicated on ", p.kv_replication, " ranks)") : "",
                  "\n");
    out += "  rank -> Q heads / KV heads";
    if (p.attention_dp > 1) out += " / attention (KV heads x batch rows)";
    out += ":\n";
    const int rows = static_cast<int>(s.batch()) / p.attention_dp;
    const int shown = std::min(p.tp, 16);
    for (int rank = 0; rank < shown; ++rank) {
      out += StrCat("    rank ", rank, ": Q ", Ranges(p.first_q_head(rank), p.heads_per_rank), " / KV ",
                    Ranges(p.first_kv_head(rank), p.kv_per_rank));
      if (p.attention_dp > 1) {
        const std::vector<int> kv = p.group_kv_heads(rank);
        const int row0 = (p.tp_position(rank) % p.attention_dp) * rows;
        out += StrCat(" / KV ", Ranges(kv.front(), static_cast<int>(kv.size())), " x rows ",
                      Ranges(row0, rows));
      }
      out += "\n";
    }
    if (p.tp > shown) out += StrCat("    ... (ranks ", shown, "..", p.tp - 1, " continue the pattern)\n");
    if (p.replicas > 1) {
      out += StrCat("    replicas 1..", p.replicas - 1, " (ranks ", p.tp, "..", p.world_size() - 1,
                    ") repeat it on their own batch\n");
    }
    out += collectives::FormatTopology(p.topology);
  }
  return out;
}

}  // namespace nkisim::launcher
