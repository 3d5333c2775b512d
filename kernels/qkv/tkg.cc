// QKV TKG (decode), after qkv_tkg.py: H on the partitions in 128-row subtiles, the fused output
// axis I in 512-column PSUM banks, one matmul accumulation per bank over this core's H shard.
//
// Core s of L owns the contiguous rows [s*H/L, (s+1)*H/L) of W and of the normalised input. Its
// partial product leaves PSUM rounded to the input dtype (shard 0 adds the bias, so it is added
// once), goes to the peer with sendrecv, and each core adds the peer's partial: both hold the
// full result, and each stores half of it (disjoint columns, or whole heads for NBSd).
//
// Loop order: bank by bank, this core's H subtiles accumulating into the bank's PSUM tile; the
// weights arrive in that order as DMAs of about DmaTargetBytes through a WeightStream ring, so
// the PE trails the HBM stream by one chunk. Each bank is evicted, exchanged, added and stored
// as soon as it is complete, which overlaps all of that with the next banks' weight stream and
// leaves only the last bank's epilogue after the last weight byte arrives (the kernel being
// HBM-bound). The reference instead exchanges per I block of 4096 columns (qkv_tkg.py:1042-1123).
#include <algorithm>
#include <vector>

#include "kernels/qkv/epilogue.h"
#include "kernels/qkv/mx_scales.h"
#include "kernels/common/tiling.h"
#include "kernels/common/tkg_prologue.h"
#include "kernels/qkv/variants.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

using nisa::AluOp;

// Weight-ring slots per DMA queue: enough chunks in flight to keep every queue busy while the PE
// consumes earlier ones, without holding the whole weight shard (whose allocation costs host time).
constexpr int64_t kSlotsPerQueue = 2;

// STATIC: x / s_in clamped to the fp8 range of the weights, cast to their fp8 type.
Tile QuantizeInput(NeuronCore& core, const QkvConfig& cfg, const QkvParams& p, const Tile& x) {
  const Tile inv = LoadInverseInputScale(core, p.qkv_in_scale, cfg.partitions);
  const float fp8_max = static_cast<float>(MaxValue(cfg.weight_dtype));
  Tile scaled = core.AllocateSbuf("x_scaled", x.shape(), DType::kFloat32);
  nisa::tensor_scalar(
      scaled, x,
      {.op0 = AluOp::kMultiply, .operand0 = inv, .op1 = AluOp::kMin, .operand1 = fp8_max});
  Tile q = core.AllocateSbuf("x_fp8", x.shape(), cfg.weight_dtype);
  nisa::tensor_scalar(q, scaled, {.op0 = AluOp::kMax, .operand0 = -fp8_max});
  return q;
}

// Stores the units (columns, or heads of d columns for NBSd) of [0, upto) not stored yet; core s
// of L takes the s-th share, so the cores write disjoint parts.
class ShardedStore {
 public:
  ShardedStore(const QkvConfig& cfg, const QkvParams& p, const TensorView& output, int s)
      : out_(output, p.output_layout, cfg.d),
        unit_(p.output_layout == QkvOutputLayout::kNBSd ? cfg.d : 1),
        s_(s),
        l_(cfg.lnc) {}

  void StoreUpTo(const Tile& result, int64_t upto) {
    const int64_t u0 = stored_, u1 = upto / unit_;
    const int64_t a = u0 + (u1 - u0) * s_ / l_, b = u0 + (u1 - u0) * (s_ + 1) / l_;
    if (a < b) out_.Store(result.slice(1, a * unit_, b * unit_), 0, a * unit_);
    stored_ = u1;
  }

 private:
  FusedOutput out_;
  int64_t unit_;
  int s_, l_;
  int64_t stored_ = 0;
};

}  // namespace

void QkvTkgKernel(const KernelContext& ctx, const QkvConfig& cfg, const QkvParams& params,
                  const QkvResult& result) {
  NeuronCore& core = ctx.core;
  const int s = ctx.prg_id, l = cfg.lnc;
  const int64_t np = cfg.partitions, tokens = cfg.tokens, h1s = cfg.shard_subtiles();
  const int64_t bank = cfg.bank_cols, banks = (cfg.i + bank - 1) / bank;

  Tile x_in = TkgPrologue(ctx, cfg, QkvFrontEndInputs(params), result.fused_hidden);
  if (cfg.quant == QuantizationType::kStatic) x_in = QuantizeInput(core, cfg, params, x_in);
  // MX: x_in [P, T, Q, 4] quantized per chunk into x4 [P, Q, T] with its E8M0 scales [P, Q, T].
  const int64_t q_chunks = cfg.mx() ? cfg.mx_tkg_chunks() : 0;
  const int64_t mp = cfg.mx() ? cfg.mx_tkg_partitions() : np;  // contraction partitions
  MxBankScales w_scales;
  Tile x4, x_scales;
  if (cfg.mx()) {
    x4 = core.AllocateSbuf("x_mx", {mp, q_chunks, tokens}, DType::kFp8E4M3FNx4);
    x_scales = core.AllocateSbuf("x_mx_scale", {mp, q_chunks, tokens}, DType::kUInt8);
    for (int64_t q = 0; q < q_chunks; ++q) {
      nisa::quantize_mx(x4.select(1, q), x_in.select(2, q), x_scales.select(1, q));
    }
    // The weight scales in groups of two banks (one DMA per quadrant and group, not per bank),
    // through a ring of two groups; four banks or fewer load once. Four banks' worth of SBUF, as
    // long as that is at most a quarter of the free SBUF (else two: a bank at a time).
    // Where every bank's accumulator fits PSUM and every bank's scales fit half the free SBUF,
    // they all load as one group: the weights then stream as whole rows (below).
    const int64_t bank_bytes = q_chunks * cfg.bank_cols;
    const int64_t all = banks * bank_bytes;
    const int64_t budget =
        banks <= core.profile().psum_banks() && all <= SbufFreeBytes(core) / 2
            ? all
            : std::max(2 * bank_bytes, std::min(4 * bank_bytes, SbufFreeBytes(core) / 4));
    w_scales = MxBankScales(core, cfg, params, l, s, q_chunks, mp, cfg.bank_cols, budget);
  }
  const Epilogue epilogue(core, cfg, params, tokens, cfg.io_dtype, /*add_bias=*/s == 0);
  Tile full = core.AllocateSbuf("qkv", {tokens, cfg.i}, cfg.io_dtype);
  Tile partial = full, peer;
  if (l == 2) {
    partial = core.AllocateSbuf("qkv_partial", {tokens, cfg.i}, cfg.io_dtype);
    peer = core.AllocateSbuf("qkv_peer_partial", {tokens, cfg.i}, cfg.io_dtype);
  }
  std::vector<Tile> acc;
  for (int64_t i = 0; i < std::min<int64_t>(banks, core.profile().psum_banks()); ++i) {
    acc.push_back(core.AllocatePsum("acc", {tokens, bank}));
  }

  // Weight chunks in consumption order, bank by bank; a narrow last bank takes more H subtiles
  // per chunk, so every DMA moves about DmaTargetBytes.
  const DType wdt = cfg.matmul_weight_dtype();
  const int64_t wbytes = static_cast<int64_t>(SizeOf(wdt)), target = DmaTargetBytes(core.profile());
  // Contraction subtiles per core: 128-row subtiles of H, or MX chunks of 4 x 128 rows.
  const int64_t subtiles = cfg.mx() ? q_chunks : h1s;
  const TensorView w =
      cfg.mx() ? params.fused_qkv_weights.reshape({l, q_chunks, mp, cfg.i}).select(0, s).permute({1, 0, 2})
               : params.fused_qkv_weights.reshape({l, np, h1s, cfg.i}).select(0, s);
  std::vector<TensorView> chunks;
  int64_t slot_elements = 1;
  // Where every bank's accumulator fits PSUM at once (and, MX, every bank's scales are resident),
  // chunks hold whole rows of the weight (all I columns of a few H subtiles or MX chunks): each
  // partition's row is one contiguous run of I x dtype bytes, so the DMA engines move it in few,
  // long descriptors (a bank-wide chunk's rows are 1 KiB runs in bf16, 2 KiB in MX: 16 B/ns an
  // engine instead of 21 at I 1280 in bf16; runtime/dma_engines.h).
  const bool whole_rows =
      banks <= static_cast<int64_t>(acc.size()) && (!cfg.mx() || w_scales.resident());
  if (whole_rows) {
    const int64_t hc = std::clamp<int64_t>(target / (mp * cfg.i * wbytes), 1, subtiles);
    slot_elements = hc * cfg.i;
    for (int64_t j0 = 0; j0 < subtiles; j0 += hc) {
      chunks.push_back(w.slice(1, j0, std::min(subtiles, j0 + hc)));
    }
  }
  for (int64_t c0 = 0; !whole_rows && c0 < cfg.i; c0 += bank) {
    const int64_t c1 = std::min(cfg.i, c0 + bank);
    // MX: one chunk (4 x 128 rows of H) per DMA. A chunk of a full bank is 256 KiB, about the
    // DMA target already, and a narrow last bank's chunks then spread over as many queues.
    const int64_t hc = cfg.mx() ? 1
                                : std::clamp<int64_t>(target / (mp * (c1 - c0) * wbytes), 1, subtiles);
    slot_elements = std::max(slot_elements, hc * (c1 - c0));
    for (int64_t j0 = 0; j0 < subtiles; j0 += hc) {
      chunks.push_back(w.slice(1, j0, std::min(subtiles, j0 + hc)).slice(2, c0, c1));
    }
  }
  const int64_t n_chunks = static_cast<int64_t>(chunks.size());
  const int64_t slots = std::clamp<int64_t>(std::min(SbufFreeBytes(core) / (slot_elements * wbytes),
                                                     kSlotsPerQueue * core.profile().dma_queues()),
                                            1, n_chunks);
  WeightStream stream(core, slot_elements, wdt, n_chunks, slots,
                      [&chunks](int64_t k) { return chunks[static_cast<size_t>(k)]; });
  if (cfg.mx()) w_scales.Prefetch(banks);
  stream.Start();

  ShardedStore store(cfg, params, result.output, s);
  // Whole-row chunks: every chunk feeds every bank; the banks evict after the last chunk.
  for (int64_t k = 0, j0 = 0; whole_rows && k < n_chunks; ++k) {
    const Tile chunk = stream.Get(k);
    for (int64_t jj = 0; jj < chunk.free_shape()[0]; ++jj, ++j0) {
      for (int64_t b = 0; b < banks; ++b) {
        const int64_t c0 = b * bank, c1 = std::min(cfg.i, c0 + bank);
        const Tile a = acc[static_cast<size_t>(b)].slice(1, 0, c1 - c0);
        if (cfg.mx()) {
          nisa::nc_matmul_mx(a, x4.select(1, j0), chunk.select(1, jj).slice(1, c0, c1),
                             x_scales.select(1, j0), w_scales.Get(b).select(1, j0),
                             {.accumulate = j0 > 0});
        } else {
          nisa::nc_matmul(a, x_in.select(2, j0), chunk.select(1, jj).slice(1, c0, c1),
                          {.accumulate = j0 > 0});
        }
      }
    }
    stream.Release(k);
  }
  int64_t k = 0;
  for (int64_t b = 0; b < banks; ++b) {
    const int64_t c0 = b * bank, c1 = std::min(cfg.i, c0 + bank);
    const Tile a = acc[static_cast<size_t>(b) % acc.size()].slice(1, 0, c1 - c0);
    const Tile ws = cfg.mx() && !whole_rows ? w_scales.Get(b) : Tile();
    for (int64_t j0 = 0; !whole_rows && j0 < subtiles; ++k) {
      const Tile chunk = stream.Get(k);
      for (int64_t jj = 0; jj < chunk.free_shape()[0]; ++jj, ++j0) {
        if (cfg.mx()) {
          nisa::nc_matmul_mx(a, x4.select(1, j0), chunk.select(1, jj), x_scales.select(1, j0),
                             ws.select(1, j0).slice(1, 0, c1 - c0), {.accumulate = j0 > 0});
        } else {
          nisa::nc_matmul(a, x_in.select(2, j0), chunk.select(1, jj), {.accumulate = j0 > 0});
        }
      }
      stream.Release(k);
    }
    if (cfg.mx() && !whole_rows) w_scales.Next(b, banks);
    // Evictions alternate between Vector and Scalar (GpSimd cannot read PSUM) so consecutive
    // banks' evictions overlap.
    epilogue.Evict(partial.slice(1, c0, c1), a, c0, b % 2 == 0 ? Engine::kVector : Engine::kScalar);
    if (whole_rows) continue;  // the banks end together: one exchange and store after the loop
    if (l == 2) {
      nisa::sendrecv(partial.slice(1, c0, c1), peer.slice(1, c0, c1));
      nisa::tensor_tensor(full.slice(1, c0, c1), partial.slice(1, c0, c1), peer.slice(1, c0, c1),
                          AluOp::kAdd);
    }
    store.StoreUpTo(full, c1);
  }
  if (whole_rows) {
    // Every DMA pays its fixed latency (about 1.3 us): one exchange and one store of all I
    // columns, not one a bank.
    if (l == 2) {
      nisa::sendrecv(partial, peer);
      nisa::tensor_tensor(full, partial, peer, AluOp::kAdd);
    }
    store.StoreUpTo(full, cfg.i);
  }
}

}  // namespace nkisim::kernels
