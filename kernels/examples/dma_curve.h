// Microbenchmarks of the DMA engine model (runtime/dma_engines.h) in the shapes of the published
// figures they are checked against (docs/dma.md): the throughput sweep of [128, n] bf16
// HBM -> SBUF transfers (nki-dma-overview.rst, figure nki-dma-intro-1.jpg), the overview's two
// profiled examples, and the worked example of a mixed-DGE copy kernel (1 KiB and 4 KiB per
// partition) measured as a profiler does: bytes over the time any DMA engine was active.
// Each call runs on a fresh core of `profile` (timing only: no values move) and returns figures
// in ns, bytes and GB/s (1 GB/s = 1 B/ns).
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/hardware_profile.h"

namespace nkisim::kernels {

struct DmaSweepPoint {
  int64_t bytes_per_partition = 0;
  double stream_gbps = 0;        // a stream of transfers on one queue, steady state
  double isolated_gbps = 0;      // one transfer alone: bytes / (trigger to completion)
  double stream_percent = 0;     // stream_gbps as a percentage of the sweep's largest point
  double isolated_percent = 0;
  double published_percent = 0;  // read off the figure (about +-2 points); < 0 where none
};
// The sweep at 32 B ... 32 KiB per partition, 128 partitions, bf16.
std::vector<DmaSweepPoint> DmaSweep(const HardwareProfile& profile);

struct DmaExampleResult {
  double trigger_to_completion_ns = 0;
  double largest_share_ns = 0;   // the busiest engine's share, semaphore excluded
  int engines_with_data = 0;
  int engines_with_semaphore = 0;
};
// One HBM -> SBUF transfer of a contiguous [partitions, columns] bf16 tensor, alone.
DmaExampleResult DmaIsolatedTransfer(const HardwareProfile& profile, int64_t partitions,
                                     int64_t columns);

struct DmaMixedKernelResult {
  double bytes = 0;              // bytes of every transfer
  double engine_active_ns = 0;   // union of the engines' busy intervals
  double achieved_gbps = 0;      // bytes / engine_active_ns
  double kernel_ns = 0;          // first trigger to last completion
};
// The worked example's structure: a [128, 16 * tile_cols] bf16 input streamed through SBUF as
// 16 tile loads and 16 tile stores on 4 queues (one a DGE mode), 4 rotating SBUF buffers, plus 4
// HBM -> SBUF transposes and 4 SBUF -> SBUF copies of [128, 128] (nkisim has no SBUF -> SBUF
// transpose: counted as copies at the engines' copy rate) and one [16, 128] store.
DmaMixedKernelResult DmaMixedDgeKernel(const HardwareProfile& profile, int64_t tile_cols);

}  // namespace nkisim::kernels
