#include "kernels/qkv/mx_scales.h"

#include <algorithm>

#include "runtime/mx.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

// Banks per group for a budget: every bank when they all fit (one resident group), else as many
// as two groups fit, at least one.
int64_t GroupBanks(int64_t banks, int64_t bank_bytes, int64_t budget_bytes) {
  if (banks * bank_bytes <= budget_bytes) return banks;
  return std::clamp<int64_t>(budget_bytes / (2 * bank_bytes), 1, banks);
}

}  // namespace

MxBankScales::MxBankScales(NeuronCore& core, const QkvConfig& cfg, const QkvParams& p, int parts,
                           int part, int64_t q_chunks, int64_t partitions, int64_t width,
                           int64_t budget_bytes)
    : cfg_(&cfg), given_(p.qkv_w_scale.valid()), width_(width),
      banks_((cfg.i + width - 1) / width), quadrants_(partitions / mx::kQuadrantPartitions) {
  group_banks_ = GroupBanks(banks_, q_chunks * width, budget_bytes);
  groups_per_pass_ = (banks_ + group_banks_ - 1) / group_banks_;
  const int64_t cols = std::min(cfg.i, group_banks_ * width);
  for (int r = 0; r < (groups_per_pass_ == 1 ? 1 : 2); ++r) {
    ring_.push_back(core.AllocateSbuf("w_mx_scale", {partitions, q_chunks, cols}, DType::kUInt8));
    if (!given_) nisa::memset(ring_.back(), mx::kNeutralScale, Engine::kGpSimd);
  }
  // A quadrant's 32 partitions of x4 elements are 4 blocks: 4 scale rows.
  constexpr int64_t kRowsPerQuadrant = mx::kQuadrantPartitions / mx::kBlockPartitions;
  if (given_) {
    rows_ = p.qkv_w_scale.reshape({parts, q_chunks, quadrants_, kRowsPerQuadrant, cfg.i})
                .select(0, part);
  }
}

int64_t MxBankScales::GroupOf(int64_t k) const {
  return k / banks_ * groups_per_pass_ + k % banks_ / group_banks_;
}

int64_t MxBankScales::Groups(int64_t total) const {
  if (ring_.size() == 1) return std::min<int64_t>(total, 1);  // loaded once
  return total / banks_ * groups_per_pass_ + (total % banks_ + group_banks_ - 1) / group_banks_;
}

void MxBankScales::Prefetch(int64_t total, int64_t groups) {
  while (given_ && loaded_ < std::min({groups, int64_t{2}, Groups(total)})) Load(loaded_++);
}

Tile MxBankScales::Get(int64_t k) const {
  const int64_t b = k % banks_, c0 = b * width_, w = std::min(width_, cfg_->i - c0);
  const int64_t off = (b % group_banks_) * width_;
  return Slot(GroupOf(k)).slice(2, off, off + w);
}

void MxBankScales::Next(int64_t k, int64_t total) {
  if (!given_ || ring_.size() == 1) return;
  const int64_t b = k % banks_;
  const bool ends_group = b % group_banks_ == group_banks_ - 1 || b == banks_ - 1;
  const int64_t g = GroupOf(k);
  if (ends_group && g + 2 < Groups(total) && loaded_ == g + 2) Load(loaded_++);
}

void MxBankScales::Load(int64_t g) {
  const int64_t b0 = g % groups_per_pass_ * group_banks_;
  const int64_t c0 = b0 * width_, c1 = std::min(cfg_->i, (b0 + group_banks_) * width_);
  for (int64_t quadrant = 0; quadrant < quadrants_; ++quadrant) {
    const int64_t p0 = quadrant * mx::kQuadrantPartitions;
    const Tile dst = Slot(g).slice(0, p0, p0 + 4).slice(2, 0, c1 - c0);
    nisa::dma_copy(dst, rows_.select(1, quadrant).permute({1, 0, 2}).slice(2, c0, c1));
  }
}

}  // namespace nkisim::kernels
