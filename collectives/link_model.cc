#include "collectives/link_model.h"

#include "runtime/cost_model.h"
#include "runtime/error.h"

#include <algorithm>
#include <unordered_map>

namespace nkisim::collectives {
namespace {

// Link ids: 6 per chip: torus +x, -x, +y, -y, EFA out, EFA in.
enum Port { kPlusX = 0, kMinusX, kPlusY, kMinusY, kEfaOut, kEfaIn, kPorts };

struct Route {
  std::vector<int> links;
  int hops = 0;
  bool same_chip = false;
  bool crosses_instance = false;
};

Route RouteBetween(const GroupPlacement& g, int from_chip, int to_chip) {
  Route r;
  if (from_chip == to_chip) {
    r.same_chip = true;
    return r;
  }
  const int cpi = g.chips_per_instance;
  if (from_chip / cpi != to_chip / cpi) {
    r.crosses_instance = true;
    r.links = {from_chip * kPorts + kEfaOut, to_chip * kPorts + kEfaIn};
    return r;
  }
  const int base = from_chip / cpi * cpi;
  int x = from_chip % cpi % g.torus_x, y = from_chip % cpi / g.torus_x;
  const int tx = to_chip % cpi % g.torus_x, ty = to_chip % cpi / g.torus_x;
  auto walk = [&](int& pos, int target, int size, Port plus, Port minus) {
    const int ahead = ((target - pos) % size + size) % size;
    const bool forward = ahead <= size - ahead;
    const int steps = forward ? ahead : size - ahead;
    for (int i = 0; i < steps; ++i) {
      const int chip = base + y * g.torus_x + x;
      r.links.push_back(chip * kPorts + (forward ? plus : minus));
      pos = ((pos + (forward ? 1 : -1)) % size + size) % size;
      ++r.hops;
    }
  };
  walk(x, tx, g.torus_x, kPlusX, kMinusX);
  walk(y, ty, g.torus_y, kPlusY, kMinusY);
  return r;
}

bool IsTorusLink(int link) { return link % kPorts < kEfaOut; }

}  // namespace

const char* LaunchName(Launch launch) { return launch == Launch::kHost ? "host" : "in_graph"; }

Launch ParseLaunch(const std::string& text, const std::string& what) {
  if (text == "in_graph" || text == "in-graph") return Launch::kInGraph;
  if (text == "host") return Launch::kHost;
  Raise(ErrorCode::kInvalidArgument,
        StrCat(what, ": '", text, "' is not a launch context; use in-graph (issued inside a "
                     "compiled graph) or host (launched from the host per call, as nccom-test)"));
}

CollectiveParams ResolveParams(const HardwareProfile& p, CollectiveOp op,
                               const std::string& algorithm) {
  CollectiveParams c;
  c.step_latency_ns = p.collective_step_latency_ns();
  c.fixed_ns = p.collective_fixed_ns();
  c.in_graph_fixed_ns = CollectiveInGraphFixedNs(p);
  c.link_gbps = p.neuronlink_gbps_per_chip() / 4;
  c.hop_latency_ns = p.neuronlink_latency_ns();
  c.interinstance_latency_ns = p.interinstance_latency_ns();
  c.interinstance_gbps = p.interinstance_gbps_per_chip();
  c.intrachip_gbps = p.intrachip_gbps();
  c.dma_gbps_per_core = CollectiveDmaGbpsPerCore(p);
  c.physical_cores_per_chip = static_cast<int>(p.physical_cores_per_chip());
  c.hbm_gbps_per_chip = p.hbm_gbps_per_core() * p.physical_cores_per_chip();
  const std::string op_name = OpName(op);
  // Specificity 0: any op, any algorithm; 1: algorithm only; 2: op only; 3: both.
  for (int level = 0; level < 4; ++level) {
    for (const proto::CollectiveTuning& t : p.collective_tuning()) {
      const bool op_set = !t.op().empty(), algo_set = !t.algorithm().empty();
      if ((op_set ? 2 : 0) + (algo_set ? 1 : 0) != level) continue;
      if (op_set && t.op() != op_name) continue;
      if (algo_set && t.algorithm() != algorithm) continue;
      if (t.has_step_latency_ns()) c.step_latency_ns = t.step_latency_ns();
      if (t.has_link_gbps()) c.link_gbps = t.link_gbps();
      if (t.has_fixed_ns()) c.fixed_ns = t.fixed_ns();
    }
  }
  return c;
}

ScheduleCost PlaySchedule(const Schedule& schedule, const GroupPlacement& g, double chunk_bytes,
                          const CollectiveParams& p, Launch launch) {
  ScheduleCost cost;
  if (schedule.steps.empty()) return cost;
  cost.fixed_ns = launch == Launch::kHost ? p.fixed_ns : 0.0;
  cost.in_graph_fixed_ns = p.in_graph_fixed_ns;
  cost.total_ns = cost.fixed_ns + cost.in_graph_fixed_ns;
  cost.rest_ns = cost.in_graph_fixed_ns;
  int max_chip = 0;
  for (int chip : g.chip) max_chip = std::max(max_chip, chip);
  // Routes pass through chips outside the group (the torus wrap-around): count every chip of the
  // instances the group spans.
  if (g.chips_per_instance > 0) {
    max_chip = (max_chip / g.chips_per_instance + 1) * g.chips_per_instance - 1;
  }
  std::vector<double> load(static_cast<size_t>((max_chip + 1) * kPorts), 0.0);
  std::vector<double> hbm(static_cast<size_t>(max_chip + 1), 0.0);
  std::vector<double> out(static_cast<size_t>(g.size()), 0.0), in(out.size(), 0.0);
  // A rank's collective DMA: its physical cores' engines (every chip's cores are shared out
  // equally among the job's ranks on it).
  auto rank_dma_gbps = [&](int member) {
    const int on_chip = std::max(1, g.ranks_on_chip.empty() ? 1 : g.ranks_on_chip[member]);
    return p.dma_gbps_per_core * std::max(1, p.physical_cores_per_chip / on_chip);
  };
  // Routes repeat across steps: cache them by chip pair.
  std::unordered_map<int64_t, Route> routes;
  auto route = [&](int a, int b) -> const Route& {
    const int64_t key = static_cast<int64_t>(a) * (max_chip + 1) + b;
    auto it = routes.find(key);
    if (it == routes.end()) it = routes.emplace(key, RouteBetween(g, a, b)).first;
    return it->second;
  };
  for (const Step& step : schedule.steps) {
    std::fill(load.begin(), load.end(), 0.0);
    std::fill(hbm.begin(), hbm.end(), 0.0);
    std::fill(out.begin(), out.end(), 0.0);
    std::fill(in.begin(), in.end(), 0.0);
    for (const Transfer& t : step.transfers) {
      const double bytes = chunk_bytes * static_cast<double>(t.chunks.size());
      const int from = g.chip[t.srcs[0]], to = g.chip[t.dst];
      for (int link : route(from, to).links) {
        if (link < 0 || static_cast<size_t>(link) >= load.size()) {
          Raise(ErrorCode::kInternal, StrCat("PlaySchedule: link ", link, " of the route chip ", from,
                                             " -> ", to, " is outside the ", load.size() / kPorts,
                                             " chips counted"));
        }
        load[link] += bytes;
      }
      out[t.srcs[0]] += bytes;
      in[t.dst] += bytes;
      if (!t.shares_read) {
        for (int src : t.srcs) hbm[g.chip[src]] += bytes;
      }
      hbm[to] += bytes * (t.reduce ? 2 : 1);
    }
    double slowest = -1, slow_latency = 0, slow_link_bytes = 0, slow_rest = 0;
    StepCost detail;
    std::string bound = "latency";
    for (const Transfer& t : step.transfers) {
      const double bytes = chunk_bytes * static_cast<double>(t.chunks.size());
      const Route& r = route(g.chip[t.srcs[0]], g.chip[t.dst]);
      const double fixed = r.hops * p.hop_latency_ns +
                           (r.crosses_instance ? p.interinstance_latency_ns : 0.0);
      double link_ns = 0, link_bytes = 0;
      for (int link : r.links) {
        const bool torus = IsTorusLink(link);
        const double ns = load[link] / (torus ? p.link_gbps : p.interinstance_gbps);
        if (ns > link_ns) {
          link_ns = ns;
          link_bytes = torus ? load[link] : 0;
        }
      }
      const double dma_ns = std::max(out[t.srcs[0]] / rank_dma_gbps(t.srcs[0]),
                                     in[t.dst] / rank_dma_gbps(t.dst));
      const double intra_ns = r.same_chip ? bytes / p.intrachip_gbps : 0.0;
      const double move_ns = std::max({link_ns, dma_ns, intra_ns});
      const double ns = p.step_latency_ns + fixed + move_ns;
      if (ns > slowest) {
        slowest = ns;
        slow_latency = fixed;
        const bool by_link = link_ns >= dma_ns && link_ns >= intra_ns && link_bytes > 0;
        slow_link_bytes = by_link ? link_bytes : 0;
        slow_rest = by_link ? 0 : move_ns;
        detail.latency_ns = p.step_latency_ns + fixed;
        detail.move_ns = move_ns;
        detail.link_bytes = 0;  // the busiest link on the route (torus or EFA), for --steps
        for (int link : r.links) detail.link_bytes = std::max(detail.link_bytes, load[link]);
        detail.dma_bytes = std::max(out[t.srcs[0]], in[t.dst]);
        bound = move_ns == 0 ? "latency"
                : link_ns >= dma_ns && link_ns >= intra_ns ? "link"
                : dma_ns >= intra_ns                        ? "dma"
                                                            : "intrachip";
      }
    }
    double hbm_bytes = 0;
    for (double b : hbm) hbm_bytes = std::max(hbm_bytes, b);
    const double hbm_ns = hbm_bytes / p.hbm_gbps_per_chip;
    // The engines stream HBM and the wires at once, packet by packet: the busiest chip's HBM
    // time overlaps the slowest transfer's data movement instead of adding to it.
    if (hbm_ns > detail.move_ns) {
      slow_link_bytes = 0;
      slow_rest = hbm_ns;
      bound = "hbm";
    }
    const double step_ns = detail.latency_ns + std::max(detail.move_ns, hbm_ns);
    detail.label = step.label;
    detail.ns = step_ns;
    detail.hbm_ns = hbm_ns;
    detail.bound = bound;
    detail.hbm_bytes = hbm_bytes;
    detail.transfers = static_cast<int>(step.transfers.size());
    cost.per_step.push_back(detail);
    cost.total_ns += step_ns;
    ++cost.steps;
    cost.latency_units += 1;
    cost.link_bytes += slow_link_bytes;
    cost.rest_ns += slow_latency + slow_rest;
  }
  return cost;
}

}  // namespace nkisim::collectives
