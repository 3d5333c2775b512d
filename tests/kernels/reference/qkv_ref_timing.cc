// Host time and peak extra memory of reference::QkvReference at the QKV prefill shape of one rank
// of the main job: x [1, S, H] bf16 (default S = 2048, H = 8192) @ W [H, I] bf16 (I = 384) with
// RMSNorm. Usage: qkv_ref_timing [S] [H] [I] [repeats]. Not a test: run it by hand.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <vector>

#include "kernels/reference/qkv_ref.h"

namespace {

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

long MaxRssKib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

// Fills a [rows, cols] view with uniform values in [-1, 1), 256 rows at a time.
void FillRandom(const nkisim::TensorView& t, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t rows = t.dim(0), cols = t.dim(1);
  for (int64_t r0 = 0; r0 < rows; r0 += 256) {
    const int64_t r1 = std::min(rows, r0 + 256);
    std::vector<float> v(static_cast<size_t>((r1 - r0) * cols));
    for (float& x : v) x = dist(rng);
    t.slice(0, r0, r1).FromFloats(v);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nkisim;
  const int64_t s = argc > 1 ? std::atoll(argv[1]) : 2048;
  const int64_t h = argc > 2 ? std::atoll(argv[2]) : 8192;
  const int64_t i = argc > 3 ? std::atoll(argv[3]) : 384;
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 1;
  std::mt19937 rng(7);
  kernels::QkvParams p;
  p.input = TensorView::Create({1, s, h}, DType::kBFloat16, "x");
  p.fused_qkv_weights = TensorView::Create({h, i}, DType::kBFloat16, "w");
  p.gamma_norm_weights = TensorView::Create({1, h}, DType::kBFloat16, "gamma");
  FillRandom(p.input.select(0, 0), rng);
  FillRandom(p.fused_qkv_weights, rng);
  FillRandom(p.gamma_norm_weights, rng);
  p.fused_norm_type = kernels::NormType::kRmsNorm;
  p.num_q_heads = i / 128 - 2, p.num_kv_heads = 1, p.d_head = 128;

  const long rss_before = MaxRssKib();
  double best = 1e30, best_cpu = 1e30, checksum = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = CpuSeconds();
    const reference::QkvGolden g = reference::QkvReference(p);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, sec);
    best_cpu = std::min(best_cpu, CpuSeconds() - cpu0);
    checksum = 0;
    for (float v : g.output) checksum += v;
  }
  const long rss_after = MaxRssKib();
  std::printf(
      "QkvReference x [1, %lld, %lld] bf16 @ W [%lld, %lld] RMSNorm: %.3f s wall, %.3f s CPU "
      "(best of %d)\n",
      static_cast<long long>(s), static_cast<long long>(h), static_cast<long long>(h),
      static_cast<long long>(i), best, best_cpu, repeats);
  std::printf("max RSS: %.1f MiB before the call, %.1f MiB after (peak extra %.1f MiB)\n",
              rss_before / 1024.0, rss_after / 1024.0, (rss_after - rss_before) / 1024.0);
  std::printf("checksum %.6e\n", checksum);
  return 0;
}
