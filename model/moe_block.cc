#include "model/moe_block.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <sstream>

#include "collectives/all_to_all_v.h"
#include "collectives/collective_cost.h"
#include "runtime/error.h"
#include "runtime/logical_core.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {
namespace {

namespace moe = kernels::moe;

constexpr int64_t kBytes = 2;  // bf16 activations and weights

// One replica's MoE step: the routing, each EP slot's share and the row counts, worked out once.
struct MoeStep {
  const MoeShape& s;
  const MoePlan& p;
  const HardwareProfile& hw;
  int64_t tokens = 0;
  moe::Routing routing;
  std::vector<int64_t> share_begin;  // [ep + 1]
  std::vector<int64_t> counts;       // [ep x ep]: choices of slot i's share to slot j's experts
  std::vector<int64_t> expert_rows;  // [E]
  std::map<int64_t, double> expert_ns;  // memo: rows -> one expert's kernel time
  MoeBlockCost* out = nullptr;

  int64_t share(int i) const { return share_begin[i + 1] - share_begin[i]; }
  int64_t max_share() const { return share(0); }  // the first shares are the larger ones
  int64_t per_slot() const { return s.experts / p.ep; }
  int64_t core_rows(int64_t rows) const { return (rows + p.lnc - 1) / p.lnc; }
};

// A kernel's simulated time on a fresh NeuronCore.
double KernelNs(const HardwareProfile& hw, const std::function<void(const KernelContext&)>& body) {
  LogicalCore core(1, hw);
  const double t0 = core.now();
  core.Launch(body);
  return core.now() - t0;
}

// The members of EP group `pos` (ranks pos, pos + moe_tp, ...) or of MoE-TP group `slot`.
collectives::GroupPlacement Placement(const MoeStep& st, bool ep_group, int index) {
  collectives::ResolvedTopology t;
  t.world_size = st.p.tp;
  t.lnc = st.p.lnc;
  const int per_chip = std::max<int>(1, static_cast<int>(st.hw.physical_cores_per_chip()) / st.p.lnc);
  for (int r = 0; r < st.p.tp; ++r) t.chip_of_rank.push_back(r / per_chip);
  collectives::Group g;
  if (index < 0) {  // the whole TP group
    for (int r = 0; r < st.p.tp; ++r) g.push_back(r);
  } else if (ep_group) {
    for (int j = 0; j < st.p.ep; ++j) g.push_back(index + j * st.p.moe_tp);
  } else {
    for (int j = 0; j < st.p.moe_tp; ++j) g.push_back(index * st.p.moe_tp + j);
  }
  return collectives::PlaceGroup(t, st.hw, g);
}

double AllToAllVNs(const MoeStep& st, bool back) {
  if (st.p.ep == 1) return 0;
  std::vector<int64_t> rows(st.counts.size());
  int64_t moved = 0;
  for (int i = 0; i < st.p.ep; ++i) {
    for (int j = 0; j < st.p.ep; ++j) {
      rows[i * st.p.ep + j] = back ? st.counts[j * st.p.ep + i] : st.counts[i * st.p.ep + j];
      if (i != j) moved += rows[i * st.p.ep + j];
    }
  }
  if (moved == 0) return 0;
  return collectives::PlanAllToAllV(Placement(st, true, 0), rows, double(st.s.hidden) * kBytes, st.hw, "auto",
                                    collectives::Launch::kInGraph)
      .cost.total_ns;
}

// The routing of slot 0's share (the largest): what the dispatch and combine kernels permute.
moe::Routing ShareRouting(const MoeStep& st) {
  moe::Routing r;
  r.tokens = st.core_rows(st.max_share());
  r.top_k = st.s.top_k;
  const auto n = static_cast<size_t>(r.tokens * r.top_k);
  r.expert.assign(st.routing.expert.begin(), st.routing.expert.begin() + n);
  r.weight.assign(st.routing.weight.begin(), st.routing.weight.begin() + n);
  return r;
}

// --- The phases (kMoePhases' rows) ---

double RouterNs(MoeStep& st) {
  const int64_t rows = st.core_rows(st.max_share());
  if (rows == 0) return 0;
  const TensorView x = TensorView::Create({rows, st.s.hidden}, DType::kBFloat16, "moe_x");
  const TensorView w = TensorView::Create({st.s.hidden, st.s.experts}, DType::kBFloat16, "w_router");
  const TensorView logits = TensorView::Create({rows, st.s.experts}, DType::kFloat32, "router_logits");
  return KernelNs(st.hw, [&](const KernelContext& c) { moe::RouterLogitsKernel(c, x, w, logits); });
}

double DispatchNs(MoeStep& st) {
  const moe::Routing r = ShareRouting(st);
  double ns = AllToAllVNs(st, false);
  if (r.tokens == 0) return ns;
  const moe::DispatchPlan plan = moe::PlanDispatch(r, st.s.experts, -1);
  const TensorView x = TensorView::Create({r.tokens, st.s.hidden}, DType::kBFloat16, "moe_x");
  const TensorView x_perm = TensorView::Create({plan.rows(), st.s.hidden}, DType::kBFloat16, "moe_x_perm");
  ns += KernelNs(st.hw, [&](const KernelContext& c) { moe::DispatchKernel(c, plan, x, x_perm); });
  return ns;
}

double ExpertNs(MoeStep& st, int64_t rows, int inter) {
  const TensorView x = TensorView::Create({rows, st.s.hidden}, DType::kBFloat16, "expert_x");
  const TensorView wg = TensorView::Create({st.s.hidden, inter}, DType::kBFloat16, "expert_wg");
  const TensorView wu = TensorView::Create({st.s.hidden, inter}, DType::kBFloat16, "expert_wu");
  const TensorView wd = TensorView::Create({inter, st.s.hidden}, DType::kBFloat16, "expert_wd");
  const TensorView y = TensorView::Create({rows, st.s.hidden}, DType::kBFloat16, "expert_y");
  return KernelNs(st.hw, [&](const KernelContext& c) { moe::ExpertMlpKernel(c, x, wg, wu, wd, y); });
}

// Slot j's experts: expert e of the slot on core e % lnc; the slot's time is its slowest core's.
double ExpertsNs(MoeStep& st) {
  const int inter = st.s.expert_inter / st.p.moe_tp;
  double slowest = -1;
  for (int j = 0; j < st.p.ep; ++j) {
    std::vector<double> core(static_cast<size_t>(st.p.lnc), 0.0);
    for (int64_t e = 0; e < st.per_slot(); ++e) {
      const int64_t n = st.expert_rows[j * st.per_slot() + e];
      if (n == 0) continue;
      auto it = st.expert_ns.find(n);
      if (it == st.expert_ns.end()) it = st.expert_ns.emplace(n, ExpertNs(st, n, inter)).first;
      core[e % st.p.lnc] += it->second;
    }
    const double t = *std::max_element(core.begin(), core.end());
    if (t > slowest) {
      slowest = t;
      st.out->busiest = j;
    }
  }
  const auto first = st.expert_rows.begin() + st.out->busiest * st.per_slot();
  st.out->busiest_expert_rows.assign(first, first + st.per_slot());
  return slowest;
}

// The shared expert is split over the whole TP group (I_shared / tp a rank) on the T tokens every
// rank holds after the attention block; its partial sums join the MoE's reduction.
double SharedExpertNs(MoeStep& st) {
  const int64_t rows = st.core_rows(st.tokens);
  return rows == 0 ? 0 : ExpertNs(st, rows, st.s.shared_inter / st.p.tp);
}

double CombineNs(MoeStep& st) {
  const moe::Routing r = ShareRouting(st);
  double ns = AllToAllVNs(st, true);
  if (r.tokens == 0) return ns;
  const moe::DispatchPlan plan = moe::PlanDispatch(r, st.s.experts, -1);
  const TensorView w = TensorView::Create({r.tokens, st.s.top_k}, DType::kFloat32, "moe_weights");
  const TensorView y = TensorView::Create({plan.rows(), st.s.hidden}, DType::kBFloat16, "moe_y_perm");
  const TensorView out = TensorView::Create({r.tokens, st.s.hidden}, DType::kBFloat16, "moe_out");
  ns += KernelNs(st.hw, [&](const KernelContext& c) { moe::CombineKernel(c, plan, w, y, nullptr, out); });
  return ns;
}

double MoeCollectivesNs(MoeStep& st) {
  const double bytes = double(st.max_share()) * st.s.hidden * kBytes;
  double ns = 0;
  if (st.p.moe_tp > 1 && bytes > 0) {
    ns += collectives::PlanCollective(collectives::CollectiveOp::kAllReduce, Placement(st, false, 0), bytes, st.hw,
                                      "auto", collectives::Launch::kInGraph)
              .cost.total_ns;
  }
  if (st.p.ep > 1 && bytes > 0) {
    ns += collectives::PlanCollective(collectives::CollectiveOp::kAllGather, Placement(st, true, 0), bytes, st.hw,
                                      "auto", collectives::Launch::kInGraph)
              .cost.total_ns;
  }
  // With EP the shared expert's [T, H] partials need their own all-reduce over the TP group (at
  // moe_ep 1 they ride in the moe_tp one, which is the TP group).
  if (st.s.shared_inter > 0 && st.p.ep > 1 && st.p.tp > 1) {
    ns += collectives::PlanCollective(collectives::CollectiveOp::kAllReduce, Placement(st, false, -1),
                                      double(st.tokens) * st.s.hidden * kBytes, st.hw, "auto",
                                      collectives::Launch::kInGraph)
              .cost.total_ns;
  }
  return ns;
}

bool Always(const MoeStep&) { return true; }
bool HasShared(const MoeStep& st) { return st.s.shared_inter > 0; }
bool Distributed(const MoeStep& st) { return st.p.tp > 1; }

struct MoePhaseRow {
  const char* name;
  bool (*runs)(const MoeStep&);
  double (*price)(MoeStep&);
};

// The MoE block's phases, in order (moe_block.h says what each does).
constexpr MoePhaseRow kMoePhases[] = {
    {"router", Always, RouterNs},
    {"dispatch", Always, DispatchNs},
    {"experts", Always, ExpertsNs},
    {"shared_expert", HasShared, SharedExpertNs},
    {"combine", Always, CombineNs},
    {"moe_collectives", Distributed, MoeCollectivesNs},
};

}  // namespace

double MoeBlockCost::total_ns() const {
  double t = 0;
  for (const MoePhaseCost& p : phases) t += p.ns;
  return t;
}

double MoeBlockCost::phase_ns(const std::string& name) const {
  for (const MoePhaseCost& p : phases) {
    if (p.phase == name) return p.ns;
  }
  return 0;
}

std::vector<std::string> MoePlanProblems(const MoeShape& s, const MoePlan& p, const std::string& plan) {
  std::vector<std::string> out;
  const std::string where = StrCat("plan '", plan, "': ");
  if (p.ep < 1 || p.moe_tp < 1) {
    out.push_back(StrCat(where, "moe_ep ", p.ep, ", moe_tp ", p.moe_tp, ": must be >= 1"));
    return out;
  }
  if (int64_t{p.ep} * p.moe_tp != p.tp) {
    out.push_back(StrCat(where, "moe_ep x moe_tp: ", p.ep, " x ", p.moe_tp, " = ", int64_t{p.ep} * p.moe_tp,
                         ": must equal tp (", p.tp, "), the ranks the experts are spread over"));
  }
  if (s.experts > 0 && s.experts % p.ep != 0) {
    out.push_back(StrCat(where, "moe_ep: ", p.ep, ": must divide the experts (num_experts ", s.experts,
                         "): each EP rank holds the same number of experts"));
  }
  if (s.expert_inter > 0 && s.expert_inter % p.moe_tp != 0) {
    out.push_back(StrCat(where, "moe_tp: ", p.moe_tp, ": must divide the expert's intermediate size (",
                         s.expert_inter, ")"));
  }
  if (s.shared_inter > 0 && s.shared_inter % p.tp != 0) {
    out.push_back(StrCat(where, "tp: ", p.tp, ": must divide the shared expert's intermediate size (",
                         s.shared_inter, "): the shared expert is split over the TP group"));
  }
  if (s.dense_inter > 0 && s.dense_inter % p.tp != 0) {
    out.push_back(StrCat(where, "tp: ", p.tp, ": must divide the dense layers' intermediate size (intermediate_size_mlp ",
                         s.dense_inter, "): their MLP is split over the TP group"));
  }
  return out;
}

MoeBlockCost PriceDenseMlpBlock(const MoeShape& shape, const MoePlan& plan, int64_t tokens,
                                const HardwareProfile& profile) {
  SetSimMode(SimMode::kTimingOnly);
  MoeBlockCost out;
  MoeStep st{shape, plan, profile, tokens, {}, {}, {}, {}, {}, &out};
  const int64_t rows = st.core_rows(tokens);
  out.phases.push_back({"dense_mlp", rows == 0 ? 0 : ExpertNs(st, rows, shape.dense_inter / plan.tp)});
  double reduce = 0;
  if (plan.tp > 1) {
    reduce = collectives::PlanCollective(collectives::CollectiveOp::kAllReduce, Placement(st, false, -1),
                                         double(tokens) * shape.hidden * kBytes, profile, "auto",
                                         collectives::Launch::kInGraph)
                 .cost.total_ns;
  }
  out.phases.push_back({"dense_mlp_all_reduce", reduce});
  return out;
}

int64_t DenseMlpBytesPerRank(const MoeShape& s, const MoePlan& p) {
  return kBytes * 3 * int64_t{s.hidden} * (int64_t{s.dense_inter} / std::max(1, p.tp));
}

MoeBlockCost PriceMoeBlock(const MoeShape& shape, const MoePlan& plan, int64_t tokens,
                           const moe::RouterSkew& skew, const HardwareProfile& profile, uint32_t seed) {
  SetSimMode(SimMode::kTimingOnly);
  MoeBlockCost out;
  MoeStep st{shape, plan, profile, tokens, {}, {}, {}, {}, {}, &out};
  if (skew.kind == moe::RouterSkew::Kind::kCounts) {  // a sample's counts, carried to this step's tokens
    moe::RouterSkew step = skew;
    step.counts = CountsForStep(skew.counts, tokens, shape.top_k);
    st.routing = moe::SkewedRouting(tokens, shape.experts, shape.top_k, step, seed);
  } else {
    st.routing = moe::SkewedRouting(tokens, shape.experts, shape.top_k, skew, seed);
  }
  for (int i = 0; i <= plan.ep; ++i) {
    // Earlier slots one token more: slot i takes [i T / ep, ...) rounded up.
    st.share_begin.push_back((int64_t{i} * tokens + plan.ep - 1) / plan.ep);
  }
  st.share_begin.back() = tokens;
  st.counts.assign(static_cast<size_t>(plan.ep) * plan.ep, 0);
  st.expert_rows.assign(static_cast<size_t>(shape.experts), 0);
  out.rank_rows.assign(static_cast<size_t>(plan.ep), 0);
  for (int i = 0; i < plan.ep; ++i) {
    for (int64_t t = st.share_begin[i]; t < st.share_begin[i + 1]; ++t) {
      for (int64_t k = 0; k < shape.top_k; ++k) {
        const int e = st.routing.expert[static_cast<size_t>(t * shape.top_k + k)];
        const int j = static_cast<int>(e / st.per_slot());
        ++st.counts[i * plan.ep + j];
        ++st.expert_rows[e];
        ++out.rank_rows[j];
      }
    }
  }
  for (const MoePhaseRow& row : kMoePhases) {
    if (row.runs(st)) out.phases.push_back({row.name, row.price(st)});
  }
  return out;
}

int64_t MoeWeightBytesPerRank(const MoeShape& s, const MoePlan& p) {
  const int64_t h = s.hidden;
  const int64_t experts = int64_t{s.experts} / std::max(1, p.ep);
  const int64_t inter = int64_t{s.expert_inter} / std::max(1, p.moe_tp);
  const int64_t shared = int64_t{s.shared_inter} / std::max(1, p.tp);
  return kBytes * (h * s.experts + experts * 3 * h * inter + 3 * h * shared);
}

namespace {

// --router-skew counts:FILE's file: an optional "tokens: N", then the counts.
moe::RouterSkew ReadCountsFile(const std::string& text, const std::string& what, int64_t* sample_tokens) {
  const std::string path = text.substr(7);
  const std::string where = StrCat(what, ": '", text, "'");
  std::ifstream in(path);
  if (path.empty() || !in) Raise(ErrorCode::kBadConfig, StrCat(where, ": cannot read the counts file '", path, "'"));
  moe::RouterSkew s;
  s.kind = moe::RouterSkew::Kind::kCounts;
  std::string line, word;
  int64_t tokens = 0;
  for (int n = 1; std::getline(in, line); ++n) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    while (words >> word) {
      if (word == "tokens:") {
        std::string value;
        words >> value;
        char* end = nullptr;
        const long long v = std::strtoll(value.c_str(), &end, 10);
        if (!s.counts.empty() || tokens != 0 || value.empty() || *end != '\0' || v < 1 || v > 1000000000) {
          Raise(ErrorCode::kBadConfig, StrCat(where, ": line ", n, ": tokens: '", value,
                                              "': must be one integer in [1, 1e9], before the counts"));
        }
        tokens = v;
        continue;
      }
      char* end = nullptr;
      const long long v = std::strtoll(word.c_str(), &end, 10);
      if (*end != '\0' || v < 0 || v > 1000000000) {
        Raise(ErrorCode::kBadConfig, StrCat(where, ": line ", n, ": count '", word,
                                            "' (expert ", s.counts.size(), "): must be an integer in [0, 1e9]"));
      }
      s.counts.push_back(v);
    }
  }
  if (s.counts.empty()) Raise(ErrorCode::kBadConfig, StrCat(where, ": no counts: one per expert is the rule"));
  if (sample_tokens != nullptr) *sample_tokens = tokens;
  return s;
}

}  // namespace

moe::RouterSkew ParseRouterSkew(const std::string& text, const std::string& what, int64_t* sample_tokens) {
  if (sample_tokens != nullptr) *sample_tokens = 0;
  moe::RouterSkew s;
  if (text == "uniform") return s;
  if (text.rfind("counts:", 0) == 0) return ReadCountsFile(text, what, sample_tokens);
  if (text.rfind("zipf:", 0) == 0) {
    char* end = nullptr;
    s.kind = moe::RouterSkew::Kind::kZipf;
    s.zipf_s = std::strtod(text.c_str() + 5, &end);
    if (end != text.c_str() + 5 && *end == '\0' && s.zipf_s >= 0 && s.zipf_s <= 16) return s;
  }
  Raise(ErrorCode::kBadConfig,
        StrCat(what, ": '", text, "': must be uniform, zipf:S with S in [0, 16], or counts:FILE"));
}

std::vector<std::string> RouterSkewProblems(const moe::RouterSkew& skew, int64_t sample_tokens,
                                            const MoeShape& shape, const std::string& what) {
  std::vector<std::string> p;
  if (skew.kind != moe::RouterSkew::Kind::kCounts) return p;
  const auto& c = skew.counts;
  if (static_cast<int64_t>(c.size()) != shape.experts) {
    p.push_back(StrCat(what, ": ", c.size(), " counts: the rule is one per expert (num_experts ", shape.experts, ")"));
    return p;
  }
  const int64_t sum = std::accumulate(c.begin(), c.end(), int64_t{0});
  const int64_t k = shape.top_k;
  if (sample_tokens > 0 && sum != sample_tokens * k) {
    p.push_back(StrCat(what, ": the counts sum to ", sum, ": the rule is tokens x num_experts_per_tok = ",
                       sample_tokens, " x ", k, " = ", sample_tokens * k));
    return p;
  }
  if (sum <= 0 || sum % k != 0) {
    p.push_back(StrCat(what, ": the counts sum to ", sum, ": the rule is the sample's tokens x ",
                       "num_experts_per_tok: a positive multiple of ", k));
    return p;
  }
  const int64_t tokens = sum / k;
  for (size_t e = 0; e < c.size(); ++e) {
    if (c[e] > tokens) {
      p.push_back(StrCat(what, ": count of expert ", e, ": ", c[e], ": must be <= the sample's tokens (", tokens,
                         "): a token picks an expert at most once"));
      break;
    }
  }
  return p;
}

std::vector<int64_t> CountsForStep(const std::vector<int64_t>& counts, int64_t tokens, int64_t top_k) {
  const int64_t sum = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  const int64_t target = tokens * top_k;
  std::vector<int64_t> out(counts.size()), rem(counts.size());
  int64_t placed = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    // counts <= 1e9 (ReadCountsFile) and a step's target <= 2^17 rows x 2^10 choices: fits.
    const int64_t num = counts[e] * target;
    out[e] = std::min(num / sum, tokens);
    rem[e] = num % sum;
    placed += out[e];
  }
  std::vector<size_t> order(counts.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rem[a] > rem[b]; });
  // Each pass gives one more row to every expert below the cap, largest remainder first; the
  // caps hold E x tokens >= target rows, so the passes end.
  while (placed < target) {
    for (size_t e : order) {
      if (placed == target) break;
      if (out[e] < tokens) {
        ++out[e];
        ++placed;
      }
    }
  }
  return out;
}

}  // namespace nkisim::launcher
