#include "kernels/common/transposed_load.h"

#include <algorithm>

#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {

Tile LoadTokenRows(NeuronCore& core, const FrontEndConfig& cfg, const std::string& name,
                   const TensorView& src, int64_t t0, int64_t t1, int64_t c0, int64_t c1) {
  const int64_t nt = t1 - t0, nc = c1 - c0, shard = cfg.h / cfg.lnc;
  Tile rows = core.AllocateSbuf(name + "_rows", {nc * nt, shard}, src.dtype());
  const TensorView token_rows = src.reshape({cfg.tokens, cfg.h}).slice(0, t0, t1);
  for (int64_t c = 0; c < nc; ++c) {
    nisa::dma_copy(rows.slice(0, c * nt, (c + 1) * nt),
                   token_rows.slice(1, (c0 + c) * shard, (c0 + c + 1) * shard));
  }
  return rows;
}

Tile TransposeTokenRows(NeuronCore& core, const FrontEndConfig& cfg, const std::string& name,
                        const Tile& rows, int64_t nt, int64_t nc) {
  const int64_t np = cfg.partitions, h1s = cfg.shard_subtiles(), k_total = nc * h1s;
  const DType dtype = rows.dtype();
  Tile x = core.AllocateSbuf(name, {np, nt, nc, h1s}, dtype);
  const HardwareProfile& prof = core.profile();
  const int64_t bank_elements =
      prof.psum_bytes_per_partition() / prof.psum_banks() / static_cast<int64_t>(SizeOf(dtype));
  const int64_t group = std::clamp<int64_t>(bank_elements / nt, 1, k_total);
  Tile banks[2];
  for (Tile& b : banks) b = core.AllocatePsum(name + "_t_psum", {np, group, nt}, dtype);
  int turn = 0;
  for (int64_t k0 = 0; k0 < k_total; k0 += group, ++turn) {
    const int64_t g = std::min(group, k_total - k0);
    const Tile bank = banks[turn % 2];
    for (int64_t kk = 0; kk < g; ++kk) {
      const int64_t c = (k0 + kk) / h1s, j = (k0 + kk) % h1s;
      const Tile in = rows.slice(0, c * nt, (c + 1) * nt).reshape({np, h1s}).select(2, j);
      nisa::nc_transpose(bank.select(1, kk), in, Engine::kPE);
    }
    // x viewed [P, g, T]: element (kk, t) at t * k_total + k0 + kk.
    const Tile dst = x.ap(np, {{1, g}, {k_total, nt}}, k0);
    nisa::tensor_copy(dst, bank.slice(1, 0, g), turn % 2 == 0 ? Engine::kVector : Engine::kScalar);
  }
  return x;
}

Tile LoadPartitionMajorByTranspose(NeuronCore& core, const FrontEndConfig& cfg,
                                   const std::string& name, const TensorView& src, int64_t t0,
                                   int64_t t1, int64_t c0, int64_t c1) {
  const Tile rows = LoadTokenRows(core, cfg, name, src, t0, t1, c0, c1);
  return TransposeTokenRows(core, cfg, name, rows, t1 - t0, c1 - c0);
}

}  // namespace nkisim::kernels
