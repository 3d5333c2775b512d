// MLP CTE (prefill): the tokens in 128-row tiles, up to four tiles (512 tokens, one PSUM bank of
// fp32 columns) per block, fewer where x_t would take more than 64 KiB a partition (BlockTiles);
// core s of L takes the tokens [s T / L, (s + 1) T / L).
//   front end (kernels/common/cte_prologue.h, shared with QKV CTE): each tile's rows are loaded,
//     the residual added (and stored as fused_hidden), normalised, and PE-transposed into
//     x_t [128 H rows, H / 128, block tokens], gamma / beta applied at the eviction;
//   gate / up: per 128-row chunk of I, weights stationary [128 H rows, 128 I], x_t moving
//     [128 H rows, block tokens] -> [I rows, 512 tokens] in one bank; all H subtiles of gate, then
//     of up, so one bank each suffices: act(gate) runs on Scalar while up accumulates, act * up on
//     Vector while the next chunk's gate does; h^T [I rows, I chunks, block tokens]. The weights
//     stream in groups of up to 4 I chunks (512 columns of each row: 1 KiB runs in bf16, where a
//     128-column chunk's 256 B runs made the DMA engines, not the PE, the bound), resident in the
//     ring while the PE takes the group's chunks one by one;
//   down: per 512-column bank of H and I chunk, one moving weight chunk [128 I rows, 512] is used
//     by the block's four tiles (stationary h^T [128 I rows, 128 tokens]) into four banks, so
//     down_w streams once per block; each tile's bank is evicted (+ down bias) and stored.
// PSUM: 2 banks for the front end's transposes, 2 for gate / up, 4 for down: all 8.
// Short blocks (BlockTiles: no wider than a core's tokens, halved where that pays): x_t's H
// subtiles in blocked order (partition p: rows p H/128 ...), and where the banks left hold an
// accumulator per I chunk, gate / up run H-outer ("wide", see wide_) over chunks of whole weight
// rows, one contiguous run a partition; down then takes up to 4 banks of columns at once.
// Every weight streams once per block of 512 tokens through one WeightStream ring; the front end
// of the next block (loads, residual add, norm) is issued early so it runs on the DMA queues,
// Scalar and Vector while the PE works on this block; its PE transposes follow this block's down.
#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/common/cte_prologue.h"
#include "kernels/common/tiling.h"
#include "kernels/mlp/gate_up.h"
#include "kernels/mlp/variants.h"
#include "kernels/mlp/weights.h"
#include "runtime/cost_model.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

struct Block {
  int64_t r0 = 0, rows = 0;  // token rows [r0, r0 + rows)
};

// x_t holds the whole H of a block's tokens; its bytes per partition are kept within 64 KiB
// (29% of trn2's 224 KiB partition: what H 8192 in bf16 takes at 512 tokens), leaving the rest to
// h^T, the front end's tiles and the weight ring. Four tiles (512 tokens, one fp32 PSUM bank) up to
// H 8192 in bf16; fewer above (H 16384: two tiles, 256 tokens a block, so every weight streams
// twice as often).
constexpr int64_t kXtBytesPerPartition = 64 * 1024;

// PSUM banks the front end's transposes take (CtePrologue).
constexpr int64_t kPrologueBanks = 2;

// Whether blocks of `tiles` tiles take gate / up H-outer over all of I (CteProgram's wide_, pair
// or shared): one accumulator [I rows, block tokens] per I chunk in the banks the front end and
// down (one a tile) leave, for gate and up, or for gate alone.
bool WideTakesAllOfI(const MlpConfig& cfg, const HardwareProfile& prof, int64_t tiles) {
  const int64_t per_bank = cfg.bank_cols / (tiles * cfg.partitions);
  const int64_t free_banks = static_cast<int64_t>(prof.psum_banks()) - kPrologueBanks - tiles;
  return per_bank >= 1 && cfg.i_chunks() >= 2 && free_banks * per_bank >= cfg.i_chunks();
}

// At most the tiles one core's tokens fill (S 128 on one core: one tile), so a short prefill
// neither reserves x_t nor PSUM banks it does not use. Where the widest block does not take gate /
// up over all of I but half of it does (H 8192, I 896: 256 tokens), the half, if the PE's work on
// a half block (MatmulNs) still outlasts the weights' HBM time (HbmTransferNs): every weight then
// streams twice as often, but in contiguous runs of whole rows (S 2048 on one core on trn2: 1.25x
// its engine floor with blocks of 512, 1.09x with 256; trn1 3.65x, 1.80x), and the PE, not the
// weight stream, still sets the pace (H 8192, I 896: the PE's 144 us against the weights' 121 us
// a half block; H 4096, I 3584 keeps 512: all of I fits no block).
int64_t BlockTiles(const MlpConfig& cfg, const HardwareProfile& prof) {
  const int64_t tile_bytes =
      cfg.h / cfg.partitions * cfg.partitions * static_cast<int64_t>(SizeOf(cfg.compute_dtype));
  int64_t tiles = std::max<int64_t>(1, cfg.bank_cols / cfg.partitions);
  while (tiles > 1 && tiles * tile_bytes > kXtBytesPerPartition) tiles /= 2;
  const int64_t per_core = (cfg.tokens + cfg.lnc - 1) / cfg.lnc;
  tiles = std::min(tiles, std::max<int64_t>(1, (per_core + cfg.partitions - 1) / cfg.partitions));
  if (tiles < 2 || WideTakesAllOfI(cfg, prof, tiles) || !WideTakesAllOfI(cfg, prof, tiles / 2)) {
    return tiles;
  }
  const int64_t half = tiles / 2, subtiles = cfg.h / cfg.partitions, ic = cfg.i_chunks();
  const DType dt = cfg.matmul_weight_dtype();
  const double pe_ns =
      2.0 * static_cast<double>(subtiles * ic) * MatmulNs(prof, half * cfg.partitions, dt) +
      static_cast<double>((cfg.h + cfg.bank_cols - 1) / cfg.bank_cols * ic * half) *
          MatmulNs(prof, cfg.bank_cols, dt);
  const int64_t weight_bytes = 3 * cfg.h * cfg.i * static_cast<int64_t>(SizeOf(dt));
  return pe_ns >= HbmTransferNs(prof, weight_bytes) ? half : tiles;
}

// I chunks of 128 columns a gate / up group takes at most: 4 (runs of 1 KiB a row in bf16).
constexpr int64_t kMaxGateUpGroup = 4;

class CteProgram {
 public:
  CteProgram(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& p,
             const MlpResult& result);
  void Run();

 private:
  int64_t TileRows(const Block& b, int64_t i) const {
    return std::min(cfg_.partitions, b.rows - i * cfg_.partitions);
  }
  void Load(const Block& b);
  void Prepare(const Block& b);
  void Transpose(const Block& b);
  // gate / up of block k's I chunks, a group at a time (see GateUpGroup).
  void GateUp(size_t k, const Block* next);
  // acc = the products of I chunk c over the stream's chunks [first, first + count) (all H
  // subtiles of one weight, the group's columns: c's are [col, col + rows)).
  // release: each chunk is released once read (a group of one I chunk, whose chunks need not all
  // be resident at once).
  void Accumulate(const Tile& acc, const Block& b, int64_t c, int64_t first, int64_t count,
                  int64_t col, bool release);
  // Builds one block's chunk list with gate / up groups of `group` I chunks.
  void BuildChunks(int64_t group);
  // Wide gate / up (short blocks, see wide_): the chunks of I chunks [c0, c1) of one weight hold
  // whole rows; each is read once, every subtile by the PE into all the group's accumulators.
  void BuildWideChunks();
  void AccumulateWide(int64_t weight, const Block& b, int64_t c0, int64_t c1, int64_t chunks);
  void GateUpWide(size_t k, const Block* next);
  Tile WideAcc(int64_t weight, int64_t c, const Block& b) const;
  void Down(const Block& b);

  NeuronCore& core_;
  const MlpConfig& cfg_;
  const MlpParams& p_;
  const MlpResult& result_;
  int64_t block_tiles_;
  std::vector<Block> blocks_;
  std::unique_ptr<CtePrologue> prologue_;
  std::unique_ptr<kernels::GateUp> gate_up_;
  std::unique_ptr<DownTerms> down_terms_;
  Tile x_t_;                // [P, H / P, block tokens] compute dtype
  Tile h_t_;                // [P, I chunks, block tokens] compute dtype
  Tile acc_gate_, acc_up_;  // [P, block tokens] PSUM
  // Down takes `slabs_` banks of 512 output columns a tile at once (wide: the gate / up banks too,
  // free once h is evicted, so a down chunk's rows are runs of slabs_ x 1 KiB in bf16, not 1 KiB).
  std::vector<Tile> acc_down_;  // bank s of tile i at i * slabs_ + s: [P, bank] PSUM
  std::vector<Tile> out_;       // per tile of a block and buffer: [P, down_cols_] I/O dtype
  int64_t slabs_ = 1, down_cols_ = 0, out_buffers_ = 1, outs_ = 0;
  // Gate / up stream as groups of I chunks: the chunks hold all of the group's columns of a
  // weight's rows (runs of group x 256 B a row in bf16, where one 128-column chunk's were 256 B:
  // the DMA engines then spent more time on descriptors than the PE on its matmuls), and stay
  // resident while the PE takes the group's I chunks one by one.
  struct GateUpGroup {
    int64_t c0, c1;                         // I chunks [c0, c1)
    int64_t first, gate_chunks, up_chunks;  // stream chunks (of a block): gate's, then up's
  };
  std::vector<GateUpGroup> groups_;
  std::vector<TensorView> chunks_;  // one block's weight chunks, in consumption order
  int64_t per_block_ = 0;           // chunks per block
  std::unique_ptr<WeightStream> stream_;
  int evictions_ = 0;
  // Wide gate / up, where the PSUM banks the front end and down leave hold an accumulator
  // [I rows, block tokens] for at least two I chunks of each of gate and up (S 128 on one core: all
  // seven of I 896 in four banks): the PE takes H outermost, each weight chunk of consecutive H
  // rows (cfg h_blocked) x all the group's I columns is read once and released; with all of I in
  // one group a partition's rows of a chunk are one contiguous run (7 KiB for I 896 in bf16), where
  // the I-chunk-outer order reads runs of one 128-column chunk of a row (256 B).
  // Where gate's and up's accumulators for all of I do not fit together but gate's alone do (S 256
  // on one core: 7 of 256 tokens in 4 banks), up reuses gate's (shared_): act(gate) is evicted to
  // act_ (SBUF fp32) first, and act * up once up is done.
  int64_t wide_ = 0;  // I chunks a wide group takes (0: the I-chunk-outer order)
  bool shared_ = false;
  Tile act_;                          // shared_: [P, wide_, block tokens] fp32
  int64_t acc_per_bank_ = 0;          // accumulators of block tokens in one bank
  std::vector<Tile> wide_banks_;      // gate's banks, then up's: [P, bank] PSUM
  std::vector<int64_t> wide_chunks_;  // per wide group: stream chunks of each weight
};

CteProgram::CteProgram(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& p,
                       const MlpResult& result)
    : core_(ctx.core), cfg_(cfg), p_(p), result_(result), block_tiles_(BlockTiles(cfg, ctx.core.profile())) {
  const int64_t r0 = ctx.prg_id * cfg.tokens / cfg.lnc;
  const int64_t r1 = (ctx.prg_id + 1) * cfg.tokens / cfg.lnc;
  const int64_t step = block_tiles_ * cfg.partitions;
  for (int64_t r = r0; r < r1; r += step) blocks_.push_back({r, std::min(step, r1 - r)});
}

void CteProgram::Load(const Block& b) {
  for (int64_t i = 0; i * cfg_.partitions < b.rows; ++i) {
    prologue_->Load(static_cast<int>(i), b.r0 + i * cfg_.partitions, TileRows(b, i));
  }
}

void CteProgram::Prepare(const Block& b) {
  for (int64_t i = 0; i * cfg_.partitions < b.rows; ++i) prologue_->Prepare(static_cast<int>(i));
}

void CteProgram::Transpose(const Block& b) {
  const int64_t np = cfg_.partitions;
  for (int64_t i = 0; i * np < b.rows; ++i) {
    prologue_->Transpose(static_cast<int>(i), x_t_.slice(2, i * np, i * np + TileRows(b, i)));
  }
}

// acc[:rows_c, :tokens] = sum over H subtiles j of W[:, j, chunk c]^T x_t[:, j, :].
void CteProgram::Accumulate(const Tile& acc, const Block& b, int64_t c, int64_t first,
                            int64_t count, int64_t col, bool release) {
  const int64_t rows = cfg_.i_rows(c);
  const Tile dst = acc.slice(0, 0, rows).slice(1, 0, b.rows);
  int64_t j = 0;
  for (int64_t k = first; k < first + count; ++k) {
    const Tile w = stream_->Get(k);
    for (int64_t jj = 0; jj < w.free_shape()[0]; ++jj, ++j) {
      nisa::nc_matmul(dst, w.select(1, jj).slice(1, col, col + rows),
                      x_t_.select(1, j).slice(1, 0, b.rows), {.accumulate = j > 0});
    }
    if (release) stream_->PopFront();
  }
}

void CteProgram::GateUp(size_t k, const Block* next) {
  const Block& b = blocks_[k];
  const int64_t np = cfg_.partitions;
  for (const GateUpGroup& g : groups_) {
    const int64_t base = static_cast<int64_t>(k) * per_block_ + g.first;
    const bool single = g.c1 - g.c0 == 1;  // each chunk read once: released as it is done
    for (int64_t c = g.c0; c < g.c1; ++c) {
      const int64_t rows = cfg_.i_rows(c), col = (c - g.c0) * np;
      Accumulate(acc_gate_, b, c, base, g.gate_chunks, col, single);
      Accumulate(acc_up_, b, c, base + g.gate_chunks, g.up_chunks, col, single);
      gate_up_->Apply(h_t_.select(1, c).slice(0, 0, rows).slice(1, 0, b.rows),
                      acc_gate_.slice(0, 0, rows).slice(1, 0, b.rows),
                      acc_up_.slice(0, 0, rows).slice(1, 0, b.rows), c);
      // The next block's residual add and norm go on Scalar / Vector after this block's first
      // activation, so they run under this block's matmuls.
      if (c == 0 && next != nullptr) Prepare(*next);
    }
    for (int64_t n = 0; !single && n < g.gate_chunks + g.up_chunks; ++n) stream_->PopFront();
  }
}

Tile CteProgram::WideAcc(int64_t weight, int64_t c, const Block& b) const {
  const int64_t per = (wide_ + acc_per_bank_ - 1) / acc_per_bank_, q = c % wide_;
  const int64_t tokens = block_tiles_ * cfg_.partitions, at = q % acc_per_bank_ * tokens;
  return wide_banks_[static_cast<size_t>((shared_ ? 0 : weight) * per + q / acc_per_bank_)]
      .slice(0, 0, cfg_.i_rows(c))
      .slice(1, at, at + b.rows);
}

// acc(weight, c) = sum over H subtiles j of W[:, j, I chunk c]^T x_t[:, j, :] for c in [c0, c1),
// j outermost: the front `chunks` chunks of the stream, each released once read.
void CteProgram::AccumulateWide(int64_t weight, const Block& b, int64_t c0, int64_t c1,
                                int64_t chunks) {
  const int64_t np = cfg_.partitions;
  int64_t j = 0;
  for (int64_t k = 0; k < chunks; ++k, stream_->PopFront()) {
    const Tile w = stream_->Front();
    for (int64_t jj = 0; jj < w.free_shape()[0]; ++jj, ++j) {
      const Tile moving = x_t_.select(1, j).slice(1, 0, b.rows);
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t col = (c - c0) * np;
        nisa::nc_matmul(WideAcc(weight, c, b), w.select(1, jj).slice(1, col, col + cfg_.i_rows(c)),
                        moving, {.accumulate = j > 0});
      }
    }
  }
}

void CteProgram::GateUpWide(size_t k, const Block* next) {
  const Block& b = blocks_[k];
  for (size_t g = 0; g < wide_chunks_.size(); ++g) {
    const int64_t c0 = static_cast<int64_t>(g) * wide_;
    const int64_t c1 = std::min(cfg_.i_chunks(), c0 + wide_);
    AccumulateWide(0, b, c0, c1, wide_chunks_[g]);
    if (shared_) {
      auto act = [&](int64_t c) {
        return act_.select(1, c - c0).slice(0, 0, cfg_.i_rows(c)).slice(1, 0, b.rows);
      };
      for (int64_t c = c0; c < c1; ++c) gate_up_->Activate(act(c), WideAcc(0, c, b), c);
      AccumulateWide(1, b, c0, c1, wide_chunks_[g]);
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t rows = cfg_.i_rows(c);
        gate_up_->Combine(h_t_.select(1, c).slice(0, 0, rows).slice(1, 0, b.rows), WideAcc(1, c, b),
                          act(c), c);
        if (c == 0 && next != nullptr) Prepare(*next);
      }
      continue;
    }
    AccumulateWide(1, b, c0, c1, wide_chunks_[g]);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t rows = cfg_.i_rows(c);
      gate_up_->Apply(h_t_.select(1, c).slice(0, 0, rows).slice(1, 0, b.rows), WideAcc(0, c, b),
                      WideAcc(1, c, b), c);
      if (c == 0 && next != nullptr) Prepare(*next);
    }
  }
}

void CteProgram::BuildWideChunks() {
  const int64_t np = cfg_.partitions;
  chunks_.clear();
  wide_chunks_.clear();
  // Blocked H (cfg h_blocked): partition p's subtile j is row p * (H / P) + j.
  const TensorView g = p_.gate_w.reshape({np, cfg_.h / np, cfg_.i});
  const TensorView u = p_.up_w.reshape({np, cfg_.h / np, cfg_.i});
  for (int64_t c0 = 0; c0 < cfg_.i_chunks(); c0 += wide_) {
    const int64_t c1 = std::min(cfg_.i, (c0 + wide_) * np);
    const int64_t first = static_cast<int64_t>(chunks_.size());
    AppendGateUpChunks(g, c0 * np, c1, cfg_, core_.profile(), &chunks_);
    const int64_t gate = static_cast<int64_t>(chunks_.size()) - first;
    AppendGateUpChunks(u, c0 * np, c1, cfg_, core_.profile(), &chunks_);
    wide_chunks_.push_back(gate);
  }
  for (int64_t h0 = 0; h0 < cfg_.h; h0 += down_cols_) {
    AppendDownChunks(p_.down_w, h0, std::min(cfg_.h, h0 + down_cols_), cfg_, core_.profile(),
                     &chunks_);
  }
  per_block_ = static_cast<int64_t>(chunks_.size());
}

void CteProgram::BuildChunks(int64_t group) {
  const int64_t np = cfg_.partitions;
  chunks_.clear();
  groups_.clear();
  // Blocked H (cfg h_blocked): partition p's subtile j is row p * (H / P) + j.
  const TensorView g = p_.gate_w.reshape({np, cfg_.h / np, cfg_.i});
  const TensorView u = p_.up_w.reshape({np, cfg_.h / np, cfg_.i});
  for (int64_t c0 = 0; c0 < cfg_.i_chunks(); c0 += group) {
    const int64_t c1 = std::min(cfg_.i_chunks(), c0 + group);
    const int64_t first = static_cast<int64_t>(chunks_.size());
    AppendGateUpChunks(g, c0 * np, std::min(cfg_.i, c1 * np), cfg_, core_.profile(), &chunks_);
    const int64_t gate = static_cast<int64_t>(chunks_.size()) - first;
    AppendGateUpChunks(u, c0 * np, std::min(cfg_.i, c1 * np), cfg_, core_.profile(), &chunks_);
    groups_.push_back({c0, c1, first, gate, static_cast<int64_t>(chunks_.size()) - first - gate});
  }
  for (int64_t h0 = 0; h0 < cfg_.h; h0 += down_cols_) {
    AppendDownChunks(p_.down_w, h0, std::min(cfg_.h, h0 + cfg_.bank_cols), cfg_, core_.profile(),
                     &chunks_);
  }
  per_block_ = static_cast<int64_t>(chunks_.size());
}

void CteProgram::Down(const Block& b) {
  const int64_t np = cfg_.partitions, tiles = (b.rows + np - 1) / np, bank = cfg_.bank_cols;
  const TensorView out = result_.output.reshape({cfg_.tokens, cfg_.h});
  auto acc = [&](int64_t i, int64_t s, int64_t n, int64_t w) {
    return acc_down_[static_cast<size_t>(i * slabs_ + s)].slice(0, 0, n).slice(1, 0, w);
  };
  for (int64_t h0 = 0; h0 < cfg_.h; h0 += down_cols_) {
    const int64_t width = std::min(down_cols_, cfg_.h - h0);
    for (int64_t c = 0; c < cfg_.i_chunks(); stream_->PopFront()) {
      const Tile w = stream_->Front();
      for (int64_t q = 0; q < w.free_shape()[0]; ++q, ++c) {
        const Tile stationary = h_t_.select(1, c).slice(0, 0, w.partitions());
        for (int64_t s = 0; s * bank < width; ++s) {
          const int64_t x0 = s * bank, x1 = std::min(width, x0 + bank);
          for (int64_t i = 0; i < tiles; ++i) {
            const int64_t n = TileRows(b, i);
            nisa::nc_matmul(acc(i, s, n, x1 - x0), stationary.slice(1, i * np, i * np + n),
                            w.select(1, q).slice(1, x0, x1), {.accumulate = c > 0});
          }
        }
      }
    }
    const int64_t buffer = outs_++ % out_buffers_;
    for (int64_t i = 0; i < tiles; ++i) {
      const int64_t n = TileRows(b, i), r0 = b.r0 + i * np;
      const Tile dst = out_[static_cast<size_t>(i * out_buffers_ + buffer)].slice(0, 0, n);
      for (int64_t x0 = 0; x0 < width; x0 += bank) {
        const int64_t x1 = std::min(width, x0 + bank);
        Evict(dst.slice(1, x0, x1), acc(i, x0 / bank, n, x1 - x0),
              down_terms_->Cut(n, h0 + x0, x1 - x0),
              evictions_++ % 2 == 0 ? Engine::kVector : Engine::kScalar);
      }
      nisa::dma_copy(out.slice(0, r0, r0 + n).slice(1, h0, h0 + width), dst.slice(1, 0, width));
    }
  }
}

void CteProgram::Run() {
  if (blocks_.empty()) return;
  const int64_t np = cfg_.partitions, tokens = block_tiles_ * np;
  FrontEndConfig front = FrontEnd(cfg_);
  front.h_blocked = true;
  prologue_ = std::make_unique<CtePrologue>(core_, front, FrontEndInputsOf(p_),
                                            static_cast<int>(block_tiles_));
  if (p_.store_fused_hidden) prologue_->StoreFusedHidden(result_.fused_hidden);
  x_t_ = core_.AllocateSbuf("x_t", {np, cfg_.h / np, tokens}, cfg_.compute_dtype);
  h_t_ = core_.AllocateSbuf("h_t", {np, cfg_.i_chunks(), tokens}, cfg_.compute_dtype);
  const HardwareProfile& prof = core_.profile();
  const int64_t free_banks =
      static_cast<int64_t>(prof.psum_banks()) - kPrologueBanks - block_tiles_;
  acc_per_bank_ = cfg_.bank_cols / tokens;
  const int64_t pair = std::min(cfg_.i_chunks(), free_banks / 2 * acc_per_bank_);
  // The wide order hands down the banks gate / up leave: at least one a tile of the block, or
  // no slab fits (a 4-tile block with 2 free banks: the I-chunk-outer order instead).
  const bool down_fits = free_banks >= block_tiles_;
  shared_ = down_fits && pair < cfg_.i_chunks() && free_banks * acc_per_bank_ >= cfg_.i_chunks();
  wide_ = !down_fits ? 0 : shared_ ? cfg_.i_chunks() : pair >= 2 ? pair : 0;
  if (shared_) act_ = core_.AllocateSbuf("act_all", {np, wide_, tokens}, DType::kFloat32);
  if (wide_ > 0) {
    const int64_t per = (wide_ + acc_per_bank_ - 1) / acc_per_bank_;
    for (int64_t b = 0; b < (shared_ ? 1 : 2) * per; ++b) {
      wide_banks_.push_back(
          core_.AllocatePsum(b < per ? "gate_acc" : "up_acc", {np, cfg_.bank_cols}));
    }
  } else {
    acc_gate_ = core_.AllocatePsum("gate_acc", {np, tokens});
    acc_up_ = core_.AllocatePsum("up_acc", {np, tokens});
  }
  // Wide: down's banks are the ones the front end and gate / up leave plus gate / up's (read by
  // then), a whole number of slabs a tile, and two output buffers a tile so a slab's eviction
  // does not wait for the previous one's store.
  const int64_t own =
      wide_ > 0 ? free_banks - static_cast<int64_t>(wide_banks_.size()) : block_tiles_;
  if (wide_ > 0) {
    const int64_t banks = own + static_cast<int64_t>(wide_banks_.size());
    // At most one DMA descriptor of row a partition (4 KiB: 4 slabs in bf16): a longer run costs a
    // second descriptor for less than its bytes' worth.
    const int64_t slab_bytes =
        cfg_.bank_cols * static_cast<int64_t>(SizeOf(cfg_.matmul_weight_dtype()));
    const int64_t most =
        std::max<int64_t>(1, static_cast<int64_t>(prof.dma_descriptor_max_bytes()) / slab_bytes);
    slabs_ = std::min({(cfg_.h + cfg_.bank_cols - 1) / cfg_.bank_cols, banks / block_tiles_, most});
    out_buffers_ = 2;
  }
  down_cols_ = slabs_ * cfg_.bank_cols;
  for (int64_t b = 0; b < own; ++b) {
    acc_down_.push_back(core_.AllocatePsum("down_acc", {np, cfg_.bank_cols}));
  }
  for (const Tile& t : wide_banks_) {
    if (static_cast<int64_t>(acc_down_.size()) < block_tiles_ * slabs_) acc_down_.push_back(t);
  }
  for (int64_t i = 0; i < block_tiles_ * out_buffers_; ++i) {
    out_.push_back(core_.AllocateSbuf("mlp_out", {np, down_cols_}, cfg_.io_dtype));
  }
  gate_up_ = std::make_unique<kernels::GateUp>(core_, cfg_, p_, tokens);
  down_terms_ = std::make_unique<DownTerms>(core_, cfg_, p_, np);

  // One block's chunks: gate and up a group of I chunks at a time (the widest group, up to 4, whose
  // chunks fit the ring one and a half times over, so the next group streams in while the PE
  // takes this one), then down bank by bank.
  const DType wdt = cfg_.matmul_weight_dtype();
  int64_t slot = 0, n = 0, slots = 0;
  // Wide: one pass, each chunk read once.
  for (int64_t group = kMaxGateUpGroup;; group /= 2) {
    if (wide_ > 0) {
      BuildWideChunks();
    } else {
      BuildChunks(group);
    }
    slot = LargestChunkElements(chunks_);
    n = per_block_ * static_cast<int64_t>(blocks_.size());
    slots = StreamSlots(core_, slot, wdt, n);
    if (wide_ > 0 || group == 1) break;
    int64_t most = 0;
    for (const GateUpGroup& g : groups_) most = std::max(most, g.gate_chunks + g.up_chunks);
    if (slots * 2 >= most * 3) break;
  }
  stream_ = std::make_unique<WeightStream>(core_, slot, wdt, n, slots, [this](int64_t k) {
    return chunks_[static_cast<size_t>(k % per_block_)];
  });

  Load(blocks_[0]);  // the first rows go ahead of the weights on the HBM port
  stream_->Start();
  Prepare(blocks_[0]);
  Transpose(blocks_[0]);
  for (size_t k = 0; k < blocks_.size(); ++k) {
    const Block* next = k + 1 < blocks_.size() ? &blocks_[k + 1] : nullptr;
    if (next != nullptr) Load(*next);  // waits for this block's transposes to read the rows
    if (wide_ > 0) {
      GateUpWide(k, next);
    } else {
      GateUp(k, next);
    }
    Down(blocks_[k]);
    if (next != nullptr) Transpose(*next);
  }
}

}  // namespace

void MlpCteKernel(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& params,
                  const MlpResult& result) {
  CteProgram(ctx, cfg, params, result).Run();
}

}  // namespace nkisim::kernels
