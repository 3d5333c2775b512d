// QKV CTE (prefill), after qkv_cte.py: tokens on the partitions in tiles of up to 128 rows, the
// normalised input transposed on the PE array so H is the contraction, one fused matmul per
// column bank (<= 512 columns of I, a multiple of d with fused RoPE so no head straddles banks).
//
// LNC = 2 splits the token rows: when S < 640 * LNC the rows are B * S folded into one axis,
// otherwise each batch's sequence is split; shard 0 takes the floor half. A core with no rows
// only joins the final core_barrier (qkv_cte.py:447-451, 606-607).
//
// Loop order: tiles are grouped into blocks whose transposed inputs stay in SBUF; for each column
// bank, the bank's weight slab (H / 128 subtiles) streams through a WeightStream ring and serves
// every tile of the block, so the weights cross HBM once per block. Non-MX contracts H in the
// blocked order (HOrder::kBlocked: partition p takes consecutive weight rows, so whole-row chunks
// are one contiguous run a partition). One bank covering I is never narrowed; a slab too big for
// SBUF is cut along H into parts, each block tile holding its own PSUM bank (PlanCte). Bank 0 of
// a block also runs each tile's front end (CtePrologue), software-pipelined with the matmuls (see
// Run; the next block's first norm goes under this block's last matmuls). At eviction
// the bias and STATIC scales are applied (Epilogue), Q and K heads are rotated (half-sin RoPE, bias
// first), V is copied, and the bank's columns are stored (BSD rows, or whole heads for NBSd).
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/common/cte_prologue.h"
#include "kernels/qkv/epilogue.h"
#include "kernels/qkv/mx_scales.h"
#include "kernels/common/tiling.h"
#include "kernels/qkv/variants.h"
#include "runtime/cost_model.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

using nisa::AluOp;

constexpr int64_t kCteFoldSeqPerCore = 640;  // S < 640 * LNC folds [B, S] into B * S rows
constexpr int64_t kLookaheadChunks = 8;      // weight chunks prefetched past a bank's slab
constexpr int kEvictionRing = 3;             // eviction buffers in flight
// MX: banks whose weight scales load together. One: two banks a group took SBUF from the blocks
// and cost H 16384 a weight pass (1.75x -> 2.14x its floor).
constexpr int64_t kMxScaleGroupBanks = 1;
// A bank's store as four DMAs of a quarter of the rows on four queues: a quarter of the latency
// (which matters for the last one), and the queues have room to spare in a PE-bound kernel.
constexpr int64_t kStorePieces = 4;

struct RowTile {
  int64_t r0, n;
};

// This core's token rows, cut into tiles of at most `partitions` rows.
std::vector<RowTile> CoreRowTiles(const QkvConfig& cfg, int s) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  auto half = [&](int64_t lo, int64_t hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    ranges.emplace_back(s == 0 ? lo : mid, s == 0 ? mid : hi);
  };
  if (cfg.lnc == 1) {
    ranges.emplace_back(0, cfg.tokens);
  } else if (cfg.s < kCteFoldSeqPerCore * cfg.lnc) {
    half(0, cfg.tokens);
  } else {
    for (int64_t b = 0; b < cfg.b; ++b) half(b * cfg.s, (b + 1) * cfg.s);
  }
  std::vector<RowTile> tiles;
  for (const auto& [lo, hi] : ranges) {
    for (int64_t r = lo; r < hi; r += cfg.partitions)
      tiles.push_back({r, std::min(cfg.partitions, hi - r)});
  }
  return tiles;
}

struct CtePlan {
  int64_t width = 0;        // columns per accumulation group
  int64_t hc = 0;           // H subtiles per weight chunk
  int64_t h_chunks = 0;     // chunks per column bank
  int64_t block_tiles = 1;  // row tiles sharing one pass over the weights
  int64_t slots = 1;        // weight ring size
  // One bank only: the slab in `parts` runs of part_chunks chunks; each block tile accumulates in
  // its own PSUM bank over all parts, so only one part is resident at a time.
  int64_t parts = 1;
  int64_t part_chunks = 0;
};

// With one bank covering I, see below. Otherwise picks the widest column bank whose weight slab
// (plus lookahead) fits next to at least two tiles' transposed inputs; failing that, one tile per
// block, and the weights re-streamed for every tile. per_tile: SBUF bytes per partition each tile
// of a block holds; accumulators: PSUM banks for the matmuls.
CtePlan PlanCte(const QkvConfig& cfg, int64_t tiles, int64_t free_bytes, int64_t per_tile,
                int64_t dma_target, bool rope, int64_t accumulators) {
  const int64_t np = cfg.partitions, h1 = cfg.mx() ? cfg.mx_chunks() : cfg.h / np;
  const int64_t wbytes = static_cast<int64_t>(SizeOf(cfg.matmul_weight_dtype()));
  const int64_t unit = rope ? cfg.d : 1;
  const int64_t base = std::min(cfg.i, cfg.bank_cols / unit * unit);
  auto chunking = [&](int64_t width) {
    CtePlan plan;
    plan.width = width;
    plan.hc = std::clamp<int64_t>(dma_target / (np * width * wbytes), 1, h1);
    if (cfg.quant == QuantizationType::kStatic && h1 >= 2)
      plan.hc = std::max<int64_t>(2, plan.hc / 2 * 2);
    plan.h_chunks = (h1 + plan.hc - 1) / plan.hc;
    plan.part_chunks = plan.h_chunks;
    return plan;
  };
  // One bank covers every column: stream whole rows (each chunk one run of hc * I elements a
  // partition, kBlocked order) and never narrow the bank, which only cuts the runs and multiplies
  // the passes. A block's tiles each read the whole slab before it is released, so a block of
  // several tiles needs the slab resident; failing that, one tile a block through a ring (whole
  // rows re-streamed per tile: cheap next to the PE time at these widths).
  if (base >= cfg.i) {
    CtePlan plan = chunking(base);
    const int64_t slot_bytes = plan.hc * plan.width * wbytes;
    const int64_t slab = plan.h_chunks * slot_bytes;
    if (free_bytes - slab >= per_tile) {
      plan.slots = plan.h_chunks;
      plan.block_tiles = std::min(tiles, (free_bytes - slab) / per_tile);
      if (plan.block_tiles >= 2 || tiles == 1) return plan;
    } else {
      plan.slots = std::max<int64_t>(1, (free_bytes - per_tile) / slot_bytes);
    }
    // Too big for SBUF next to two tiles (H 16384 x I 512 is 128 KiB a partition): split the
    // slab along H into parts and hold each tile's sums in its own PSUM bank across the parts, so
    // a block of several tiles still reads each weight row once. The fewest parts that give two
    // tiles a block: at H 16384, I 512 (405B TP64, before the early next-block norm) two parts
    // of 64 KiB and blocks of 2 took 204.8 us; 3 parts 206.8, 4 parts (blocks of 3) 225.3, 16
    // parts (blocks of 4, a one-chunk ring) 274.9, one tile a block 257.6. Non-MX only (MX's
    // per-bank scale groups assume one pass over H).
    for (int64_t parts = 2; !cfg.mx() && tiles > 1 && parts <= plan.h_chunks; ++parts) {
      const int64_t part_chunks = (plan.h_chunks + parts - 1) / parts;
      const int64_t nb =
          std::min({tiles, accumulators, (free_bytes - part_chunks * slot_bytes) / per_tile});
      if (nb >= 2) {
        plan.parts = (plan.h_chunks + part_chunks - 1) / part_chunks;
        plan.part_chunks = part_chunks;
        plan.slots = part_chunks;
        plan.block_tiles = nb;
        break;
      }
    }
    return plan;
  }
  for (int64_t shift = 0; shift < 3 && tiles > 1; ++shift) {
    CtePlan plan = chunking(std::max(unit, (base >> shift) / unit * unit));
    const int64_t slot_bytes = plan.hc * plan.width * wbytes;
    plan.slots = plan.h_chunks + std::min(plan.h_chunks, kLookaheadChunks);
    const int64_t room = free_bytes - plan.slots * slot_bytes;
    if (room >= 2 * per_tile) {
      plan.block_tiles = std::min(tiles, room / per_tile);
      return plan;
    }
  }
  CtePlan plan = chunking(base);
  plan.slots = std::max<int64_t>(1, (free_bytes - per_tile) / (plan.hc * plan.width * wbytes));
  return plan;
}

// Fused RoPE on the Q and K heads of one eviction: out = X * cos + [-X2, X1] * sin_half, with
// cos [n, d] and only the first half of sin loaded per tile (qkv_cte.py:3141-3281).
class Rope {
 public:
  Rope(NeuronCore& core, const QkvConfig& cfg, const QkvParams& p, int64_t tiles, int64_t width)
      : cfg_(cfg), params_(p) {
    // One tile per row tile: the scoreboard tracks whole tiles, so a shared [P, tiles, d] tile
    // would make each tile's rotation wait for the caches of every tile loaded before it.
    for (int64_t t = 0; t < tiles; ++t) {
      cos_.push_back(core.AllocateSbuf("cos", {cfg.partitions, cfg.d}, p.cos_cache.dtype()));
      sin_.push_back(
          core.AllocateSbuf("sin_half", {cfg.partitions, cfg.d / 2}, p.sin_cache.dtype()));
    }
    for (Tile& t : tmp_)
      t = core.AllocateSbuf("rope_tmp", {cfg.partitions, width}, DType::kFloat32);
  }

  void Load(int64_t t, const RowTile& rows) {
    auto cache = [&](const TensorView& c, int64_t cols) {
      return c.reshape({cfg_.tokens, cfg_.d}).slice(0, rows.r0, rows.r0 + rows.n).slice(1, 0, cols);
    };
    const size_t i = static_cast<size_t>(t);
    nisa::dma_copy(cos_[i].slice(0, 0, rows.n), cache(params_.cos_cache, cfg_.d));
    nisa::dma_copy(sin_[i].slice(0, 0, rows.n), cache(params_.sin_cache, cfg_.d / 2));
  }

  // out and x: [n, heads * d]; x (fp32, evicted with bias) is overwritten.
  void Apply(const Tile& out, const Tile& x, int64_t t) {
    const int64_t n = x.partitions(), d = cfg_.d, h = d / 2, heads = x.free_size() / d;
    const Tile xv = x.reshape({heads, d});
    const Tile tv = tmp_[turn_++ % 2].slice(0, 0, n).slice(1, 0, heads * d).reshape({heads, d});
    const size_t i = static_cast<size_t>(t);
    const Tile cos = cos_[i].slice(0, 0, n).reshape({1, d}).broadcast(1, heads);
    const Tile sin = sin_[i].slice(0, 0, n).reshape({1, h}).broadcast(1, heads);
    nisa::scalar_tensor_tensor(tv.slice(2, 0, h), xv.slice(2, h, d), AluOp::kMultiply, -1.0f,
                               AluOp::kMultiply, sin);
    nisa::tensor_tensor(tv.slice(2, h, d), xv.slice(2, 0, h), sin, AluOp::kMultiply);
    nisa::tensor_tensor(xv, xv, cos, AluOp::kMultiply);
    nisa::tensor_tensor(out.reshape({heads, d}), xv, tv, AluOp::kAdd);
  }

 private:
  const QkvConfig& cfg_;
  const QkvParams& params_;
  std::vector<Tile> cos_, sin_;  // per row tile: [P, d] and [P, d / 2], in the caches' dtype
  Tile tmp_[2];
  int64_t turn_ = 0;
};

class CteRunner {
 public:
  CteRunner(NeuronCore& core, const QkvConfig& cfg, const QkvParams& p, const QkvResult& result,
            std::vector<RowTile> tiles);
  void Run();

 private:
  // Accumulates chunks [c_begin, c_end) of the slab at `first_chunk` (subtiles from c_begin hc).
  void Matmul(const Tile& acc, const Tile& x_t, int64_t n, int64_t first_chunk, int64_t c_begin,
              int64_t c_end, bool release);
  void MatmulMx(const Tile& acc, int64_t t, const Tile& w_scale, int64_t n, int64_t first_chunk,
                bool release);
  void Finish(const Tile& acc, const RowTile& rows, int64_t t, int64_t c0);

  const QkvConfig& cfg_;
  const std::vector<RowTile> tiles_;
  const bool rope_;
  const int buffers_;
  CtePrologue prologue_;
  Epilogue epilogue_;
  FusedOutput output_;
  std::vector<Tile> acc_, evicted_, out_;
  CtePlan plan_;
  std::vector<Tile> x_t_;   // [P, H / P, P]; MX: x4 [P, H / 4P, P]
  std::vector<Tile> x_ts_;  // MX: the E8M0 scales of x_t_, [P, H / 4P, P] uint8
  MxBankScales w_scales_;   // MX
  int64_t bank_seq_ = 0;    // MX: banks served so far (the scale ring's sequence)
  int64_t blocks_ = 1;      // passes over the weights
  std::unique_ptr<Rope> rotary_;
  std::unique_ptr<WeightStream> stream_;
  int64_t turn_ = 0;
};

// Whether one column bank covers all of I (PlanCte's whole-row plan).
bool OneBank(const QkvConfig& cfg, bool rope) {
  const int64_t unit = rope ? cfg.d : 1;
  return cfg.i <= cfg.bank_cols / unit * unit;
}

// Double-buffers the front end's row tiles when two fit in a quarter of SBUF, or a third for a
// non-MX one-bank plan: there the next tile's load then overlaps this tile's norm (H 16384, one
// bank, 405B TP64: 257.2 -> 204.8 us with the H parts below; the weight parts need less room than
// a second row buffer gives back).
int RowBuffers(const NeuronCore& core, const QkvConfig& cfg, int64_t tiles, bool rope) {
  const int64_t row = cfg.h * static_cast<int64_t>(SizeOf(cfg.compute_dtype));
  const int64_t share = !cfg.mx() && OneBank(cfg, rope) ? 3 : 4;
  const int64_t budget = static_cast<int64_t>(core.profile().sbuf_bytes_per_partition()) / share;
  const int64_t want = std::min<int64_t>(tiles, 2);
  return static_cast<int>(std::max<int64_t>(1, std::min(want, budget / row)));
}

CteRunner::CteRunner(NeuronCore& core, const QkvConfig& cfg, const QkvParams& p,
                     const QkvResult& result, std::vector<RowTile> tiles)
    : cfg_(cfg),
      tiles_(std::move(tiles)),
      rope_(p.fused_rope),
      buffers_(RowBuffers(core, cfg, static_cast<int64_t>(tiles_.size()), p.fused_rope)),
      prologue_(core, cfg, QkvFrontEndInputs(p), buffers_,
                cfg.mx() ? HOrder::kStrided : HOrder::kBlocked),
      epilogue_(core, cfg, p, cfg.partitions, cfg.compute_dtype, /*add_bias=*/true),
      output_(result.output, p.output_layout, cfg.d) {
  const int64_t np = cfg.partitions, bank = cfg.bank_cols;
  const HardwareProfile& prof = core.profile();
  for (int64_t i = 2; i < prof.psum_banks(); ++i)
    acc_.push_back(core.AllocatePsum("acc", {np, bank}));
  const int64_t xbytes = static_cast<int64_t>(SizeOf(prologue_.transposed_dtype()));
  // MX: a tile's x4 elements (4 B per 4 rows of H) and their scales (1 B each).
  // The RoPE caches are two allocations per tile (cos [P, d], sin [P, d / 2]), each rounded up
  // to the SBUF granule.
  const int64_t granule = static_cast<int64_t>(core.sbuf().granule());
  auto rounded = [granule](int64_t bytes) { return (bytes + granule - 1) / granule * granule; };
  const int64_t cache_bytes = static_cast<int64_t>(SizeOf(p.cos_cache.dtype()));
  const int64_t per_tile =
      (cfg.mx() ? cfg.h / 4 * 5 : cfg.h * xbytes) +
      (rope_ ? rounded(cfg.d * cache_bytes) + rounded(cfg.d / 2 * cache_bytes) : 0);
  const int64_t rope_tmp = rope_ ? 2 * bank * 4 : 0;
  // MxBankScales: a ring of two groups of kMxScaleGroupBanks banks (one DMA a quadrant a group).
  const int64_t mx_scale_ring = cfg.mx() ? 2 * kMxScaleGroupBanks * cfg.mx_chunks() * bank : 0;
  const int64_t ring_bytes =
      kEvictionRing * (rounded(bank * static_cast<int64_t>(SizeOf(cfg.out_dtype))) +
                       (rope_ ? rounded(bank * 4) : 0));
  plan_ = PlanCte(cfg, static_cast<int64_t>(tiles_.size()),
                  SbufFreeBytes(core) - rope_tmp - mx_scale_ring - ring_bytes, per_tile,
                  DmaTargetBytes(prof), rope_, static_cast<int64_t>(acc_.size()));
  for (int i = 0; i < kEvictionRing; ++i) {
    out_.push_back(core.AllocateSbuf("qkv_out", {np, bank}, cfg.out_dtype));
    if (rope_) evicted_.push_back(core.AllocateSbuf("qk_evicted", {np, bank}, DType::kFloat32));
  }
  const int64_t subtiles = cfg.mx() ? cfg.mx_chunks() : cfg.h / np;
  for (int64_t t = 0; t < plan_.block_tiles; ++t) {
    if (cfg.mx()) {
      x_t_.push_back(core.AllocateSbuf("x_t_mx", {np, subtiles, np}, DType::kFp8E4M3FNx4));
      x_ts_.push_back(core.AllocateSbuf("x_t_mx_scale", {np, subtiles, np}, DType::kUInt8));
    } else {
      x_t_.push_back(core.AllocateSbuf("x_t", {np, subtiles, np}, prologue_.transposed_dtype()));
    }
  }
  if (cfg.mx()) {
    w_scales_ = MxBankScales(core, cfg, p, 1, 0, subtiles, np, plan_.width, mx_scale_ring);
  }
  if (rope_) rotary_ = std::make_unique<Rope>(core, cfg, p, plan_.block_tiles, plan_.width);

  const int64_t banks = (cfg.i + plan_.width - 1) / plan_.width;
  const int64_t blocks =
      (static_cast<int64_t>(tiles_.size()) + plan_.block_tiles - 1) / plan_.block_tiles;
  blocks_ = blocks;
  // Non-MX: partition p contracts the consecutive rows [p H / P, (p + 1) H / P) (HOrder::kBlocked,
  // the order the prologue transposes x in), so a chunk of hc subtiles of whole rows is one run of
  // hc * I elements a partition; the strided order (row j P + p) cut it into hc runs of I.
  const TensorView w =
      cfg.mx() ? p.fused_qkv_weights.reshape({subtiles, np, cfg.i}).permute({1, 0, 2})
               : p.fused_qkv_weights.reshape({np, subtiles, cfg.i});
  const CtePlan plan = plan_;
  auto source = [w, plan, banks, i = cfg.i, h1 = subtiles](int64_t k) {
    const int64_t c0 = (k / plan.h_chunks) % banks * plan.width, j0 = k % plan.h_chunks * plan.hc;
    return w.slice(1, j0, std::min(h1, j0 + plan.hc)).slice(2, c0, std::min(i, c0 + plan.width));
  };
  const int64_t total = blocks * banks * plan_.h_chunks;
  stream_ = std::make_unique<WeightStream>(core, plan_.hc * plan_.width, cfg.matmul_weight_dtype(),
                                           total, std::min(plan_.slots, total), source);
}

// Program order decides each engine's order, so the front end is software-pipelined in the
// block's first bank: tile t + 1's norm (Scalar / Vector) is issued before tile t's matmuls and
// evictions, its transposes (PE) right after tile t's matmuls, and the load of the tile
// `buffers_` ahead right after the transposes that free its buffer.
void CteRunner::Run() {
  const int64_t ntiles = static_cast<int64_t>(tiles_.size());
  int64_t loaded = 0;
  // A tile's RoPE caches load with its rows when the tile is in the current block (their
  // buffers are per block position, still read by the block before), else at the block's start.
  int64_t rope_next = 0, block_end = std::min(plan_.block_tiles, ntiles);
  auto load_rope = [&] {
    for (; rope_ && rope_next < std::min(loaded, block_end); ++rope_next) {
      rotary_->Load(rope_next % plan_.block_tiles, tiles_[rope_next]);
    }
  };
  auto load_next = [&] {
    if (loaded == ntiles) return;
    prologue_.Load(static_cast<int>(loaded % buffers_), tiles_[loaded].r0, tiles_[loaded].n);
    ++loaded;
    load_rope();
  };
  auto prepare = [&](int64_t g) {
    prologue_.Prepare(static_cast<int>(g % buffers_));
  };
  auto transpose = [&](int64_t g, int64_t t) {
    if (cfg_.mx()) {
      prologue_.TransposeMx(static_cast<int>(g % buffers_), x_t_[t], x_ts_[t]);
    } else {
      prologue_.Transpose(static_cast<int>(g % buffers_), x_t_[t]);
    }
    load_next();
  };
  const int64_t banks = (cfg_.i + plan_.width - 1) / plan_.width;
  while (loaded < std::min<int64_t>(buffers_, ntiles)) load_next();
  if (cfg_.mx()) w_scales_.Prefetch(blocks_ * banks);
  stream_->Start();  // after the first tiles' loads on the HBM port
  // One cell: tile t of the block against column bank `bank` (the slab at chunk `first_chunk`).
  // With transpose_next, the next tile's front-end transposes go between the matmuls and the
  // eviction.
  // With plan_.parts > 1 (one bank), the cell of part `part` accumulates that part's chunks into
  // tile t's own PSUM bank, and only the last part evicts.
  auto cell = [&](int64_t first, int64_t t, int64_t nb, int64_t bank, int64_t first_chunk,
                  const Tile& ws, bool transpose_next, int64_t part = 0) {
    const int64_t c0 = bank * plan_.width, width = std::min(plan_.width, cfg_.i - c0);
    const RowTile& rows = tiles_[first + t];
    const size_t a = plan_.parts > 1 ? static_cast<size_t>(t) : turn_ % acc_.size();
    const Tile acc = acc_[a].slice(0, 0, rows.n).slice(1, 0, width);
    if (cfg_.mx()) {
      MatmulMx(acc, t, ws.slice(2, 0, width), rows.n, first_chunk, /*release=*/t == nb - 1);
    } else {
      const int64_t c_begin = part * plan_.part_chunks;
      Matmul(acc, x_t_[t], rows.n, first_chunk, c_begin,
             std::min(plan_.h_chunks, c_begin + plan_.part_chunks), /*release=*/t == nb - 1);
    }
    if (transpose_next) transpose(first + t + 1, t + 1);
    if (part + 1 < plan_.parts) return;
    Finish(acc, rows, t, c0);
    ++turn_;
  };
  int64_t chunk = 0;
  // The next block's first norm is issued before the last cell of this block's final pass (its
  // rows are loaded by then), so the Scalar / Vector work overlaps the PE's last matmuls instead
  // of leaving the PE idle at the block boundary (405B TP64: 20 us a block).
  int64_t prepared = -1;
  auto prepare_next_block = [&](int64_t next) {
    if (next < ntiles && loaded > next && prepared != next) {
      prepare(next);
      prepared = next;
    }
  };
  for (int64_t first = 0; first < ntiles; first += plan_.block_tiles) {
    const int64_t nb = std::min(plan_.block_tiles, ntiles - first);
    block_end = first + nb;
    load_rope();
    if (prepared != first) prepare(first);
    transpose(first, 0);
    // Bank 0 runs tile by tile with the front end: tile t + 1's norm before tile t's matmuls,
    // its transposes right after them.
    const Tile ws0 = cfg_.mx() ? w_scales_.Get(bank_seq_) : Tile();
    for (int64_t part = 0; part < plan_.parts; ++part) {
      for (int64_t t = 0; t < nb; ++t) {
        const bool front = part == 0 && t + 1 < nb;
        if (front) prepare(first + t + 1);
        if (banks == 1 && part + 1 == plan_.parts && t + 1 == nb) prepare_next_block(first + nb);
        cell(first, t, nb, 0, chunk, ws0, front, part);
      }
    }
    if (cfg_.mx()) w_scales_.Next(bank_seq_++, blocks_ * banks);
    chunk += plan_.h_chunks;
    for (int64_t bank = 1; bank < banks; ++bank, chunk += plan_.h_chunks) {
      const Tile w_scale = cfg_.mx() ? w_scales_.Get(bank_seq_) : Tile();
      for (int64_t t = 0; t < nb; ++t) {
        if (bank + 1 == banks && t + 1 == nb) prepare_next_block(first + nb);
        cell(first, t, nb, bank, chunk, w_scale, false);
      }
      if (cfg_.mx()) w_scales_.Next(bank_seq_++, blocks_ * banks);
    }
  }
}

void CteRunner::Matmul(const Tile& acc, const Tile& x_t, int64_t n, int64_t first_chunk,
                       int64_t c_begin, int64_t c_end, bool release) {
  const bool double_row = cfg_.quant == QuantizationType::kStatic;
  for (int64_t c = c_begin; c < c_end; ++c) {
    const Tile w = stream_->Get(first_chunk + c);
    const int64_t subtiles = w.free_shape()[0];
    for (int64_t jj = 0; jj < subtiles;) {
      const int64_t j = c * plan_.hc + jj;
      const int64_t step = double_row && jj + 1 < subtiles ? 2 : 1;
      nisa::MatmulOptions options{.accumulate = j > 0};
      if (step == 2) {
        options.perf_mode = nisa::PerfMode::kDoubleRow;
        nisa::nc_matmul(acc, x_t.slice(1, j, j + 2).slice(2, 0, n), w.slice(1, jj, jj + 2),
                        options);
      } else {
        nisa::nc_matmul(acc, x_t.select(1, j).slice(1, 0, n), w.select(1, jj), options);
      }
      jj += step;
    }
    if (release) stream_->Release(first_chunk + c);
  }
}

void CteRunner::MatmulMx(const Tile& acc, int64_t t, const Tile& w_scale, int64_t n,
                         int64_t first_chunk, bool release) {
  for (int64_t c = 0; c < plan_.h_chunks; ++c) {
    const Tile w = stream_->Get(first_chunk + c);
    for (int64_t jj = 0; jj < w.free_shape()[0]; ++jj) {
      const int64_t j = c * plan_.hc + jj;
      nisa::nc_matmul_mx(acc, x_t_[t].select(1, j).slice(1, 0, n), w.select(1, jj),
                         x_ts_[t].select(1, j).slice(1, 0, n), w_scale.select(1, j),
                         {.accumulate = j > 0});
    }
    if (release) stream_->Release(first_chunk + c);
  }
}

void CteRunner::Finish(const Tile& acc, const RowTile& rows, int64_t t, int64_t c0) {
  const int64_t n = rows.n, width = acc.free_size();
  const size_t slot = static_cast<size_t>(turn_ % static_cast<int64_t>(out_.size()));
  const Tile out = out_[slot].slice(0, 0, n).slice(1, 0, width);
  // Columns [0, rotated) of this bank are Q or K heads to rotate; the rest are copied.
  const int64_t qk_end = rope_ ? (cfg_.n_q + cfg_.n_kv) * cfg_.d : 0;
  const int64_t rotated = std::clamp<int64_t>(qk_end - c0, 0, width);
  if (rotated > 0) {
    const Tile x = evicted_[slot].slice(0, 0, n).slice(1, 0, rotated);
    epilogue_.Evict(x, acc.slice(1, 0, rotated), c0, Engine::kScalar);
    rotary_->Apply(out.slice(1, 0, rotated), x, t);
  }
  if (rotated < width) {
    epilogue_.Evict(out.slice(1, rotated, width), acc.slice(1, rotated, width), c0 + rotated,
                    rope_ ? Engine::kScalar : Engine::kVector);
  }
  output_.Store(out, rows.r0, c0, kStorePieces);
}

}  // namespace

void QkvCteKernel(const KernelContext& ctx, const QkvConfig& cfg, const QkvParams& params,
                  const QkvResult& result) {
  std::vector<RowTile> tiles = CoreRowTiles(cfg, ctx.prg_id);
  if (!tiles.empty()) CteRunner(ctx.core, cfg, params, result, std::move(tiles)).Run();
  nisa::core_barrier();
}

}  // namespace nkisim::kernels
