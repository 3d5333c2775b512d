// Cost of each kind of instruction, in simulated nanoseconds, from the hardware profile.
// Pure functions: no state, no clock. The formulas (docs/architecture.md, "Cost model"):
//   matmul      max(min(pe_min_cycles, M), N) * f / pe_freq, f = pe_fp32_cycle_factor for fp32
//               operands, else 1 (ISA nc_matmul row); an fp8 double-row matmul covers K = 256 in
//               that time. The PE's current-ramp throttle stretches it (runtime/pe_throttle.h).
//   MX matmul   the bf16 matmul time * 4 / pe_mx_speedup (it contracts 4 values per partition)
//   compute op  the generic row of runtime/engine_costs.h: Vector/Scalar max(MIN_II, F') and
//               GpSimd gpsimd_start + F' cycles, F' = ceil(F / (elems_per_cycle / partitions));
//               the nisa instructions use their own rows (docs/engine-costs.md)
//   DMA         runtime/dma_engines.h: per engine share descriptors x DmaDescriptorNs +
//               bytes / dma_engine_raw_gbps, one semaphore descriptor, the queue's issue stage
//               and the transfer's fixed latency (docs/dma.md)
//   sendrecv    a DMA of the send tile on the sender's engines (runtime/logical_core.cc)
#pragma once

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/hardware_profile.h"
#include "runtime/timeline.h"

namespace nkisim {

// The stationary tile's free size M lowers the floor when < pe_min_cycles (ISA l.908).
double MatmulNs(const HardwareProfile& p, int64_t stationary_free, int64_t moving_free,
                DType operand_dtype);
// A full stationary (M = pe_cols).
double MatmulNs(const HardwareProfile& p, int64_t moving_free, DType operand_dtype);
// REQUIRES: p.pe_mx_speedup() > 0 (the profile has an MX path).
double MxMatmulNs(const HardwareProfile& p, int64_t moving_free);
// Vector, Scalar or GpSimd; narrow = every operand is 16-bit or narrower (Vector runs faster).
double ComputeOpNs(const HardwareProfile& p, Engine engine, int64_t free_elements, bool narrow);
// The time one descriptor costs an engine beyond its bytes: what separates the engine's raw rate
// from what it sustains on full (dma_descriptor_max_bytes) descriptors:
// max_bytes / dma_engine_gbps - max_bytes / dma_engine_raw_gbps (trn2: 4096 / 23 - 4096 / 27.2 =
// 27.5 ns).
double DmaDescriptorNs(const HardwareProfile& p);
// An engine's share: descriptors x DmaDescriptorNs + bytes / (dma_engine_raw_gbps x efficiency).
double DmaShareNs(const HardwareProfile& p, int64_t bytes, int64_t descriptors, double efficiency);
// The 4 B completion semaphore every engine writes: one descriptor of 4 bytes.
double DmaSemaphoreNs(const HardwareProfile& p);
// From the end of the issue stage to the engines' start: dma_latency_ns - dma_issue_ns - the
// semaphore (>= 0), so that an empty transfer takes dma_latency_ns trigger to completion.
double DmaStartLatencyNs(const HardwareProfile& p);
double HbmTransferNs(const HardwareProfile& p, int64_t bytes);
// What one physical core's DMA can stream at best: min(hbm_gbps_per_core, dma_engines x
// dma_engine_gbps) (trn2: min(362.5, 368); trn1: min(410, 272) = 272: the engines bound it).
double DmaPeakGbpsPerCore(const HardwareProfile& p);
// What one physical core's DMA engines move for a collective: every engine streams the rings'
// dma_collective_packet_bytes packets, one descriptor each, so an engine sustains
// packet / (DmaDescriptorNs + packet / dma_engine_raw_gbps), and the core's HBM port bounds the
// sum (trn2: 16 x 26.9 = 430, bounded to 362.5 GB/s). A rank of LNC physical cores has LNC times it.
double CollectiveDmaGbpsPerCore(const HardwareProfile& p);
// What every collective pays once, in a graph or launched from the host: the device's collective
// barrier and the start of its DMA rings, collective_barrier_ns + dma_latency_ns (trn2: 0.369 +
// 1.3 = 1.669 us).
double CollectiveInGraphFixedNs(const HardwareProfile& p);
// The least time any kernel can take to read its inputs from HBM and store a result that depends
// on all of them, for `hbm_bytes_per_core` of traffic (inputs and result) on one physical core:
// the first load's bytes start through the core's HBM port no earlier than its trigger's fixed
// latency allows (dma_latency_ns less the semaphore it ends with), every byte passes the port at
// DmaPeakGbpsPerCore, and the store that needs the last input byte pays dma_latency_ns whole. So
// about 2 * dma_latency_ns + hbm_bytes_per_core / DmaPeakGbpsPerCore: the HBM roofline plus the
// two fixed latencies no stream hides. A lower bound under this model, not an estimate.
double StreamFloorNs(const HardwareProfile& p, double hbm_bytes_per_core);

}  // namespace nkisim
