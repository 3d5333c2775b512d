#include "kernels/examples/blocked_matmul.h"

#include <algorithm>
#include <vector>

#include "runtime/cost_model.h"
#include "runtime/dma_engines.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

constexpr int64_t kP = 128, kBank = 512;

}  // namespace

void BlockedMatmulKernel(const KernelContext& ctx, const TensorView& a, const TensorView& b,
                         const TensorView& c) {
  using namespace nisa;
  NeuronCore& core = ctx.core;
  const int64_t m = a.dim(0), k = a.dim(1);
  const int64_t n_shard = b.dim(1) / ctx.n_prgs, n_begin = ctx.prg_id * n_shard;
  const int64_t k_tiles = k / kP, block_cols = kBlockBanks * kBank;
  const DType dt = a.dtype();

  for (int64_t m0 = 0; m0 < m; m0 += kP) {
    // A's whole row block in one load: K x dtype contiguous bytes a partition.
    Tile a_rows = core.AllocateSbuf("a_rows", {kP, k}, dt);
    dma_copy(a_rows, a.slice(0, m0, m0 + kP));
    std::vector<Tile> a_t(k_tiles);
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
      Tile a_psum = core.AllocatePsum("a_t_psum", {kP, kP}, dt);
      nc_transpose(a_psum, a_rows.slice(1, kt * kP, (kt + 1) * kP), Engine::kPE);
      a_t[kt] = core.AllocateSbuf("a_t", {kP, kP}, dt);
      tensor_copy(a_t[kt], a_psum, Engine::kVector);
    }
    int eviction = 0;
    for (int64_t g0 = n_begin; g0 < n_begin + n_shard; g0 += block_cols) {
      const int64_t g_width = std::min(block_cols, n_begin + n_shard - g0);
      std::vector<Tile> acc;
      for (int64_t n0 = 0; n0 < g_width; n0 += kBank) {
        acc.push_back(core.AllocatePsum("acc", {kP, std::min(kBank, g_width - n0)}));
      }
      for (int64_t kt = 0; kt < k_tiles; ++kt) {
        // One B block feeds the group's banks: g_width x dtype bytes a partition.
        Tile b_block = core.AllocateSbuf("b_block", {kP, g_width}, dt);
        dma_copy(b_block, b.slice(0, kt * kP, (kt + 1) * kP).slice(1, g0, g0 + g_width));
        for (size_t j = 0; j < acc.size(); ++j) {
          const int64_t n0 = static_cast<int64_t>(j) * kBank;
          nc_matmul(acc[j], a_t[kt], b_block.slice(1, n0, n0 + acc[j].free_size()),
                    {.accumulate = kt > 0});
        }
      }
      Tile out = core.AllocateSbuf("out", {kP, g_width}, c.dtype());
      for (size_t j = 0; j < acc.size(); ++j) {
        const int64_t n0 = static_cast<int64_t>(j) * kBank;
        tensor_copy(out.slice(1, n0, n0 + acc[j].free_size()), acc[j],
                    eviction++ % 2 == 0 ? Engine::kVector : Engine::kScalar);
      }
      dma_copy(c.slice(0, m0, m0 + kP).slice(1, g0, g0 + g_width), out);  // one store a group
    }
  }
}

double MatmulDmaEngineNs(const HardwareProfile& p, MatmulLayout layout, int64_t m, int64_t k,
                         int64_t n, int lnc, int64_t in_bytes, int64_t c_bytes) {
  // A [128, cols] transfer between a row-major HBM matrix and SBUF: one run of cols x bytes a
  // partition (whole rows only when cols is the matrix's width; not counted: the gain is small).
  auto transfer = [&](int64_t cols, int64_t bytes) {
    const int64_t row = cols * bytes;
    const DmaSplit s = SplitOverEngines(p, 0, kP, row, row, false, true);
    double busiest = 0;
    for (size_t e = 0; e < s.bytes.size(); ++e) {
      busiest = std::max(busiest, DmaShareNs(p, s.bytes[e], s.descriptors[e], 1.0));
    }
    return busiest + DmaSemaphoreNs(p);
  };
  const int64_t m_blocks = m / kP, k_tiles = k / kP, n_shard = n / lnc;
  double ns = 0;
  if (layout == MatmulLayout::kTiled) {
    const int64_t banks = n_shard / kBank, rest = n_shard % kBank;
    ns += static_cast<double>(m_blocks * k_tiles) * transfer(kP, in_bytes);
    ns += static_cast<double>(m_blocks * banks) *
          (static_cast<double>(k_tiles) * transfer(kBank, in_bytes) + transfer(kBank, c_bytes));
    if (rest > 0) {
      ns += static_cast<double>(m_blocks) *
            (static_cast<double>(k_tiles) * transfer(rest, in_bytes) + transfer(rest, c_bytes));
    }
  } else {
    const int64_t block = kBlockBanks * kBank, groups = n_shard / block, rest = n_shard % block;
    ns += static_cast<double>(m_blocks) * transfer(k, in_bytes);
    ns += static_cast<double>(m_blocks * groups) *
          (static_cast<double>(k_tiles) * transfer(block, in_bytes) + transfer(block, c_bytes));
    if (rest > 0) {
      ns += static_cast<double>(m_blocks) *
            (static_cast<double>(k_tiles) * transfer(rest, in_bytes) + transfer(rest, c_bytes));
    }
  }
  return ns;
}

}  // namespace nkisim::kernels
