// MLP TKG (decode): the tokens (B*S <= 128) stay on the free axis of every product.
//   gate / up: the weights are the stationary operand ([128 H rows, <= 128 I columns]) and the
//     normalised x_hat^T ([128 H rows, B*S], H on the partitions, from the shared TKG front end)
//     the moving one, so each product comes out as [I rows, B*S] in PSUM: I on the partitions is
//     the layout the down projection contracts, so no transpose sits between the projections, and a
//     matmul costs max(B*S, 64) PE cycles instead of 512 for a [B*S, 512] product.
//   down: the product h^T [I rows, B*S] is the stationary operand and down_w [I rows, 512 H
//     columns] the moving one, into [B*S, 512] PSUM banks: the output's own layout.
// Loop order: gate / up block by block, this core's H subtiles accumulating. A block is all of I
// when its chunks fit two PSUM banks each for gate and up ([128, 512 / B*S, B*S] a bank), so the
// weights stream as whole rows (partition p's rows of a chunk are consecutive rows of W: one
// contiguous run a partition, where 512-column slices were 1 KiB runs in bf16 and 512 B in fp8,
// descriptor-bound under the 16-engine DMA model); wider I goes in blocks of one bank, two sets.
// With several blocks, while the last block's sums cross between the cores, the PE runs the
// first down group's products of the earlier blocks' chunks. Down: this core's output banks in
// groups of as many as have their own PSUM bank, down_w streaming as whole rows of the group's
// columns (4 KiB a partition at 2048 columns in bf16); each bank evicted and stored at the end
// of its group. Two WeightStream rings, gate / up's and down's: down's chunks are issued (but
// one) only after the last exchange, which would otherwise wait behind them on the DMA engines.
// Each down bank has its own output tile and each gate / up block its own h tile: the scoreboard
// orders a tile's writers after its readers, so one shared [B*S, H / L] tile held each bank's
// eviction behind the previous bank's store (H 8192, I 448, B*S 32: 1.40x the stream floor with
// it, 1.07x without), and one h tile would hold the last block's act * up behind the early down
// products.
// LNC 2 (mlp.h): core s holds rows [s H / 2, (s + 1) H / 2) of x_hat, Wg and Wu, so its gate / up
// products are partial; after each block the fp32 partials go to the peer (sendrecv) and each
// core adds the peer's (gate on GpSimd, up on Vector), then applies act * up to the full sums (biases
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

// I chunks of 128 rows one fp32 PSUM bank holds as gate / up accumulators: [128, k, B*S].
int64_t ChunksPerBank(const MlpConfig& cfg) {
  return std::clamp<int64_t>(cfg.bank_cols / std::max<int64_t>(1, cfg.tokens), 1, cfg.i_chunks());
}

// Banks per gate (and per up) accumulator: all of I in one block when it fits in two banks each
// (one accumulator set, the weights streamed as whole rows), else one bank a block and two sets
// (a block's exchange and act * up overlap the next block's matmuls).
int64_t BanksPerAccumulator(const MlpConfig& cfg) {
  const int64_t per = ChunksPerBank(cfg), n = cfg.i_chunks();
  return n <= 2 * per ? (n + per - 1) / per : 1;
}

// I chunks per gate / up block: the columns of I one DMA row of a weight chunk covers.
int64_t ChunksPerBlock(const MlpConfig& cfg) {
  return ChunksPerBank(cfg) * BanksPerAccumulator(cfg);
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

// One gate or up accumulator: BanksPerAccumulator PSUM banks of [P, ChunksPerBank, T].
struct Accumulator {
  std::vector<Tile> banks;
  int64_t per_bank = 1;
  // Chunk k of the block: [P, T].
  Tile Chunk(int64_t k) const { return banks[static_cast<size_t>(k / per_bank)].select(1, k % per_bank); }
};

// Down chunks issued with the gate / up stream, before the last exchange: they keep the engines
// busy through the exchange's latency and hold it by one chunk's engine time (1.44x the stream
// floor at B*S 32, H 4096, I 896, STATIC, against 1.50x with none and 1.55x with two).
constexpr int64_t kDownChunksAhead = 1;

class TkgProgram {
 public:
  TkgProgram(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& p,
             const MlpResult& result);
  void Run();

 private:
  void Allocate();
  void BuildChunks();
  void StartStream();
  void Accumulate(const Accumulator& acc, const ChunkRange& block);
  void GateUpBlock(size_t b);
  void Exchange(size_t b);
  void Apply(size_t b);
  // The down banks of group g (this core's output columns, acc_down_.size() banks of 512 a group):
  // [first, last).
  size_t GroupBegin(size_t g) const { return g * acc_down_.size(); }
  size_t GroupEnd(size_t g) const { return std::min(out_.size(), (g + 1) * acc_down_.size()); }
  size_t Groups() const { return (out_.size() + acc_down_.size() - 1) / acc_down_.size(); }
  // Down group g: the products of I chunks [c0, c1), the next chunks of the stream (whole rows of
  // the group's columns), into the group's PSUM accumulators (opened by chunk 0).
  void DownChunks(size_t g, int64_t c0, int64_t c1);
  // The bank's eviction (+ bias, dequantized; Vector and Scalar each take part of the columns)
  // and store.
  void EvictAndStore(size_t bank);
  // The I chunk where the early down products end: the chunks of every gate / up block but the
  // last, whose h is ready before the last block's exchange is (0 with one block).
  int64_t EarlyEnd() const { return blocks_.back().begin; }
  // h^T of I chunk c [rows, T] (or chunks c, c + 1 [P, 2, T]): each gate / up block has its own
  // tile, so the early down products (readers of the first blocks') do not hold the last block's
  // writes behind them (the scoreboard orders a tile's writers after its readers).
  Tile H(int64_t c, int64_t n = 1) const;
  // 2 when free index jj and jj + 1 of chunk w go into one double-row matmul (STATIC: both
  // operands fp8, K = 256 for the time of 128), else 1.
  int64_t Pair(const Tile& w, int64_t jj) const {
    return double_row_ && jj + 1 < w.free_shape()[0] && w.partitions() == cfg_.partitions ? 2 : 1;
  }
  // A weight chunk: one full descriptor a partition (trn2: 128 x 4 KiB = 512 KiB, 1.4 us of the
  // 16 engines): half of DmaTargetBytes, so the last chunk of the stream, whose matmuls are the
  // kernel's tail, is shorter (1.41x the stream floor at B*S 32, H 4096, I 896 against 1.39x with
  // 1 MiB; fp8 STATIC 1.66x against 2.01x).
  int64_t ChunkBytes() const {
    return cfg_.partitions * core_.profile().dma_descriptor_max_bytes();
  }
  // x_hat's subtile j as the gate / up moving operand [P, T].
  Tile Moving(int64_t j) const { return double_row_ ? x_.select(1, j) : x_.select(2, j); }
  // The accumulator set of block b (two sets when there are several blocks).
  size_t Set(size_t b) const { return b % sets_; }

  const KernelContext& ctx_;
  NeuronCore& core_;
  const MlpConfig& cfg_;
  const MlpParams& p_;
  const MlpResult& result_;
  int s_;
  int64_t shard0_, shard1_;  // this core's output columns of down
  std::vector<ChunkRange> blocks_;
  size_t sets_;      // gate / up accumulator sets: 1 with one block, else 2
  bool double_row_;  // STATIC: fp8 x fp8 matmuls in pairs (perf_mode double_row)
  Tile x_;           // [P, T, H1s]: this core's rows of x_hat; STATIC: fp8 [P, H1s, T]
  std::vector<Tile> h_;  // per gate / up block: [P, block chunks, T], h^T (down's stationary)
  Accumulator acc_gate_[2], acc_up_[2];
  std::vector<Tile> acc_down_;  // [T, 512] PSUM, bank k in acc_down_[k % size]
  Tile partial_[2], peer_[2];   // LNC 2: [P, 2, chunks per block, T] fp32 (gate, up)
  std::vector<Tile> out_;       // per down bank: [T, 512] in the I/O dtype
  std::vector<TensorView> gate_up_chunks_, down_chunks_;
  // Two rings: down's chunks are issued only after the last gate / up exchange (see Run).
  std::unique_ptr<WeightStream> gate_up_stream_, down_stream_;
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
      sets_(blocks_.size() > 1 ? 2 : 1),
      double_row_(cfg.is_static()) {}

void TkgProgram::Allocate() {
  const int64_t np = cfg_.partitions, t = cfg_.tokens, per = ChunksPerBlock(cfg_);
  const int64_t per_bank = ChunksPerBank(cfg_), banks = BanksPerAccumulator(cfg_);
  for (const ChunkRange& b : blocks_) {
    h_.push_back(core_.AllocateSbuf("h_t", {np, b.size(), t}, cfg_.matmul_input_dtype()));
  }
  for (int64_t h0 = shard0_; h0 < shard1_; h0 += cfg_.bank_cols) {
    const int64_t width = std::min(shard1_, h0 + cfg_.bank_cols) - h0;
    out_.push_back(core_.AllocateSbuf("mlp_out", {t, width}, cfg_.io_dtype));
  }
  for (size_t k = 0; k < sets_; ++k) {
    for (Accumulator* acc : {&acc_gate_[k], &acc_up_[k]}) {
      acc->per_bank = per_bank;
      for (int64_t i = 0; i < banks; ++i) {
        acc->banks.push_back(core_.AllocatePsum(acc == &acc_gate_[k] ? "gate_acc" : "up_acc",
                                                {np, per_bank, t}));
      }
    }
    if (cfg_.lnc == 2) {
      partial_[k] = core_.AllocateSbuf("gate_up_partial", {np, 2, per, t}, DType::kFloat32);
      peer_[k] = core_.AllocateSbuf("gate_up_peer", {np, 2, per, t}, DType::kFloat32);
    }
  }
  // The PSUM banks gate / up leave (the front end's have been freed), at least 2, at most one per
  // bank of output columns: a down group's columns, streamed as whole rows of the group.
  const int64_t used = 2 * static_cast<int64_t>(sets_) * banks;
  const int64_t free_banks = core_.profile().psum_banks() - used;
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

// The stream in the PE's order: gate / up block by block (with one block, whole weight rows:
// partition p's rows of a chunk are consecutive rows of W, one contiguous run of hc x I), then
// the first down group's early chunks, then each group's remaining chunks (whole rows of the
// group's up to 2048 output columns).
void TkgProgram::BuildChunks() {
  const int64_t np = cfg_.partitions, h1s = cfg_.shard_subtiles();
  auto shard = [&](const TensorView& w) {
    return w.reshape({cfg_.lnc, np, h1s, cfg_.i}).select(0, s_);
  };
  const TensorView g = shard(p_.gate_w), u = shard(p_.up_w);
  for (const ChunkRange& b : blocks_) {
    const int64_t c0 = b.begin * np, c1 = std::min(cfg_.i, b.end * np);
    AppendGateUpChunks(g, c0, c1, cfg_, core_.profile(), &gate_up_chunks_, ChunkBytes());
    AppendGateUpChunks(u, c0, c1, cfg_, core_.profile(), &gate_up_chunks_, ChunkBytes());
  }
  const int64_t early = EarlyEnd(), n = cfg_.i_chunks();
  auto down = [&](size_t group, int64_t c0, int64_t c1) {
    const int64_t h0 = shard0_ + static_cast<int64_t>(GroupBegin(group)) * cfg_.bank_cols;
    const int64_t h1 = std::min(shard1_, shard0_ + static_cast<int64_t>(GroupEnd(group)) *
                                                       cfg_.bank_cols);
    AppendDownChunks(p_.down_w, h0, h1, cfg_, core_.profile(), &down_chunks_, c0, c1,
                     ChunkBytes());
  };
  if (early > 0) down(0, 0, early);
  for (size_t group = 0; group < Groups(); ++group) down(group, group == 0 ? early : 0, n);
}

// Two weight rings, gate / up's and down's: one DMA a chunk, each split over the 16 DMA engines by
// its partitions (runtime/dma_engines.h), so a chunk lands dma_latency_ns plus its bytes at the
// engines' rate after it is issued, and the chunks in flight on different queues overlap their
// latencies. Gate / up's scale and bias loads go behind its first two chunks (they are first read
// by act * up); kDownChunksAhead of down's chunks are issued now, the rest after the last exchange
// (Run), and down's scale and bias loads then too (first read by the first eviction; the ROW scale
// row, broadcast onto the B*S partitions, is 8 KiB a partition and would hold the exchange).
void TkgProgram::StartStream() {
  const DType wdt = cfg_.matmul_weight_dtype();
  // DownTerms' tiles, allocated after the rings: the bias and ROW scale rows of this core's
  // columns (fp32) and STATIC's few columns.
  const int64_t terms = (shard1_ - shard0_) * 4 *
                            ((p_.down_bias.valid() ? 1 : 0) + (cfg_.is_row() ? 1 : 0)) +
                        4 * 4;
  auto ring = [&](const std::vector<TensorView>& chunks) {
    const int64_t slot = LargestChunkElements(chunks), n = static_cast<int64_t>(chunks.size());
    return std::make_unique<WeightStream>(
        core_, slot, wdt, n, StreamSlots(core_, slot, wdt, n, terms),
        [&chunks](int64_t k) { return chunks[static_cast<size_t>(k)]; });
  };
  gate_up_stream_ = ring(gate_up_chunks_);
  down_stream_ = ring(down_chunks_);
  gate_up_stream_->IssueUpTo(2);
  gate_up_ = std::make_unique<GateUp>(core_, cfg_, p_, cfg_.tokens);
  gate_up_stream_->Start();
  down_stream_->IssueUpTo(kDownChunksAhead);
}

// acc chunk c - block.begin = sum over this core's H subtiles j of W[:, j, chunk c]^T x[:, :, j]
// for the block's I chunks: the next chunks of the stream (one weight's share of the block).
void TkgProgram::Accumulate(const Accumulator& acc, const ChunkRange& block) {
  const int64_t np = cfg_.partitions, subtiles = cfg_.shard_subtiles();
  for (int64_t j = 0; j < subtiles; gate_up_stream_->PopFront()) {
    const Tile w = gate_up_stream_->Front();
    for (int64_t jj = 0, k = 1; jj < w.free_shape()[0]; jj += k, j += k) {
      k = Pair(w, jj);
      for (int64_t c = block.begin; c < block.end; ++c) {
        const int64_t rows = cfg_.i_rows(c), col = (c - block.begin) * np;
        const Tile dst = acc.Chunk(c - block.begin).slice(0, 0, rows);
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
  Accumulate(acc_gate_[Set(b)], blocks_[b]);
  Accumulate(acc_up_[Set(b)], blocks_[b]);
}

// LNC 2: the block's partial products to SBUF (fp32), to the peer, and the peer's added.
void TkgProgram::Exchange(size_t b) {
  if (cfg_.lnc != 2) return;
  const int64_t chunks = blocks_[b].size(), per_bank = ChunksPerBank(cfg_);
  const size_t set = Set(b);
  const Tile mine = partial_[set].slice(2, 0, chunks), peer = peer_[set].slice(2, 0, chunks);
  for (int64_t k0 = 0; k0 < chunks; k0 += per_bank) {
    const int64_t k1 = std::min(chunks, k0 + per_bank);
    const size_t bank = static_cast<size_t>(k0 / per_bank);
    nisa::tensor_copy(mine.select(1, 0).slice(1, k0, k1),
                      acc_gate_[set].banks[bank].slice(1, 0, k1 - k0), Engine::kVector);
    nisa::tensor_copy(mine.select(1, 1).slice(1, k0, k1),
                      acc_up_[set].banks[bank].slice(1, 0, k1 - k0), Engine::kScalar);
  }
  nisa::sendrecv(mine, peer);
  // The peer's gate added on GpSimd and its up on Vector at the same time: one GpSimd add of both
  // took 0.87 us of the critical path at B*S 32, I 896.
  nisa::tensor_tensor(mine.select(1, 0), mine.select(1, 0), peer.select(1, 0), AluOp::kAdd,
                      Engine::kGpSimd);
  nisa::tensor_tensor(mine.select(1, 1), mine.select(1, 1), peer.select(1, 1), AluOp::kAdd,
                      Engine::kVector);
}

// h^T of the block's chunks from the full gate / up sums (PSUM at LNC 1, the exchanged sums at 2).
void TkgProgram::Apply(size_t b) {
  const ChunkRange& block = blocks_[b];
  const size_t set = Set(b);
  for (int64_t c = block.begin; c < block.end; ++c) {
    const int64_t rows = cfg_.i_rows(c), k = c - block.begin;
    const Tile g = cfg_.lnc == 2 ? partial_[set].select(1, 0).select(1, k) : acc_gate_[set].Chunk(k);
    const Tile u = cfg_.lnc == 2 ? partial_[set].select(1, 1).select(1, k) : acc_up_[set].Chunk(k);
    gate_up_->Apply(h_[b].select(1, k).slice(0, 0, rows), g.slice(0, 0, rows), u.slice(0, 0, rows),
                    c);
  }
}

void TkgProgram::DownChunks(size_t group, int64_t c0, int64_t c1) {
  const size_t b0 = GroupBegin(group), b1 = GroupEnd(group);
  for (int64_t c = c0; c < c1; down_stream_->PopFront()) {
    const Tile w = down_stream_->Front();
    for (int64_t q = 0, k = 1; q < w.free_shape()[0]; q += k, c += k) {
      // A pair shares one h tile: both chunks in one gate / up block.
      k = (c + 1) % ChunksPerBlock(cfg_) != 0 ? Pair(w, q) : 1;
      for (size_t bank = b0; bank < b1; ++bank) {
        const int64_t width = out_[bank].free_size();
        const int64_t off = static_cast<int64_t>(bank - b0) * cfg_.bank_cols;
        const Tile acc = acc_down_[bank % acc_down_.size()].slice(1, 0, width);
        if (k == 2) {
          nisa::nc_matmul(acc, H(c, 2), w.slice(1, q, q + 2).slice(2, off, off + width),
                          {.accumulate = c > 0, .perf_mode = nisa::PerfMode::kDoubleRow});
        } else {
          nisa::nc_matmul(acc, H(c).slice(0, 0, w.partitions()),
                          w.select(1, q).slice(1, off, off + width), {.accumulate = c > 0});
        }
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
    if (b + 1 == blocks_.size()) {
      // Down's chunks go onto the engines only now, behind the exchange: the engines serve the
      // transfers in the order they are issued, so chunks issued earlier held the exchange (and
      // the PE, which waits for h) behind them (5.8 us at B*S 32, H 4096, I 896, STATIC).
      down_stream_->Start();
      down_terms_ = std::make_unique<DownTerms>(core_, cfg_, p_, cfg_.tokens, shard0_, shard1_);
      // While the last block's sums cross between the cores and its h is computed, the PE runs
      // the first group's down products of the chunks whose h is ready.
      if (early > 0) DownChunks(0, 0, early);
    }
    Apply(b);
  }
  for (size_t group = 0; group < Groups(); ++group) {
    DownChunks(group, group == 0 ? early : 0, cfg_.i_chunks());
    for (size_t bank = GroupBegin(group); bank < GroupEnd(group); ++bank) EvictAndStore(bank);
  }
}

}  // namespace

void MlpTkgKernel(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& params,
                  const MlpResult& result) {
  TkgProgram(ctx, cfg, params, result).Run();
}

}  // namespace nkisim::kernels
