// The cost of a collective: its schedule played on a link-level model of the machine.
//
// The machine: chips on a torus_x x torus_y torus per instance, each with 4 NeuronLink links
// (+x, -x, +y, -y; one per direction and neighbour), instances joined chip by chip over EFA.
// A transfer between chips of one instance is routed dimension by dimension (x, then y, the
// shorter way round); between instances it leaves through its chip's EFA port and enters through
// the destination chip's; on one chip it is an intra-chip write.
//
// One step:
//   load(l)    = bytes of all the step's transfers routed over link l (they share it)
//   transfer t = step_latency + hops(t) * hop_latency [+ interinstance_latency]
//                + max( max over links l on t's route of load(l) / bandwidth(l),
//                       bytes the writing rank sends this step / its DMA rate,
//                       bytes the receiving rank gets this step / its DMA rate,
//                       bytes(t) / intrachip_gbps when t stays on its chip )
//                a rank's DMA rate is its physical cores' engines at the collective packet size
//                (runtime/cost_model.h CollectiveDmaGbpsPerCore x cores per rank)
//   hbm        = max over chips of (bytes read + bytes written on the chip) / chip HBM bandwidth;
//                a transfer reads bytes per source (none when it shares a read), writes bytes at
//                the destination, and a reduce reads the destination's copy too
//   step       = the slowest transfer's latency + max(its data movement, hbm): the engines
//                stream HBM and the wires at once, packet by packet
// collective  = in_graph_fixed [+ host launch] + sum of the steps (no step, no fixed cost: a
//               group of one). Every collective pays in_graph_fixed (the device's own
//               synchronisation and ring start-up); one launched from the host, call by call, as
//               nccom-test runs it, also pays the host launch cost (`fixed_ns`), per op and
//               algorithm. Inside a compiled graph the device issues the collective itself and
//               no host launch is paid (Launch::kInGraph; docs/collectives.md).
// Every constant comes from the profile, corrected per op and algorithm by collective_tuning.
// All times in ns, GB = 1e9 B, so bytes / GB/s = ns.
#pragma once

#include <string>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/schedule.h"
#include "runtime/hardware_profile.h"

namespace nkisim::collectives {

// Where a collective is issued: inside a compiled graph (what `run`, `sweep` and the layer
// phases price) or launched from the host one call at a time (what nccom-test measures, and
// `nkisim collective` and `nkisim calibrate` use by default).
enum class Launch { kInGraph, kHost };
const char* LaunchName(Launch launch);  // "in_graph" | "host"
// "in_graph" / "in-graph" / "host"; throws Error(kInvalidArgument) naming `what` otherwise.
Launch ParseLaunch(const std::string& text, const std::string& what);

struct CollectiveParams {
  double step_latency_ns = 0;
  double fixed_ns = 0;  // the host launch cost per call (charged to Launch::kHost only)
  double in_graph_fixed_ns = 0;  // the device's sync + ring start-up (every collective)
  double link_gbps = 0;  // one NeuronLink link, one direction
  double hop_latency_ns = 0;
  double interinstance_latency_ns = 0;
  double interinstance_gbps = 0;  // one chip's EFA port, one direction
  double intrachip_gbps = 0;
  double dma_gbps_per_core = 0;   // one physical core's DMA engines (CollectiveDmaGbpsPerCore)
  int physical_cores_per_chip = 1;  // a rank has physical_cores_per_chip / ranks on its chip
  double hbm_gbps_per_chip = 0;
};

// The profile's figures with the collective_tuning entries matching (op, algorithm) applied,
// the less specific first.
CollectiveParams ResolveParams(const HardwareProfile& profile, CollectiveOp op,
                               const std::string& algorithm);

struct StepCost {
  std::string label;
  double ns = 0;
  double hbm_ns = 0;
  std::string bound;  // what limited the step: "link", "dma", "intrachip", "hbm", "latency"
  // The slowest transfer's terms (ns = latency_ns + move_ns + hbm_ns) and the bytes behind them:
  double latency_ns = 0;     // step latency + hops x hop latency [+ inter-instance latency]
  double move_ns = 0;        // max(busiest link, rank DMA, intra-chip write); ns also takes hbm_ns
  double link_bytes = 0;     // the busiest link on its route
  double dma_bytes = 0;      // max(what its sender sends, what its receiver gets) this step
  double hbm_bytes = 0;      // the busiest chip's HBM reads + writes this step
  int transfers = 0;         // transfers in the step
};

struct ScheduleCost {
  double total_ns = 0;
  double fixed_ns = 0;           // the host launch cost charged (0 in a graph)
  double in_graph_fixed_ns = 0;  // the device's fixed cost charged (part of rest_ns)
  int steps = 0;
  // total = fixed_ns + step_latency_ns * latency_units + link_bytes / link_gbps + rest_ns, with
  // the slowest transfer of each step as it is under these params (what calibration fits).
  double latency_units = 0;
  double link_bytes = 0;
  double rest_ns = 0;
  std::vector<StepCost> per_step;
};

// REQUIRES: the schedule was built for `group`; every param > 0 except the latencies and fixed.
ScheduleCost PlaySchedule(const Schedule& schedule, const GroupPlacement& group,
                          double chunk_bytes, const CollectiveParams& params, Launch launch);

}  // namespace nkisim::collectives
