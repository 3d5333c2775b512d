#include "runtime/cost_model.h"

#include <algorithm>
#include <cmath>

#include "runtime/engine_costs.h"
#include "runtime/error.h"

namespace nkisim {

double MatmulNs(const HardwareProfile& p, int64_t stationary_free, int64_t moving_free,
                DType operand_dtype) {
  const bool fp32 = operand_dtype == DType::kFloat32;
  return PeMatmulCycles(p, stationary_free, moving_free, fp32) / p.pe_freq_ghz();
}

double MatmulNs(const HardwareProfile& p, int64_t moving_free, DType operand_dtype) {
  return MatmulNs(p, p.pe_cols(), moving_free, operand_dtype);
}

double MxMatmulNs(const HardwareProfile& p, int64_t moving_free) {
  return PeMatmulCycles(p, p.pe_cols(), moving_free, false) * 4.0 / p.pe_mx_speedup() /
         p.pe_freq_ghz();
}

double ComputeOpNs(const HardwareProfile& p, Engine engine, int64_t free_elements, bool narrow) {
  return RowNs(p, engine, cost_rows::kGeneric, free_elements, narrow, /*dependent=*/false);
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

double DmaPeakGbpsPerCore(const HardwareProfile& p) {
  return std::min(p.hbm_gbps_per_core(), p.dma_engines() * p.dma_engine_gbps());
}

double StreamFloorNs(const HardwareProfile& p, double hbm_bytes_per_core) {
  return 2 * p.dma_latency_ns() - DmaSemaphoreNs(p) + hbm_bytes_per_core / DmaPeakGbpsPerCore(p);
}

double CollectiveInGraphFixedNs(const HardwareProfile& p) {
  return p.collective_barrier_ns() + p.dma_latency_ns();
}

double CollectiveDmaGbpsPerCore(const HardwareProfile& p) {
  const double packet = p.dma_collective_packet_bytes();
  const double engine_gbps = packet / (DmaDescriptorNs(p) + packet / p.dma_engine_raw_gbps());
  return std::min(p.hbm_gbps_per_core(), p.dma_engines() * engine_gbps);
}


}  // namespace nkisim
