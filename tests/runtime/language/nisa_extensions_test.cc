// The nisa instructions added for the nl language (runtime/nisa/random.h, dma_descriptors.h,
// gather.h), tested at the ISA level: values against plain loops, legality errors, the engine each
// records and its cost computed by hand from the hardware profile fields.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/nisa.h"
#include "tests/runtime/language/nl_test_util.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nisa {
namespace {

using ::nkisim::nl::testing::NlTest;
using ::nkisim::testing::Contains;
using ::nkisim::testing::InvalidArgumentMessage;

// A GpSimd instruction (docs/engine-costs.md): GPSIMD_START (gpsimd_start_cycles, 150) +
// ceil(F / (elems_per_cycle / partitions)) cycles.
double ComputeNsByHand(const HardwareProfile& p, double freq, double elems_per_cycle, int64_t f) {
  return (p.gpsimd_start_cycles() + std::ceil(f / (elems_per_cycle / p.partitions()))) / freq;
}

double Duration(const InstructionRecord& r) { return r.end_ns - r.start_ns; }

TEST_F(NlTest, RandomFillsOnGpSimdAtItsRate) {
  const HardwareProfile& p = core_.profile();
  Tile t = core_.AllocateSbuf("t", {128, 300}, DType::kFloat32);
  random_seed(1);
  random(t);
  const InstructionRecord& r = core_.timeline().records().back();
  EXPECT_STREQ(r.name, "random");
  EXPECT_EQ(r.engine, Engine::kGpSimd);
  EXPECT_NEAR(Duration(r), ComputeNsByHand(p, p.gpsimd_freq_ghz(), p.gpsimd_elems_per_cycle(), 300),
              1e-9);
  // Draw i of the stream is CounterRng(seed, kPrngStreamId).Uniform(i), row-major.
  const CounterRng rng(1, kPrngStreamId);
  EXPECT_EQ(t.get(0, {0}), rng.Uniform(0));
  EXPECT_EQ(t.get(2, {5}), rng.Uniform(2 * 300 + 5));
  Tile next = core_.AllocateSbuf("next", {1, 1}, DType::kFloat32);
  random(next);
  EXPECT_EQ(next.get(0, {0}), rng.Uniform(128 * 300));
}

TEST_F(NlTest, DropoutChecksItsOperands) {
  Tile data = core_.AllocateSbuf("data", {4, 8}, DType::kInt32);
  Tile dst = core_.AllocateSbuf("dst", {4, 8}, DType::kFloat32);
  EXPECT_EQ(InvalidArgumentMessage([&] { dropout(dst, data, 0.5f); }),
            "dropout: operand 'dst' 'dst' [4, 8] fp32 SBUF: must keep data's integer dtype int32");
  Tile idst = core_.AllocateSbuf("idst", {4, 8}, DType::kInt32);
  Tile column = core_.AllocateSbuf("prob", {4, 1}, DType::kBFloat16);
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { dropout(idst, data, column); }),
                       "must be a float column, and fp32 when data is an integer tile"));
  Tile wrong = core_.AllocateSbuf("wrong", {4, 2}, DType::kFloat32);
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { dropout(idst, data, wrong); }),
                       "a per-partition probability must be [4, 1]"));
}

TEST_F(NlTest, DmaTransposeCostsOneDmaOrDescriptorsThenOneDma) {
  const HardwareProfile& p = core_.profile();
  TensorView src = TensorView::Create({16, 128}, DType::kBFloat16, "src");
  Tile dst = core_.AllocateSbuf("dst", {128, 16}, DType::kBFloat16);
  dma_transpose(dst, src);
  const InstructionRecord hw = core_.timeline().records().back();
  EXPECT_TRUE(IsDmaQueue(hw.engine));
  // Alone: the fixed latency plus one engine's 8 rows of 32 B (8 descriptors) at 90%.
  EXPECT_NEAR(Duration(hw), p.dma_latency_ns() + DmaShareNs(p, 8 * 32, 8, 0.9), 1e-9);

  Tile dst2 = core_.AllocateSbuf("dst2", {128, 16}, DType::kBFloat16);
  dma_transpose(dst2, src, DgeMode::kSoftware);
  const auto& records = core_.timeline().records();
  const InstructionRecord& gen = records[records.size() - 2];
  const InstructionRecord& sw = records.back();
  EXPECT_STREQ(gen.name, "dge_descriptors");
  EXPECT_EQ(gen.engine, Engine::kGpSimd);
  EXPECT_NEAR(Duration(gen),
              ComputeNsByHand(p, p.gpsimd_freq_ghz(), p.gpsimd_elems_per_cycle(),
                              16 * 128 / p.partitions()),
              1e-9);
  EXPECT_GE(sw.start_ns, gen.end_ns);
  EXPECT_EQ(dst2.ToFloats(), dst.ToFloats());
  EXPECT_EQ(HardwareDgeViolation(src, p.partitions()), "");
  Tile wrong = core_.AllocateSbuf("wrong", {16, 128}, DType::kBFloat16);
  EXPECT_EQ(InvalidArgumentMessage([&] { dma_transpose(wrong, src); }),
            "dma_transpose: operand 'dst' 'wrong' [16, 128] bf16 SBUF: must be an SBUF tile "
            "[128, 16], the transpose of src");
}

TEST_F(NlTest, DmaScatterAddCostsTheReadAndWriteOfEachRow) {
  const HardwareProfile& p = core_.profile();
  TensorView dst = TensorView::Create({32, 64}, DType::kFloat32, "dst");
  Tile indices = core_.AllocateSbuf("indices", {8, 1}, DType::kInt32);
  indices.FromFloats({1, 3, 5, 7, 9, 11, 13, 15});
  Tile src = core_.AllocateSbuf("src", {8, 64}, DType::kFloat32);
  src.FromFloats(std::vector<float>(512, 0.5f));
  dma_scatter_add(dst, indices, src);
  const InstructionRecord& r = core_.timeline().records().back();
  EXPECT_STREQ(r.name, "dma_scatter_add");
  // 8 rows of 256 B on engine 0 (one descriptor a row); the HBM port moves them twice.
  const double bytes = 8 * 64 * 4;
  EXPECT_EQ(r.bytes, static_cast<int64_t>(bytes));
  EXPECT_NEAR(Duration(r), p.dma_latency_ns() + DmaShareNs(p, 2048, 8, 1.0), 1e-9);
  EXPECT_EQ(dst.get({3, 10}), 0.5f);
  EXPECT_EQ(dst.get({2, 10}), 0.0f);
  Tile float_indices = core_.AllocateSbuf("fi", {8, 1}, DType::kFloat32);
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { dma_scatter_add(dst, float_indices, src); }),
                       "must be an integer SBUF tile [8, 1]"));
}

TEST_F(NlTest, GatherFlattenedRunsOnGpSimdOverTheIndexCount) {
  const HardwareProfile& p = core_.profile();
  Tile data = core_.AllocateSbuf("data", {4, 50}, DType::kBFloat16);
  std::vector<float> v(200);
  for (int i = 0; i < 200; ++i) v[i] = static_cast<float>(i);
  data.FromFloats(v);
  Tile indices = core_.AllocateSbuf("indices", {4, 10}, DType::kUInt32);
  std::vector<float> idx(40);
  for (int i = 0; i < 40; ++i) idx[i] = static_cast<float>((i * 7) % 50);
  indices.FromFloats(idx);
  Tile dst = core_.AllocateSbuf("dst", {4, 10}, DType::kFloat32);
  gather_flattened(dst, data, indices);
  const InstructionRecord& r = core_.timeline().records().back();
  EXPECT_EQ(r.engine, Engine::kGpSimd);
  // local_gather's row: 150 + 10 indices / C, C = ((28 + 4) / 4) / min(4 / 2 bytes, 1) = 8:
  // 150 + ceil(1.25) = 152 GpSimd cycles.
  EXPECT_NEAR(Duration(r), 152 / p.gpsimd_freq_ghz(), 1e-9);
  for (int q = 0; q < 4; ++q) {
    for (int j = 0; j < 10; ++j) EXPECT_EQ(dst.get(q, {j}), q * 50 + idx[q * 10 + j]);
  }
  Tile psum = core_.AllocatePsum("psum", {4, 10}, DType::kFloat32);
  EXPECT_TRUE(Contains(InvalidArgumentMessage([&] { gather_flattened(psum, data, indices); }),
                       "operand 'dst' 'psum' [4, 10] fp32 PSUM: is in PSUM, which the GpSimd "
                       "engine cannot access"));
}

}  // namespace
}  // namespace nkisim::nisa
