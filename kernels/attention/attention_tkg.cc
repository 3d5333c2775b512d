#include "kernels/attention/attention_tkg.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/dma_descriptors.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

using nisa::ActFn;
using nisa::AluOp;

constexpr const char* kName = "attention_tkg";
// nb (= -max * scale) of a partial that has seen no token: exp(-kNoMax + x) underflows to 0.
constexpr float kNoMax = 3.0e38f;
// K spans (a partition's run of one K chunk): at least kMinRunBytes where the group has the
// steps, so each DMA descriptor (27.5 ns on trn2) carries 2 KiB or more (docs/dma.md: >= 2 KiB a
// partition recommended), at most kMaxRunBytes (the KV slots' size).
constexpr int64_t kMinRunBytes = 4096;
constexpr int64_t kMaxRunBytes = 4096;
// The KV slot pool: about kKvPoolBytes a partition. Bytes in flight to cover the DMA latency
// (1.3 us at 362.5 GB/s: 471 KB, 3.7 KiB a partition) are a small part of it; the rest lets the
// stream run ahead of the PE.
constexpr int64_t kKvPoolBytes = 64 * 1024;
constexpr int64_t kMinKvSlots = 8;
constexpr int64_t kMaxKvSlots = 32;
constexpr int64_t kMaxKvPoolBytes = 96 * 1024;
// PE work (ns) the score matmuls should run ahead of the softmax that consumes them.
constexpr double kLookaheadNs = 2500.0;
// One batch row splits its tokens into virtual rows from this many tokens per core: their merge
// on chip adds about 1.2 us after the last block.
constexpr int64_t kVirtualRowsMinTokensPerCore = 16384;
// Fewest tokens of a virtual row (4 blocks of 512), and most virtual rows per core (measured at
// T = 32768, LNC 1, when the merge went through HBM: 4, 8 and 16 per core gave 1.29x, 1.30x and
// 1.35x at d = 64 in bf16, and 1.21x, 1.14x and 1.11x at d = 128 in fp32).
constexpr int64_t kVirtualRowTokens = 2048;
constexpr int64_t kMaxVirtualRowsPerCore = 8;
// The PE's share of a block's HBM time from which one row runs as virtual rows: at 0.9 (d 128,
// bf16: 654 against 723 ns) the PE's fill and drain around a stream it barely trails cost more
// than the merge (T 32768: 1.10x -> 1.07x at LNC 1, 1.27x -> 1.22x at LNC 2).
constexpr double kVirtualRowsPeShare = 0.85;

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
  int64_t f0 = 0;  // first element of the slot's partitions it fills
};

// The K / V chunks in the order of their first use, through a fixed pool of SBUF slots: a chunk
// is loaded into a free slot as soon as one is free (in chunk order), a released chunk frees its
// slot, and the scoreboard makes the next DMA into it wait for the chunk's readers, so the model
// sees a bounded buffer. A chunk may stay resident while later ones are used and released (a
// K span serves several steps).
class KvStream {
 public:
  KvStream(NeuronCore& core, int64_t slot_elements, DType dtype, std::vector<std::vector<Piece>> chunks,
           int64_t slots)
      : chunks_(std::move(chunks)), slot_of_(chunks_.size(), -1) {
    slots = std::clamp<int64_t>(slots, 1, std::max<int64_t>(1, static_cast<int64_t>(chunks_.size())));
    for (int64_t i = 0; i < slots; ++i) {
      slots_.push_back(core.AllocateSbuf(StrCat("kv_slot", i),
                                         {core.profile().partitions(), slot_elements}, dtype));
      free_.push_back(slots - 1 - i);
    }
  }
  void Start() { Fill(); }
  // Chunk k's slot (flat [partitions, slot_elements]). REQUIRES: k issued and not released.
  Tile Get(int64_t k) const {
    if (k >= issued_ || slot_of_[static_cast<size_t>(k)] < 0) {
      Raise(ErrorCode::kInternal, StrCat(kName, ": KV chunk ", k, " is not resident (issued ",
                                         issued_, ")"));
    }
    return slots_[static_cast<size_t>(slot_of_[static_cast<size_t>(k)])];
  }
  void Release(int64_t k) {
    free_.push_back(slot_of_[static_cast<size_t>(k)]);
    slot_of_[static_cast<size_t>(k)] = -1;
    Fill();
  }
  int64_t size() const { return static_cast<int64_t>(chunks_.size()); }

 private:
  void Fill() {
    while (issued_ < size() && !free_.empty()) {
      const int64_t s = free_.back();
      free_.pop_back();
      slot_of_[static_cast<size_t>(issued_)] = s;
      const Tile& slot = slots_[static_cast<size_t>(s)];
      for (const Piece& piece : chunks_[static_cast<size_t>(issued_)]) {
        const TensorView& v = piece.view;
        const Shape free(v.shape().begin() + 1, v.shape().end());
        nisa::dma_copy(slot.slice(0, piece.p0, piece.p0 + v.dim(0))
                           .slice(1, piece.f0, piece.f0 + NumElements(free))
                           .reshape(free),
                       v);
      }
      ++issued_;
    }
  }
  std::vector<Tile> slots_;
  std::vector<std::vector<Piece>> chunks_;
  std::vector<int64_t> slot_of_, free_;
  int64_t issued_ = 0;
};

// The DMA queue among [0, n) whose issue stage frees first.
int EarliestQueue(const NeuronCore& core, int64_t n) {
  int best = 0;
  for (int q = 1; q < n; ++q) {
    if (core.dma().queue_free_ns(q) < core.dma().queue_free_ns(best)) best = q;
  }
  return best;
}

// A step: one block of tokens for one group of rows.
struct Step {
  int64_t group;     // group index
  int64_t t0, w;     // tokens [t0, t0 + w) of the cache
  bool first, last;  // first / last block of its group on this core
  bool with_new;     // the block ends with this step's token, taken from k_new / v_new
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
  if (!p.k_new.valid() && !p.v_new.valid()) return;
  if (!p.k_new.valid()) Fail("k_new", p.k_new, "must be given with v_new");
  if (!p.v_new.valid()) Fail("v_new", p.v_new, "must be given with k_new");
  for (const auto& [name, t] : {std::pair<const char*, const TensorView&>{"k_new", p.k_new},
                                {"v_new", p.v_new}}) {
    if (t.rank() != 2 || t.dim(0) != k[0] || t.dim(1) != k[1]) {
      Fail(name, t, StrCat("must be [Bl, d] = [", k[0], ", ", k[1], "] (this step's row of each of ",
                           "the Bl batch rows, written at position T - 1 of the cache)"));
    }
    if (t.dtype() != p.k_cache.dtype()) {
      Fail(name, t, StrCat("dtype must equal k_cache's ", DTypeName(p.k_cache.dtype())));
    }
  }
}

AttentionTkgPlan PlanAttentionTkg(const AttentionTkgParams& p, int lnc,
                                  const HardwareProfile& prof, bool split_even_rows) {
  AttentionTkgPlan plan;
  plan.heads = p.q.dim(0);
  plan.rows = p.q.dim(1);
  plan.d = p.q.dim(2);
  plan.tokens = p.k_cache.dim(2);
  plan.block = prof.pe_max_moving_free();
  const int64_t np = prof.partitions();
  // Rows sharing one online softmax, over `rows` rows.
  auto group_of = [&](int64_t rows) {
    const int64_t pack = std::clamp<int64_t>(np / plan.d, 1, std::clamp<int64_t>(np / plan.heads, 1, rows));
    const int64_t group = std::clamp<int64_t>(np / plan.heads, 1, rows);
    return std::pair<int64_t, int64_t>{pack, group / pack * pack};
  };
  // LNC 2 splits the rows when Bl is even and the softmax of a core's rows still trails its HBM
  // stream (a core's Vector / Scalar instructions cover one group of rows, so halving a single
  // group doubles each core's softmax time); otherwise the tokens.
  plan.core0_rows = plan.rows;
  if (lnc == 2 && plan.rows % 2 == 0) {
    const int64_t half = plan.rows / 2, group = group_of(half).second;
    const int64_t groups = (half + group - 1) / group;
    const int64_t n_blocks = (plan.tokens + plan.block - 1) / plan.block;
    const int64_t width = std::min(plan.block, ((plan.tokens + n_blocks - 1) / n_blocks + np - 1) / np * np);
    const bool fp32 = p.k_cache.dtype() == DType::kFloat32;
    // Per block: the row max (Vector, fp32 scores) and exp with its row sum (Scalar).
    const double softmax_ns =
        static_cast<double>(groups * n_blocks) *
        std::max(ComputeOpNs(prof, Engine::kVector, width, false),
                 ComputeOpNs(prof, Engine::kScalar, width, !fp32));
    const double hbm_ns = HbmTransferNs(prof, half * 2 * plan.d * plan.tokens * SizeOf(p.k_cache.dtype()));
    plan.split_rows = split_even_rows || softmax_ns <= hbm_ns;
    if (plan.split_rows) plan.core0_rows = half;
  }
  const auto [pack, group] = group_of(plan.split_rows ? plan.core0_rows : plan.rows);
  plan.rows_per_pack = pack;
  plan.rows_per_group = group;
  // Tokens: an even split (each core's HBM port moves half of the cache; rounding core 0 up to
  // 128 tokens cost up to 1.25x at T = 1025), or all of them on each core when the rows split.
  plan.core0_tokens = lnc == 1 || plan.split_rows ? plan.tokens : (plan.tokens + 1) / 2;
  // One row alone leaves the scores on G of the 128 partitions and (d <= 64) half of the
  // contraction empty, so each 512-token block pays every PE instruction for one row; where that
  // takes the PE to kVirtualRowsPeShare of the row's HBM stream or beyond, a long row is cut into
  // virtual rows (the caches seen as [V, d, T / V]), up to kMaxVirtualRowsPerCore per core with
  // at least kVirtualRowTokens tokens each, which share the transposes and softmax instructions
  // and (d <= 64) the score and P @ V matmuls.
  const DType kdt = p.k_cache.dtype();
  const double pe_block_ns =
      MatmulNs(prof, plan.block, kdt) +
      static_cast<double>(plan.block / np) *
          (MatmulNs(prof, plan.heads, kdt) +
           std::min(MatmulNs(prof, plan.heads, kdt), MatmulNs(prof, plan.d, kdt)));
  const double hbm_block_ns = HbmTransferNs(prof, 2 * plan.d * plan.block * SizeOf(kdt));
  if (plan.rows == 1 && plan.tokens / lnc >= kVirtualRowsMinTokensPerCore &&
      pe_block_ns > kVirtualRowsPeShare * hbm_block_ns) {
    int64_t per_core = std::min({kMaxVirtualRowsPerCore, np / plan.heads,
                                 plan.tokens / lnc / kVirtualRowTokens});
    while (per_core >= 2 && plan.tokens % (per_core * lnc) != 0) --per_core;
    if (per_core >= 2) plan.virtual_rows = per_core * lnc;
  }
  return plan;
}

void AttentionTkgKernel(const KernelContext& ctx, const AttentionTkgParams& params,
                        const TensorView& out, const TensorView& row_out) {
  NeuronCore& core = ctx.core;
  const HardwareProfile& prof = core.profile();
  // Virtual rows always split between the cores: each core merges its own on chip.
  const AttentionTkgPlan plan = PlanAttentionTkg(params, ctx.n_prgs, prof, row_out.valid());
  const int64_t g = plan.heads, bl = plan.rows, d = plan.d, np = prof.partitions();
  const int64_t c = plan.rows_per_pack, r = plan.rows_per_group, cd = c * d;
  const DType kdt = params.k_cache.dtype(), vdt = params.v_cache.dtype(), odt = out.dtype();
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const int s = ctx.prg_id, lnc = ctx.n_prgs;
  // This core's rows [row_lo, row_hi) and tokens [t_lo, t_hi); `merge`: the tokens are split, so
  // the partials cross between the cores.
  const bool merge = lnc == 2 && !plan.split_rows;
  const int64_t row_lo = plan.split_rows && s == 1 ? plan.core0_rows : 0;
  const int64_t row_hi = plan.split_rows && s == 0 ? plan.core0_rows : bl;
  const int64_t t_lo = merge && s == 1 ? plan.core0_tokens : 0;
  const int64_t t_hi = merge && s == 0 ? plan.core0_tokens : plan.tokens;
  const int64_t groups = (row_hi - row_lo + r - 1) / r;
  auto group_rows = [&](int64_t gi) { return std::min(r, row_hi - row_lo - gi * r); };
  auto group_packs = [&](int64_t gi) { return (group_rows(gi) + c - 1) / c; };

  // ---- the steps and the KV chunks in PE consumption order ----
  std::vector<Step> steps;
  // The core's tokens in ceil(n / 512) blocks of equal width (a multiple of 128 but the last):
  // 513 tokens are 384 + 129, not 512 + 1, whose one-token block pays every fixed cost again.
  const int64_t n_blocks = (t_hi - t_lo + plan.block - 1) / plan.block;
  const int64_t width =
      n_blocks == 0 ? plan.block
                    : std::min(plan.block, ((t_hi - t_lo + n_blocks - 1) / n_blocks + np - 1) / np * np);
  // With k_new / v_new, the core holding token T - 1 takes it from SBUF: its K column and V row
  // are loaded once for all of the core's rows (kn [c * d, packs], pack i's rows stacked on the
  // partitions as in the scores matmul; vn: every row's V on partition p, where the token sits
  // in the last block's V chunk) instead of as a column / row of every row's last chunks.
  const bool with_new = params.k_new.valid() && t_hi == plan.tokens && t_hi > t_lo;
  for (int64_t gi = 0; gi < groups; ++gi) {
    for (int64_t t0 = t_lo; t0 < t_hi; t0 += width) {
      const bool last = t0 + width >= t_hi;
      steps.push_back({gi, t0, std::min(width, t_hi - t0), t0 == t_lo, last, with_new && last});
    }
  }
  const int64_t n_steps = static_cast<int64_t>(steps.size());
  const int64_t new_p = with_new ? (steps.back().w - 1) % np : 0;  // vn's partition
  const bool merged_k = params.k_cache.strides()[0] == d * params.k_cache.strides()[1];
  // K of a pack over the span of steps [k, k_end) of one group: each partition's run is the
  // span's consecutive tokens (cache columns only).
  auto k_chunk = [&](int64_t k, int64_t k_end, int64_t pack) {
    const Step& st = steps[static_cast<size_t>(k)];
    const Step& ls = steps[static_cast<size_t>(k_end - 1)];
    const int64_t b0 = row_lo + st.group * r + pack * c, cc = std::min(c, row_hi - b0);
    std::vector<Piece> pieces;
    const int64_t w = ls.t0 + ls.w - (ls.with_new ? 1 : 0) - st.t0;  // cache columns
    if (w == 0) return pieces;
    if (merged_k || cc == 1) {
      const TensorView rows = params.k_cache.slice(0, b0, b0 + cc).slice(2, st.t0, st.t0 + w);
      AccessPattern flat{rows.offset(), {{rows.strides()[1], cc * d}, {rows.strides()[2], w}}};
      pieces.push_back({0, rows.ap(flat)});
    } else {
      for (int64_t j = 0; j < cc; ++j) {
        pieces.push_back({j * d, params.k_cache.select(0, b0 + j).slice(1, st.t0, st.t0 + w)});
      }
    }
    return pieces;
  };
  // K spans: consecutive steps of a group whose K goes as one chunk, so a partition's run is at
  // least kMinRunBytes (the DMA engines' descriptors cost 27.5 ns each: a 768 B run moves at
  // about half an engine's rate, 2 KiB at 80%) and at most kMaxRunBytes (the slot's size).
  const int64_t kds = static_cast<int64_t>(SizeOf(kdt));
  std::vector<int64_t> span_first(steps.size()), span_end(steps.size());
  int64_t span_tokens = 0;
  auto make_spans = [&](int64_t min_run) {
    span_tokens = 0;
    for (int64_t k = 0; k < n_steps;) {
      const int64_t want = std::max<int64_t>(1, (min_run + width * kds - 1) / (width * kds));
      const int64_t cap = std::max<int64_t>(1, kMaxRunBytes / (width * kds));
      int64_t e = k + 1;
      while (e < n_steps && e - k < std::min(want, cap) &&
             steps[static_cast<size_t>(e)].group == steps[static_cast<size_t>(k)].group) {
        ++e;
      }
      for (int64_t i = k; i < e; ++i) span_first[static_cast<size_t>(i)] = k, span_end[static_cast<size_t>(i)] = e;
      span_tokens = std::max(span_tokens, steps[static_cast<size_t>(e - 1)].t0 +
                                              steps[static_cast<size_t>(e - 1)].w -
                                              steps[static_cast<size_t>(k)].t0);
      k = e;
    }
  };
  // V of a pack: the full 128-token chunks as [128, cc, n, d] (one DMA per row, each row's
  // n d elements at free offset b n d), then the remainder [rem, cc, d].
  auto v_chunks = [&](int64_t k, int64_t pack) {
    const Step& st = steps[static_cast<size_t>(k)];
    const int64_t b0 = row_lo + st.group * r + pack * c, cc = std::min(c, row_hi - b0);
    const int64_t nfull = st.w / np, rem = st.w % np;
    const TensorView rows = params.v_cache.slice(0, b0, b0 + cc);
    std::vector<std::vector<Piece>> out_chunks;
    // Partition p holds the block's tokens p n + j, j < n = nfull (P^T chunk j is P's columns
    // j, j + n, ...: the contraction may take the tokens in any order both operands share), so
    // each partition's run is n consecutive tokens' rows, and the runs of consecutive partitions
    // touch: each row's part is one contiguous span of HBM, so it goes as its own DMA (rows
    // interleaved on a partition would cut every run at d elements).
    if (nfull > 0) {
      std::vector<Piece> pieces;
      for (int64_t b = 0; b < cc; ++b) {
        const TensorView full = rows.select(0, b).slice(0, st.t0, st.t0 + nfull * np);
        AccessPattern ap{full.offset(), {{nfull * full.strides()[0], np}, {full.strides()[0], nfull},
                                         {full.strides()[1], d}}};
        pieces.push_back({0, full.ap(ap), b * nfull * d});
      }
      out_chunks.push_back(std::move(pieces));
    }
    // With this step's token the cache's position T - 1 is not used: a chunk of that token alone
    // is not loaded (pv takes it from vn); in a longer chunk it rides along, unused, so the
    // chunk stays one box (one DMA).
    if (rem > 0) {
      std::vector<Piece> pieces;
      if (!(st.with_new && rem == 1)) {
        pieces.push_back({0, rows.slice(1, st.t0 + nfull * np, st.t0 + st.w).permute({1, 0, 2})});
      }
      out_chunks.push_back(std::move(pieces));
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
    int64_t first_chunk;  // K: its span's chunk; V: the first of its `chunks` chunks
  };
  std::vector<std::vector<Piece>> chunks;
  std::vector<Item> order;
  // The K chunk of (span's first step, pack), pushed at the span's first step.
  std::vector<std::vector<int64_t>> k_chunk_id;
  std::vector<size_t> iteration_begin;
  auto build = [&]() {
  chunks.clear();
  order.clear();
  iteration_begin.clear();
  k_chunk_id.assign(steps.size(), {});
  auto push_k = [&](int64_t k, int64_t i) {
    const int64_t f = span_first[static_cast<size_t>(k)];
    std::vector<int64_t>& ids = k_chunk_id[static_cast<size_t>(f)];
    if (f == k) {
      ids.push_back(static_cast<int64_t>(chunks.size()));
      chunks.push_back(k_chunk(k, span_end[static_cast<size_t>(k)], i));
    }
    order.push_back({true, k, i, 1, ids[static_cast<size_t>(i)]});
  };
  auto add_k = [&](int64_t k) {
    for (int64_t i = 0; i < group_packs(steps[k].group); ++i) push_k(k, i);
  };
  for (int64_t k = 0; k < std::min(look, n_steps); ++k) add_k(k);
  for (int64_t k = 0; k < n_steps; ++k) {
    iteration_begin.push_back(order.size());
    const int64_t kn = k + look;
    const int64_t packs_k = group_packs(steps[k].group);
    const int64_t packs_n = kn < n_steps ? group_packs(steps[kn].group) : 0;
    for (int64_t i = 0; i < std::max(packs_k, packs_n); ++i) {
      if (i < packs_n) push_k(kn, i);
      if (i < packs_k) {
        auto v = v_chunks(k, i);
        order.push_back({false, k, i, static_cast<int64_t>(v.size()), static_cast<int64_t>(chunks.size())});
        for (auto& piece : v) chunks.push_back(std::move(piece));
      }
    }
  }
  iteration_begin.push_back(order.size());
  };
  // The slots the stream needs: chunks are loaded in order, each into a free slot, and used in
  // `order`; a K span stays resident until its last step, so the pool must hold every chunk
  // between the oldest still in use and the newest one needed.
  auto slots_needed = [&]() {
    std::vector<int64_t> uses(chunks.size(), 0);
    for (const Item& item : order) {
      for (int64_t ch = 0; ch < item.chunks; ++ch) ++uses[static_cast<size_t>(item.first_chunk + ch)];
    }
    int64_t newest = -1, released = 0, need = 1;
    std::vector<bool> done(chunks.size(), false);
    for (const Item& item : order) {
      for (int64_t ch = 0; ch < item.chunks; ++ch) {
        const size_t id = static_cast<size_t>(item.first_chunk + ch);
        newest = std::max<int64_t>(newest, static_cast<int64_t>(id));
        need = std::max(need, newest + 1 - released);
        if (--uses[id] == 0) done[id] = true, ++released;
      }
    }
    return need;
  };
  // Longer K runs where the pool that needs fits kMaxKvPoolBytes a partition, else shorter.
  int64_t kv_slots = 0, slot_elements = 0;
  for (const int64_t min_run : {kMinRunBytes, kMinRunBytes / 2, int64_t{0}}) {
    make_spans(min_run);
    build();
    slot_elements = std::max({plan.block, span_tokens, plan.block / np * cd});
    const int64_t need = slots_needed();
    // Beyond the resident chunks, room for the stream to run ahead of the PE.
    kv_slots = std::max(need + kMinKvSlots,
                        std::clamp<int64_t>(kKvPoolBytes / (slot_elements * kds), kMinKvSlots, kMaxKvSlots));
    if (kv_slots * slot_elements * kds <= kMaxKvPoolBytes || min_run == 0) break;
  }

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
  const std::vector<Tile> peer = merge ? sbuf_ring("peer_partial", 2, {np, cd + 2}, f32)
                                          : std::vector<Tile>{};
  const std::vector<Tile> out_t = sbuf_ring("out", 2, {np, cd}, odt);
  std::vector<Tile> s_ps, p_sb, mx, nb, alpha, rs, pt_ps, pt_sb, pv_ps, pv_sb;
  if (n_steps > 0) {
    s_ps = psum_ring("scores", look + 1, {np, plan.block}, f32);
    pt_ps = psum_ring("p_t_psum", 2, {np, nj_max * np}, vdt);
    pv_ps = psum_ring("pv", 2, {np, v_stationary ? r * g : cd}, f32);
    // With two rows a pack, P @ V writes only each row's diagonal block of a pack's [c d, c G]
    // (pv): the blocks between stay the zeros written here, so the accumulator and the virtual
    // rows' merge (which weights them by 0) never see stale PSUM.
    if (c > 1) {
      for (const Tile& t : pv_ps) nisa::memset(t, 0.0f, Engine::kVector);
    }
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
  // Virtual rows merged on chip (row_out): one stacked identity per column half, [(b, h'), h] =
  // (h == h') for the rows b whose results sit in that half, built on GpSimd ahead of the stream.
  std::vector<Tile> row_eye;
  if (row_out.valid()) {
    if (merge || groups != 1 || n_steps == 0 || (lnc == 2 && !plan.split_rows)) {
      Raise(ErrorCode::kInternal, StrCat(kName, ": virtual rows merge on chip only as one group on ",
                                         "cores that split the rows"));
    }
    const int64_t rows = group_rows(0);
    const Tile diff = core.AllocateSbuf("row_eye_iota", {np, g}, f32);
    nisa::iota(diff.slice(0, 0, rows * g), 0, -1, {{1, g}});  // h - p = (h - h') - b g
    for (int64_t j = 0; j < c; ++j) {
      row_eye.push_back(core.AllocateSbuf(StrCat("row_eye", j), {np, g}, f32));
      for (int64_t b = 0; b < rows; ++b) {
        const Tile block = row_eye.back().slice(0, b * g, (b + 1) * g);
        if (b % c == j) {
          nisa::tensor_scalar(block, diff.slice(0, b * g, (b + 1) * g),
                              {.op0 = AluOp::kEqual, .operand0 = static_cast<float>(-b * g)},
                              Engine::kGpSimd);
        } else {
          nisa::memset(block, 0.0f, Engine::kGpSimd);
        }
      }
    }
  }

  // q of a group as a block-diagonal stationary per pack: partition j*d + e, column j*G + h of
  // pack i holds q[h, b0 + i*c + j, e].
  auto load_q = [&](int64_t gi) {
    const Tile& t = at(qbd, gi);
    const int64_t b0 = row_lo + gi * r, rows = group_rows(gi);
    if (c > 1) nisa::memset(t, 0.0f, Engine::kGpSimd);
    // q^T by transposing DMAs of q's contiguous d-element rows (a permuted dma_copy view costs
    // one descriptor per element: 4096 at G 8, 4 rows, d 128, about 7 us of the engines).
    if (g == 1 && c == 1) {  // [rows, d] -> [d, rows]: one transpose for the group
      nisa::dma_transpose(t.slice(0, 0, d).slice(1, 0, rows), params.q.select(0, 0).slice(0, b0, b0 + rows));
      return;
    }
    // Row b (pack i, position j) -> partitions [j d, (j + 1) d), columns (i c + j) G + h: one
    // [G, d] -> [d, G] transpose a row (the hardware DGE's, G <= 16).
    for (int64_t b = 0; b < rows; ++b) {
      const int64_t col = b * g;  // (i c + j) G with i = b / c, j = b % c
      const int64_t j = b % c;
      nisa::dma_transpose(t.slice(0, j * d, (j + 1) * d).slice(1, col, col + g),
                          params.q.select(1, b0 + b));
    }
  };

  // K and V share one dtype (validated), so they share the ring.
  KvStream stream(core, slot_elements, kdt, std::move(chunks), kv_slots);
  if (groups > 0 && n_steps > 0) load_q(0);
  // This step's K column and V row of the core's rows (with_new): two DMAs ahead of the stream.
  // With one row per pack, new_mask[b * G + h, b] = 1 picks each row's own score.
  Tile kn, vn, new_sb, new_mask;
  if (with_new && c == 1) {
    new_sb = core.AllocateSbuf("new_scores_own", {np, r}, f32);
    new_mask = core.AllocateSbuf("new_mask", {np, r}, f32);
    nisa::memset(new_mask, 0.0f, Engine::kGpSimd);
    for (int64_t b = 0; b < r; ++b) {
      nisa::memset(new_mask.slice(0, b * g, (b + 1) * g).slice(1, b, b + 1), 1.0f, Engine::kGpSimd);
    }
  }
  if (with_new) {
    const int64_t n_rows = row_hi - row_lo;
    kn = core.AllocateSbuf("k_new", {np, (n_rows + c - 1) / c}, kdt);
    vn = core.AllocateSbuf("v_new", {np, n_rows * d}, vdt);
    // kn[j d + e, i] = k_new[row_lo + i c + j, e]: per pack position j, one transposing DMA of
    // the rows j, j + c, ... ([n, d] -> [d, n]; a permuted dma_copy costs a descriptor an element).
    for (int64_t j = 0; j < std::min(c, n_rows); ++j) {
      const int64_t n = (n_rows - j + c - 1) / c;
      nisa::dma_transpose(kn.slice(0, j * d, (j + 1) * d).slice(1, 0, n),
                          params.k_new.slice(0, row_lo + j, row_lo + j + (n - 1) * c + 1, c));
    }
    nisa::dma_copy(vn.slice(0, new_p, new_p + 1).slice(1, 0, n_rows * d).reshape({n_rows, d}),
                   params.v_new.slice(0, row_lo, row_hi));
  }
  stream.Start();
  int64_t q_loaded = n_steps > 0 ? 1 : 0;

  auto qk = [&](int64_t k, int64_t pack, int64_t chunk) {
    const Step& st = steps[static_cast<size_t>(k)];
    if (st.group + 1 < groups && q_loaded == st.group + 1) load_q(q_loaded++);
    const int64_t b0 = row_lo + st.group * r + pack * c, cc = std::min(c, row_hi - b0);
    const int64_t p0 = pack * c * g, w = st.w - (st.with_new ? 1 : 0);
    const Tile qs = at(qbd, st.group).slice(0, 0, cc * d).slice(1, p0, p0 + cc * g);
    const Tile sc = at(s_ps, k).slice(0, p0, p0 + cc * g);
    if (w > 0) {
      const int64_t col = st.t0 - steps[static_cast<size_t>(span_first[static_cast<size_t>(k)])].t0;
      nisa::nc_matmul(sc.slice(1, 0, w), qs,
                      stream.Get(chunk).slice(0, 0, cc * d).slice(1, col, col + w));
    }
    if (st.with_new && c > 1) {
      // This step's token: its K column from kn, into the block's last score column (the
      // block-diagonal q keeps the pack's rows apart).
      const int64_t pk = (b0 - row_lo) / c;
      nisa::nc_matmul(sc.slice(1, w, w + 1), qs, kn.slice(0, 0, cc * d).slice(1, pk, pk + 1));
    } else if (st.with_new && pack == 0) {
      // One row per pack: the scores of the group's rows against every row's K column in one
      // matmul, [rows * G, rows]; row b's own column masked and summed into the last column.
      const int64_t rows = group_rows(st.group), pp = rows * g, b1 = b0 - row_lo;
      // The scores bank of step k + 1 is free: step k - L, its last user, has had its softmax.
      const Tile all = at(s_ps, k + 1).slice(0, 0, pp).slice(1, 0, rows);
      nisa::nc_matmul(all, at(qbd, st.group).slice(0, 0, d).slice(1, 0, pp),
                      kn.slice(0, 0, d).slice(1, b1, b1 + rows));
      const Tile own = new_sb.slice(0, 0, pp).slice(1, 0, rows);
      nisa::tensor_tensor(own, all, new_mask.slice(0, 0, pp).slice(1, 0, rows), AluOp::kMultiply);
      nisa::tensor_reduce(at(s_ps, k).slice(0, 0, pp).slice(1, st.w - 1, st.w), AluOp::kAdd, own, {1});
    }
    if (k == span_end[static_cast<size_t>(k)] - 1) stream.Release(chunk);
  };

  auto softmax = [&](int64_t k) {
    const Step& st = steps[static_cast<size_t>(k)];
    const int64_t pp = group_rows(st.group) * g;
    const Tile sc = at(s_ps, k).slice(0, 0, pp).slice(1, 0, st.w);
    const Tile m = at(mx, k).slice(0, 0, pp), nbk = at(nb, k).slice(0, 0, pp);
    nisa::tensor_reduce(m, AluOp::kMax, sc, {1});
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
    if (!st.first) {
      nisa::activation(at(alpha, k).slice(0, 0, pp), ActFn::kExp, at(nb, k - 1).slice(0, 0, pp),
                       ShiftedExp(nbk));
    }
  };

  // The running sum (and, after the last block, the max) of step k, issued with its accumulator
  // update rather than with its softmax, so the in-order GpSimd queue does not hold the
  // accumulator update behind this block's softmax chain.
  auto update_sum = [&](int64_t k) {
    const Step& st = steps[static_cast<size_t>(k)];
    const int64_t pp = group_rows(st.group) * g;
    const Tile& gs = at(gstate, st.group);
    const Tile l = gs.slice(0, 0, pp).slice(1, cd + 1, cd + 2);
    const Tile rsk = at(rs, k).slice(0, 0, pp);
    if (st.first) {
      nisa::tensor_copy(l, rsk, Engine::kGpSimd);
    } else {
      nisa::scalar_tensor_tensor(l, l, AluOp::kMultiply, at(alpha, k).slice(0, 0, pp), AluOp::kAdd,
                                 rsk, Engine::kGpSimd);
    }
    if (st.last && (merge || row_out.valid())) {  // the max: for the peer or the rows' merge
      nisa::tensor_copy(gs.slice(0, 0, pp).slice(1, cd, cd + 1), at(nb, k).slice(0, 0, pp),
                        Engine::kGpSimd);
    }
  };

  // P^T of step k: 128-token chunks of P transposed on the PE, then evicted to SBUF on Vector
  // (a PSUM source: GpSimd cannot read PSUM; on Scalar, busy with the exps, the d 64 one-row case
  // took 4.42 instead of 4.12 us).
  auto transpose = [&](int64_t k) {
    const Step& st = steps[static_cast<size_t>(k)];
    const int64_t pp = group_rows(st.group) * g;
    const Tile& pt = at(pt_ps, k);
    const int64_t nj = (st.w + np - 1) / np, nfull = st.w / np;
    // Chunk j < nfull: P's columns j, j + nfull, ... (V's token order, v_chunks); the
    // remainder: the last st.w % 128 columns in order.
    for (int64_t j = 0; j < nj; ++j) {
      const int64_t wj = std::min(np, st.w - j * np);
      const Tile src = j < nfull ? at(p_sb, k).slice(0, 0, pp).slice(1, j, nfull * np, nfull)
                                 : at(p_sb, k).slice(0, 0, pp).slice(1, j * np, j * np + wj);
      nisa::nc_transpose(pt.slice(0, 0, wj).slice(1, j * pp, (j + 1) * pp), src);
    }
    const Tile& dst = at(pt_sb, k);
    if (nfull > 0) {
      nisa::tensor_copy(dst.slice(1, 0, nfull * pp), pt.slice(1, 0, nfull * pp), Engine::kVector);
    }
    if (nj > nfull) {
      const int64_t wj = st.w - nfull * np;
      nisa::tensor_copy(dst.slice(0, 0, wj).slice(1, nfull * pp, nj * pp),
                        pt.slice(0, 0, wj).slice(1, nfull * pp, nj * pp), Engine::kVector);
    }
  };

  auto pv = [&](int64_t k, int64_t pack, int64_t n_chunks, int64_t first_chunk) {
    const Step& st = steps[static_cast<size_t>(k)];
    const int64_t pp = group_rows(st.group) * g;
    const int64_t b0 = row_lo + st.group * r + pack * c, cc = std::min(c, row_hi - b0);
    const int64_t nfull = st.w / np, rem = st.w % np, p0 = pack * c * g;
    const Tile dst = v_stationary ? at(pv_ps, k).slice(0, 0, cc * d).slice(1, p0, p0 + cc * g)
                                  : at(pv_ps, k).slice(0, p0, p0 + cc * g).slice(1, 0, cc * d);
    const Tile& pt = at(pt_sb, k);
    int64_t j = 0;
    for (int64_t ch = 0; ch < n_chunks; ++ch) {
      const Tile slot = stream.Get(first_chunk + ch);
      const bool full = ch == 0 && nfull > 0;
      const int64_t n_in = full ? nfull : 1, wj = full ? np : rem;
      // Row bb's 128 tokens of chunk jj: [wj, d] at free offset (bb n_in + jj) d (v_chunks).
      auto v_of = [&](int64_t bb, int64_t jj) {
        return slot.slice(0, 0, wj).slice(1, (bb * n_in + jj) * d, (bb * n_in + jj + 1) * d);
      };
      for (int64_t jj = 0; jj < n_in; ++jj, ++j) {
        // This step's token (partition new_p of the step's last 128-token chunk) contracts apart,
        // its V rows from vn: the cache DMA skipped that partition.
        const bool new_here = st.with_new && ch == n_chunks - 1 && jj == n_in - 1;
        const int64_t pw = new_here ? wj - 1 : wj;
        const Tile p_t = pt.slice(1, j * pp + p0, j * pp + p0 + cc * g);
        bool accumulate = j > 0;
        auto matmul = [&](const Tile& out, const Tile& v_rows, const Tile& p_rows, bool acc) {
          if (v_stationary) {
            nisa::nc_matmul(out, v_rows, p_rows, {.accumulate = acc});
          } else {
            nisa::nc_matmul(out, p_rows, v_rows, {.accumulate = acc});
          }
        };
        // One matmul per row of the pack, into its diagonal block of dst (the pack's rows sit
        // apart in the slot, so each row's V is a plain [wj, d] operand).
        for (int64_t bb = 0; bb < cc && pw > 0; ++bb) {
          const Tile out = v_stationary ? dst.slice(0, bb * d, (bb + 1) * d).slice(1, bb * g, (bb + 1) * g)
                                        : dst.slice(0, bb * g, (bb + 1) * g).slice(1, bb * d, (bb + 1) * d);
          matmul(out, v_of(bb, jj).slice(0, 0, pw), p_t.slice(1, bb * g, (bb + 1) * g).slice(0, 0, pw),
                 accumulate);
        }
        if (pw > 0) accumulate = true;
        if (new_here) {
          const int64_t v0 = (b0 - row_lo) * d;
          matmul(dst, vn.slice(0, new_p, new_p + 1).slice(1, v0, v0 + cc * d),
                 p_t.slice(0, new_p, new_p + 1), accumulate);
        }
      }
      stream.Release(first_chunk + ch);
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
    // pvt is in SBUF with V stationary, else in PSUM, which GpSimd cannot read. The update runs
    // on Vector either way: on GpSimd (150 + 2N cycles for fp32) the last step's took 0.5 us of
    // the kernel's tail (B 4, G 8, T 1025, LNC 2: 8.91 -> 8.62 us).
    if (st.first) {
      nisa::tensor_copy(acc, pvt, v_stationary ? Engine::kGpSimd : Engine::kScalar);
    } else {
      nisa::scalar_tensor_tensor(acc, acc, AluOp::kMultiply, at(alpha, k).slice(0, 0, pp),
                                 AluOp::kAdd, pvt, Engine::kVector);
    }
  };

  // res = acc / l (l: one value per partition).
  auto normalise = [&](const Tile& res, const Tile& acc, const Tile& l) {
    const Tile inv = core.AllocateSbuf("inv_sum", {l.partitions(), 1}, f32);
    nisa::reciprocal(inv, l);
    nisa::tensor_scalar(res, acc, {.op0 = AluOp::kMultiply, .operand0 = inv});
  };

  // res = the exact merge of this core's partial `own` and the peer's (each [P, w + 2]: the
  // unnormalised output, nb, sum); tmp [P, 5] scratch.
  auto merge_with_peer = [&](const Tile& own, const Tile& pe, const Tile& tmp, const Tile& res) {
    const int64_t w = own.free_size() - 2, pp = own.partitions();
    const Tile acc = own.slice(1, 0, w), nbs = own.slice(1, w, w + 1), ls = own.slice(1, w + 1, w + 2);
    const Tile acc_p = pe.slice(1, 0, w), nbp = pe.slice(1, w, w + 1), lp = pe.slice(1, w + 1, w + 2);
    const Tile w_self = tmp.slice(1, 0, 1), rl = tmp.slice(1, 1, 2);
    const Tile nbm = tmp.slice(1, 2, 3), w_peer = tmp.slice(1, 3, 4), lt = tmp.slice(1, 4, 5);
    nisa::tensor_tensor(nbm, nbs, nbp, AluOp::kMin);
    nisa::activation(w_self, ActFn::kExp, nbs, ShiftedExp(nbm));
    nisa::activation(w_peer, ActFn::kExp, nbp, ShiftedExp(nbm));
    nisa::tensor_tensor(lt, lp, w_peer, AluOp::kMultiply);
    nisa::scalar_tensor_tensor(lt, ls, AluOp::kMultiply, w_self, AluOp::kAdd, lt);
    nisa::reciprocal(rl, lt);
    nisa::tensor_tensor(w_self, w_self, rl, AluOp::kMultiply);
    nisa::tensor_tensor(w_peer, w_peer, rl, AluOp::kMultiply);
    Tile scaled = core.AllocateSbuf("merge_peer", {pp, w}, f32);
    nisa::tensor_scalar(scaled, acc_p, {.op0 = AluOp::kMultiply, .operand0 = w_peer});
    nisa::scalar_tensor_tensor(res, acc, AluOp::kMultiply, w_self, AluOp::kAdd, scaled);
  };

  // Virtual rows (row_out): the rows are token segments of one batch row, all in this one group;
  // their partials merge across the partitions on the PE, with no trip through HBM:
  //   M_h = max_b m_(b,h) (nb = -m / sqrt(d): the scores' min of nb, transposed onto one
  //   partition and reduced over the rows, then matmul-broadcast back to every row's partitions),
  //   u_(b,h) = exp(m_(b,h) - M_h), and out[h] = sum_b u acc_b / sum_b u l_b as matmuls whose
  //   stationary is a stack of identities (one per row) scaled by u.
  auto merge_rows_on_chip = [&](int64_t gi) {
    const int64_t rows = group_rows(gi), pp = rows * g;
    const Tile gs = at(gstate, gi).slice(0, 0, pp);
    const Tile nbs = gs.slice(1, cd, cd + 1), ls = gs.slice(1, cd + 1, cd + 2);
    // PSUM: the scores banks are free once the last block has run.
    const Tile nb_row = at(s_ps, 0).slice(0, 0, 1).slice(1, 0, pp);
    const Tile bcast = at(s_ps, 1).slice(0, 0, pp).slice(1, 0, 1);
    // num (d columns, then the weighted nb, unused, and den = sum u l) of the heads.
    const Tile numden = at(s_ps, 1).slice(0, 0, g).slice(1, 1, d + 3);
    const Tile num = numden.slice(1, 0, d), den = numden.slice(1, d + 1, d + 2);
    // work: u, a 1 (partition 0), then W_j per column half.
    const Tile work = core.AllocateSbuf("row_merge", {pp, 2 + c * g}, f32);
    const Tile u = work.slice(1, 0, 1), one = work.slice(0, 0, 1).slice(1, 1, 2);
    const Tile top = core.AllocateSbuf("row_merge_top", {1, pp + g}, f32);
    const Tile nb_rep = top.slice(1, 0, pp), head_min = top.slice(1, pp, pp + g);
    nisa::memset(one, 1.0f, Engine::kGpSimd);
    nisa::nc_transpose(nb_row, nbs, Engine::kPE);
    nisa::tensor_reduce(head_min, AluOp::kMin, nb_row.reshape({rows, g}), {1});
    nisa::tensor_copy(nb_rep.reshape({rows, g}), head_min.reshape({1, g}).broadcast(1, rows));
    nisa::nc_matmul(bcast, nb_rep, one);  // [pp, 1]: the head's min nb on each row's partitions
    // u = exp(-nb + min nb) = exp(m - M) on the Scalar engine (any common reference would do: num
    // and den share it; the max keeps every u <= 1); W_j: the stacked identities of the
    // rows whose results sit in columns [j d, (j + 1) d) (d <= 64: two rows per partition), x u.
    nisa::activation(u, ActFn::kExp, nbs, ShiftedExp(bcast));
    for (int64_t j = 0; j < c; ++j) {
      nisa::tensor_scalar(work.slice(1, 2 + j * g, 2 + (j + 1) * g), at(row_eye, j).slice(0, 0, pp),
                          {.op0 = AluOp::kMultiply, .operand0 = u});
    }
    // The last column half runs on through nb and l (one matmul for num and den); the others add
    // their rows' l into den apart.
    for (int64_t j = 0; j < c; ++j) {
      const Tile w = work.slice(1, 2 + j * g, 2 + (j + 1) * g);
      if (j == c - 1) {
        nisa::nc_matmul(numden, w, gs.slice(1, j * d, cd + 2), {.accumulate = j > 0});
      } else {
        nisa::nc_matmul(num, w, gs.slice(1, j * d, (j + 1) * d), {.accumulate = j > 0});
        nisa::nc_matmul(den, w, ls, {.accumulate = j > 0});
      }
    }
    const Tile res = at(out_t, gi).slice(0, 0, g).slice(1, 0, d);
    if (lnc == 1) {
      normalise(res, num, den);
      nisa::dma_copy(row_out.select(1, 0), res);
      return;
    }
    // LNC 2 (the cores split the virtual rows): this core's merge is a partial relative to its
    // own max (num, the min nb of row 0's partitions, den), merged with the peer's over the link;
    // each core stores half of the heads.
    const Tile own = core.AllocateSbuf("row_merge_own", {g, d + 2}, f32);
    const Tile pe = core.AllocateSbuf("row_merge_peer", {g, d + 2}, f32);
    const Tile tmp = core.AllocateSbuf("row_merge_tmp", {g, 5}, f32);
    nisa::tensor_copy(own.slice(1, 0, d), num);
    nisa::tensor_copy(own.slice(1, d, d + 1), bcast.slice(0, 0, g), Engine::kScalar);
    nisa::tensor_copy(own.slice(1, d + 1, d + 2), den, Engine::kScalar);
    nisa::sendrecv(own, pe);
    merge_with_peer(own, pe, tmp, res);
    const int64_t h0 = g * s / 2, h1 = g * (s + 1) / 2;
    if (h1 > h0) nisa::dma_copy(row_out.select(1, 0).slice(0, h0, h1), res.slice(0, h0, h1));
  };

  // The group's result: merge with the peer's partial (LNC 2), normalise, store this core's rows.
  auto finish = [&](int64_t gi) {
    if (row_out.valid()) {
      merge_rows_on_chip(gi);
      return;
    }
    const int64_t rows = group_rows(gi), pp = rows * g, b0 = row_lo + gi * r;
    const Tile gs = at(gstate, gi).slice(0, 0, pp);
    const Tile acc = gs.slice(1, 0, cd), nbs = gs.slice(1, cd, cd + 1), ls = gs.slice(1, cd + 1, cd + 2);
    const Tile res = at(out_t, gi).slice(0, 0, pp);
    if (!merge) {
      normalise(res, acc, ls);
    } else {
      const Tile pe = at(peer, gi).slice(0, 0, pp);
      nisa::sendrecv(gs, pe);
      merge_with_peer(gs, pe, core.AllocateSbuf("merge_tmp", {pp, 5}, f32), res);
    }
    // Rows (or, for a one-row group, heads) this core stores.
    int64_t r0 = 0, r1 = rows, h0 = 0, h1 = g;
    if (merge && rows > 1) {
      r0 = rows * s / 2, r1 = rows * (s + 1) / 2;
    } else if (merge) {
      h0 = g * s / 2, h1 = g * (s + 1) / 2;
    }
    // With k_new, the stores leave the last DMA queue to AttentionTkgAppendKernel (which runs
    // after and so starts when that queue's last KV DMA ends) if they fit on the others; with
    // one head the group's rows sit on consecutive partitions, as in out[0, rows, :], and go as
    // one DMA.
    nisa::DmaOptions store;
    const int64_t free_queues = prof.dma_queues() - 1;
    if (params.k_new.valid() && g == 1 && c == 1 && r1 > r0) {
      store.queue = EarliestQueue(core, free_queues);
      nisa::dma_copy(out.select(0, 0).slice(0, b0 + r0, b0 + r1), res.slice(0, r0, r1), store);
      return;
    }
    const bool spare = params.k_new.valid() && (h0 < h1 ? r1 - r0 : 0) <= free_queues;
    for (int64_t b = r0; b < r1 && h0 < h1; ++b) {
      const int64_t j = b % c;
      if (spare) store.queue = EarliestQueue(core, free_queues);
      nisa::dma_copy(out.select(1, b0 + b).slice(0, h0, h1),
                     res.slice(0, b * g + h0, b * g + h1).slice(1, j * d, (j + 1) * d), store);
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
    for (; it < order.size() && order[it].is_k && order[it].step == k; ++it) qk(k, order[it].pack, order[it].first_chunk);
    softmax(k);
  }
  // Step k's accumulator update is issued in iteration k + 1, after the P^T eviction of step
  // k + 1: on an in-order queue the update (which waits for P @ V of step k) would otherwise
  // hold what follows it there, and P @ V of step k + 1 behind that.
  auto retire = [&](int64_t k) {
    update_sum(k);  // first: its inputs are long ready, and the final 1 / sum needs it
    update(k);
  };
  // P^T of step k + 1 is issued before P @ V of step k (from iteration 1 on, when its softmax
  // ran an iteration earlier: look >= 2), so the in-order PE transposes it while P @ V waits for
  // step k's V; where the last V chunks land together, each step then costs its P @ V alone
  // (B 4, G 8, T 4096, d 128, LNC 2: 15.5 -> 15.2 us). In iteration 0 the prologue's last softmax
  // is still running, and a transpose waiting for it would hold P @ V of step 0. Every iteration
  // has a P @ V (every step's group has rows), so step k >= 2 is always transposed ahead.
  const auto transposed_ahead = [&](int64_t k) { return look >= 2 && k >= 2; };
  for (int64_t k = 0; k < n_steps; ++k) {
    if (!transposed_ahead(k)) transpose(k);
    bool first_pv = true;
    for (size_t i = iteration_begin[static_cast<size_t>(k)];
         i < iteration_begin[static_cast<size_t>(k) + 1]; ++i) {
      const Item& item = order[i];
      if (item.is_k) {
        qk(item.step, item.pack, item.first_chunk);
      } else {
        if (first_pv && k + 1 < n_steps && transposed_ahead(k + 1)) transpose(k + 1);
        first_pv = false;
        pv(item.step, item.pack, item.chunks, item.first_chunk);
      }
    }
    if (k + look < n_steps) softmax(k + look);
    // A group's merge and stores are issued one iteration after its last update, behind the next
    // softmax, so the in-order Vector / Scalar queues do not hold that softmax behind them.
    if (pending >= 0) finish(pending);
    pending = -1;
    if (k > 0) {
      retire(k - 1);
      if (steps[static_cast<size_t>(k - 1)].last) pending = steps[static_cast<size_t>(k - 1)].group;
    }
  }
  retire(n_steps - 1);
  if (pending >= 0) finish(pending);
  finish(steps.back().group);
}

void AttentionTkgAppendKernel(const KernelContext& ctx, const AttentionTkgParams& params) {
  if (!params.k_new.valid()) return;
  const int64_t last = params.k_cache.dim(2) - 1;
  // The queue the kernel's stores left free (it frees when the core's KV stream ends).
  nisa::DmaOptions queue;
  queue.queue = static_cast<int>(ctx.core.profile().dma_queues()) - 1;
  // Each core writes its share of the rows, K and V. K's column T - 1 is one element a
  // descriptor whatever the view ([Bl, d] at stride T); seen as [d, rows] its d outer rows
  // spread over all the engines instead of one engine a row (Bl 4 on one core: 128 descriptors
  // on each of 4 engines, 3.5 us, against 32 on each of 16).
  const int64_t bl = params.k_new.dim(0);
  const int64_t r0 = bl * ctx.prg_id / ctx.n_prgs, r1 = bl * (ctx.prg_id + 1) / ctx.n_prgs;
  if (r1 == r0) return;
  nisa::dma_copy(params.k_cache.select(2, last).slice(0, r0, r1).permute({1, 0}),
                 params.k_new.slice(0, r0, r1).permute({1, 0}), queue);
  nisa::dma_copy(params.v_cache.select(1, last).slice(0, r0, r1), params.v_new.slice(0, r0, r1), queue);
}

namespace {

// The case of one batch row as V virtual rows: row v is tokens [v L, (v + 1) L) of the row, L =
// T / V (q repeated by a zero stride, the caches as strided views; nothing is copied).
AttentionTkgParams VirtualRows(const AttentionTkgParams& p, int64_t v) {
  const TensorView &q = p.q, &k = p.k_cache, &vc = p.v_cache;
  const int64_t g = q.dim(0), d = q.dim(2), len = k.dim(2) / v;
  AttentionTkgParams out;
  out.q = q.ap({q.offset(), {{q.strides()[0], g}, {0, v}, {q.strides()[2], d}}});
  out.k_cache = k.ap({k.offset(), {{len * k.strides()[2], v}, {k.strides()[1], d}, {k.strides()[2], len}}});
  out.v_cache = vc.ap({vc.offset(), {{len * vc.strides()[1], v}, {vc.strides()[1], len}, {vc.strides()[2], d}}});
  return out;
}

// AttentionTkgInto's launches. REQUIRES: params and out validated.
void LaunchAttentionTkg(LogicalCore& lnc, const AttentionTkgParams& params, const TensorView& out) {
  const int64_t v = PlanAttentionTkg(params, lnc.lnc(), lnc.profile()).virtual_rows;
  if (v > 1) {  // the row as virtual rows, merged on chip (and at LNC 2 over the link)
    // This step's token goes into the caches first; the virtual rows read it there (their reads
    // wait for that write).
    if (params.k_new.valid()) {
      lnc.Launch([&](const KernelContext& ctx) { AttentionTkgAppendKernel(ctx, params); });
    }
    const AttentionTkgParams vp = VirtualRows(params, v);
    lnc.Launch([&](const KernelContext& ctx) { AttentionTkgKernel(ctx, vp, out, out); });
    return;
  }
  lnc.Launch([&](const KernelContext& ctx) { AttentionTkgKernel(ctx, params, out); });
  if (params.k_new.valid()) {
    lnc.Launch([&](const KernelContext& ctx) { AttentionTkgAppendKernel(ctx, params); });
  }
}

}  // namespace

void AttentionTkgInto(LogicalCore& lnc, const AttentionTkgParams& params, const TensorView& out) {
  ValidateAttentionTkg(params, lnc.profile());
  if (!out.valid() || out.shape() != params.q.shape() || !IsFloat(out.dtype())) {
    Fail("out", out, StrCat("must be a float tensor of q's shape ", ShapeString(params.q.shape())));
  }
  LaunchAttentionTkg(lnc, params, out);
}

TensorView AttentionTkg(LogicalCore& lnc, const AttentionTkgParams& params) {
  ValidateAttentionTkg(params, lnc.profile());
  TensorView out = TensorView::Create(params.q.shape(), params.q.dtype(), "attention_out");
  LaunchAttentionTkg(lnc, params, out);
  return out;
}

}  // namespace nkisim::kernels
