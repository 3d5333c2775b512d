#include "model/moe_config.h"

#include <algorithm>
#include <cmath>

#include "kernels/reference/moe_ref.h"
#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

// The bias per unit of s and ln(e + 1): the router logits have a standard deviation of about
// 0.58 (x and w uniform, docs/moe.md), so s = 1.2 puts expert 31 (of 32) 2.1 below expert 0, 3.6 deviations.
constexpr double kZipfBiasScale = 0.5;
// Host bounds of one simulating process (the job holds fp64 goldens of every expert it sees).
constexpr uint32_t kMaxHidden = 16384, kMaxExperts = 1024, kMaxTokens = 4096;
constexpr uint32_t kMaxIntermediate = 1u << 16, kMaxRanks = 4096;
constexpr double kMaxBytesPerRank = 2.0 * (1 << 30);

std::string Where(const proto::Plan& p) { return StrCat("plan '", p.name(), "': "); }

void CheckMoeModel(const proto::Scenario& s, ProblemList& problems) {
  const proto::MoeShape& m = s.moe();
  const uint32_t h = s.model().hidden();
  if (h == 0 || h > kMaxHidden) {
    problems.push_back(StrCat("model.hidden: ", h, " must be in [1, ", kMaxHidden, "]"));
  }
  if (m.experts() == 0 || m.experts() > kMaxExperts) {
    problems.push_back(StrCat("moe.experts: ", m.experts(), " must be in [1, ", kMaxExperts, "]"));
  }
  if (m.top_k() == 0 || m.top_k() > m.experts()) {
    problems.push_back(StrCat("moe.top_k: ", m.top_k(), " must be in [1, moe.experts (", m.experts(),
                              ")]: each token picks top_k distinct experts"));
  }
  if (m.intermediate() == 0 || m.intermediate() > kMaxIntermediate) {
    problems.push_back(StrCat("moe.intermediate: ", m.intermediate(), " must be in [1, ",
                              kMaxIntermediate, "] (one expert's I)"));
  }
  if (m.tokens() == 0 || m.tokens() > kMaxTokens) {
    problems.push_back(StrCat("moe.tokens: ", m.tokens(), " must be in [1, ", kMaxTokens,
                              "] (tokens per expert-parallel rank)"));
  }
  const std::string& r = m.router();
  if (r != "qwen3" && r != "mixtral" && r != "gpt_oss" && r != "llama4") {
    problems.push_back(StrCat("moe.router: '", r, "' is not one of qwen3, mixtral, gpt_oss, llama4"));
  } else if (r == "llama4" && m.top_k() != 1) {
    problems.push_back(StrCat("moe.top_k: ", m.top_k(), ": the llama4 router (sigmoid top-1) needs 1"));
  }
  if (m.skew() != "zipf" && m.skew() != "uniform") {
    problems.push_back(StrCat("moe.skew: '", m.skew(), "' is not one of zipf, uniform"));
  }
  if (!(m.zipf_s() >= 0 && m.zipf_s() <= 10)) {
    problems.push_back(StrCat("moe.zipf_s: ", m.zipf_s(), " must be in [0, 10]"));
  }
  // What the decoder-layer workloads read and this one does not: refused by name, not ignored.
  const proto::ModelShape& ms = s.model();
  for (const auto& [field, value] :
       {std::pair{"model.n_q_heads", ms.n_q_heads()}, {"model.n_kv_heads", ms.n_kv_heads()},
        {"model.d_head", ms.d_head()}, {"model.intermediate", ms.intermediate()},
        {"batch", s.batch()}, {"kv_length", s.kv_length()}, {"seq_len", s.seq_len()},
        {"steps", s.steps()}, {"model.qkv_bias", ms.qkv_bias() ? 1u : 0u}}) {
    if (value != 0) {
      problems.push_back(StrCat(field, ": ", value, ": the moe workload runs no attention or dense ",
                                "MLP; drop it (tokens: moe.tokens, I: moe.intermediate)"));
    }
  }
  if (s.layers() != 1) {
    problems.push_back(StrCat("layers: ", s.layers(), ": the moe workload runs one MoE layer"));
  }
  if (s.attention_only() || s.sequence_parallel()) {
    problems.push_back("attention_only / sequence_parallel: not fields of the moe workload");
  }
}

// The plan's topology: the scenario's (placement, algorithms) with the plan's world, LNC and the
// derived "tp" (contiguous) and "ep" (strided) sets; a set given by name only keeps its algorithm.
proto::Topology MoeTopology(const proto::Scenario& s, const proto::Plan& p, ProblemList& problems) {
  proto::Topology t = s.topology();
  const uint32_t world = p.moe_ep() * p.moe_tp();
  if (t.world_size() != 0 && t.world_size() != world) {
    problems.push_back(StrCat(Where(p), "moe_ep x moe_tp = ", p.moe_ep(), " x ", p.moe_tp(), " = ",
                              world, " ranks, but topology.world_size is ", t.world_size(),
                              ": the rule is moe_ep x moe_tp = the job's ranks"));
  }
  t.set_world_size(world);
  t.set_lnc(p.lnc());
  bool has_tp = false, has_ep = false;
  for (proto::ReplicaGroupSet& set : *t.mutable_replica_groups()) {
    const bool derived = set.name() == kTpGroups || set.name() == kEpGroups;
    if (!derived) continue;
    if (set.groups_case() != proto::ReplicaGroupSet::GROUPS_NOT_SET) {
      problems.push_back(StrCat(Where(p), "topology.replica_groups '", set.name(), "': derived from ",
                                "moe_ep and moe_tp; give it by name only (to set its algorithm)"));
    }
    if (set.name() == kTpGroups) {
      has_tp = true;
      set.mutable_contiguous()->set_group_size(p.moe_tp());
    } else {
      has_ep = true;
      set.mutable_strided()->set_group_size(p.moe_ep());
    }
  }
  if (!has_tp) {
    proto::ReplicaGroupSet& set = *t.add_replica_groups();
    set.set_name(kTpGroups);
    set.mutable_contiguous()->set_group_size(p.moe_tp());
  }
  if (!has_ep) {
    proto::ReplicaGroupSet& set = *t.add_replica_groups();
    set.set_name(kEpGroups);
    set.mutable_strided()->set_group_size(p.moe_ep());
  }
  t.clear_batch_shard();
  return t;
}

void ResolveMoePlan(ResolvedScenario& r, const proto::Plan& p, ProblemList& problems) {
  const proto::MoeShape& m = r.spec.moe();
  const std::string where = Where(p);
  const size_t before = problems.size();
  if (p.moe_ep() == 0 || p.moe_tp() == 0 || p.moe_ep() > kMaxRanks || p.moe_tp() > kMaxRanks ||
      p.moe_ep() * p.moe_tp() > kMaxRanks) {
    problems.push_back(StrCat(where, "moe_ep: ", p.moe_ep(), ", moe_tp: ", p.moe_tp(),
                              ": both must be >= 1 and moe_ep x moe_tp <= ", kMaxRanks, " ranks"));
    return;
  }
  if (p.tp() != p.moe_tp() || p.replicas() != p.moe_ep()) {
    problems.push_back(StrCat(where, "tp: ", p.tp(), ", replicas: ", p.replicas(), " contradict moe_tp ",
                              p.moe_tp(), " and moe_ep ", p.moe_ep(), " (the rule: tp = moe_tp, ",
                              "replicas = moe_ep; leave them out)"));
  }
  if (m.experts() > 0 && m.experts() % p.moe_ep() != 0) {
    problems.push_back(StrCat(where, "moe_ep: ", p.moe_ep(), " must divide moe.experts (", m.experts(),
                              "): every expert-parallel rank owns experts / moe_ep experts"));
  }
  if (m.intermediate() > 0 && m.intermediate() % p.moe_tp() != 0) {
    problems.push_back(StrCat(where, "moe_tp: ", p.moe_tp(), " must divide moe.intermediate (",
                              m.intermediate(), "): every TP rank holds I / moe_tp of each expert"));
  }
  if (p.lnc() != 1) {
    problems.push_back(StrCat(where, "lnc: ", p.lnc(), ": the MoE kernels run at lnc 1 (so far)"));
  }
  if (p.attention_dp() != 1) {
    problems.push_back(StrCat(where, "attention_dp: ", p.attention_dp(), ": the moe workload has no attention"));
  }
  if (p.instances() != 0) {
    problems.push_back(StrCat(where, "instances: ", p.instances(), ": derived for the moe workload; leave it out"));
  }
  const std::string& name = p.name();
  if (name.empty() || name.size() > 64 ||
      !std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
      })) {
    problems.push_back(StrCat("plans: name '", name, "' must be 1 to 64 letters, digits, '_', '-' or '.'"));
  }
  if (problems.size() != before) return;
  ResolvedPlan plan;
  plan.name = name;
  plan.tp = plan.moe_tp = static_cast<int>(p.moe_tp());
  plan.replicas = plan.moe_ep = static_cast<int>(p.moe_ep());
  plan.lnc = 1;
  const int per_instance = static_cast<int>(r.profile.physical_cores_per_chip() / plan.lnc *
                                            r.profile.chips_per_instance());
  plan.instances = per_instance > 0 ? (plan.world_size() + per_instance - 1) / per_instance : 1;
  const HbmFootprint hbm = MoeHbmFootprint(r.spec, r.dtype, plan, r.profile);
  if (!hbm.fits() || static_cast<double>(hbm.total()) > kMaxBytesPerRank) {
    problems.push_back(StrCat(where, "needs ", FormatHbmFootprint(hbm), "; the limit is the HBM and ",
                              kMaxBytesPerRank / (1 << 30), " GiB of host memory per rank: raise ",
                              "moe_ep or moe_tp, or shrink moe.tokens, moe.intermediate or model.hidden"));
    return;
  }
  const proto::Topology t = MoeTopology(r.spec, p, problems);
  if (problems.size() != before) return;
  std::vector<std::string> topology_problems = collectives::CheckTopology(t, r.profile);
  for (const std::string& tp : topology_problems) problems.push_back(StrCat(where, "topology: ", tp));
  if (!topology_problems.empty()) return;
  plan.topology = collectives::ResolveTopology(t, r.profile, r.source);
  r.plans.push_back(std::move(plan));
}

}  // namespace

const std::vector<std::string>& MoePhases() {
  static const std::vector<std::string> phases = {
      "router",  "dispatch",          "dispatch_all_to_all", "experts",
      "expert_all_reduce", "combine_all_to_all", "combine"};
  return phases;
}

void FillMoeDefaults(proto::Scenario& s) {
  proto::MoeShape& m = *s.mutable_moe();
  if (m.router().empty()) m.set_router("qwen3");
  if (m.skew().empty()) m.set_skew("zipf");
  if (m.skew() == "zipf" && m.zipf_s() == 0) m.set_zipf_s(1.2);
  if (!s.has_chain_tolerance()) {
    s.mutable_chain_tolerance()->set_atol(1e-2);
    s.mutable_chain_tolerance()->set_rtol(1e-2);
  }
  struct Default { const char* phase; double atol, rtol; };
  // Logits: fp32 PSUM of bf16 operands (the kernel tests' 1e-4); the data movements exact; the
  // bf16 expert outputs and the combine as the kernel tests hold them.
  for (const Default& d :
       {Default{"router", 1e-4, 1e-4}, Default{"dispatch", 0, 0}, Default{"dispatch_all_to_all", 0, 0},
        Default{"experts", 1e-5, 2e-2}, Default{"expert_all_reduce", 1e-5, 2e-2},
        Default{"combine_all_to_all", 0, 0}, Default{"combine", 1e-5, 2e-2}}) {
    if (!s.tolerances().contains(d.phase)) {
      proto::Tolerance& t = (*s.mutable_tolerances())[d.phase];
      t.set_atol(d.atol);
      t.set_rtol(d.rtol);
    }
  }
  for (proto::Plan& p : *s.mutable_plans()) {
    if (p.tp() == 0) p.set_tp(p.moe_tp());
    if (p.replicas() == 0) p.set_replicas(p.moe_ep());
    if (p.lnc() == 0) p.set_lnc(1);
    if (p.name().empty()) p.set_name(StrCat("ep", p.moe_ep(), "xtp", p.moe_tp()));
  }
}

void CheckMoeScenario(ResolvedScenario& r, ProblemList& problems) {
  const proto::Scenario& s = r.spec;
  CheckMoeModel(s, problems);
  if (s.plans().empty()) {
    problems.push_back("plans: none given; add at least one, e.g. plans { moe_ep: 8 moe_tp: 2 }");
  }
  if (!s.scenarios().empty()) problems.push_back("scenarios: replaced by plans (docs/scenarios.md)");
  const size_t model_problems = problems.size();
  for (int i = 0; i < s.plans_size(); ++i) {
    const proto::Plan& p = s.plans(i);
    for (int j = 0; j < i; ++j) {
      if (s.plans(j).name() == p.name()) {
        problems.push_back(StrCat("plans: name '", p.name(), "' is used twice; name the plans"));
      }
    }
    const uint64_t world = uint64_t{p.moe_ep()} * p.moe_tp();
    const uint64_t first = uint64_t{s.plans(0).moe_ep()} * s.plans(0).moe_tp();
    if (world != first) {
      problems.push_back(StrCat("plans: '", p.name(), "' has moe_ep x moe_tp = ", world, " ranks but '",
                                s.plans(0).name(), "' has ", first, "; the plans of one job share its ranks"));
    }
    if (model_problems == 0) ResolveMoePlan(r, p, problems);
  }
  const proto::Fault& f = s.fault();
  if (f.kind() != proto::Fault::NONE && !s.plans().empty()) {
    const uint64_t world = uint64_t{s.plans(0).moe_ep()} * s.plans(0).moe_tp();
    if (f.rank() >= world) {
      problems.push_back(StrCat("fault.rank: ", f.rank(), " is outside the job's ", world, " ranks"));
    }
    const auto& phases = MoePhases();
    if (f.kind() == proto::Fault::CORRUPT_INPUT) {
      problems.push_back("fault.kind: CORRUPT_INPUT corrupts a decoder layer's input; the moe workload "
                         "takes THROW, KILL or STALL");
    } else if (std::find(phases.begin(), phases.end(), f.phase()) == phases.end()) {
      std::string names;
      for (const std::string& n : phases) names += (names.empty() ? "" : ", ") + n;
      problems.push_back(StrCat("fault.phase: '", f.phase(), "' is not a phase of the moe workload (",
                                names, ")"));
    }
  }
}

HbmFootprint MoeHbmFootprint(const proto::Scenario& s, DType dtype, const ResolvedPlan& plan,
                             const HardwareProfile& profile) {
  const double elem = static_cast<double>(SizeOf(dtype));
  const proto::MoeShape& m = s.moe();
  const double h = s.model().hidden(), e = m.experts(), t = m.tokens(), k = m.top_k();
  const double ep = std::max(1, plan.moe_ep), tp = std::max(1, plan.moe_tp);
  HbmFootprint f;
  f.weights_per_layer = static_cast<int64_t>((h * e + e / ep * 3 * h * m.intermediate() / tp) * elem);
  // x, the dispatched rows (t k), the received rows at their largest (ep t k, twice: as received
  // and regrouped by expert), the expert outputs (partial, sum, regrouped back), the returned rows
  // and the output; fp32 logits and weights.
  const double rows_in = ep * t * k;
  f.activations = static_cast<int64_t>((t * h + t * k * h * 2 + rows_in * h * 5 + t * h) * elem +
                                       (t * e + t * k) * 4);
  const uint64_t per_chip = std::max(1u, profile.physical_cores_per_chip() / std::max(1, plan.lnc));
  f.capacity = static_cast<int64_t>(profile.hbm_bytes_per_chip() / per_chip);
  return f;
}

double MoeRouterBias(const proto::MoeShape& moe, int e) {
  if (moe.skew() != "zipf") return 0;
  return -moe.zipf_s() * std::log(e + 1.0) * kZipfBiasScale;
}

std::string FormatMoeScenario(const ResolvedScenario& r) {
  const proto::Scenario& s = r.spec;
  const proto::MoeShape& m = s.moe();
  std::string out = StrCat("workload moe: H ", s.model().hidden(), ", ", m.experts(), " experts, top ",
                           m.top_k(), ", expert I ", m.intermediate(), ", router ", m.router(), ", skew ",
                           m.skew(), m.skew() == "zipf" ? StrCat(" s ", m.zipf_s()) : "", ", ",
                           m.tokens(), " tokens per EP rank, dropless; ", r.world_size(), " ranks\n");
  for (const ResolvedPlan& p : r.plans) {
    out += StrCat("\nplan '", p.name, "': moe_ep ", p.moe_ep, " x moe_tp ", p.moe_tp, ", lnc ", p.lnc,
                  ", instances ", p.instances, "\n");
    out += StrCat("  HBM per logical core: ", FormatHbmFootprint(MoeHbmFootprint(s, r.dtype, p, r.profile)),
                  "\n");
    const int per = static_cast<int>(m.experts()) / p.moe_ep;
    for (int q = 0; q < std::min(p.moe_ep, 16); ++q) {
      out += StrCat("    EP ", q, " (ranks ", q * p.moe_tp, "..", (q + 1) * p.moe_tp - 1, "): experts ",
                    q * per, "..", (q + 1) * per - 1, ", I / ", p.moe_tp, " = ",
                    m.intermediate() / p.moe_tp, " columns per rank\n");
    }
    if (p.moe_ep > 16) out += "    ... (the pattern continues)\n";
    out += collectives::FormatTopology(p.topology);
  }
  return out;
}

}  // namespace nkisim::launcher
