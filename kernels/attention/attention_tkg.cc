#include "kernels/attention/attention_tkg.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

using nisa::ActFn;
using nisa::AluOp;

constexpr const char* kName = "attention_tkg";
// nb (= -max * scale) of a partial that has seen no token: exp(-kNoMax + x) underflows to 0.
constexpr float kNoMax = 3.0e38f;
// KV ring slots per DMA queue: enough transfers in flight to keep the HBM port busy.
constexpr int64_t kSlotsPerQueue = 2;
// Smallest DMA of the start-up ramp.
constexpr int64_t kRampPieceBytes = 16 * 1024;
// Largest KV DMA (but in the middle of a long stream): 96 KiB holds a queue 4.2 us and
// 16 such queues still outrun the HBM port (16 x 96 KiB / 4.2 us = 375 GB/s > 362.5), while a
// whole 128 KiB chunk arrives 5.4 us after its issue, which the small-batch streams (a few MB)
// cannot hide.
constexpr int64_t kMaxPieceBytes = 96 * 1024;
// A stream of at least this many bytes per core is cut into fewer, larger DMAs but for its first
// and last kStreamEdgeBytes (see the ramp).
constexpr int64_t kLongStreamBytes = 6 * 1024 * 1024;
constexpr int64_t kStreamEdgeBytes = 1024 * 1024;
// PE work (ns) the score matmuls should run ahead of the softmax that consumes them.
constexpr double kLookaheadNs = 2500.0;

// Options of exp(-x + bias): the rescale factor exp(old nb - new nb) of a partial.
nisa::ActivationOptions ShiftedExp(const Tile& bias) {
  nisa::ActivationOptions options;
  options.scale = -1.0f;
  options.bias = bias;
  return options;
}

[[noreturn]] void Fail(const std::string& operand, const TensorView& t, const std::string& rule) {
  Raise(ErrorCode::kInvalidArgument,
        StrCat(kName, ": ", operand, " ", t.valid() ? ShapeString(t.shape()) : "<none>", " ",
               t.valid() ? DTypeName(t.dtype()) : "", ": ", rule));
}

// One DMA of a KV chunk: HBM view -> partitions [p0, p0 + view.dim(0)) of the slot.
struct Piece {
  int64_t p0;
  TensorView view;
};

// The K / V chunks in the order the PE consumes them, through a fixed ring of SBUF slots: chunk
// k + slots is loaded into chunk k's slot when k is released, and the scoreboard makes that DMA
// wait for chunk k's readers, so the model sees a bounded buffer.
class KvStream {
 public:
  KvStream(NeuronCore& core, int64_t slot_elements, DType dtype, std::vector<std::vector<Piece>> chunks,
           int64_t slots)
      : chunks_(std::move(chunks)) {
    slots = std::clamp<int64_t>(slots, 1, std::max<int64_t>(1, static_cast<int64_t>(chunks_.size())));
    for (int64_t i = 0; i < slots; ++i) {
      slots_.push_back(core.AllocateSbuf(StrCat("kv_slot", i),
                                         {core.profile().partitions(), slot_elements}, dtype));
    }
  }
  void Start() {
    while (issued_ < std::min<int64_t>(size(), static_cast<int64_t>(slots_.size()))) Issue();
  }
  // Chunk k's slot as [partitions, free...] of its first piece's free shape, or flat when the
  // chunk has several pieces. REQUIRES: k is the next chunk to release.
  Tile Get(int64_t k) const {
    if (k != released_ || k >= issued_) {
      Raise(ErrorCode::kInternal, StrCat(kName, ": KV chunk ", k, " is not resident (released ",
                                         released_, ", issued ", issued_, ")"));
    }
    return slots_[static_cast<size_t>(k) % slots_.size()];
  }
  void Release() {
    ++released_;
    if (issued_ < size()) Issue();
  }
  int64_t size() const { return static_cast<int64_t>(chunks_.size()); }

 private:
  void Issue() {
    const Tile& slot = slots_[static_cast<size_t>(issued_) % slots_.size()];
    for (const Piece& piece : chunks_[static_cast<size_t>(issued_)]) {
      const TensorView& v = piece.view;
      const Shape free(v.shape().begin() + 1, v.shape().end());
      nisa::dma_copy(
          slot.slice(0, piece.p0, piece.p0 + v.dim(0)).slice(1, 0, NumElements(free)).reshape(free), v);
    }
    ++issued_;
  }
  std::vector<Tile> slots_;
  std::vector<std::vector<Piece>> chunks_;
  int64_t issued_ = 0, released_ = 0;
};

// A step: one block of tokens for one group of rows.
struct Step {
  int64_t group;     // group index
  int64_t t0, w;     // tokens [t0, t0 + w) of the cache
  bool first, last;  // first / last block of its group on this core
};

}  // namespace

void ValidateAttentionTkg(const AttentionTkgParams& p, const HardwareProfile& profile) {
  for (const auto& [name, t] : {std::pair<const char*, const TensorView&>{"q", p.q},
                                {"k_cache", p.k_cache}, {"v_cache", p.v_cache}}) {
    if (!t.valid() || t.rank() != 3) Fail(name, t, "must be a 3-D tensor");
    if (!IsFloat(t.dtype())) Fail(name, t, "dtype must be a float type");
  }
  const int64_t g = p.q.dim(0), bl = p.q.dim(1), d = p.q.dim(2);
  if (d > profile.partitions()) {
    Fail("q", p.q, StrCat("d = ", d, " must be <= ", profile.partitions(), " (the partitions)"));
  }
  if (g > profile.pe_cols()) {
    Fail("q", p.q, StrCat("G = ", g, " heads must be <= ", profile.pe_cols(), " (the PE columns)"));
  }
  const Shape& k = p.k_cache.shape();
  const Shape& v = p.v_cache.shape();
  if (p.k_cache.dtype() != p.v_cache.dtype()) {
    Fail("v_cache", p.v_cache, StrCat("dtype must equal k_cache's ", DTypeName(p.k_cache.dtype())));
  }
  if (k[2] == 0) Fail("k_cache", p.k_cache, "T = 0: the cache must hold at least one token");
  if (v[0] != k[0] || v[1] != k[2] || v[2] != k[1]) {
    Fail("v_cache", p.v_cache,
         StrCat("must be [Bl, T, d] = [", k[0], ", ", k[2], ", ", k[1], "] to match k_cache ",
                ShapeString(k), " [Bl, d, T]"));
  }
  if (k[0] != bl || k[1] != d) {
    Fail("q", p.q, StrCat("[G, Bl, d] must have Bl = ", k[0], " and d = ", k[1], " of k_cache ",
                          ShapeString(k), " [Bl, d, T]"));
  }
}

AttentionTkgPlan PlanAttentionTkg(const AttentionTkgParams& p, int lnc,
                                  const HardwareProfile& prof) {
  AttentionTkgPlan plan;
  plan.heads = p.q.dim(0);
  plan.rows = p.q.dim(1);
  plan.d = p.q.dim(2);
  plan.tokens = p.k_cache.dim(2);
  const int64_t np = prof.partitions();
  plan.rows_per_group = std::clamp<int64_t>(np / plan.heads, 1, plan.rows);
  plan.rows_per_pack = std::clamp<int64_t>(np / plan.d, 1, plan.rows_per_group);
  plan.rows_per_group = plan.rows_per_group / plan.rows_per_pack * plan.rows_per_pack;
  plan.block = prof.pe_max_moving_free();
  // An even split: each core's HBM port moves half of the cache (rounding core 0 up to 128
  // tokens cost up to 1.25x at T = 1025).
  plan.core0_tokens = lnc == 1 ? plan.tokens : (plan.tokens + 1) / 2;
  (void)np;
  return plan;
}

void AttentionTkgKernel(const KernelContext& ctx, const AttentionTkgParams& params,
                        const TensorView& out) {
  NeuronCore& core = ctx.core;
  const HardwareProfile& prof = core.profile();
  const AttentionTkgPlan plan = PlanAttentionTkg(params, ctx.n_prgs, prof);
  const int64_t g = plan.heads, bl = plan.rows, d = plan.d, np = prof.partitions();
  const int64_t c = plan.rows_per_pack, r = plan.rows_per_group, cd = c * d;
  const int64_t groups = (bl + r - 1) / r;
  const DType kdt = params.k_cache.dtype(), vdt = params.v_cache.dtype(), odt = out.dtype();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int s = ctx.prg_id, lnc = ctx.n_prgs;
  const int64_t t_lo = s == 0 ? 0 : plan.core0_tokens;
  const int64_t t_hi = (s == 0 && lnc == 2) ? plan.core0_tokens : plan.tokens;
  auto group_rows = [&](int64_t gi) { return std::min(r, bl - gi * r); };
  auto group_packs = [&](int64_t gi) { return (group_rows(gi) + c - 1) / c; };

  // ---- the steps and the KV chunks in PE consumption order ----
  std::vector<Step> steps;
  // The core's tokens in ceil(n / 512) blocks of equal width (a multiple of 128 but the last):
  // 513 tokens are 384 + 129, not 512 + 1, whose one-token block pays every fixed cost again.
  const int64_t n_blocks = (t_hi - t_lo + plan.block - 1) / plan.block;
  const int64_t width =
      n_blocks == 0 ? plan.block
                    : std::min(plan.block, ((t_hi - t_lo + n_blocks - 1) / n_blocks + np - 1) / np * np);
  for (int64_t gi = 0; gi < groups; ++gi) {
    for (int64_t t0 = t_lo; t0 < t_hi; t0 += width) {
      steps.push_back({gi, t0, std::min(width, t_hi - t0), t0 == t_lo, t0 + width >= t_hi});
    }
  }
  const int64_t n_steps = static_cast<int64_t>(steps.size());
  const bool merged_k = params.k_cache.strides()[0] == d * params.k_cache.strides()[1];
  auto k_chunk = [&](const Step& st, int64_t pack) {
    const int64_t b0 = st.group * r + pack * c, cc = std::min(c, bl - b0);
    std::vector<Piece> pieces;
    if (merged_k || cc == 1) {
      const TensorView rows = params.k_cache.slice(0, b0, b0 + cc).slice(2, st.t0, st.t0 + st.w);
      AccessPattern flat{rows.offset(), {{rows.strides()[1], cc * d}, {rows.strides()[2], st.w}}};
      pieces.push_back({0, rows.ap(flat)});
    } else {
      for (int64_t j = 0; j < cc; ++j) {
        pieces.push_back({j * d, params.k_cache.select(0, b0 + j).slice(1, st.t0, st.t0 + st.w)});
      }
    }
    return pieces;
  };
  // V of a pack: the full 128-token chunks as [128, n, cc, d], then the remainder [rem, cc, d].
  auto v_chunks = [&](const Step& st, int64_t pack) {
    const int64_t b0 = st.group * r + pack * c, cc = std::min(c, bl - b0);
    const int64_t nfull = st.w / np, rem = st.w % np;
    const TensorView rows = params.v_cache.slice(0, b0, b0 + cc);
    std::vector<std::vector<Piece>> out_chunks;
    if (nfull > 0) {
      const TensorView full = rows.slice(1, st.t0, st.t0 + nfull * np);
      AccessPattern ap{full.offset(),
                       {{full.strides()[1], np}, {np * full.strides()[1], nfull},
                        {full.strides()[0], cc}, {full.strides()[2], d}}};
      out_chunks.push_back({{0, full.ap(ap)}});
    }
    if (rem > 0) {
      out_chunks.push_back(
          {{0, rows.slice(1, st.t0 + nfull * np, st.t0 + st.w).permute({1, 0, 2})}});
    }
    return out_chunks;
  };

  // P @ V in the V-stationary form when it has fewer moving columns: V [128 tokens, c * d]
  // stationary, P^T [128 tokens, c * G] moving, so a matmul costs max(c * G, pe_min_cycles)
  // instead of max(c * d, pe_min_cycles) cycles (G = 8, d = 128: 124 instead of 188 with the
  // access overhead). The step's result is transposed, [c * d, rows * G]; one Vector transpose
  // per step (from PSUM) brings it back to the accumulator's [rows * G, c * d].
  const bool v_stationary = MatmulNs(prof, c * g, vdt) < MatmulNs(prof, cd, vdt);
  // Lookahead: the score matmuls of step k + L run on the PE with P @ V of step k.
  const double step_pe_ns =
      group_packs(0) * (MatmulNs(prof, plan.block, kdt) +
                        (plan.block / np) * MatmulNs(prof, v_stationary ? c * g : cd, vdt)) +
      (plan.block / np) * MatmulNs(prof, r * g, vdt);
  const int64_t look =
      std::clamp<int64_t>(static_cast<int64_t>(std::ceil(kLookaheadNs / step_pe_ns)), 1, 3);

  // Consumption order: K of steps [0, L); then per step k: K(k + L, i) interleaved with V(k, i).
  struct Item {
    bool is_k;
    int64_t step, pack, chunks;
  };
  std::vector<std::vector<Piece>> chunks;
  std::vector<Item> order;
  auto add_k = [&](int64_t k) {
    for (int64_t i = 0; i < group_packs(steps[k].group); ++i) {
      chunks.push_back(k_chunk(steps[k], i));
      order.push_back({true, k, i, 1});
    }
  };
  for (int64_t k = 0; k < std::min(look, n_steps); ++k) add_k(k);
  std::vector<size_t> iteration_begin;
  for (int64_t k = 0; k < n_steps; ++k) {
    iteration_begin.push_back(order.size());
    const int64_t kn = k + look;
    const int64_t packs_k = group_packs(steps[k].group);
    const int64_t packs_n = kn < n_steps ? group_packs(steps[kn].group) : 0;
    for (int64_t i = 0; i < std::max(packs_k, packs_n); ++i) {
      if (i < packs_n) {
        chunks.push_back(k_chunk(steps[kn], i));
        order.push_back({true, kn, i, 1});
      }
      if (i < packs_k) {
        auto v = v_chunks(steps[k], i);
        order.push_back({false, k, i, static_cast<int64_t>(v.size())});
        for (auto& piece : v) chunks.push_back(std::move(piece));
      }
    }
  }
  iteration_begin.push_back(order.size());

  // ---- on-chip buffers (fixed rings, so the scoreboard sees every reuse) ----
  const int64_t ring = look + 2;
  const DType f32 = DType::kFloat32;
  auto sbuf_ring = [&](const char* name, int64_t n, const Shape& shape, DType dt) {
    std::vector<Tile> tiles;
    for (int64_t i = 0; i < n; ++i) tiles.push_back(core.AllocateSbuf(StrCat(name, i), shape, dt));
    return tiles;
  };
  auto psum_ring = [&](const char* name, int64_t n, const Shape& shape, DType dt) {
    std::vector<Tile> tiles;
    for (int64_t i = 0; i < n; ++i) tiles.push_back(core.AllocatePsum(StrCat(name, i), shape, dt));
    return tiles;
  };
  const int64_t nj_max = plan.block / np;
  const std::vector<Tile> qbd = sbuf_ring("q_blockdiag", 2, {np, (r / c) * c * g}, kdt);
  const std::vector<Tile> gstate = sbuf_ring("partial", ring, {np, cd + 2}, f32);
  const std::vector<Tile> peer = lnc == 2 ? sbuf_ring("peer_partial", 2, {np, cd + 2}, f32)
                                          : std::vector<Tile>{};
  const std::vector<Tile> out_t = sbuf_ring("out", 2, {np, cd}, odt);
  std::vector<Tile> s_ps, p_sb, mx, nb, alpha, rs, pt_ps, pt_sb, pv_ps, pv_sb;
  if (n_steps > 0) {
    s_ps = psum_ring("scores", look + 1, {np, plan.block}, f32);
    pt_ps = psum_ring("p_t_psum", 2, {np, nj_max * np}, vdt);
    pv_ps = psum_ring("pv", 2, {np, v_stationary ? r * g : cd}, f32);
    if (v_stationary) pv_sb = sbuf_ring("pv_t", 2, {np, cd}, f32);
    p_sb = sbuf_ring("p", look + 1, {np, plan.block}, vdt);
    pt_sb = sbuf_ring("p_t", 2, {np, nj_max * np}, vdt);
    mx = sbuf_ring("block_max", ring, {np, 1}, f32);
    nb = sbuf_ring("neg_max", ring, {np, 1}, f32);
    alpha = sbuf_ring("rescale", ring, {np, 1}, f32);
    rs = sbuf_ring("block_sum", ring, {np, 1}, f32);
  }
  auto at = [](const std::vector<Tile>& v, int64_t i) -> const Tile& {
    return v[static_cast<size_t>(i) % v.size()];
  };

  // q of a group as a block-diagonal stationary per pack: partition j*d + e, column j*G + h of
  // pack i holds q[h, b0 + i*c + j, e].
  auto load_q = [&](int64_t gi) {
    const Tile& t = at(qbd, gi);
    const int64_t b0 = gi * r, rows = group_rows(gi);
    if (c > 1) nisa::memset(t, 0.0f, Engine::kGpSimd);
    if (c == 1) {
      nisa::dma_copy(t.slice(0, 0, d).slice(1, 0, rows * g).reshape({rows, g}),
                     params.q.slice(1, b0, b0 + rows).permute({2, 1, 0}));
      return;
    }
    for (int64_t b = 0; b < rows; ++b) {
      const int64_t i = b / c, j = b % c;
      nisa::dma_copy(t.slice(0, j * d, (j + 1) * d).slice(1, i * c * g + j * g, i * c * g + (j + 1) * g),
                     params.q.select(1, b0 + b).permute({1, 0}));
    }
  };

  // Start-up ramp: a 128 KiB DMA holds its queue about 5 us, so the first chunks are cut (along
  // their partitions) into pieces of about 1/4 of the bytes streamed before them (at most kMaxPieceBytes), at least
  // kRampPieceBytes: the first blocks arrive at about the port's pace instead of one whole-chunk
  // DMA latency late.
  {
    int64_t total = 0;
    for (const auto& chunk : chunks) {
      for (const Piece& piece : chunk) total += piece.view.size_bytes();
    }
    // A short stream (a few MB) is cut so that every queue carries about two pieces of it: one
    // whole-chunk DMA holds its queue ~5 us, longer than the whole stream's HBM time.
    const int64_t cap = std::min<int64_t>(
        kMaxPieceBytes, std::max<int64_t>(kRampPieceBytes, total / (2 * prof.dma_queues())));
    int64_t streamed = 0;
    for (auto& chunk : chunks) {
      int64_t bytes = 0;
      for (const Piece& piece : chunk) bytes += piece.view.size_bytes();
      const int64_t piece_bytes = std::min(cap, std::max<int64_t>(kRampPieceBytes, streamed / 4));
      streamed += bytes;
      if (piece_bytes >= bytes || chunk.size() != 1) continue;
      const Piece whole = chunk[0];
      const int64_t rows = whole.view.dim(0);
      // The middle of a long stream rounds the piece count down (pieces of at least piece_bytes,
      // so a 128 KiB chunk is one DMA): 16 queues of 64 KiB DMAs move only 350 GB/s (600 ns fixed
      // per DMA), below the 362.5 GB/s port. Its first and last MiB keep the smaller pieces, so
      // the first blocks arrive early and the last ones trail the port by less.
      const bool middle = total >= kLongStreamBytes && streamed >= kStreamEdgeBytes &&
                          total - streamed >= kStreamEdgeBytes;
      const int64_t n = std::min<int64_t>(rows, middle ? std::max<int64_t>(1, bytes / piece_bytes)
                                                       : (bytes + piece_bytes - 1) / piece_bytes);
      chunk.clear();
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r0 = rows * i / n, r1 = rows * (i + 1) / n;
        chunk.push_back({whole.p0 + r0, whole.view.slice(0, r0, r1)});
      }
    }
  }
  // K and V share one dtype (validated), so they share the ring.
  KvStream stream(core, std::max(plan.block, nj_max * cd), kdt, std::move(chunks),
                  kSlotsPerQueue * prof.dma_queues());
  if (groups > 0 && n_steps > 0) load_q(0);
  stream.Start();
  int64_t next_chunk = 0, q_loaded = n_steps > 0 ? 1 : 0;

  auto qk = [&](int64_t k, int64_t pack) {
    const Step& st = steps[static_cast<size_t>(k)];
    if (st.group + 1 < groups && q_loaded == st.group + 1) load_q(q_loaded++);
    const int64_t b0 = st.group * r + pack * c, cc = std::min(c, bl - b0);
    const Tile kt = stream.Get(next_chunk).slice(0, 0, cc * d).slice(1, 0, st.w);
    const int64_t p0 = pack * c * g;
    nisa::nc_matmul(at(s_ps, k).slice(0, p0, p0 + cc * g).slice(1, 0, st.w),
                    at(qbd, st.group).slice(0, 0, cc * d).slice(1, p0, p0 + cc * g), kt);
    stream.Release();
    ++next_chunk;
  };

  auto softmax = [&](int64_t k) {
    const Step& st = steps[static_cast<size_t>(k)];
    const int64_t pp = group_rows(st.group) * g;
    const Tile sc = at(s_ps, k).slice(0, 0, pp).slice(1, 0, st.w);
    const Tile m = at(mx, k).slice(0, 0, pp), nbk = at(nb, k).slice(0, 0, pp);
    nisa::tensor_reduce(m, AluOp::kMax, sc, {1});
    const Tile& gs = at(gstate, st.group);
    const Tile l = gs.slice(0, 0, pp).slice(1, cd + 1, cd + 2);
    if (st.first) {
      nisa::tensor_scalar(nbk, m, {.op0 = AluOp::kMultiply, .operand0 = -scale});
    } else {
      const Tile nbp = at(nb, k - 1).slice(0, 0, pp);
      nisa::tensor_scalar(nbk, m, {.op0 = AluOp::kMultiply, .operand0 = -scale,
                                   .op1 = AluOp::kMin, .operand1 = nbp});
    }
    const Tile rsk = at(rs, k).slice(0, 0, pp);
    nisa::activation(at(p_sb, k).slice(0, 0, pp).slice(1, 0, st.w), ActFn::kExp, sc,
                     {.scale = scale, .bias = nbk, .reduce_op = AluOp::kAdd, .reduce_res = rsk});
    if (st.first) {
      nisa::tensor_copy(l, rsk, Engine::kGpSimd);
    } else {
      const Tile a = at(alpha, k).slice(0, 0, pp);
      nisa::activation(a, ActFn::kExp, at(nb, k - 1).slice(0, 0, pp), ShiftedExp(nbk));
      nisa::scalar_tensor_tensor(l, l, AluOp::kMultiply, a, AluOp::kAdd, rsk, Engine::kGpSimd);
    }
    if (st.last) nisa::tensor_copy(gs.slice(0, 0, pp).slice(1, cd, cd + 1), nbk, Engine::kGpSimd);
  };

  // P^T of step k: 128-token chunks of P transposed on the PE, then evicted to SBUF.
  auto transpose = [&](int64_t k) {
    const Step& st = steps[static_cast<size_t>(k)];
    const int64_t pp = group_rows(st.group) * g;
    const Tile& pt = at(pt_ps, k);
    const int64_t nj = (st.w + np - 1) / np, nfull = st.w / np;
    for (int64_t j = 0; j < nj; ++j) {
      const int64_t wj = std::min(np, st.w - j * np);
      nisa::nc_transpose(pt.slice(0, 0, wj).slice(1, j * pp, (j + 1) * pp),
                         at(p_sb, k).slice(0, 0, pp).slice(1, j * np, j * np + wj));
    }
    const Tile& dst = at(pt_sb, k);
    if (nfull > 0) {
      nisa::tensor_copy(dst.slice(1, 0, nfull * pp), pt.slice(1, 0, nfull * pp), Engine::kGpSimd);
    }
    if (nj > nfull) {
      const int64_t wj = st.w - nfull * np;
      nisa::tensor_copy(dst.slice(0, 0, wj).slice(1, nfull * pp, nj * pp),
                        pt.slice(0, 0, wj).slice(1, nfull * pp, nj * pp), Engine::kGpSimd);
    }
  };

  auto pv = [&](int64_t k, int64_t pack, int64_t n_chunks) {
    const Step& st = steps[static_cast<size_t>(k)];
    const int64_t pp = group_rows(st.group) * g;
    const int64_t b0 = st.group * r + pack * c, cc = std::min(c, bl - b0);
    const int64_t nfull = st.w / np, rem = st.w % np, p0 = pack * c * g;
    const Tile dst = v_stationary ? at(pv_ps, k).slice(0, 0, cc * d).slice(1, p0, p0 + cc * g)
                                  : at(pv_ps, k).slice(0, p0, p0 + cc * g).slice(1, 0, cc * d);
    const Tile& pt = at(pt_sb, k);
    int64_t j = 0;
    for (int64_t ch = 0; ch < n_chunks; ++ch, ++next_chunk) {
      const Tile slot = stream.Get(next_chunk);
      const bool full = ch == 0 && nfull > 0;
      const int64_t n_in = full ? nfull : 1, wj = full ? np : rem;
      const Tile v = slot.slice(0, 0, wj).slice(1, 0, n_in * cc * d).reshape({n_in, cc * d});
      for (int64_t jj = 0; jj < n_in; ++jj, ++j) {
        const Tile p_t = pt.slice(0, 0, wj).slice(1, j * pp + p0, j * pp + p0 + cc * g);
        if (v_stationary) {
          nisa::nc_matmul(dst, v.select(1, jj), p_t, {.accumulate = j > 0});
        } else {
          nisa::nc_matmul(dst, p_t, v.select(1, jj), {.accumulate = j > 0});
        }
      }
      stream.Release();
    }
    (void)pp;
  };

  auto update = [&](int64_t k) {
    const Step& st = steps[static_cast<size_t>(k)];
    const int64_t pp = group_rows(st.group) * g;
    const Tile acc = at(gstate, st.group).slice(0, 0, pp).slice(1, 0, cd);
    Tile pvt;
    if (!v_stationary) {
      pvt = at(pv_ps, k).slice(0, 0, pp).slice(1, 0, cd);
    } else {
      const Tile src = at(pv_ps, k).slice(0, 0, cd).slice(1, 0, pp);
      if (st.first) {
        nisa::nc_transpose(acc, src, Engine::kVector);
        return;
      }
      pvt = at(pv_sb, k).slice(0, 0, pp);
      nisa::nc_transpose(pvt, src, Engine::kVector);
    }
    if (st.first) {
      nisa::tensor_copy(acc, pvt, Engine::kGpSimd);
    } else {
      nisa::scalar_tensor_tensor(acc, acc, AluOp::kMultiply, at(alpha, k).slice(0, 0, pp),
                                 AluOp::kAdd, pvt, Engine::kGpSimd);
    }
  };

  // The group's result: merge with the peer's partial (LNC 2), normalise, store this core's rows.
  auto finish = [&](int64_t gi) {
    const int64_t rows = group_rows(gi), pp = rows * g, b0 = gi * r;
    const Tile gs = at(gstate, gi).slice(0, 0, pp);
    const Tile acc = gs.slice(1, 0, cd), nbs = gs.slice(1, cd, cd + 1), ls = gs.slice(1, cd + 1, cd + 2);
    const Tile res = at(out_t, gi).slice(0, 0, pp);
    Tile tmp = core.AllocateSbuf("merge_tmp", {pp, 6}, f32);
    const Tile w_self = tmp.slice(1, 0, 1), rl = tmp.slice(1, 1, 2);
    if (lnc == 1) {
      nisa::reciprocal(rl, ls);
      nisa::tensor_scalar(res, acc, {.op0 = AluOp::kMultiply, .operand0 = rl});
    } else {
      const Tile pe = at(peer, gi).slice(0, 0, pp);
      nisa::sendrecv(gs, pe);
      const Tile acc_p = pe.slice(1, 0, cd), nbp = pe.slice(1, cd, cd + 1), lp = pe.slice(1, cd + 1, cd + 2);
      const Tile nbm = tmp.slice(1, 2, 3), w_peer = tmp.slice(1, 3, 4), lt = tmp.slice(1, 4, 5);
      nisa::tensor_tensor(nbm, nbs, nbp, AluOp::kMin);
      nisa::activation(w_self, ActFn::kExp, nbs, ShiftedExp(nbm));
      nisa::activation(w_peer, ActFn::kExp, nbp, ShiftedExp(nbm));
      nisa::tensor_tensor(lt, lp, w_peer, AluOp::kMultiply);
      nisa::scalar_tensor_tensor(lt, ls, AluOp::kMultiply, w_self, AluOp::kAdd, lt);
      nisa::reciprocal(rl, lt);
      nisa::tensor_tensor(w_self, w_self, rl, AluOp::kMultiply);
      nisa::tensor_tensor(w_peer, w_peer, rl, AluOp::kMultiply);
      Tile scaled = core.AllocateSbuf("merge_peer", {pp, cd}, f32);
      nisa::tensor_scalar(scaled, acc_p, {.op0 = AluOp::kMultiply, .operand0 = w_peer});
      nisa::scalar_tensor_tensor(res, acc, AluOp::kMultiply, w_self, AluOp::kAdd, scaled);
    }
    // Rows (or, for a one-row group, heads) this core stores.
    int64_t r0 = 0, r1 = rows, h0 = 0, h1 = g;
    if (lnc == 2 && rows > 1) {
      r0 = rows * s / 2, r1 = rows * (s + 1) / 2;
    } else if (lnc == 2) {
      h0 = g * s / 2, h1 = g * (s + 1) / 2;
    }
    for (int64_t b = r0; b < r1 && h0 < h1; ++b) {
      const int64_t j = b % c;
      nisa::dma_copy(out.select(1, b0 + b).slice(0, h0, h1),
                     res.slice(0, b * g + h0, b * g + h1).slice(1, j * d, (j + 1) * d));
    }
  };

  if (n_steps == 0) {
    // This core holds no tokens: a neutral partial (no max, zero sum and output) per group.
    for (int64_t gi = 0; gi < groups; ++gi) {
      const Tile gs = at(gstate, gi).slice(0, 0, group_rows(gi) * g);
      nisa::memset(gs.slice(1, 0, cd), 0.0f);
      nisa::memset(gs.slice(1, cd, cd + 1), kNoMax);
      nisa::memset(gs.slice(1, cd + 1, cd + 2), 0.0f);
      finish(gi);
    }
    return;
  }

  // Prologue: the scores and softmax of the first L steps.
  size_t it = 0;
  int64_t pending = -1;
  for (int64_t k = 0; k < std::min(look, n_steps); ++k) {
    for (; it < order.size() && order[it].is_k && order[it].step == k; ++it) qk(k, order[it].pack);
    softmax(k);
  }
  for (int64_t k = 0; k < n_steps; ++k) {
    transpose(k);
    for (size_t i = iteration_begin[static_cast<size_t>(k)];
         i < iteration_begin[static_cast<size_t>(k) + 1]; ++i) {
      const Item& item = order[i];
      if (item.is_k) {
        qk(item.step, item.pack);
      } else {
        pv(item.step, item.pack, item.chunks);
      }
    }
    if (k + look < n_steps) softmax(k + look);
    update(k);
    // A group's merge and stores are issued one iteration late, behind the next softmax, so the
    // in-order Vector / Scalar queues do not hold the next block's softmax behind them.
    if (pending >= 0) finish(pending);
    pending = steps[static_cast<size_t>(k)].last ? steps[static_cast<size_t>(k)].group : -1;
  }
  if (pending >= 0) finish(pending);
}

TensorView AttentionTkg(LogicalCore& lnc, const AttentionTkgParams& params) {
  ValidateAttentionTkg(params, lnc.profile());
  TensorView out = TensorView::Create(params.q.shape(), params.q.dtype(), "attention_out");
  lnc.Launch([&](const KernelContext& ctx) { AttentionTkgKernel(ctx, params, out); });
  return out;
}

}  // namespace nkisim::kernels
