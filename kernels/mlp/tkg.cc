// MLP TKG (decode): the tokens (B*S <= 128) stay on the free axis of every product.
//   gate / up: the weights are the stationary operand ([128 H rows, <= 128 I columns]) and the
//     normalised x_hat^T ([128 H rows, B*S], H on the partitions, from the QKV TKG front end) the
//     moving one, so each product comes out as [I rows, B*S] in PSUM: I on the partitions is the
//     layout the down projection contracts, so no transpose sits between the projections, and a
//     matmul costs max(B*S, 64) PE cycles instead of 512 for a [B*S, 512] product.
//   down: the product h^T [I rows, B*S] is the stationary operand and down_w [I rows, 512 H
//     columns] the moving one, into [B*S, 512] PSUM banks: the output's own layout.
// Loop order: gate / up column block by block (512 columns of I: four PSUM chunks [128, B*S] of
// one bank for gate and one for up), this core's H subtiles accumulating; then the down banks of
// this core's output columns, I chunks accumulating. All the weights flow in that order through
// one WeightStream ring, so the down weights stream in while the last gate / up blocks finish and
// the PE trails the HBM stream (the kernel is HBM-bound).
// LNC 2 (mlp.h): core s holds rows [s H / 2, (s + 1) H / 2) of x_hat, Wg and Wu, so its gate / up
// products are partial; after each block the fp32 partials go to the peer (sendrecv) and each
// core adds the peer's (on GpSimd, SBUF only), then applies act * up to the full sums (biases
// added once, after the sum). Down: core s computes and stores output columns
// [s H / 2, (s + 1) H / 2), all of I, disjoint writes.
#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/common/tiling.h"
#include "kernels/mlp/gate_up.h"
#include "kernels/mlp/variants.h"
#include "kernels/mlp/weights.h"
#include "kernels/qkv/tkg_prologue.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

using nisa::AluOp;

// I chunks of 128 rows per gate / up block: one fp32 PSUM bank of [128, chunks, B*S].
int64_t ChunksPerBlock(const MlpConfig& cfg) {
  return std::max<int64_t>(1, cfg.bank_cols / cfg.partitions);
}

class TkgProgram {
 public:
  TkgProgram(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& p,
             const MlpResult& result);
  void Run();

 private:
  void BuildChunks();
  void Accumulate(const Tile& acc, int64_t c_first, int64_t c_end);
  void GateUpBlock(int64_t block);
  void ExchangeAndApply(int64_t block, const Tile& gate, const Tile& up);
  void DownBank(int64_t bank);
  // The next chunk of the stream; Release() frees it.
  Tile Next() { return stream_->Get(next_); }
  void Release() { stream_->Release(next_++); }

  const KernelContext& ctx_;
  NeuronCore& core_;
  const MlpConfig& cfg_;
  const MlpParams& p_;
  const MlpResult& result_;
  int s_;
  int64_t shard0_;  // this core's first output column of down
  Tile x_;          // [P, T, H1s]: this core's rows of x_hat (fp8 for STATIC)
  Tile h_;          // [P, I chunks, T]: h^T, the down projection's stationary
  Tile acc_gate_[2], acc_up_[2], acc_down_[2];
  Tile partial_[2], peer_[2];  // LNC 2: [P, 2, chunks per block, T] fp32 (gate, up)
  Tile out_;                   // [T, H / L] in the I/O dtype
  std::vector<TensorView> chunks_;
  std::vector<int64_t> gate_chunks_, bank_chunks_;  // gate_w chunks per block, chunks per bank
  std::unique_ptr<WeightStream> stream_;
  std::unique_ptr<GateUp> gate_up_;
  std::unique_ptr<DownTerms> down_terms_;
  int64_t next_ = 0;
  int evictions_ = 0;
};

TkgProgram::TkgProgram(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& p,
                       const MlpResult& result)
    : ctx_(ctx), core_(ctx.core), cfg_(cfg), p_(p), result_(result), s_(ctx.prg_id),
      shard0_(ctx.prg_id * cfg.h / cfg.lnc) {}

void TkgProgram::BuildChunks() {
  const int64_t np = cfg_.partitions, h1s = cfg_.shard_subtiles(), cols = ChunksPerBlock(cfg_) * np;
  auto shard = [&](const TensorView& w) {
    return w.reshape({cfg_.lnc, np, h1s, cfg_.i}).select(0, s_);
  };
  const TensorView g = shard(p_.gate_w), u = shard(p_.up_w);
  for (int64_t c0 = 0; c0 < cfg_.i; c0 += cols) {
    const size_t before = chunks_.size();
    AppendGateUpChunks(g, c0, std::min(cfg_.i, c0 + cols), cfg_, core_.profile(), &chunks_);
    gate_chunks_.push_back(static_cast<int64_t>(chunks_.size() - before));
    AppendGateUpChunks(u, c0, std::min(cfg_.i, c0 + cols), cfg_, core_.profile(), &chunks_);
  }
  const int64_t end = shard0_ + cfg_.h / cfg_.lnc;
  for (int64_t h0 = shard0_; h0 < end; h0 += cfg_.bank_cols) {
    const size_t before = chunks_.size();
    AppendDownChunks(p_.down_w, h0, std::min(end, h0 + cfg_.bank_cols), cfg_, core_.profile(),
                     &chunks_);
    bank_chunks_.push_back(static_cast<int64_t>(chunks_.size() - before));
  }
}

// acc[:, c - c_first, :] = sum over this core's H subtiles of W[:, j, chunk c]^T x[:, :, j], for
// the I chunks [c_first, c_end), the next chunks of the stream (one weight's share of a block).
void TkgProgram::Accumulate(const Tile& acc, int64_t c_first, int64_t c_end) {
  const int64_t np = cfg_.partitions, subtiles = cfg_.shard_subtiles();
  for (int64_t j = 0; j < subtiles; Release()) {
    const Tile w = Next();
    for (int64_t jj = 0; jj < w.free_shape()[0]; ++jj, ++j) {
      for (int64_t c = c_first; c < c_end; ++c) {
        const int64_t rows = cfg_.i_rows(c), col = (c - c_first) * np;
        nisa::nc_matmul(acc.select(1, c - c_first).slice(0, 0, rows),
                        w.select(1, jj).slice(1, col, col + rows), x_.select(2, j),
                        {.accumulate = j > 0});
      }
    }
  }
}

void TkgProgram::GateUpBlock(int64_t block) {
  const int64_t per = ChunksPerBlock(cfg_), c_first = block * per;
  const int64_t c_end = std::min(cfg_.i_chunks(), c_first + per);
  const Tile gate = acc_gate_[block % 2].slice(1, 0, c_end - c_first);
  const Tile up = acc_up_[block % 2].slice(1, 0, c_end - c_first);
  Accumulate(gate, c_first, c_end);
  Accumulate(up, c_first, c_end);
  ExchangeAndApply(block, gate, up);
}

void TkgProgram::ExchangeAndApply(int64_t block, const Tile& gate, const Tile& up) {
  const int64_t c_first = block * ChunksPerBlock(cfg_), chunks = gate.free_shape()[0];
  Tile g = gate, u = up;
  if (cfg_.lnc == 2) {
    const Tile mine = partial_[block % 2].slice(2, 0, chunks);
    const Tile peer = peer_[block % 2].slice(2, 0, chunks);
    nisa::tensor_copy(mine.select(1, 0), gate, Engine::kVector);
    nisa::tensor_copy(mine.select(1, 1), up, Engine::kScalar);
    nisa::sendrecv(mine, peer);
    nisa::tensor_tensor(mine, mine, peer, AluOp::kAdd, Engine::kGpSimd);
    g = mine.select(1, 0);
    u = mine.select(1, 1);
  }
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t c = c_first + k, rows = cfg_.i_rows(c);
    gate_up_->Apply(h_.select(1, c).slice(0, 0, rows), g.select(1, k).slice(0, 0, rows),
                    u.select(1, k).slice(0, 0, rows), c);
  }
}

void TkgProgram::DownBank(int64_t bank) {
  const int64_t t = cfg_.tokens, h0 = shard0_ + bank * cfg_.bank_cols;
  const int64_t h1 = std::min(shard0_ + cfg_.h / cfg_.lnc, h0 + cfg_.bank_cols);
  const Tile acc = acc_down_[bank % 2].slice(1, 0, h1 - h0);
  const int64_t n = bank_chunks_[static_cast<size_t>(bank)];
  for (int64_t k = 0, c = 0; k < n; ++k, Release()) {
    const Tile w = Next();
    for (int64_t q = 0; q < w.free_shape()[0]; ++q, ++c) {
      nisa::nc_matmul(acc, h_.select(1, c).slice(0, 0, w.partitions()), w.select(1, q),
                      {.accumulate = c > 0});
    }
  }
  // Evictions alternate Vector and Scalar (GpSimd cannot read PSUM) so banks overlap.
  const Tile out = out_.slice(1, h0 - shard0_, h1 - shard0_);
  Evict(out, acc, down_terms_->Cut(t, h0, h1 - h0),
        evictions_++ % 2 == 0 ? Engine::kVector : Engine::kScalar);
  StoreInPieces(result_.output.reshape({t, cfg_.h}).slice(1, h0, h1), out);
}

void TkgProgram::Run() {
  const int64_t np = cfg_.partitions, t = cfg_.tokens, per = ChunksPerBlock(cfg_);
  x_ = TkgPrologue(ctx_, PrologueConfig(cfg_), PrologueParams(p_), result_.fused_hidden);
  if (cfg_.is_static()) x_ = QuantizeInput(core_, x_, p_.gate_up_in_scale, cfg_.weight_dtype);
  h_ = core_.AllocateSbuf("h_t", {np, cfg_.i_chunks(), t}, cfg_.matmul_input_dtype());
  out_ = core_.AllocateSbuf("mlp_out", {t, cfg_.h / cfg_.lnc}, cfg_.io_dtype);
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
  BuildChunks();
  const DType wdt = cfg_.matmul_weight_dtype();
  const int64_t slot = LargestChunkElements(chunks_), n = static_cast<int64_t>(chunks_.size());
  stream_ = std::make_unique<WeightStream>(core_, slot, wdt, n, StreamSlots(core_, slot, wdt, n),
                                           [this](int64_t k) { return chunks_[static_cast<size_t>(k)]; });
  stream_->Start();
  const int64_t blocks = static_cast<int64_t>(gate_chunks_.size());
  for (int64_t b = 0; b < blocks; ++b) GateUpBlock(b);
  for (int64_t b = 0; b < static_cast<int64_t>(bank_chunks_.size()); ++b) DownBank(b);
}

}  // namespace

void MlpTkgKernel(const KernelContext& ctx, const MlpConfig& cfg, const MlpParams& params,
                  const MlpResult& result) {
  TkgProgram(ctx, cfg, params, result).Run();
}

}  // namespace nkisim::kernels
