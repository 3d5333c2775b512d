// The per-instruction cost table (runtime/engine_costs.h, docs/engine-costs.md), the dependent
// overhead and the PE current-ramp throttle (runtime/pe_throttle.h). Every expected value is
// worked out in the comment beside it from the profile figures: MIN_II 64, GPSIMD_START 150,
// dependent overhead 200 cycles; trn1 engines 1 element per lane per cycle, Scalar 1.4 GHz;
// trn2 Vector 0.96 GHz at 4 (16-bit) or 2 elements per lane per cycle, PE 2.4 GHz.
#include "runtime/engine_costs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/cost_model.h"
#include "runtime/hardware_profile.h"
#include "runtime/neuron_core.h"
#include "runtime/nisa/elementwise.h"
#include "runtime/nisa/matmul.h"
#include "runtime/pe_throttle.h"

namespace nkisim {
namespace {

using nisa::ActFn;
using nisa::AluOp;

HardwareProfile Trn1() {
  return LoadHardwareProfile(std::string(NKISIM_SOURCE_DIR) + "/configs/hardware/trn1.textproto");
}

struct RowCase {
  CostRow row;
  int64_t n_small;
  double want_small;  // below MIN_II (or the row's small regime)
  int64_t n_large;
  double want_large;
};

// Each row at two sizes on trn1's Vector (one element per lane per cycle, so the ISA's N as is).
TEST(EngineCostsTest, EveryRowAtTwoSizes) {
  namespace r = cost_rows;
  const HardwareProfile p = Trn1();
  const std::vector<RowCase> cases = {
      {r::kActivation, 10, 64, 1000, 1000},          // max(64, 10); max(64, 1000)
      {r::kActivationReduce, 10, 128, 1000, 1064},   // max(64, 10) + 64; 1000 + 64
      {r::kBnAggr, 6, 64, 300, 1300},                // max(64, 13*6/3 = 26); 13*300/3
      {r::kBnStats, 10, 64, 512, 512},
      {r::kDropout, 10, 64, 512, 512},
      {r::kMemset, 10, 64, 512, 512},
      {r::kMemsetZero16, 100, 64, 512, 256},         // max(64, 50); 512 / 2
      {r::kTranspose, 32, 64, 128, 128},
      {r::kReciprocal, 4, 64, 100, 800},             // max(64, 32); 8 * 100
      {r::kStt, 16, 32, 512, 1024},                  // 2N, no MIN_II floor
      {r::kSttFast, 16, 16, 512, 512},               // N
      {r::kCopy, 10, 64, 512, 512},
      {r::kSelect, 16, 64, 512, 1024},               // max(64, 32); 2 * 512
      {r::kSelectPsum, 16, 64, 512, 512},
      {r::kReduce, 16, 16, 512, 512},                // N, no floor
      {r::kReduceFast, 16, 8, 512, 256},             // N / 2
      {r::kTensorScalar, 10, 64, 512, 512},
      {r::kTensorTensor, 16, 64, 512, 1024},         // max(64, 32); 2 * 512
      {r::kTensorTensorFast, 16, 64, 512, 512},
  };
  for (const RowCase& c : cases) {
    EXPECT_DOUBLE_EQ(RowCycles(p, Engine::kVector, c.row, c.n_small, false), c.want_small)
        << c.row.name;
    EXPECT_DOUBLE_EQ(RowCycles(p, Engine::kVector, c.row, c.n_large, false), c.want_large)
        << c.row.name;
  }
}

TEST(EngineCostsTest, GpSimdAddsItsStartUpInsteadOfTheFloor) {
  const HardwareProfile p = Trn1();
  // iota: 150 + N.
  EXPECT_DOUBLE_EQ(RowCycles(p, Engine::kGpSimd, cost_rows::kIota, 1, false), 151);
  EXPECT_DOUBLE_EQ(RowCycles(p, Engine::kGpSimd, cost_rows::kIota, 512, false), 662);
  // A copy on GpSimd: 150 + N too, no MIN_II floor.
  EXPECT_DOUBLE_EQ(RowCycles(p, Engine::kGpSimd, cost_rows::kCopy, 10, false), 160);
  // local_gather, one 4-byte element per index: C = ((28 + 4) / 4) / min(1, 1) = 8:
  // 64 indices: 150 + 64 / 8 = 158; 4096 indices: 150 + 512 = 662.
  EXPECT_DOUBLE_EQ(GatherCycles(p, 64, 1, 4), 158);
  EXPECT_DOUBLE_EQ(GatherCycles(p, 4096, 1, 4), 662);
  // 4 two-byte elements per index: C = ((28 + 16) / 16) / min(2, 4) = 1.375;
  // 100 indices: 150 + ceil(400 / 1.375 = 290.9) = 441.
  EXPECT_DOUBLE_EQ(GatherCycles(p, 100, 4, 2), 441);
}

TEST(EngineCostsTest, Trn2VectorDividesTheNTermByItsLaneRate) {
  const HardwareProfile& p = Trn2Profile();
  // bf16 tensor_scalar, N = 512: 512 / 4 = 128 > 64 cycles; N = 128: 32 -> floored at 64.
  EXPECT_DOUBLE_EQ(RowCycles(p, Engine::kVector, cost_rows::kTensorScalar, 512, true), 128);
  EXPECT_DOUBLE_EQ(RowCycles(p, Engine::kVector, cost_rows::kTensorScalar, 128, true), 64);
  // fp32 tensor_tensor (2N row), N = 512: 2 * 512 / 2 = 512 cycles = 533.3 ns at 0.96 GHz.
  EXPECT_NEAR(RowNs(p, Engine::kVector, cost_rows::kTensorTensor, 512, false, false), 512 / 0.96,
              1e-9);
  // The dependent overhead adds 200 cycles: (512 + 200) / 0.96.
  EXPECT_NEAR(RowNs(p, Engine::kVector, cost_rows::kTensorTensor, 512, false, true), 712 / 0.96,
              1e-9);
  EXPECT_THROW(RowCycles(p, Engine::kPE, cost_rows::kCopy, 5, true), std::exception);
}

TEST(EngineCostsTest, MatmulAndPeTransposeRows) {
  const HardwareProfile& p = Trn2Profile();
  // max(min(64, M), N): M = 128, N = 512 -> 512; N = 16 -> 64; M = 32, N = 16 -> 32.
  EXPECT_DOUBLE_EQ(PeMatmulCycles(p, 128, 512, false), 512);
  EXPECT_DOUBLE_EQ(PeMatmulCycles(p, 128, 16, false), 64);
  EXPECT_DOUBLE_EQ(PeMatmulCycles(p, 32, 16, false), 32);
  // fp32: x4.
  EXPECT_DOUBLE_EQ(PeMatmulCycles(p, 32, 16, true), 128);
  EXPECT_DOUBLE_EQ(PeMatmulCycles(p, 128, 512, true), 2048);
  // PE transpose max(P, min(64, F)) as a matmul with M = F, N = P: P = 128, F = 32 -> 128;
  // P = 16, F = 128 -> 64.
  EXPECT_DOUBLE_EQ(PeMatmulCycles(p, 32, 128, false), 128);
  EXPECT_DOUBLE_EQ(PeMatmulCycles(p, 128, 16, false), 64);
  // MatmulNs: cycles / 2.4 GHz, no access overhead any more: 512 / 2.4 = 213.33 ns.
  EXPECT_NEAR(MatmulNs(p, 512, DType::kBFloat16), 512 / 2.4, 1e-9);
  EXPECT_NEAR(MatmulNs(p, 32, 16, DType::kBFloat16), 32 / 2.4, 1e-9);
}

class CoreTest : public ::testing::Test {
 protected:
  explicit CoreTest(const HardwareProfile& p = Trn2Profile()) : core_(0, p), scope_(core_) {}
  Tile Sbuf(const std::string& name, const Shape& shape, DType dtype, float value) {
    Tile t = core_.AllocateSbuf(name, shape, dtype);
    t.FromFloats(std::vector<float>(shape[0] * shape[1], value));
    return t;
  }
  double Duration(size_t i) const {
    const InstructionRecord& r = core_.timeline().records().at(i);
    return r.end_ns - r.start_ns;
  }
  NeuronCore core_;
  ScopedCurrentCore scope_;
};

using InstructionRowTest = CoreTest;

// The instructions pick their rows from their operands.
TEST_F(InstructionRowTest, TensorTensorMemsetAndActivationPickTheirRows) {
  Tile a = Sbuf("a", {128, 512}, DType::kBFloat16, 1.0f);
  Tile b = Sbuf("b", {128, 512}, DType::kBFloat16, 2.0f);
  Tile d16 = core_.AllocateSbuf("d16", {128, 512}, DType::kBFloat16);
  Tile d32 = core_.AllocateSbuf("d32", {128, 512}, DType::kFloat32);
  nisa::tensor_tensor(d16, a, b, AluOp::kAdd);  // all bf16, add: N row, 512 / 4 = 128 cycles
  EXPECT_NEAR(Duration(0), 128 / 0.96, 1e-9);
  nisa::tensor_tensor(d32, a, b, AluOp::kAdd);  // fp32 dst: 2N row, 2 * 512 / 2 = 512 cycles
  EXPECT_NEAR(Duration(1), 512 / 0.96, 1e-9);
  Tile z = core_.AllocateSbuf("z", {128, 512}, DType::kBFloat16);
  nisa::memset(z, 0.0f);  // zero bf16 fill: N / 2 = 256, / 4 per lane = 64 cycles
  EXPECT_NEAR(Duration(2), 64 / 0.96, 1e-9);
  nisa::memset(d32, 1.0f);  // fp32 fill of 1: max(64, 512 / 2 = 256)
  EXPECT_NEAR(Duration(3), 256 / 0.96, 1e-9);
  Tile x = Sbuf("x", {128, 300}, DType::kFloat32, 0.5f);
  Tile y = core_.AllocateSbuf("y", {128, 300}, DType::kFloat32);
  Tile sum = core_.AllocateSbuf("sum", {128, 1}, DType::kFloat32);
  nisa::activation(y, ActFn::kExp, x, {.reduce_op = AluOp::kAdd, .reduce_res = sum});
  EXPECT_NEAR(Duration(4), (300 + 64) / 1.2, 1e-9);  // max(64, 300) + 64 Scalar cycles at 1.2 GHz
}

// A Vector-bound chain of tiny dependent instructions: each waits for the previous one's output.
TEST_F(InstructionRowTest, DependentTinyVectorChainPaysTheOverheadEachStep) {
  Tile a = Sbuf("a", {128, 1}, DType::kFloat32, 1.0f);
  Tile b = core_.AllocateSbuf("b", {128, 1}, DType::kFloat32);
  const nisa::TensorScalarOps add1{.op0 = AluOp::kAdd, .operand0 = 1.0f};
  for (int i = 0; i < 10; ++i) nisa::tensor_scalar(i % 2 ? a : b, i % 2 ? b : a, add1);
  // The first reads a tile no instruction wrote: max(64, 1) = 64 cycles. Each later one waits on
  // the previous output: 64 + 200 = 264 cycles = 275 ns at 0.96 GHz.
  EXPECT_NEAR(Duration(0), 64 / 0.96, 1e-9);
  for (size_t i = 1; i < 10; ++i) EXPECT_NEAR(Duration(i), 264 / 0.96, 1e-9) << i;
  EXPECT_NEAR(core_.timeline().records().back().end_ns, (64 + 9 * 264) / 0.96, 1e-6);
  // Ten independent ones (each reads `a`, writes its own tile) are back-to-back at MIN_II.
  const double t0 = core_.timeline().records().back().end_ns;
  Tile c = Sbuf("c", {128, 1}, DType::kFloat32, 3.0f);
  std::vector<Tile> outs;
  for (int i = 0; i < 10; ++i) outs.push_back(core_.AllocateSbuf("o" + std::to_string(i), {128, 1}, DType::kFloat32));
  for (int i = 0; i < 10; ++i) nisa::tensor_scalar(outs[i], c, add1);
  EXPECT_NEAR(core_.timeline().records().back().end_ns - t0, 10 * 64 / 0.96, 1e-6);
}

class Trn1CoreTest : public CoreTest {
 protected:
  Trn1CoreTest() : CoreTest(Trn1()) {}
};

// PG l.425: dependent 1-element ScalarE instructions issue every 189 ns (264 cycles at 1.4 GHz
// on NC-v2). The model: max(64, 1) + 200 = 264 cycles / 1.4 GHz = 188.57 ns; tolerance 2%.
TEST_F(Trn1CoreTest, DependentOneElementScalarChainIssuesEvery189Ns) {
  Tile a = Sbuf("a", {128, 1}, DType::kFloat32, 0.5f);
  Tile b = core_.AllocateSbuf("b", {128, 1}, DType::kFloat32);
  for (int i = 0; i < 8; ++i) nisa::activation(i % 2 ? a : b, ActFn::kIdentity, i % 2 ? b : a);
  const std::vector<InstructionRecord>& r = core_.timeline().records();
  for (size_t i = 2; i < r.size(); ++i) {
    const double interval_ns = r[i].start_ns - r[i - 1].start_ns;
    EXPECT_NEAR(interval_ns, 189.0, 189.0 * 0.02) << i;
    EXPECT_NEAR(interval_ns, 264 / 1.4, 1e-9) << i;
  }
}

TEST_F(Trn1CoreTest, Trn1HasNoPeThrottle) {
  EXPECT_FALSE(PeThrottles(core_.profile()));
  Tile s = Sbuf("s", {128, 128}, DType::kBFloat16, 1.0f);
  Tile m = Sbuf("m", {128, 512}, DType::kBFloat16, 1.0f);
  Tile d = core_.AllocatePsum("d", {128, 512});
  nisa::nc_matmul(d, s, m);  // 512 cycles at 2.8 GHz, cold or not
  EXPECT_NEAR(Duration(0), 512 / 2.8, 1e-9);
}

using PeThrottleTest = CoreTest;

// b = (1 - 0.5) / 3000 ns: the limit's slope. A cold burst of W ns of full-rate work shorter than
// the ramp takes T with 0.5 T + b T^2 / 2 = W.
constexpr double kSlope = 0.5 / 3000;
constexpr double kMatmulNs = 512 / 2.4;  // 213.33 ns at full rate

TEST_F(PeThrottleTest, ShortColdBurstRunsOnTheRamp) {
  Tile s = Sbuf("s", {128, 128}, DType::kBFloat16, 1.0f);
  Tile m = Sbuf("m", {128, 512}, DType::kBFloat16, 1.0f);
  Tile d = core_.AllocatePsum("d", {128, 512});
  for (int i = 0; i < 5; ++i) nisa::nc_matmul(d, s, m);
  // W = 5 x 213.33 = 1066.7 ns; T = (-0.5 + sqrt(0.25 + 2 b W)) / b
  //   = (-0.5 + sqrt(0.25 + 0.35556)) / 1.6667e-4 = (0.77818 - 0.5) / 1.6667e-4 = 1669.1 ns,
  // 1.56x the steady 1066.7 ns.
  const double w = 5 * kMatmulNs;
  const double t = (-0.5 + std::sqrt(0.25 + 2 * kSlope * w)) / kSlope;
  EXPECT_NEAR(t, 1669.1, 0.1);
  EXPECT_NEAR(core_.timeline().records().back().end_ns, t, 1e-6);
  // The first runs at about half rate (0.5 -> 0.535 over its 400 ns: 400 ns), each next faster.
  EXPECT_NEAR(Duration(0), 400.0, 1e-6);  // 0.5 d + b d^2 / 2 = 213.33 at d = 400
  for (size_t i = 1; i < 5; ++i) EXPECT_LT(Duration(i), Duration(i - 1));
  EXPECT_GT(Duration(4), kMatmulNs);
}

TEST_F(PeThrottleTest, LongBurstConvergesToTheFullRate) {
  Tile s = Sbuf("s", {128, 128}, DType::kBFloat16, 1.0f);
  Tile m = Sbuf("m", {128, 512}, DType::kBFloat16, 1.0f);
  Tile d = core_.AllocatePsum("d", {128, 512});
  for (int i = 0; i < 60; ++i) nisa::nc_matmul(d, s, m);
  // The ramp does 0.5 x 3000 + b x 3000^2 / 2 = 1500 + 750 = 2250 ns of work in its 3000 ns, so
  // the burst of W = 60 x 213.33 = 12800 ns ends 750 ns late: at 13550 ns.
  EXPECT_NEAR(core_.timeline().records().back().end_ns, 60 * kMatmulNs + 750, 1e-6);
  EXPECT_NEAR(Duration(59), kMatmulNs, 1e-9);  // full rate
}

// After the PE idles for a window (3 us) it is cold again; a shorter gap keeps it warm.
TEST_F(PeThrottleTest, ColdAgainAfterThreeMicrosecondsIdle) {
  const HardwareProfile& p = core_.profile();
  PeThrottle pe;
  double t = 0;
  for (int i = 0; i < 60; ++i) t += pe.Run(p, t, kMatmulNs);
  EXPECT_NEAR(t, 13550, 1e-6);
  // 1 us gap: busy 2000 of the last 3000 ns >= 50%: still warm, full rate.
  t += 1000;
  EXPECT_DOUBLE_EQ(pe.LimitAt(p, t), 1.0);
  t += pe.Run(p, t, kMatmulNs);
  // 3.1 us gap: nothing busy in the last window: cold. The first matmul runs from limit 0.5:
  // 0.5 d + b d^2 / 2 = 213.33 -> d = 400 ns.
  t += 3100;
  EXPECT_DOUBLE_EQ(pe.LimitAt(p, t), 0.5);
  EXPECT_NEAR(pe.Run(p, t, kMatmulNs), 400.0, 1e-6);
}

TEST(PeThrottleMathTest, RampedNsSolvesTheIntegral) {
  // From 0.75 at slope b: full at (1 - 0.75) / b = 1500 ns after 0.75 x 1500 + b 1500^2 / 2 =
  // 1125 + 187.5 = 1312.5 ns of work; 2000 ns of work then takes 1500 + 687.5 = 2187.5 ns.
  EXPECT_NEAR(RampedNs(0.75, kSlope, 2000), 2187.5, 1e-9);
  EXPECT_DOUBLE_EQ(RampedNs(1.0, kSlope, 2000), 2000);
}

}  // namespace
}  // namespace nkisim
