#include "kernels/attention/attention_cte.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"
#include "runtime/language/nl.h"
#include "runtime/nisa/dma_descriptors.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {
namespace {

constexpr int64_t kRows = 128;        // query rows per tile (the partitions)
constexpr int64_t kBank = 512;        // keys per QK^T matmul (one PSUM bank of fp32)
constexpr int64_t kKeys = 1024;       // keys per block (two PSUM banks of fp32)
constexpr int64_t kChunk = 128;       // keys per PV contraction (the partitions)
constexpr int64_t kMaxHeads = 4;      // query heads per item: 4 x 128 = the PV moving width
constexpr float kMaskValue = -30000;  // added to masked scores (fits fp16 and bf16)
constexpr int kKvSlots = 3;           // K^T / V of three (b, g) groups in SBUF
constexpr int kItemSlots = 12;        // Q^T and softmax statistics of twelve items (> kLagC +
                                      // kFinalDelay one-unit items in flight)
constexpr int64_t kLagB = 1;          // the softmax stage runs this many units behind QK^T
constexpr int64_t kLagC = 8;          // the transpose / PV stage runs this many units behind
constexpr int kScoreSlots = kLagB + 2;  // score tiles (two PSUM banks each)
constexpr int kOutSlots = 2;          // PSUM banks of O^T accumulators
constexpr int kUnitSlots = kLagC - kLagB + 2;  // exp output and per-unit columns
constexpr int kBlockSlots = 2;        // P^T and alpha rows per block
constexpr int kFinalSlots = 2;        // 1/l rows and the output staging
constexpr int kFinalDelay = 3;        // pipeline steps between an item's last PV and its epilogue

[[noreturn]] void Fail(const std::string& what) {
  Raise(ErrorCode::kInvalidArgument, StrCat("attention_cte: ", what));
}

std::string Described(const char* name, const TensorView& t) {
  return t.valid() ? StrCat(name, " ", ShapeString(t.shape()), " ", DTypeName(t.dtype()))
                   : StrCat(name, " <none>");
}

bool IsComputeFloat(DType dtype) {
  return dtype == DType::kBFloat16 || dtype == DType::kFloat16 || dtype == DType::kFloat32;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One item: a 128-row query tile of up to four query heads sharing KV head g of batch b.
struct Item {
  int64_t b, g, group;  // group: the index of (b, g) in this core's order
  int64_t r0, rows, kend;
  int64_t h0, nh;
  int64_t blocks;
  int64_t first_unit = 0;
  int64_t first_block = 0;  // blocks are numbered in unit order over the items
};

// One unit of the pipeline: block j of head hh of an item.
struct Unit {
  int64_t item, j, hh;
};

class CteProgram {
 public:
  CteProgram(const KernelContext& ctx, const AttentionCteParams& p, const TensorView& out)
      : ctx_(ctx), p_(p), out_(out) {
    n_q_ = p.q.dim(0);
    batch_ = p.q.dim(1);
    seq_ = p.q.dim(2);
    d_ = p.q.dim(3);
    n_kv_ = p.k.dim(0);
    cdt_ = p.q.dtype();
    scale_ = 1.0f / std::sqrt(static_cast<float>(d_));
    Plan();
  }

  void Run() {
    if (units_.empty()) return;
    Allocate();
    const int64_t n = static_cast<int64_t>(units_.size());
    for (int64_t t = 0; t < n + kLagC; ++t) {
      if (t < n) StageQk(t);
      IssueUpTo(t - kLagB + 1, t - kLagC + 1, t);
    }
    IssueUpTo(n, n, n + kLagC);
    while (!finals_.empty()) {
      Final(finals_.front().first);
      finals_.pop_front();
    }
  }

  private:
  void Plan() {
    const std::vector<int64_t> tiles = AttentionCteTilesOfProgram(seq_, ctx_.prg_id, ctx_.n_prgs);
    if (tiles.empty()) return;
    const int64_t ratio = n_q_ / n_kv_;
    for (int64_t b = 0; b < batch_; ++b) {
      for (int64_t g = 0; g < n_kv_; ++g) {
        const int64_t group = static_cast<int64_t>(groups_.size());
        groups_.push_back({b, g});
        for (int64_t i : tiles) {
          for (int64_t h = 0; h < ratio; h += kMaxHeads) {
            Item it;
            it.b = b;
            it.g = g;
            it.group = group;
            it.r0 = i * kRows;
            it.rows = std::min(kRows, seq_ - it.r0);
            it.kend = it.r0 + it.rows;
            it.h0 = g * ratio + h;
            it.nh = std::min(kMaxHeads, ratio - h);
            it.blocks = CeilDiv(it.kend, kKeys);
            it.first_unit = static_cast<int64_t>(units_.size());
            it.first_block = blocks_;
            blocks_ += it.blocks;
            const int64_t index = static_cast<int64_t>(items_.size());
            items_.push_back(it);
            for (int64_t j = 0; j < it.blocks; ++j) {
              for (int64_t hh = 0; hh < it.nh; ++hh) units_.push_back({index, j, hh});
            }
          }
        }
      }
    }
    group_last_unit_.assign(groups_.size(), -1);
    for (int64_t u = 0; u < static_cast<int64_t>(units_.size()); ++u) {
      group_last_unit_[items_[units_[u].item].group] = u;
    }
    group_loaded_.assign(groups_.size(), false);
    item_loaded_.assign(items_.size(), false);
  }

  void Allocate() {
    const DType f32 = DType::kFloat32;
    const int64_t chunks = CeilDiv(seq_, kChunk);
    for (int s = 0; s < kv_slots_; ++s) {
      kt_.push_back(nl::ndarray({d_, seq_}, cdt_, nl::Buffer::kSbuf, "attn_kT"));
      v_.push_back(nl::ndarray({kChunk, chunks, d_}, cdt_, nl::Buffer::kSbuf, "attn_v"));
    }
    for (int s = 0; s < kItemSlots; ++s) {
      qt_.push_back(nl::ndarray({d_, kMaxHeads, kRows}, cdt_, nl::Buffer::kSbuf, "attn_qT"));
      nm_.push_back(nl::ndarray({kRows, kMaxHeads * 2}, f32, nl::Buffer::kSbuf, "attn_neg_max"));
      l_.push_back(nl::ndarray({kRows, kMaxHeads}, f32, nl::Buffer::kSbuf, "attn_sum"));
    }
    for (int s = 0; s < kScoreSlots; ++s) {
      s_.push_back(nl::ndarray({kRows, kKeys}, f32, nl::Buffer::kPsum, "attn_scores"));
    }
    for (int s = 0; s < kOutSlots; ++s) {
      ot_.push_back(nl::ndarray({d_, kMaxHeads * kRows}, f32, nl::Buffer::kPsum, "attn_oT"));
    }
    for (int s = 0; s < kUnitSlots; ++s) {
      p_sb_.push_back(nl::ndarray({kRows, kKeys}, cdt_, nl::Buffer::kSbuf, "attn_p"));
      nmb_.push_back(nl::ndarray({kRows, 1}, f32, nl::Buffer::kSbuf, "attn_block_neg_max"));
      rs_.push_back(nl::ndarray({kRows, 1}, f32, nl::Buffer::kSbuf, "attn_block_sum"));
      alpha_.push_back(nl::ndarray({kRows, 1}, f32, nl::Buffer::kSbuf, "attn_alpha"));
    }
    for (int s = 0; s < kBlockSlots; ++s) {
      pt_.push_back(nl::ndarray({kChunk, kKeys / kChunk, kMaxHeads, kRows}, cdt_,
                                nl::Buffer::kSbuf, "attn_pT"));
      abc_.push_back(nl::ndarray({d_, kMaxHeads, kRows}, f32, nl::Buffer::kSbuf, "attn_alpha_rows"));
    }
    for (int s = 0; s < kFinalSlots; ++s) {
      rl_.push_back(nl::ndarray({kRows, kMaxHeads}, f32, nl::Buffer::kSbuf, "attn_inv_sum"));
      lbc_.push_back(nl::ndarray({d_, kMaxHeads, kRows}, f32, nl::Buffer::kSbuf, "attn_inv_rows"));
      osb_.push_back(nl::ndarray({d_, kMaxHeads, kRows}, out_.dtype(), nl::Buffer::kSbuf,
                                 "attn_out"));
    }
    // Identity (the mask's stationary) and the mask: value c - p of column c, partition p.
    const Tile diff = nl::ndarray({kRows, kRows}, f32, nl::Buffer::kSbuf, "attn_iota");
    nisa::iota(diff, 0, -1, {{1, kRows}});
    ident_ = nl::ndarray({kRows, kRows}, cdt_, nl::Buffer::kSbuf, "attn_identity");
    mask_ = nl::ndarray({kRows, kRows}, cdt_, nl::Buffer::kSbuf, "attn_mask");
    nisa::tensor_scalar(ident_, diff, {.op0 = nisa::AluOp::kEqual, .operand0 = 0.0f});
    nisa::tensor_scalar(mask_, diff,
                        {.op0 = nisa::AluOp::kGreater, .operand0 = 0.0f,
                         .op1 = nisa::AluOp::kMultiply, .operand1 = kMaskValue});
    LoadGroup(0);
  }

  // K^T and V of group gi (unscaled: 1/sqrt(d) is applied by the exp's scale) into slot gi % kKvSlots, in 128-key DMAs.
  void LoadGroup(int64_t gi) {
    if (group_loaded_[gi]) return;
    group_loaded_[gi] = true;
    const int64_t prev = gi - kv_slots_;
    if (prev >= 0) {
      // The slot's previous group must be done with it (in issue order): flush its stages.
      const int64_t last = group_last_unit_[prev] + 1;
      IssueUpTo(last, last, -1);
    }
    const auto [b, g] = groups_[gi];
    const Tile& kt = kt_[gi % kv_slots_];
    const Tile& v = v_[gi % kv_slots_];
    const TensorView ksrc = p_.k.select(0, g).select(0, b);  // [S, d]
    const TensorView vsrc = p_.v.select(0, g).select(0, b);
    for (int64_t k0 = 0; k0 < seq_; k0 += kKeys) {
      const int64_t w = std::min(kKeys, seq_ - k0);
      // K^T of the block: one transposing DMA of the contiguous [w, d] rows (one descriptor a
      // partition); a permuted dma_copy view would cost one descriptor per element.
      nisa::dma_transpose(kt.slice(1, k0, k0 + w), ksrc.slice(0, k0, k0 + w));
      for (int64_t c0 = k0; c0 < k0 + w; c0 += kChunk) {
        const int64_t kw = std::min(kChunk, seq_ - c0);
        nisa::dma_copy(v.slice(0, 0, kw).select(1, c0 / kChunk), vsrc.slice(0, c0, c0 + kw));
      }
    }
  }

  void LoadItem(int64_t k) {
    if (k >= static_cast<int64_t>(items_.size()) || item_loaded_[k]) return;
    item_loaded_[k] = true;
    const Item& it = items_[k];
    const Tile& qt = qt_[k % kItemSlots];
    for (int64_t hh = 0; hh < it.nh; ++hh) {
      nisa::dma_transpose(qt.select(1, hh).slice(1, 0, it.rows),
                          p_.q.select(0, it.h0 + hh).select(0, it.b).slice(0, it.r0, it.r0 + it.rows));
    }
  }

  int64_t BlockWidth(const Item& it, int64_t j) const {
    return std::min(kKeys, it.kend - j * kKeys);
  }
  Tile NegMax(const Item& it, int64_t k, int64_t hh, int which) const {
    const int64_t col = hh * 2 + which;
    return nm_[k % kItemSlots].slice(0, 0, it.rows).slice(1, col, col + 1);
  }
  Tile Sum(const Item& it, int64_t k, int64_t hh) const {
    return l_[k % kItemSlots].slice(0, 0, it.rows).slice(1, hh, hh + 1);
  }

  // Issues the transpose / PV stage of units [c_next_, c_end) and the softmax stage of units
  // [b_next_, b_end) (never a unit's C before its B), then the epilogues due by step t.
  // The C stage goes first: its O^T rescale then sits ahead of this step's exp in Scalar's
  // queue, so the PV matmuls (which wait for the rescale) do not also wait for that exp and
  // hold the next QK^T behind them on the PE (2.25x -> 1.94x the PE bound at S 2048, n_q 32).
  void IssueUpTo(int64_t b_end, int64_t c_end, int64_t t) {
    const int64_t n = static_cast<int64_t>(units_.size());
    b_end = std::min(b_end, n);
    c_end = std::min(c_end, n);
    while (c_next_ < std::min(c_end, b_next_)) StageTransposeAndPv(c_next_++, t);
    while (b_next_ < b_end) StageSoftmax(b_next_++);
    while (c_next_ < std::min(c_end, b_next_)) StageTransposeAndPv(c_next_++, t);
    while (!finals_.empty() && finals_.front().second <= t) {
      Final(finals_.front().first);
      finals_.pop_front();
    }
  }

  // The C stage of unit u_index: its P^T, then the block's PV once its last head is in, the
  // item's epilogue scheduled after its last block, and the next (b, g)'s K / V prefetched.
  void StageTransposeAndPv(int64_t u_index, int64_t t) {
    StageTranspose(u_index);
    const Unit& u = units_[u_index];
    const Item& it = items_[u.item];
    if (u.hh == it.nh - 1) StagePv(u.item, u.j);
    if (u.hh == it.nh - 1 && u.j == it.blocks - 1) finals_.push_back({u.item, t + kFinalDelay});
    if (u_index == it.first_unit && it.group + 1 < static_cast<int64_t>(groups_.size()) &&
        (u.item == 0 || items_[u.item - 1].group != it.group)) {
      LoadGroup(it.group + 1);  // prefetch the next (b, g)
    }
  }

  // PE: scores of unit t, plus the mask on the diagonal square.
  void StageQk(int64_t t) {
    const Unit& u = units_[t];
    const Item& it = items_[u.item];
    if (u.j == 0 && u.hh == 0) {
      LoadGroup(it.group);
      LoadItem(u.item);
      LoadItem(u.item + 1);
      LoadItem(u.item + 2);
    }
    const int64_t w = BlockWidth(it, u.j), k0 = u.j * kKeys;
    const Tile s = s_[t % kScoreSlots].slice(0, 0, it.rows).slice(1, 0, w);
    const Tile q = qt_[u.item % kItemSlots].select(1, u.hh).slice(1, 0, it.rows);
    for (int64_t b0 = 0; b0 < w; b0 += kBank) {
      const int64_t bw = std::min(kBank, w - b0);
      nisa::nc_matmul(s.slice(1, b0, b0 + bw), q,
                      kt_[it.group % kv_slots_].slice(1, k0 + b0, k0 + b0 + bw));
    }
    if (u.j == it.blocks - 1) {
      nisa::nc_matmul(s.slice(1, w - it.rows, w), ident_.slice(0, 0, it.rows).slice(1, 0, it.rows),
                      mask_.slice(0, 0, it.rows).slice(1, 0, it.rows), {.accumulate = true});
    }
  }

  // Vector / GpSimd / Scalar: the row max of the PSUM scores on Vector (GpSimd cannot read
  // PSUM), the running max on GpSimd, P = exp(S - m) with its row sum on Scalar.
  void StageSoftmax(int64_t t) {
    const Unit& u = units_[t];
    const Item& it = items_[u.item];
    const int64_t w = BlockWidth(it, u.j);
    const Tile s = s_[t % kScoreSlots].slice(0, 0, it.rows).slice(1, 0, w);
    const Tile p = p_sb_[t % kUnitSlots].slice(0, 0, it.rows).slice(1, 0, w);
    int& cur = cur_[u.item % kItemSlots][u.hh];
    if (u.j == 0) {
      cur = 0;
      const Tile nmb0 = nmb_[t % kUnitSlots].slice(0, 0, it.rows);
      nisa::tensor_reduce(nmb0, nisa::AluOp::kMax, s, {1}, {.negate = true}, Engine::kVector);
      nisa::tensor_scalar(NegMax(it, u.item, u.hh, 0), nmb0,
                          {.op0 = nisa::AluOp::kMultiply, .operand0 = scale_}, Engine::kGpSimd);
      nisa::activation(p, nisa::ActFn::kExp, s,
                       {.scale = scale_, .bias = NegMax(it, u.item, u.hh, 0),
                        .reduce_op = nisa::AluOp::kAdd,
                        .reduce_res = Sum(it, u.item, u.hh)});
      return;
    }
    const Tile nmb = nmb_[t % kUnitSlots].slice(0, 0, it.rows);
    const Tile rs = rs_[t % kUnitSlots].slice(0, 0, it.rows);
    const Tile alpha = alpha_[t % kUnitSlots].slice(0, 0, it.rows);
    const Tile old_nm = NegMax(it, u.item, u.hh, cur), new_nm = NegMax(it, u.item, u.hh, 1 - cur);
    cur = 1 - cur;
    nisa::tensor_reduce(nmb, nisa::AluOp::kMax, s, {1}, {.negate = true}, Engine::kVector);
    nisa::scalar_tensor_tensor(new_nm, nmb, nisa::AluOp::kMultiply, scale_, nisa::AluOp::kMin,
                               old_nm, Engine::kGpSimd);
    // alpha = exp(m_old - m_new) = exp(-nm_old + nm_new).
    nisa::ActivationOptions rescale;
    rescale.scale = -1.0f;
    rescale.bias = new_nm;
    nisa::activation(alpha, nisa::ActFn::kExp, old_nm, rescale);
    nisa::activation(p, nisa::ActFn::kExp, s,
                     {.scale = scale_, .bias = new_nm, .reduce_op = nisa::AluOp::kAdd, .reduce_res = rs});
  }

  // Vector: P^T chunks of unit t into the block's P^T; alpha as rows [d, rows].
  void StageTranspose(int64_t t) {
    const Unit& u = units_[t];
    const Item& it = items_[u.item];
    const int64_t w = BlockWidth(it, u.j);
    const int64_t block = BlockIndex(u.item, u.j);
    const Tile& pt = pt_[block % kBlockSlots];
    const Tile p = p_sb_[t % kUnitSlots];
    for (int64_t c = 0; c * kChunk < w; ++c) {
      const int64_t kw = std::min(kChunk, w - c * kChunk);
      nisa::nc_transpose(pt.slice(0, 0, kw).select(1, c).select(1, u.hh).slice(1, 0, it.rows),
                         p.slice(0, 0, it.rows).slice(1, c * kChunk, c * kChunk + kw),
                         Engine::kVector);
    }
    if (u.j > 0) {
      const Tile l = Sum(it, u.item, u.hh);
      nisa::scalar_tensor_tensor(l, l, nisa::AluOp::kMultiply,
                                 alpha_[t % kUnitSlots].slice(0, 0, it.rows), nisa::AluOp::kAdd,
                                 rs_[t % kUnitSlots].slice(0, 0, it.rows), Engine::kGpSimd);
      nisa::nc_transpose(abc_[block % kBlockSlots].select(1, u.hh).slice(1, 0, it.rows),
                         alpha_[t % kUnitSlots].slice(0, 0, it.rows).broadcast(1, d_),
                         Engine::kVector);
    }
  }

  int64_t BlockIndex(int64_t k, int64_t j) const { return items_[k].first_block + j; }

  // PE (and Vector for the rescale): O^T += V^T P^T over the block's key chunks.
  void StagePv(int64_t k, int64_t j) {
    const Item& it = items_[k];
    if (j == 0) {
      // The accumulator slot's previous owner must have been finalised (in issue order).
      while (!finals_.empty() && finals_.front().first <= k - kOutSlots) {
        Final(finals_.front().first);
        finals_.pop_front();
      }
    }
    const int64_t block = BlockIndex(k, j), w = BlockWidth(it, j), cols = it.nh * kRows;
    const Tile ot = ot_[k % kOutSlots].slice(1, 0, cols);
    if (j > 0) {
      const Tile rows = abc_[block % kBlockSlots].slice(1, 0, it.nh).reshape({cols});
      nisa::tensor_tensor(ot, ot, rows, nisa::AluOp::kMultiply, Engine::kScalar);
    }
    const Tile& pt = pt_[block % kBlockSlots];
    const Tile& v = v_[it.group % kv_slots_];
    for (int64_t c = 0; c * kChunk < w; ++c) {
      const int64_t kw = std::min(kChunk, w - c * kChunk);
      const int64_t chunk = (j * kKeys) / kChunk + c;
      nisa::nc_matmul(ot, v.slice(0, 0, kw).select(1, chunk),
                      pt.slice(0, 0, kw).select(1, c).slice(1, 0, it.nh).reshape({cols}),
                      {.accumulate = j > 0 || c > 0});
    }
  }

  // Vector: out = O^T / l (1/l as rows), stored per head.
  void Final(int64_t k) {
    const Item& it = items_[k];
    const int slot = static_cast<int>(final_count_++ % kFinalSlots);
    const int64_t cols = it.nh * kRows;
    const Tile rl = rl_[slot].slice(0, 0, it.rows).slice(1, 0, it.nh);
    nisa::reciprocal(rl, l_[k % kItemSlots].slice(0, 0, it.rows).slice(1, 0, it.nh));
    for (int64_t hh = 0; hh < it.nh; ++hh) {
      nisa::nc_transpose(lbc_[slot].select(1, hh).slice(1, 0, it.rows),
                         rl.slice(1, hh, hh + 1).broadcast(1, d_), Engine::kVector);
    }
    const Tile o = osb_[slot].slice(1, 0, it.nh).reshape({cols});
    nisa::tensor_tensor(o, ot_[k % kOutSlots].slice(1, 0, cols),
                        lbc_[slot].slice(1, 0, it.nh).reshape({cols}), nisa::AluOp::kMultiply,
                        Engine::kScalar);
    for (int64_t hh = 0; hh < it.nh; ++hh) {
      nisa::dma_copy(out_.select(0, it.b).select(0, it.h0 + hh).slice(1, it.r0, it.r0 + it.rows),
                     osb_[slot].select(1, hh).slice(1, 0, it.rows));
    }
  }

  const KernelContext& ctx_;
  const AttentionCteParams& p_;
  const TensorView& out_;
  int64_t n_q_ = 0, batch_ = 0, seq_ = 0, d_ = 0, n_kv_ = 0;
  DType cdt_ = DType::kBFloat16;
  float scale_ = 1.0f;

  std::vector<std::pair<int64_t, int64_t>> groups_;  // (b, g)
  std::vector<Item> items_;
  std::vector<Unit> units_;
  std::vector<bool> group_loaded_, item_loaded_;
  int64_t blocks_ = 0;
  int64_t b_next_ = 0, c_next_ = 0;
  int kv_slots_ = kKvSlots;
  std::vector<int64_t> group_last_unit_;
  std::deque<std::pair<int64_t, int64_t>> finals_;  // (item, step at which to issue)
  int64_t final_count_ = 0;
  int cur_[kItemSlots][kMaxHeads] = {};

  std::vector<Tile> kt_, v_, qt_, nm_, l_, s_, ot_, p_sb_, nmb_, rs_, alpha_, pt_, abc_, rl_, lbc_,
      osb_;
  Tile ident_, mask_;
};

}  // namespace

Shape AttentionCteOutputShape(const TensorView& q) {
  return {q.dim(1), q.dim(0), q.dim(3), q.dim(2)};
}

std::vector<int64_t> AttentionCteTilesOfProgram(int64_t seq_len, int prg_id, int n_prgs) {
  std::vector<int64_t> tiles;
  const int64_t n = CeilDiv(seq_len, kRows);
  for (int64_t i = 0; i < n; ++i) {
    const int core = n_prgs == 1 ? 0 : ((i % 4 == 0 || i % 4 == 3) ? 0 : 1);
    if (core == prg_id) tiles.push_back(i);
  }
  return tiles;
}

double AttentionCteFlops(int64_t b, int64_t n_q, int64_t s, int64_t d) {
  double pairs = 0;
  for (int64_t r0 = 0; r0 < s; r0 += kRows) {
    const int64_t rows = std::min(kRows, s - r0);
    pairs += static_cast<double>(rows) * static_cast<double>(r0 + rows);
  }
  return 4.0 * static_cast<double>(d) * pairs * static_cast<double>(b * n_q);
}

double AttentionCausalFlops(int64_t b, int64_t n_q, int64_t s, int64_t d) {
  return 4.0 * static_cast<double>(d) * static_cast<double>(b * n_q) * static_cast<double>(s) *
         static_cast<double>(s + 1) / 2.0;
}

int64_t AttentionCteMaxSeqLen(const HardwareProfile& profile, DType dtype) {
  return static_cast<int64_t>(profile.sbuf_bytes_per_partition()) / 2 /
         (int64_t{2} * kKvSlots * static_cast<int64_t>(SizeOf(dtype)));
}

void ValidateAttentionCte(const AttentionCteParams& p, const TensorView& out,
                          const HardwareProfile& profile) {
  for (const auto& [name, t] : {std::pair<const char*, const TensorView&>{"q", p.q},
                                {"k", p.k}, {"v", p.v}}) {
    if (!t.valid() || t.rank() != 4) {
      Fail(StrCat(Described(name, t), ": must be a 4-D tensor [heads, B, S, d] (NBSd)"));
    }
    if (!IsComputeFloat(t.dtype())) {
      Fail(StrCat(Described(name, t), ": dtype must be bf16, fp16 or fp32"));
    }
  }
  const int64_t n_q = p.q.dim(0), b = p.q.dim(1), s = p.q.dim(2), d = p.q.dim(3);
  const std::string qs = Described("q", p.q);
  if (s < 1) Fail(StrCat(qs, ": S = ", s, " must be >= 1"));
  if (b < 1) Fail(StrCat(qs, ": B = ", b, " must be >= 1"));
  if (n_q < 1) Fail(StrCat(qs, ": n_q = ", n_q, " must be >= 1"));
  if (d < 1 || d > profile.partitions()) {
    Fail(StrCat(qs, ": d = ", d, " must be in [1, ", profile.partitions(),
                "] (the contraction on the partitions)"));
  }
  for (const auto& [name, t] : {std::pair<const char*, const TensorView&>{"k", p.k}, {"v", p.v}}) {
    if (t.dtype() != p.q.dtype()) {
      Fail(StrCat(Described(name, t), ": dtype must equal q's (", DTypeName(p.q.dtype()), ")"));
    }
    if (t.dim(1) != b || t.dim(2) != s || t.dim(3) != d) {
      Fail(StrCat(Described(name, t), ": must be [n_kv, ", b, ", ", s, ", ", d,
                  "] (q's B, S and d)"));
    }
  }
  if (p.k.dim(0) != p.v.dim(0)) {
    Fail(StrCat(Described("v", p.v), ": heads must equal k's n_kv = ", p.k.dim(0)));
  }
  const int64_t n_kv = p.k.dim(0);
  if (n_kv < 1 || n_q % n_kv != 0) {
    Fail(StrCat(qs, ": n_q = ", n_q, " must be divisible by n_kv = ", n_kv, " (k ",
                ShapeString(p.k.shape()), ")"));
  }
  const int64_t need = int64_t{2} * kKvSlots * s * static_cast<int64_t>(SizeOf(p.q.dtype()));
  if (s > AttentionCteMaxSeqLen(profile, p.q.dtype())) {
    Fail(StrCat(qs, ": S = ", s, ": the K^T and V buffers (", need,
                " B per partition) must fit in half of SBUF (",
                profile.sbuf_bytes_per_partition() / 2, " B)"));
  }
  if (out.valid()) {
    const Shape want = AttentionCteOutputShape(p.q);
    if (out.shape() != want || !IsComputeFloat(out.dtype())) {
      Fail(StrCat(Described("out", out), ": must be ", ShapeString(want),
                  " (B, n_q, d, S) in bf16, fp16 or fp32"));
    }
  }
}

void AttentionCteKernel(const KernelContext& ctx, const AttentionCteParams& params,
                        const TensorView& out) {
  CteProgram program(ctx, params, out);
  program.Run();
}

TensorView AttentionCte(LogicalCore& lnc, const AttentionCteParams& params) {
  ValidateAttentionCte(params, TensorView(), lnc.profile());
  TensorView out =
      TensorView::Create(AttentionCteOutputShape(params.q), params.q.dtype(), "attention_cte_out");
  lnc.Launch([&](const KernelContext& ctx) { AttentionCteKernel(ctx, params, out); });
  return out;
}

}  // namespace nkisim::kernels
