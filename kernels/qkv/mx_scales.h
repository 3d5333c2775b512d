// Internal to kernels/qkv: the E8M0 weight scales of the MX path, loaded a group of column banks at
// a time. qkv_w_scale [H / 32, I] holds one scale per 32 rows of H (8 packed rows) and column;
// chunk q of 4 x 128 rows has 16 of them, which nc_matmul_mx wants on partitions 0-3, 32-35, 64-67
// and 96-99 of the scale tile (runtime/mx.h); a chunk of 4 x 64 rows has 8, on partitions 0-3 and
// 32-35. A group's scales load as one DMA per quadrant (four on 128 partitions), whatever the
// number of banks in it, so the larger the group the fewer DMAs pay their fixed cost:
//   * when every bank fits the SBUF budget, one group holds them all and loads once, however many
//     times the kernel walks the banks;
//   * otherwise a ring of two groups, the next loading while the current one's matmuls run.
// Without qkv_w_scale every scale is the neutral 127 (MX_NEUTRAL_SCALE).
#pragma once

#include <cstdint>
#include <vector>

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
  // for covers columns (k % banks) * width. budget_bytes: SBUF bytes per partition the scales may
  // take; at least two banks' worth (q_chunks * width each) are taken whatever it says.
  MxBankScales(NeuronCore& core, const QkvConfig& cfg, const QkvParams& params, int parts,
               int part, int64_t q_chunks, int64_t partitions, int64_t width, int64_t budget_bytes);

  // Issues the loads of the first `groups` (1 or 2) groups of a sequence of `total` banks, those
  // not issued yet: call it before the weight stream starts, so the scales the first matmuls need
  // are not queued behind the weights.
  void Prefetch(int64_t total, int64_t groups = 2);
  // [P, Q, w] scales of the k-th bank of the sequence (k = 0, 1, 2, ... in order), w its width
  // (the last bank may be narrower than `width`).
  Tile Get(int64_t k) const;
  // Bank k's matmuls are issued: when it ends its group, load the group after next into the slot
  // this group used.
  void Next(int64_t k, int64_t total);
  // True when one group holds every bank (loaded once).
  bool resident() const { return ring_.size() == 1; }

 private:
  int64_t GroupOf(int64_t k) const;  // the group sequence index of the k-th bank
  int64_t Groups(int64_t total) const;
  void Load(int64_t g);
  const Tile& Slot(int64_t g) const { return ring_[static_cast<size_t>(g) % ring_.size()]; }

  const QkvConfig* cfg_ = nullptr;
  bool given_ = false;
  int64_t width_ = 0, banks_ = 1;
  int64_t group_banks_ = 1;     // banks per group
  int64_t groups_per_pass_ = 1;
  int64_t loaded_ = 0;          // groups whose load is issued
  TensorView rows_;             // [Q, quadrants, 4, I]: chunk, quadrant, row in the quadrant
  int64_t quadrants_ = 4;
  // One tile when a group holds every bank (loaded once, however many passes), else two.
  std::vector<Tile> ring_;
};

}  // namespace nkisim::kernels
