// The naive and the careful matmul (kernels/examples/tiled_matmul.h, blocked_matmul.h): both match
// the plain matmul; the DMA curve's estimate of their engine time is the arithmetic written below;
// the naive one is slower by the factor that estimate implies, and its engines show why (busy on
// small descriptors for most of the kernel). Every engine's busy time fits in the kernel's time.
#include "kernels/examples/blocked_matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/examples/tiled_matmul.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/matmul_ref.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"

namespace nkisim::kernels {
namespace {

TensorView Random(const Shape& shape, uint64_t seed) {
  TensorView t = TensorView::Create(shape, DType::kBFloat16, "in");
  std::vector<float> v(static_cast<size_t>(t.numel()));
  uint64_t x = seed;
  for (float& f : v) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    f = static_cast<float>(static_cast<int>((x >> 33) % 17) - 8) / 8.0f;  // exact in bf16
  }
  t.FromFloats(v);
  return t;
}

struct KernelRun {
  double sim_ns = 0;
  double busiest_dma_ns = 0;
  double max_engine_busy_ns = 0;  // over every engine of every core
  reference::Comparison check;
};

KernelRun RunKernel(MatmulLayout layout, int lnc_size, int64_t m, int64_t k, int64_t n) {
  const TensorView a = Random({m, k}, 1), b = Random({k, n}, 2);
  const TensorView c = TensorView::Create({m, n}, DType::kFloat32, "c");
  ValidateTiledMatmul(a, b, c, lnc_size);
  LogicalCore lnc(lnc_size, Trn2Profile());
  lnc.Launch([&](const KernelContext& ctx) {
    if (layout == MatmulLayout::kTiled) {
      TiledMatmulKernel(ctx, a, b, c);
    } else {
      BlockedMatmulKernel(ctx, a, b, c);
    }
  });
  KernelRun r;
  r.sim_ns = lnc.now();
  for (int i = 0; i < lnc_size; ++i) {
    const CoreSummary s = lnc.core(i).Summary();
    for (double busy : s.busy_ns) r.max_engine_busy_ns = std::max(r.max_engine_busy_ns, busy);
    for (int e = 0; e < 16; ++e) {
      r.busiest_dma_ns = std::max(r.busiest_dma_ns, s.busy_ns[EngineIndex(DmaEngine(e))]);
    }
  }
  // Exact bf16 inputs (multiples of 1/8): the fp32 sums are exact to 2^-24 relative.
  r.check = reference::Compare(c.ToFloats(), reference::Matmul(a, b), {1e-6, 1e-6});
  return r;
}

TEST(BlockedMatmulTest, BothMatchThePlainMatmulAtLncOneAndTwo) {
  for (int lnc : {1, 2}) {
    for (MatmulLayout layout : {MatmulLayout::kTiled, MatmulLayout::kBlocked}) {
      const KernelRun r = RunKernel(layout, lnc, 256, 384, 2560 + 512 * lnc);  // a partial group
      EXPECT_TRUE(r.check.pass()) << "lnc " << lnc << ": " << r.check.ToString();
    }
  }
}

// trn2: 8 partitions an engine; a descriptor costs 4096 / 23 - 4096 / 27.2 = 27.49 ns beyond its
// bytes at 27.2 B/ns; the semaphore is one more descriptor of 4 B. One [128, c] transfer of b-byte
// elements: 8 x ceil(c b / 4096) descriptors and 8 c b bytes on the busiest engine.
//   M 128, K 256, N 2048, bf16 in, fp32 out, LNC 1:
//   tiled:   2 a loads [128, 128] (256 B rows: 8 x 27.49 + 2048 / 27.2 + sem)        = 2 x 322.9
//            4 banks x (2 b loads [128, 512] (1 KiB rows: 8 x 27.49 + 8192 / 27.2 + sem) = 548.8
//                       + 1 store [128, 512] fp32 (2 KiB rows: 8 x 27.49 + 16384 / 27.2 + sem) = 850.0)
//            = 645.8 + 4 x (2 x 548.8 + 850.0) = 8436.3 ns
//   blocked: 1 a load [128, 256] (512 B rows: 8 x 27.49 + 4096 / 27.2 + sem)          = 398.2
//            1 group x (2 b loads [128, 2048] (4 KiB rows: 8 x 27.49 + 32768 / 27.2 + sem) = 1452.3
//                       + 1 store [128, 2048] fp32 (8 KiB rows: 16 x 27.49 + 65536 / 27.2 + sem) = 2877.0)
//            = 398.2 + 2 x 1452.3 + 2877.0 = 6179.9 ns
TEST(BlockedMatmulTest, DmaEngineEstimateIsTheArithmetic) {
  const HardwareProfile& p = Trn2Profile();
  const double d = 4096 / 23.0 - 4096 / 27.2, sem = d + 4 / 27.2;
  auto share = [&](double descriptors, double bytes) { return descriptors * d + bytes / 27.2 + sem; };
  const double tiled = 2 * share(8, 2048) + 4 * (2 * share(8, 8192) + share(8, 16384));
  const double blocked = share(8, 4096) + 2 * share(8, 32768) + share(16, 65536);
  EXPECT_NEAR(tiled, 8436.3, 0.1);
  EXPECT_NEAR(blocked, 6179.9, 0.1);
  EXPECT_NEAR(MatmulDmaEngineNs(p, MatmulLayout::kTiled, 128, 256, 2048, 1, 2, 4), tiled, 1e-6);
  EXPECT_NEAR(MatmulDmaEngineNs(p, MatmulLayout::kBlocked, 128, 256, 2048, 1, 2, 4), blocked, 1e-6);
}

// The naive kernel against the careful one at a size where the DMA binds: the simulated ratio is
// the ratio the transfers' shapes imply (within 15%: the kernels also pay latencies, the PE and
// the evictions), its busiest engine is busy for most of the kernel, and the careful one's far less
// of the same bytes.
TEST(BlockedMatmulTest, NaiveIsSlowerByWhatTheDmaCurveImplies) {
  const HardwareProfile& p = Trn2Profile();
  const int64_t m = 512, k = 2048, n = 4096;
  const KernelRun naive = RunKernel(MatmulLayout::kTiled, 1, m, k, n);
  const KernelRun careful = RunKernel(MatmulLayout::kBlocked, 1, m, k, n);
  ASSERT_TRUE(naive.check.pass()) << naive.check.ToString();
  ASSERT_TRUE(careful.check.pass()) << careful.check.ToString();
  const double implied = MatmulDmaEngineNs(p, MatmulLayout::kTiled, m, k, n, 1, 2, 4) /
                         MatmulDmaEngineNs(p, MatmulLayout::kBlocked, m, k, n, 1, 2, 4);
  const double ratio = naive.sim_ns / careful.sim_ns;
  EXPECT_GT(implied, 1.4);
  EXPECT_NEAR(ratio / implied, 1.0, 0.15) << "simulated " << ratio << "x, implied " << implied << "x";
  EXPECT_GT(naive.busiest_dma_ns, 0.85 * naive.sim_ns);
  EXPECT_GT(naive.busiest_dma_ns / careful.busiest_dma_ns, 0.85 * implied);
  // Work conservation: no engine is busy longer than the kernel ran.
  EXPECT_LE(naive.max_engine_busy_ns, naive.sim_ns * (1 + 1e-9));
  EXPECT_LE(careful.max_engine_busy_ns, careful.sim_ns * (1 + 1e-9));
}

}  // namespace
}  // namespace nkisim::kernels
