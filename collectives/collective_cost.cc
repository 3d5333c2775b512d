#include "collectives/collective_cost.h"

#include <algorithm>
#include <cstdlib>

namespace nkisim::collectives {
namespace {

constexpr double kLinksPerChip = 4;

int TorusDistance(int a, int b, int size) {
  const int d = std::abs(a - b);
  return std::min(d, size - d);
}

// Every member sends `bytes` to the member `shift` places later; the round takes the slowest pair.
double RoundNs(const ResolvedTopology& topo, const HardwareProfile& profile, const Group& group,
               int shift, double bytes) {
  double slowest = 0;
  const int p = static_cast<int>(group.size());
  for (int i = 0; i < p; ++i) {
    slowest =
        std::max(slowest, PointToPointNs(topo, profile, group[i], group[(i + shift) % p], bytes));
  }
  return slowest;
}

}  // namespace

double PointToPointNs(const ResolvedTopology& topo, const HardwareProfile& p, int from_rank,
                      int to_rank, double bytes) {
  if (from_rank == to_rank) return 0.0;
  const int a = topo.chip_of_rank[from_rank], b = topo.chip_of_rank[to_rank];
  if (a == b) return p.core_link_latency_ns() + bytes / p.core_link_gbps();
  const int per_instance = static_cast<int>(p.chips_per_instance());
  if (a / per_instance != b / per_instance) {
    return p.neuronlink_latency_ns() + bytes / p.interinstance_gbps_per_chip();
  }
  const int tx = static_cast<int>(p.torus_x()), ty = static_cast<int>(p.torus_y());
  const int la = a % per_instance, lb = b % per_instance;
  const int hops = TorusDistance(la % tx, lb % tx, tx) + TorusDistance(la / tx, lb / tx, ty);
  return hops * p.neuronlink_latency_ns() + bytes / (p.neuronlink_gbps_per_chip() / kLinksPerChip);
}

double AllGatherNs(const ResolvedTopology& topo, const HardwareProfile& profile, const Group& group,
                   double bytes_per_rank) {
  const int p = static_cast<int>(group.size());
  return p > 1 ? (p - 1) * RoundNs(topo, profile, group, 1, bytes_per_rank) : 0.0;
}

double ReduceScatterNs(const ResolvedTopology& topo, const HardwareProfile& profile,
                       const Group& group, double output_bytes_per_rank) {
  return AllGatherNs(topo, profile, group, output_bytes_per_rank);
}

double AllReduceNs(const ResolvedTopology& topo, const HardwareProfile& profile, const Group& group,
                   double bytes) {
  const int p = static_cast<int>(group.size());
  return p > 1 ? 2 * (p - 1) * RoundNs(topo, profile, group, 1, bytes / p) : 0.0;
}

double AllToAllNs(const ResolvedTopology& topo, const HardwareProfile& profile, const Group& group,
                  double bytes_per_rank) {
  const int p = static_cast<int>(group.size());
  double total = 0;
  for (int k = 1; k < p; ++k) total += RoundNs(topo, profile, group, k, bytes_per_rank / p);
  return total;
}

}  // namespace nkisim::collectives
