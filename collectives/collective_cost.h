// Simulated cost of the collectives: alpha-beta models of their algorithms over the topology of
// the hardware profile (docs/collectives.md, "Cost model").
//
//   point to point a -> b: same chip: core_link_latency + bytes / core_link_gbps (shared HBM);
//     same instance: hops * neuronlink_latency + bytes / (neuronlink_gbps_per_chip / 4 links),
//     hops = distance on the torus_x x torus_y torus; other instance:
//     neuronlink_latency + bytes / interinstance_gbps_per_chip.
//   ring step: every member sends to the next at once; the step takes the slowest pair.
//   all_gather: p - 1 ring steps of the per-rank bytes; reduce_scatter: p - 1 steps of the
//   per-rank output bytes; all_reduce: 2 (p - 1) steps of bytes / p; all_to_all (pairwise):
//   for k = 1 .. p - 1, every member i sends bytes / p to member i + k, each round the slowest.
// Link contention between concurrent pairs is not modelled. All results in ns; GB = 1e9 B.
#pragma once

#include "collectives/topology.h"
#include "runtime/hardware_profile.h"

namespace nkisim::collectives {

double PointToPointNs(const ResolvedTopology& topo, const HardwareProfile& profile, int from_rank,
                      int to_rank, double bytes);
double AllGatherNs(const ResolvedTopology& topo, const HardwareProfile& profile, const Group& group,
                   double bytes_per_rank);
double ReduceScatterNs(const ResolvedTopology& topo, const HardwareProfile& profile,
                       const Group& group, double output_bytes_per_rank);
double AllReduceNs(const ResolvedTopology& topo, const HardwareProfile& profile, const Group& group,
                   double bytes);
double AllToAllNs(const ResolvedTopology& topo, const HardwareProfile& profile, const Group& group,
                  double bytes_per_rank);

}  // namespace nkisim::collectives
