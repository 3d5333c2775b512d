// MLP TKG (decode): the tokens (B*S <= 128) stay on the free axis of every product.
//   gate / up: the weights are the stationary operand ([128 H rows, <= 128 I columns]) and the
//     normalised x_hat^T ([128 H rows, B*S], H on the partitions, from the shared TKG front end)
//     the moving one, so each product comes out as [I rows, B*S] in PSUM: I on the partitions is
//     the layout the down projection contracts, so no transpose sits between the projections, and a
//     matmul costs max(B*S, 64) PE cycles instead of 512 for a [B*S, 512] product.
//   down: the product h^T [I rows, B*S] is the stationary operand and down_w [I rows, 512 H
//     columns] the moving one, into [B*S, 512] PSUM banks: the output's own layout.
// Loop order: gate / up column block by block (up to 512 columns of I: four PSUM chunks
// [128, B*S] of one bank for gate and one for up), this core's H subtiles accumulating; after the
// last block's matmuls, while its sums cross between the cores and its h is computed, the down
// products of the I chunks of the earlier blocks for as many banks of this core's output columns
// as have their own PSUM bank (4 of the 8 beside gate / up's 4); then bank by bank the rest of I,
// each bank evicted and stored as it completes. All the weights flow in that order through one
// WeightStream ring. (Without the early products the PE idled through the last exchange: 1.5 us
// at H 4096, I 896, B*S 32, where ROW is PE-bound. An earlier attempt evicted an fp32 partial of
// the early chunks to SBUF instead, with 2 down banks, and gained little on bf16, HBM-bound.)
// Each down bank has its own output tile and each gate / up block its own h tile: the scoreboard
// orders a tile's writers after its readers, so one shared [B*S, H / L] tile held each bank's
// eviction behind the previous bank's store (H 8192, I 448, B*S 32: 1.40x the stream floor with
// it, 1.07x without), and one h tile would hold the last block's act * up behind the early down
// products.
// LNC 2 (mlp.h): core s holds rows [s H / 2, (s + 1) H / 2) of x_hat, Wg and Wu, so its gate / up
// products are partial; after each block the fp32 partials go to the peer (sendrecv) and each
// core adds the peer's (on GpSimd, SBUF only), then applies act * up to the full sums (biases
// added once, after the sum). Down: core s computes and stores output columns
// [s H / 2, (s + 1) H / 2), all of I, disjoint writes.
#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/common/tiling.h"
#include "kernels/common/tkg_prologue.h"
#include "kernels/mlp/gate_up.h"
#include "kernels/mlp/variants.h"
#include "kernels/mlp/weights.h"
#include "runtime/cost_model.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

using nisa::AluOp;

// The down banks whose stores are the kernel's tail (see EvictAndStore).
constexpr size_t kTailBanks = 2;

// I chunks of 128 rows per gate / up block: one fp32 PSUM bank of [128, chunks, B*S].
int64_t ChunksPerBlock(const MlpConfig& cfg) {
  return std::max<int64_t>(1, cfg.bank_cols / cfg.partitions);
}

struct ChunkRange {
  int64_t begin = 0, end = 0;  // I chunks [begin, end)
  int64_t size() const { return end - begin; }
};

// Blocks of ChunksPerBlock I chunks (the last may be narrower).
std::vector<ChunkRange> GateUpBlocks(const MlpConfig& cfg) {
  const int64_t n = cfg.i_chunks(), per = ChunksPerBlock(cfg);
  std::vector<ChunkRange> blocks;
  for (int64_t c = 0; c < n; c += per) blocks.push_back({c, std::min(n, c + per)});
  return blocks;
}

class TkgProgram {
 public:
  TkgProgram(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& p,
             const MlpResult& result);
  void Run();

 private:
  void Allocate();
  void BuildChunks();
  void StartStream();
  void Accumulate(const Tile& acc, const ChunkRange& block);
  void GateUpBlock(size_t b);
  void Exchange(size_t b);
  void Apply(size_t b);
  // Down bank `bank` (this core's output columns h0 + [0, 512)): the products of I chunks
  // [c0, c1), the next chunks of the stream, into its PSUM accumulator (opened by chunk 0).
  void DownChunks(size_t bank, int64_t c0, int64_t c1);
  // The bank's eviction (+ bias, dequantized; Vector and Scalar each take part of the columns)
  // and store (the last kTailBanks over the queues: they are the kernel's tail).
  void EvictAndStore(size_t bank);
  // The I chunk where the early down products end: the chunks of every gate / up block but the
  // last, whose h is ready before the last block's exchange is.
  int64_t EarlyEnd() const { return blocks_.back().begin; }
  // The banks that take the early chunks: as many as have their own PSUM accumulator.
  size_t EarlyBanks() const {
    return EarlyEnd() > 0 ? std::min(out_.size(), acc_down_.size()) : 0;
  }
  // h^T of I chunk c [rows, T] (or chunks c, c + 1 [P, 2, T]): each gate / up block has its own
  // tile, so the early down products (readers of the first blocks') do not hold the last block's
  // writes behind them (the scoreboard orders a tile's writers after its readers).
  Tile H(int64_t c, int64_t n = 1) const;
  // 2 when free index jj and jj + 1 of chunk w go into one double-row matmul (STATIC: both
  // operands fp8, K = 256 for the time of 128), else 1.
  int64_t Pair(const Tile& w, int64_t jj) const {
    return double_row_ && jj + 1 < w.free_shape()[0] && w.partitions() == cfg_.partitions ? 2 : 1;
  }
  // x_hat's subtile j as the gate / up moving operand [P, T].
  Tile Moving(int64_t j) const { return double_row_ ? x_.select(1, j) : x_.select(2, j); }

  const KernelContext& ctx_;
  NeuronCore& core_;
  const MlpConfig& cfg_;
  const MlpParams& p_;
  const MlpResult& result_;
  int s_;
  int64_t shard0_, shard1_;  // this core's output columns of down
  std::vector<ChunkRange> blocks_;
  bool double_row_;  // STATIC: fp8 x fp8 matmuls in pairs (perf_mode double_row)
  Tile x_;           // [P, T, H1s]: this core's rows of x_hat; STATIC: fp8 [P, H1s, T]
  std::vector<Tile> h_;  // per gate / up block: [P, block chunks, T], h^T (down's stationary)
  Tile acc_gate_[2], acc_up_[2];
  std::vector<Tile> acc_down_;  // [T, 512] PSUM, bank k in acc_down_[k % size]
  Tile partial_[2], peer_[2];   // LNC 2: [P, 2, chunks per block, T] fp32 (gate, up)
  std::vector<Tile> out_;       // per down bank: [T, 512] in the I/O dtype
  std::vector<TensorView> chunks_;
  std::unique_ptr<WeightStream> stream_;
  std::unique_ptr<GateUp> gate_up_;
  std::unique_ptr<DownTerms> down_terms_;
};

TkgProgram::TkgProgram(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& p,
                       const MlpResult& result)
    : ctx_(ctx),
      core_(ctx.core),
      cfg_(cfg),
      p_(p),
      result_(result),
      s_(ctx.prg_id),
      shard0_(ctx.prg_id * cfg.h / cfg.lnc),
      shard1_((ctx.prg_id + 1) * cfg.h / cfg.lnc),
      blocks_(GateUpBlocks(cfg)),
      double_row_(cfg.is_static()) {}

void TkgProgram::Allocate() {
  const int64_t np = cfg_.partitions, t = cfg_.tokens, per = ChunksPerBlock(cfg_);
  for (const ChunkRange& b : blocks_) {
    h_.push_back(core_.AllocateSbuf("h_t", {np, b.size(), t}, cfg_.matmul_input_dtype()));
  }
  for (int64_t h0 = shard0_; h0 < shard1_; h0 += cfg_.bank_cols) {
    const int64_t width = std::min(shard1_, h0 + cfg_.bank_cols) - h0;
    out_.push_back(core_.AllocateSbuf("mlp_out", {t, width}, cfg_.io_dtype));
  }
  for (int k = 0; k < 2; ++k) {
    acc_gate_[k] = core_.AllocatePsum("gate_acc", {np, per, t});
    acc_up_[k] = core_.AllocatePsum("up_acc", {np, per, t});
    if (cfg_.lnc == 2) {
      partial_[k] = core_.AllocateSbuf("gate_up_partial", {np, 2, per, t}, DType::kFloat32);
      peer_[k] = core_.AllocateSbuf("gate_up_peer", {np, 2, per, t}, DType::kFloat32);
    }
  }
  // The PSUM banks gate / up leave (each of their 4 accumulators is one bank: <= 4 chunks of
  // T <= 128 fp32 columns; the front end's has been freed), at least 2 so consecutive banks
  // overlap, at most one per bank of output columns.
  const int64_t free_banks = core_.profile().psum_banks() - 4;
  const int64_t down = std::min<int64_t>(std::max<int64_t>(free_banks, 2),
                                         static_cast<int64_t>(out_.size()));
  for (int64_t k = 0; k < down; ++k) {
    acc_down_.push_back(core_.AllocatePsum("down_acc", {t, cfg_.bank_cols}));
  }
}

Tile TkgProgram::H(int64_t c, int64_t n) const {
  const ChunkRange& b = blocks_[static_cast<size_t>(c / ChunksPerBlock(cfg_))];
  const Tile& h = h_[static_cast<size_t>(c / ChunksPerBlock(cfg_))];
  return n == 2 ? h.slice(1, c - b.begin, c - b.begin + 2) : h.select(1, c - b.begin);
}

// The stream in the PE's order: gate / up block by block, then the early banks' early chunks,
// then each bank's remaining chunks (all of I for the banks past the early ones).
void TkgProgram::BuildChunks() {
  const int64_t np = cfg_.partitions, h1s = cfg_.shard_subtiles();
  auto shard = [&](const TensorView& w) {
    return w.reshape({cfg_.lnc, np, h1s, cfg_.i}).select(0, s_);
  };
  const TensorView g = shard(p_.gate_w), u = shard(p_.up_w);
  for (const ChunkRange& b : blocks_) {
    const int64_t c0 = b.begin * np, c1 = std::min(cfg_.i, b.end * np);
    AppendGateUpChunks(g, c0, c1, cfg_, core_.profile(), &chunks_);
    AppendGateUpChunks(u, c0, c1, cfg_, core_.profile(), &chunks_);
  }
  const int64_t early = EarlyEnd(), n = cfg_.i_chunks();
  auto down = [&](size_t bank, int64_t c0, int64_t c1) {
    const int64_t h0 = shard0_ + static_cast<int64_t>(bank) * cfg_.bank_cols;
    AppendDownChunks(p_.down_w, h0, std::min(shard1_, h0 + cfg_.bank_cols), cfg_,
                     core_.profile(), &chunks_, c0, c1);
  };
  for (size_t bank = 0; bank < EarlyBanks(); ++bank) down(bank, 0, early);
  for (size_t bank = 0; bank < out_.size(); ++bank) down(bank, bank < EarlyBanks() ? early : 0, n);
}

// The stream's DMAs: one a chunk, each split over the 16 DMA engines by its partitions
// (runtime/dma_engines.h), so a chunk lands dma_latency_ns plus its bytes at the engines' rate
// after it is issued, and the chunks in flight on different queues overlap their latencies.
// Gate / up's scale and bias loads go behind the first chunks on the HBM port (they are first
// read by the first block's act * up), down's behind the ring's first fill (first read by the first
// eviction; the ROW scale row, broadcast onto the B*S partitions, is 8 KiB a partition).
void TkgProgram::StartStream() {
  const HardwareProfile& prof = core_.profile();
  const DType wdt = cfg_.matmul_weight_dtype();
  const int64_t slot = LargestChunkElements(chunks_), n = static_cast<int64_t>(chunks_.size());
  stream_ =
      std::make_unique<WeightStream>(core_, slot, wdt, n, StreamSlots(core_, slot, wdt, n),
                                     [this](int64_t k) { return chunks_[static_cast<size_t>(k)]; });
  stream_->IssueUpTo(prof.dma_queues());
  gate_up_ = std::make_unique<GateUp>(core_, cfg_, p_, cfg_.tokens);
  stream_->Start();
  down_terms_ = std::make_unique<DownTerms>(core_, cfg_, p_, cfg_.tokens, shard0_, shard1_);
}

// acc[:, c - block.begin, :] = sum over this core's H subtiles j of W[:, j, chunk c]^T x[:, :, j]
// for the block's I chunks: the next chunks of the stream (one weight's share of the block).
void TkgProgram::Accumulate(const Tile& acc, const ChunkRange& block) {
  const int64_t np = cfg_.partitions, subtiles = cfg_.shard_subtiles();
  for (int64_t j = 0; j < subtiles; stream_->PopFront()) {
    const Tile w = stream_->Front();
    for (int64_t jj = 0, k = 1; jj < w.free_shape()[0]; jj += k, j += k) {
      k = Pair(w, jj);
      for (int64_t c = block.begin; c < block.end; ++c) {
        const int64_t rows = cfg_.i_rows(c), col = (c - block.begin) * np;
        const Tile dst = acc.select(1, c - block.begin).slice(0, 0, rows);
        if (k == 2) {  // STATIC: two H subtiles in one double-row matmul
          nisa::nc_matmul(dst, w.slice(1, jj, jj + 2).slice(2, col, col + rows),
                          x_.slice(1, j, j + 2),
                          {.accumulate = j > 0, .perf_mode = nisa::PerfMode::kDoubleRow});
        } else {
          nisa::nc_matmul(dst, w.select(1, jj).slice(1, col, col + rows), Moving(j),
                          {.accumulate = j > 0});
        }
      }
    }
  }
}

void TkgProgram::GateUpBlock(size_t b) {
  Accumulate(acc_gate_[b % 2].slice(1, 0, blocks_[b].size()), blocks_[b]);
  Accumulate(acc_up_[b % 2].slice(1, 0, blocks_[b].size()), blocks_[b]);
}

// LNC 2: the block's partial products to SBUF (fp32), to the peer, and the peer's added.
void TkgProgram::Exchange(size_t b) {
  if (cfg_.lnc != 2) return;
  const int64_t chunks = blocks_[b].size();
  const Tile mine = partial_[b % 2].slice(2, 0, chunks), peer = peer_[b % 2].slice(2, 0, chunks);
  nisa::tensor_copy(mine.select(1, 0), acc_gate_[b % 2].slice(1, 0, chunks), Engine::kVector);
  nisa::tensor_copy(mine.select(1, 1), acc_up_[b % 2].slice(1, 0, chunks), Engine::kScalar);
  nisa::sendrecv(mine, peer);
  nisa::tensor_tensor(mine, mine, peer, AluOp::kAdd, Engine::kGpSimd);
}

// h^T of the block's chunks from the full gate / up sums (PSUM at LNC 1, the exchanged sums at 2).
void TkgProgram::Apply(size_t b) {
  const ChunkRange& block = blocks_[b];
  const Tile g = cfg_.lnc == 2 ? partial_[b % 2].select(1, 0) : acc_gate_[b % 2];
  const Tile u = cfg_.lnc == 2 ? partial_[b % 2].select(1, 1) : acc_up_[b % 2];
  for (int64_t c = block.begin; c < block.end; ++c) {
    const int64_t rows = cfg_.i_rows(c), k = c - block.begin;
    gate_up_->Apply(h_[b].select(1, k).slice(0, 0, rows), g.select(1, k).slice(0, 0, rows),
                    u.select(1, k).slice(0, 0, rows), c);
  }
}

void TkgProgram::DownChunks(size_t bank, int64_t c0, int64_t c1) {
  const Tile acc = acc_down_[bank % acc_down_.size()].slice(1, 0, out_[bank].free_size());
  for (int64_t c = c0; c < c1; stream_->PopFront()) {
    const Tile w = stream_->Front();
    for (int64_t q = 0, k = 1; q < w.free_shape()[0]; q += k, c += k) {
      // A pair shares one h tile: both chunks in one gate / up block.
      k = (c + 1) % ChunksPerBlock(cfg_) != 0 ? Pair(w, q) : 1;
      if (k == 2) {
        nisa::nc_matmul(acc, H(c, 2), w.slice(1, q, q + 2),
                        {.accumulate = c > 0, .perf_mode = nisa::PerfMode::kDoubleRow});
      } else {
        nisa::nc_matmul(acc, H(c).slice(0, 0, w.partitions()), w.select(1, q),
                        {.accumulate = c > 0});
      }
    }
  }
}

void TkgProgram::EvictAndStore(size_t bank) {
  const int64_t t = cfg_.tokens, width = out_[bank].free_size();
  const int64_t h0 = shard0_ + static_cast<int64_t>(bank) * cfg_.bank_cols;
  const Tile acc = acc_down_[bank % acc_down_.size()].slice(1, 0, width);
  // Vector (about 1.6x Scalar's rate on fp32 PSUM) takes 5/8 of the columns and Scalar the rest
  // at the same time (GpSimd cannot read PSUM): a bank is evicted in about 0.23 us at B*S 32
  // where one engine took 0.33 (Vector) or 0.48 (Scalar), well within the next bank's matmuls.
  const int64_t split = width >= 64 ? width * 5 / 8 : width;
  Evict(out_[bank].slice(1, 0, split), acc.slice(1, 0, split), down_terms_->Cut(t, h0, split),
        Engine::kVector);
  if (split < width) {
    Evict(out_[bank].slice(1, split, width), acc.slice(1, split, width),
          down_terms_->Cut(t, h0 + split, width - split), Engine::kScalar);
  }
  // One store a bank: its rows go over the engines by partition.
  nisa::dma_copy(result_.output.reshape({t, cfg_.h}).slice(1, h0, h0 + width), out_[bank]);
}

void TkgProgram::Run() {
  x_ = TkgPrologue(ctx_, FrontEnd(cfg_), FrontEndInputsOf(p_), result_.fused_hidden);
  if (cfg_.is_static())
    x_ = QuantizeInputSubtiles(core_, x_, p_.gate_up_in_scale, cfg_.weight_dtype);
  Allocate();
  BuildChunks();
  StartStream();
  const int64_t early = EarlyEnd();
  for (size_t b = 0; b < blocks_.size(); ++b) {
    GateUpBlock(b);
    Exchange(b);
    // While the last block's sums cross between the cores and its h is computed, the PE runs the
    // down products of the chunks whose h is ready.
    if (b + 1 == blocks_.size()) {
      for (size_t bank = 0; bank < EarlyBanks(); ++bank) DownChunks(bank, 0, early);
    }
    Apply(b);
  }
  for (size_t bank = 0; bank < out_.size(); ++bank) {
    DownChunks(bank, bank < EarlyBanks() ? early : 0, cfg_.i_chunks());
    EvictAndStore(bank);
  }
}

}  // namespace

void MlpTkgKernel(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& params,
                  const MlpResult& result) {
  TkgProgram(ctx, cfg, params, result).Run();
}

}  // namespace nkisim::kernels
