#include "kernels/qkv/mx_scales.h"

#include <algorithm>

#include "runtime/mx.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {

MxBankScales::MxBankScales(NeuronCore& core, const QkvConfig& cfg, const QkvParams& p, int parts,
                           int part, int64_t q_chunks, int64_t partitions, int64_t width)
    : cfg_(&cfg), given_(p.qkv_w_scale.valid()), width_(width),
      banks_((cfg.i + width - 1) / width), quadrants_(partitions / mx::kQuadrantPartitions) {
  for (Tile& t : ring_) {
    t = core.AllocateSbuf("w_mx_scale", {partitions, q_chunks, width}, DType::kUInt8);
    if (!given_) nisa::memset(t, mx::kNeutralScale, Engine::kGpSimd);
  }
  // A quadrant's 32 partitions of x4 elements are 4 blocks: 4 scale rows.
  constexpr int64_t kRowsPerQuadrant = mx::kQuadrantPartitions / mx::kBlockPartitions;
  if (given_) {
    rows_ = p.qkv_w_scale.reshape({parts, q_chunks, quadrants_, kRowsPerQuadrant, cfg.i})
                .select(0, part);
  }
}

void MxBankScales::Prefetch(int64_t total) {
  while (given_ && loaded_ < std::min<int64_t>(2, total)) Load(loaded_++);
}

void MxBankScales::Next(int64_t k, int64_t total) {
  if (given_ && k + 2 < total && loaded_ == k + 2) Load(loaded_++);
}

void MxBankScales::Load(int64_t k) {
  const int64_t c0 = (k % banks_) * width_, c1 = std::min(cfg_->i, c0 + width_);
  for (int64_t quadrant = 0; quadrant < quadrants_; ++quadrant) {
    const int64_t p0 = quadrant * mx::kQuadrantPartitions;
    const Tile dst = ring_[k % 2].slice(0, p0, p0 + 4).slice(2, 0, c1 - c0);
    nisa::dma_copy(dst, rows_.select(1, quadrant).permute({1, 0, 2}).slice(2, c0, c1));
  }
}

}  // namespace nkisim::kernels
