#include "runtime/cost_model.h"

#include <gtest/gtest.h>

#include "runtime/hardware_profile.h"

namespace nkisim {
namespace {

// Hand-computed from the trn2 figures: PE 2.4 GHz; the ISA's nc_matmul row
// max(min(64, M), N) x (4 for fp32) (docs/engine-costs.md), no access overhead.
TEST(CostModelTest, Bf16MatmulIsMaxMin64MNCycles) {
  const HardwareProfile& p = Trn2Profile();
  // 128x128x512: max(min(64, 128), 512) = 512 cycles = 213.33 ns.
  EXPECT_NEAR(MatmulNs(p, 512, DType::kBFloat16), 512 / 2.4, 1e-9);
  EXPECT_NEAR(512 / 2.4, 213.33, 0.01);
  // Small N is floored at 64 cycles; a 16-column stationary lowers the floor to 16.
  EXPECT_NEAR(MatmulNs(p, 16, DType::kBFloat16), 64 / 2.4, 1e-9);
  EXPECT_NEAR(MatmulNs(p, 16, 8, DType::kBFloat16), 16 / 2.4, 1e-9);
  // fp32 operands run 4x slower; fp8 at the bf16 rate.
  EXPECT_NEAR(MatmulNs(p, 512, DType::kFloat32), 4 * 512 / 2.4, 1e-9);
  EXPECT_NEAR(MatmulNs(p, 512, DType::kFp8E4M3), MatmulNs(p, 512, DType::kBFloat16), 1e-9);
}

TEST(CostModelTest, ComputeEnginesUseTheirOwnClockAndLaneRate) {
  const HardwareProfile& p = Trn2Profile();
  // The generic row max(MIN_II = 64, N'), N' = ceil(N / per-lane rate); GpSimd 150 + N'.
  // Vector: 512 bf16 elems/cycle over 128 lanes = 4 per lane; 0.96 GHz.
  EXPECT_NEAR(ComputeOpNs(p, Engine::kVector, 512, true), 128 / 0.96, 1e-9);
  EXPECT_NEAR(ComputeOpNs(p, Engine::kVector, 512, false), 256 / 0.96, 1e-9);
  // Scalar: 128 elems/cycle = 1 per lane at 1.2 GHz.
  EXPECT_NEAR(ComputeOpNs(p, Engine::kScalar, 512, true), 512 / 1.2, 1e-9);
  // Below MIN_II: ceil(5 / 4) = 2 -> 64 cycles.
  EXPECT_NEAR(ComputeOpNs(p, Engine::kVector, 5, true), 64 / 0.96, 1e-9);
  EXPECT_NEAR(ComputeOpNs(p, Engine::kGpSimd, 5, true), (150 + 5) / 1.2, 1e-9);
  EXPECT_THROW(ComputeOpNs(p, Engine::kPE, 5, true), std::exception);
}

// The DMA engines' costs (runtime/dma_engines.h), from the trn2 profile's figures.
TEST(CostModelTest, DmaDescriptorShareSemaphoreAndHbm) {
  const HardwareProfile& p = Trn2Profile();
  // One 4 KiB descriptor: what separates 23 B/ns sustained from 27.2 B/ns raw.
  const double descriptor = 4096 / 23.0 - 4096 / 27.2;  // 27.49 ns
  EXPECT_NEAR(DmaDescriptorNs(p), descriptor, 1e-9);
  // A share of 8 descriptors of 1 KiB: 8 x 27.49 + 8192 / 27.2 = 521.1 ns (16.2 B/ns, not 27.2).
  EXPECT_NEAR(DmaShareNs(p, 8192, 8, 1.0), 8 * descriptor + 8192 / 27.2, 1e-9);
  // Full descriptors run at the sustained rate: 8 x 4 KiB in 8 x 4096 / 23 ns.
  EXPECT_NEAR(DmaShareNs(p, 32768, 8, 1.0), 32768 / 23.0, 1e-9);
  // A transpose at 90%: the bytes take 1 / 0.9 as long, the descriptors the same.
  EXPECT_NEAR(DmaShareNs(p, 32768, 8, 0.9), 8 * descriptor + 32768 / (27.2 * 0.9), 1e-9);
  EXPECT_NEAR(DmaSemaphoreNs(p), descriptor + 4 / 27.2, 1e-9);
  // An empty transfer takes dma_latency_ns: issue 863, start, then its semaphore.
  EXPECT_NEAR(p.dma_issue_ns() + DmaStartLatencyNs(p) + DmaSemaphoreNs(p), 1300, 1e-9);
  EXPECT_NEAR(HbmTransferNs(p, 362500), 1000.0, 1e-9);
}

// The HBM time of the traffic plus the first load's latency to its first byte and the store's
// whole latency: 2 x 1300 - the semaphore.
TEST(CostModelTest, StreamFloorIsTheHbmTimePlusTwoFixedDmaLatencies) {
  const HardwareProfile& p = Trn2Profile();
  EXPECT_NEAR(StreamFloorNs(p, 362500), 1000.0 + 2 * 1300 - DmaSemaphoreNs(p), 1e-9);
  EXPECT_NEAR(StreamFloorNs(p, 0), 2600.0 - DmaSemaphoreNs(p), 1e-9);
  // The floor reaches 1.25x the HBM roofline where the fixed part is a quarter of the HBM time.
  const double hbm_ns = 4 * (2600.0 - DmaSemaphoreNs(p));  // 10290 ns: 3.73 MB per core
  EXPECT_NEAR(StreamFloorNs(p, hbm_ns * 362.5) / HbmTransferNs(p, hbm_ns * 362.5), 1.25, 1e-6);  // whole bytes
}

}  // namespace
}  // namespace nkisim
