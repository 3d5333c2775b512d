// Internal to kernels/qkv: the E8M0 weight scales of the MX path, streamed a column bank at a time.
// qkv_w_scale [H / 32, I] holds one scale per 32 rows of H (8 packed rows) and column; chunk q of
// 4 x 128 rows has 16 of them, which nc_matmul_mx wants on partitions 0-3, 32-35, 64-67 and 96-99
// of the scale tile (runtime/mx.h); a chunk of 4 x 64 rows has 8, on partitions 0-3 and 32-35. MxBankScales keeps a ring of two [P, Q, width] uint8 tiles and
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
  // The scales of H part `part` of `parts` (TKG: this core's shard; CTE: 1 part), q_chunks chunks
  // of 4 x `partitions` rows (a multiple of 32), in banks of `width` columns; the k-th bank asked
  // for covers columns (k % banks) * width.
  MxBankScales(NeuronCore& core, const QkvConfig& cfg, const QkvParams& params, int parts,
               int part, int64_t q_chunks, int64_t partitions, int64_t width);

  // Issues the loads of the first two banks of a sequence of `total`: call it before the weight
  // stream starts, so the scales the first matmuls need are not queued behind the weights.
  void Prefetch(int64_t total);
  // [P, Q, width] scales of the k-th bank of the sequence (k = 0, 1, 2, ... in order); issues the
  // load of bank k + 2 (when k + 2 < total) into the slot bank k - 1 used... after this bank's
  // consumers are issued: call Next(k) once its matmuls are issued.
  Tile Get(int64_t k) const { return ring_[k % 2]; }
  // Bank k's matmuls are issued: load bank k + 2 into its slot (when k + 2 < total).
  void Next(int64_t k, int64_t total);

 private:
  void Load(int64_t k);
  int64_t loaded_ = 0;  // banks whose load is issued

  const QkvConfig* cfg_ = nullptr;
  bool given_ = false;
  int64_t width_ = 0, banks_ = 1;
  TensorView rows_;  // [Q, quadrants, 4, I]: chunk, quadrant, row in the quadrant
  int64_t quadrants_ = 4;
  Tile ring_[2];
};

}  // namespace nkisim::kernels
