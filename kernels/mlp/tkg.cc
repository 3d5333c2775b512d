// MLP TKG (decode): the tokens (B*S <= 128) stay on the free axis of every product.
//   gate / up: the weights are the stationary operand ([128 H rows, <= 128 I columns]) and the
//     normalised x_hat^T ([128 H rows, B*S], H on the partitions, from the shared TKG front end)
//     the moving one, so each product comes out as [I rows, B*S] in PSUM: I on the partitions is
//     the layout the down projection contracts, so no transpose sits between the projections, and a
//     matmul costs max(B*S, 64) PE cycles instead of 512 for a [B*S, 512] product.
//   down: the product h^T [I rows, B*S] is the stationary operand and down_w [I rows, 512 H
//     columns] the moving one, into [B*S, 512] PSUM banks: the output's own layout.
// Loop order: gate / up column block by block (up to 512 columns of I: four PSUM chunks
// [128, B*S] of one bank for gate and one for up), this core's H subtiles accumulating; then the
// down banks of this core's output columns, I chunks accumulating. All the weights flow in that
// order through one WeightStream ring and the PE trails the HBM stream (the kernel is HBM-bound).
// Each down bank has its own output tile: the scoreboard orders a tile's writers after its
// readers, so one shared [B*S, H / L] tile held each bank's eviction behind the previous bank's
// store (H 8192, I 448, B*S 32: 1.40x the stream floor with it, 1.07x without). Splitting the down
// projection in two phases around the last block's exchange (an fp32 partial of the earlier
// chunks) was tried and gained nothing over this (1.04x against 1.07x at B*S 96, H 4096, equal or
// worse elsewhere), so the down projection waits for all of h.
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
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

using nisa::AluOp;

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
  void Accumulate(const Tile& acc, const ChunkRange& block);
  void GateUpBlock(size_t b);
  void Exchange(size_t b);
  void Apply(size_t b);
  // The down products of every bank of this core's columns, all I chunks accumulating; each bank
  // evicted (+ bias, dequantized) and stored.
  void Down();
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
  Tile h_;           // [P, I chunks, T]: h^T, the down projection's stationary
  Tile acc_gate_[2], acc_up_[2], acc_down_[2];
  Tile partial_[2], peer_[2];  // LNC 2: [P, 2, chunks per block, T] fp32 (gate, up)
  std::vector<Tile> out_;      // per down bank: [T, 512] in the I/O dtype
  std::vector<TensorView> chunks_;
  std::unique_ptr<WeightStream> stream_;
  std::unique_ptr<GateUp> gate_up_;
  std::unique_ptr<DownTerms> down_terms_;
  int evictions_ = 0;
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
  h_ = core_.AllocateSbuf("h_t", {np, cfg_.i_chunks(), t}, cfg_.matmul_input_dtype());
  for (int64_t h0 = shard0_; h0 < shard1_; h0 += cfg_.bank_cols) {
    const int64_t width = std::min(shard1_, h0 + cfg_.bank_cols) - h0;
    out_.push_back(core_.AllocateSbuf("mlp_out", {t, width}, cfg_.io_dtype));
  }
  for (int k = 0; k < 2; ++k) {
    acc_gate_[k] = core_.AllocatePsum("gate_acc", {np, per, t});
    acc_up_[k] = core_.AllocatePsum("up_acc", {np, per, t});
    acc_down_[k] = core_.AllocatePsum("down_acc", {t, cfg_.bank_cols});
    if (cfg_.lnc == 2) {
      partial_[k] = core_.AllocateSbuf("gate_up_partial", {np, 2, per, t}, DType::kFloat32);
      peer_[k] = core_.AllocateSbuf("gate_up_peer", {np, 2, per, t}, DType::kFloat32);
    }
  }
  gate_up_ = std::make_unique<GateUp>(core_, cfg_, p_, t);
  down_terms_ = std::make_unique<DownTerms>(core_, cfg_, p_, t);
}

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
  for (int64_t h0 = shard0_; h0 < shard1_; h0 += cfg_.bank_cols) {
    AppendDownChunks(p_.down_w, h0, std::min(shard1_, h0 + cfg_.bank_cols), cfg_, core_.profile(),
                     &chunks_);
  }
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
    gate_up_->Apply(h_.select(1, c).slice(0, 0, rows), g.select(1, k).slice(0, 0, rows),
                    u.select(1, k).slice(0, 0, rows), c);
  }
}

void TkgProgram::Down() {
  const int64_t t = cfg_.tokens;
  for (size_t bank = 0; bank < out_.size(); ++bank) {
    const int64_t h0 = shard0_ + static_cast<int64_t>(bank) * cfg_.bank_cols;
    const int64_t width = out_[bank].free_size();
    const Tile acc = acc_down_[bank % 2].slice(1, 0, width);
    for (int64_t c = 0; c < cfg_.i_chunks(); stream_->PopFront()) {
      const Tile w = stream_->Front();
      for (int64_t q = 0, k = 1; q < w.free_shape()[0]; q += k, c += k) {
        k = Pair(w, q);
        if (k == 2) {
          nisa::nc_matmul(acc, h_.slice(1, c, c + 2), w.slice(1, q, q + 2),
                          {.accumulate = c > 0, .perf_mode = nisa::PerfMode::kDoubleRow});
        } else {
          nisa::nc_matmul(acc, h_.select(1, c).slice(0, 0, w.partitions()), w.select(1, q),
                          {.accumulate = c > 0});
        }
      }
    }
    // Evictions alternate Vector and Scalar (GpSimd cannot read PSUM) so banks overlap.
    Evict(out_[bank], acc, down_terms_->Cut(t, h0, width),
          evictions_++ % 2 == 0 ? Engine::kVector : Engine::kScalar);
    StoreInPieces(result_.output.reshape({t, cfg_.h}).slice(1, h0, h0 + width), out_[bank]);
  }
}

void TkgProgram::Run() {
  x_ = TkgPrologue(ctx_, FrontEnd(cfg_), FrontEndInputsOf(p_), result_.fused_hidden);
  if (cfg_.is_static())
    x_ = QuantizeInputSubtiles(core_, x_, p_.gate_up_in_scale, cfg_.weight_dtype);
  Allocate();
  BuildChunks();
  const DType wdt = cfg_.matmul_weight_dtype();
  const int64_t slot = LargestChunkElements(chunks_), n = static_cast<int64_t>(chunks_.size());
  stream_ =
      std::make_unique<WeightStream>(core_, slot, wdt, n, StreamSlots(core_, slot, wdt, n),
                                     [this](int64_t k) { return chunks_[static_cast<size_t>(k)]; });
  stream_->Start();
  for (size_t b = 0; b < blocks_.size(); ++b) {
    GateUpBlock(b);
    Exchange(b);
    Apply(b);
  }
  Down();
}

}  // namespace

void MlpTkgKernel(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& params,
                  const MlpResult& result) {
  TkgProgram(ctx, cfg, params, result).Run();
}

}  // namespace nkisim::kernels
