#include "kernels/examples/tiled_matmul.h"

#include <algorithm>
#include <vector>

#include "runtime/error.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {

void ValidateTiledMatmul(const TensorView& a, const TensorView& b, const TensorView& c, int lnc) {
  auto fail = [](const std::string& what) {
    Raise(ErrorCode::kInvalidArgument, StrCat("tiled_matmul: ", what));
  };
  if (a.rank() != 2 || b.rank() != 2 || c.rank() != 2) fail("a, b and c must be 2-D");
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  if (b.dim(0) != k) fail(StrCat("b is ", ShapeString(b.shape()), "; its rows must equal a's K = ", k));
  if (c.dim(0) != m || c.dim(1) != n) fail(StrCat("c is ", ShapeString(c.shape()), "; must be [", m, ", ", n, "]"));
  if (m % 128 != 0) fail(StrCat("M = ", m, " must be a multiple of 128"));
  if (k % 128 != 0) fail(StrCat("K = ", k, " must be a multiple of 128"));
  if (n % lnc != 0) fail(StrCat("N = ", n, " must be a multiple of lnc = ", lnc));
  if (a.dtype() != b.dtype() || !IsFloat(a.dtype())) fail("a and b must share one float dtype");
}

void TiledMatmulKernel(const KernelContext& ctx, const TensorView& a, const TensorView& b,
                       const TensorView& c) {
  using namespace nisa;
  constexpr int64_t kP = 128, kBank = 512;
  NeuronCore& core = ctx.core;
  const int64_t m = a.dim(0), k = a.dim(1);
  const int64_t n_shard = b.dim(1) / ctx.n_prgs, n_begin = ctx.prg_id * n_shard;
  const int64_t k_tiles = k / kP;
  const DType dt = a.dtype();

  for (int64_t m0 = 0; m0 < m; m0 += kP) {
    // A's row block, transposed once per K subtile: stationary operands [K=128, M=128].
    std::vector<Tile> a_t(k_tiles);
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
      Tile a_block = core.AllocateSbuf("a_block", {kP, kP}, dt);
      dma_copy(a_block, a.slice(0, m0, m0 + kP).slice(1, kt * kP, (kt + 1) * kP));
      Tile a_psum = core.AllocatePsum("a_t_psum", {kP, kP}, dt);
      nc_transpose(a_psum, a_block, Engine::kPE);
      a_t[kt] = core.AllocateSbuf("a_t", {kP, kP}, dt);
      tensor_copy(a_t[kt], a_psum, Engine::kVector);
    }
    int eviction = 0;
    for (int64_t n0 = n_begin; n0 < n_begin + n_shard; n0 += kBank) {
      const int64_t width = std::min(kBank, n_begin + n_shard - n0);
      Tile acc = core.AllocatePsum("acc", {kP, width});
      for (int64_t kt = 0; kt < k_tiles; ++kt) {
        Tile b_block = core.AllocateSbuf("b_block", {kP, width}, dt);
        dma_copy(b_block, b.slice(0, kt * kP, (kt + 1) * kP).slice(1, n0, n0 + width));
        nc_matmul(acc, a_t[kt], b_block, {.accumulate = kt > 0});
      }
      // Alternate evictions between Vector and Scalar so they overlap the next matmuls.
      Tile out = core.AllocateSbuf("out", {kP, width}, c.dtype());
      tensor_copy(out, acc, eviction++ % 2 == 0 ? Engine::kVector : Engine::kScalar);
      dma_copy(c.slice(0, m0, m0 + kP).slice(1, n0, n0 + width), out);
    }
  }
}

}  // namespace nkisim::kernels
