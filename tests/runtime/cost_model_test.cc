#include "runtime/cost_model.h"

#include <gtest/gtest.h>

#include "runtime/hardware_profile.h"

namespace nkisim {
namespace {

// Hand-computed from the trn2 figures: PE 2.4 GHz, 60 cycles access overhead.
TEST(CostModelTest, Bf16MatmulIsMaxN64CyclesPlusOverhead) {
  const HardwareProfile& p = Trn2Profile();
  // 128x128x512: max(512, 64) = 512 cycles = 213.33 ns, plus 60 cycles = 25 ns.
  EXPECT_NEAR(MatmulNs(p, 512, DType::kBFloat16), 512 / 2.4 + 25.0, 1e-9);
  EXPECT_NEAR(512 / 2.4, 213.33, 0.01);
  // Small N is floored at 64 cycles.
  EXPECT_NEAR(MatmulNs(p, 16, DType::kBFloat16), (64 + 60) / 2.4, 1e-9);
  // fp32 operands run 4x slower; fp8 at the bf16 rate.
  EXPECT_NEAR(MatmulNs(p, 512, DType::kFloat32), (4 * 512 + 60) / 2.4, 1e-9);
  EXPECT_NEAR(MatmulNs(p, 512, DType::kFp8E4M3), MatmulNs(p, 512, DType::kBFloat16), 1e-9);
}

TEST(CostModelTest, ComputeEnginesUseTheirOwnClockAndLaneRate) {
  const HardwareProfile& p = Trn2Profile();
  // Vector: 512 bf16 elems/cycle over 128 lanes = 4 per lane; 0.96 GHz.
  EXPECT_NEAR(ComputeOpNs(p, Engine::kVector, 512, true), (60 + 128) / 0.96, 1e-9);
  EXPECT_NEAR(ComputeOpNs(p, Engine::kVector, 512, false), (60 + 256) / 0.96, 1e-9);
  // Scalar: 128 elems/cycle = 1 per lane at 1.2 GHz; partial cycles round up.
  EXPECT_NEAR(ComputeOpNs(p, Engine::kScalar, 512, true), (60 + 512) / 1.2, 1e-9);
  EXPECT_NEAR(ComputeOpNs(p, Engine::kVector, 5, true), (60 + 2) / 0.96, 1e-9);
  EXPECT_THROW(ComputeOpNs(p, Engine::kPE, 5, true), std::exception);
}

TEST(CostModelTest, DmaHbmAndLink) {
  const HardwareProfile& p = Trn2Profile();
  EXPECT_NEAR(DmaQueueNs(p, 131072), 600 + 131072 / 27.34375, 1e-6);
  EXPECT_NEAR(HbmTransferNs(p, 362500), 1000.0, 1e-9);
  EXPECT_NEAR(LinkNs(p, 362500), 600 + 1000.0, 1e-9);
}

// The HBM time of the traffic plus one fixed DMA cost for the first load and one for the store.
TEST(CostModelTest, StreamFloorIsTheHbmTimePlusTwoFixedDmaCosts) {
  const HardwareProfile& p = Trn2Profile();
  EXPECT_NEAR(StreamFloorNs(p, 362500), 1000.0 + 2 * 600, 1e-9);
  EXPECT_NEAR(StreamFloorNs(p, 0), 1200.0, 1e-9);
  // 1.74 MB per core is about where the floor reaches 1.25x of the HBM roofline (1200 ns is a
  // quarter of 4800 ns of HBM time).
  EXPECT_NEAR(StreamFloorNs(p, 4800 * 362.5) / HbmTransferNs(p, 4800 * 362.5), 1.25, 1e-9);
}

}  // namespace
}  // namespace nkisim
