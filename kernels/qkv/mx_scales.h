// Internal to kernels/qkv: the E8M0 weight scales of the MX path, streamed a column bank at a time.
// qkv_w_scale [H / 32, I] holds one scale per 32 rows of H (8 packed rows) and column; chunk q of
// 4 x 128 rows has 16 of them, which nc_matmul_mx wants on partitions 0-3, 32-35, 64-67 and 96-99
// of the scale tile (runtime/mx.h). MxBankScales keeps a ring of two [P, Q, width] uint8 tiles and
// loads the next bank's scales (four DMAs, one per quadrant) while the current bank's matmuls run.
// Without qkv_w_scale every scale is the neutral 127 (MX_NEUTRAL_SCALE).
#pragma once

#include <cstdint>

#include "kernels/qkv/config.h"
#include "kernels/qkv/qkv.h"
#include "runtime/neuron_core.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::kernels {

class MxBankScales {
 public:
  MxBankScales() = default;
  // The scales of H part `part` of `parts` (TKG: this core's shard; CTE: 1 part), q_chunks chunks,
  // in banks of `width` columns; the k-th bank asked for covers columns (k % banks) * width.
  MxBankScales(NeuronCore& core, const QkvConfig& cfg, const QkvParams& params, int parts,
               int part, int64_t q_chunks, int64_t width);

  // [P, Q, width] scales of the k-th bank of the sequence (k = 0, 1, 2, ... in order); issues the
  // load of bank k + 1 (when k + 1 < total) before returning.
  Tile Get(int64_t k, int64_t total);

 private:
  void Load(int64_t k);

  const QkvConfig* cfg_ = nullptr;
  bool given_ = false;
  int64_t width_ = 0, banks_ = 1;
  TensorView rows_;  // [Q, 4, 4, I]: chunk, quadrant, row in the quadrant
  Tile ring_[2];
};

}  // namespace nkisim::kernels
