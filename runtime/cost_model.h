// Cost of each kind of instruction, in simulated nanoseconds, from the hardware profile.
// Pure functions: no state, no clock. The formulas (docs/architecture.md, "Cost model"):
//   matmul      (max(N, pe_min_cycles) * f + access_overhead) / pe_freq, f = pe_fp32_cycle_factor
//               for fp32 operands, else 1; an fp8 double-row matmul covers K = 256 in that time
//   MX matmul   the bf16 matmul time * 4 / pe_mx_speedup (it contracts 4 values per partition)
//   compute op  (access_overhead + ceil(F / (elems_per_cycle / partitions))) / engine_freq,
//               F = free elements per partition (the partitions run in parallel)
//   DMA         dma_fixed + bytes / dma_queue_bandwidth (HBM share contention is charged apart)
//   link        core_link_latency + bytes / core_link_bandwidth
#pragma once

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/hardware_profile.h"
#include "runtime/timeline.h"

namespace nkisim {

double MatmulNs(const HardwareProfile& p, int64_t moving_free, DType operand_dtype);
// REQUIRES: p.pe_mx_speedup() > 0 (the profile has an MX path).
double MxMatmulNs(const HardwareProfile& p, int64_t moving_free);
// Vector, Scalar or GpSimd; narrow = every operand is 16-bit or narrower (Vector runs faster).
double ComputeOpNs(const HardwareProfile& p, Engine engine, int64_t free_elements, bool narrow);
double DmaQueueNs(const HardwareProfile& p, int64_t bytes);
double HbmTransferNs(const HardwareProfile& p, int64_t bytes);
double LinkNs(const HardwareProfile& p, int64_t bytes);
// The least time any kernel can take to read its inputs from HBM and store a result that depends
// on all of them, for `hbm_bytes_per_core` of traffic (inputs and result) on one physical core:
// the first load's bytes start through the core's HBM port one dma_fixed_ns after it is issued
// (as dma_copy charges it), every byte passes the port at hbm_gbps_per_core, and the store that
// needs the last input byte pays dma_fixed_ns again before its own bytes. So
// 2 * dma_fixed_ns + hbm_bytes_per_core / hbm_gbps_per_core: the HBM roofline plus the two fixed
// costs no stream hides. A lower bound under this model, not an estimate.
double StreamFloorNs(const HardwareProfile& p, double hbm_bytes_per_core);

}  // namespace nkisim
