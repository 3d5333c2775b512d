#include "runtime/cost_model.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace nkisim {

double MatmulNs(const HardwareProfile& p, int64_t moving_free, DType operand_dtype) {
  const double factor = operand_dtype == DType::kFloat32 ? p.pe_fp32_cycle_factor() : 1.0;
  const double cycles =
      std::max<double>(static_cast<double>(moving_free), p.pe_min_cycles()) * factor +
      p.access_overhead_cycles();
  return cycles / p.pe_freq_ghz();
}

double MxMatmulNs(const HardwareProfile& p, int64_t moving_free) {
  const double cycles =
      std::max<double>(static_cast<double>(moving_free), p.pe_min_cycles()) * 4.0 / p.pe_mx_speedup() +
      p.access_overhead_cycles();
  return cycles / p.pe_freq_ghz();
}

double ComputeOpNs(const HardwareProfile& p, Engine engine, int64_t free_elements, bool narrow) {
  double freq = 0, elems_per_cycle = 0;
  switch (engine) {
    case Engine::kVector:
      freq = p.vector_freq_ghz();
      elems_per_cycle = narrow ? p.vector_elems_per_cycle_16bit() : p.vector_elems_per_cycle_other();
      break;
    case Engine::kScalar:
      freq = p.scalar_freq_ghz();
      elems_per_cycle = p.scalar_elems_per_cycle();
      break;
    case Engine::kGpSimd:
      freq = p.gpsimd_freq_ghz();
      elems_per_cycle = p.gpsimd_elems_per_cycle();
      break;
    default:
      Raise(ErrorCode::kInternal, StrCat("ComputeOpNs: ", EngineName(engine), " is not a compute engine"));
  }
  const double per_lane = elems_per_cycle / p.partitions();
  const double cycles = p.access_overhead_cycles() + std::ceil(free_elements / per_lane);
  return cycles / freq;
}

double DmaDescriptorNs(const HardwareProfile& p) {
  const double max_bytes = p.dma_descriptor_max_bytes();
  return std::max(0.0, max_bytes / p.dma_engine_gbps() - max_bytes / p.dma_engine_raw_gbps());
}

double DmaShareNs(const HardwareProfile& p, int64_t bytes, int64_t descriptors, double efficiency) {
  return descriptors * DmaDescriptorNs(p) + bytes / (p.dma_engine_raw_gbps() * efficiency);
}

double DmaSemaphoreNs(const HardwareProfile& p) { return DmaShareNs(p, 4, 1, 1.0); }

double DmaStartLatencyNs(const HardwareProfile& p) {
  return std::max(0.0, p.dma_latency_ns() - p.dma_issue_ns() - DmaSemaphoreNs(p));
}
double HbmTransferNs(const HardwareProfile& p, int64_t bytes) {
  return bytes / p.hbm_gbps_per_core();
}

double StreamFloorNs(const HardwareProfile& p, double hbm_bytes_per_core) {
  return 2 * p.dma_latency_ns() - DmaSemaphoreNs(p) + hbm_bytes_per_core / p.hbm_gbps_per_core();
}


}  // namespace nkisim
