#include "kernels/attention/decode_attention.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"
#include "runtime/language/nl.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels {

void ValidateDecodeAttention(const DecodeAttentionParams& p, const HardwareProfile& profile) {
  auto fail = [](const std::string& rule) {
    Raise(ErrorCode::kInvalidArgument, StrCat("decode_attention: ", rule));
  };
  for (const auto& [name, t] : {std::pair<const char*, const TensorView&>{"q", p.q},
                                {"k_cache", p.k_cache}, {"v_cache", p.v_cache}}) {
    if (!t.valid() || t.rank() != 3 || !IsFloat(t.dtype())) {
      fail(StrCat(name, " ", t.valid() ? ShapeString(t.shape()) : "<none>", ": must be a 3-D float tensor"));
    }
  }
  const int64_t hq = p.q.dim(0), rows = p.q.dim(1), d = p.q.dim(2);
  if (hq > profile.pe_cols() || d > profile.partitions()) {
    fail(StrCat("q ", ShapeString(p.q.shape()), ": heads (", hq, ") and d (", d, ") must be <= ",
                profile.partitions()));
  }
  if (p.k_cache.shape() != p.v_cache.shape() || p.k_cache.dim(0) != rows || p.k_cache.dim(2) != d) {
    fail(StrCat("k_cache ", ShapeString(p.k_cache.shape()), " and v_cache ",
                ShapeString(p.v_cache.shape()), " must both be [", rows, ", T, ", d, "]"));
  }
}

void DecodeAttentionKernel(const KernelContext& ctx, const DecodeAttentionParams& p,
                           const TensorView& out) {
  const HardwareProfile& prof = ctx.core.profile();
  const int64_t bank = prof.pe_max_moving_free(), chunk = prof.partitions();
  const int64_t hq = p.q.dim(0), rows = p.q.dim(1), d = p.q.dim(2), tokens = p.k_cache.dim(1);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t b = ctx.prg_id; b < rows; b += ctx.n_prgs) {
    // Scores [Hq, T] = q_b K_b^T / sqrt(d): d is the contraction, on the partitions.
    const Tile q_t = nl::load(p.q.select(1, b).permute({1, 0}));  // [d, Hq]
    const Tile scores = nl::ndarray({hq, tokens}, DType::kFloat32);
    for (int64_t t0 = 0; t0 < tokens; t0 += bank) {
      const int64_t w = std::min(bank, tokens - t0);
      const Tile k_t = nl::load(p.k_cache.select(0, b).slice(0, t0, t0 + w).permute({1, 0}));
      const Tile partial = nl::matmul(q_t, k_t, /*transpose_x=*/true);  // [Hq, w] in PSUM
      nisa::tensor_scalar(scores.slice(1, t0, t0 + w), partial,
                          {.op0 = nisa::AluOp::kMultiply, .operand0 = scale});
    }
    const Tile probs = nl::softmax(scores, {1}, {.dtype = p.v_cache.dtype()});
    // out_b [Hq, d] = P V_b: the tokens are the contraction, 128 at a time on the partitions.
    const Tile acc = nl::ndarray({hq, d}, DType::kFloat32, nl::Buffer::kPsum);
    for (int64_t t0 = 0; t0 < tokens; t0 += chunk) {
      const int64_t w = std::min(chunk, tokens - t0);
      const Tile p_t = nl::copy(nl::transpose(probs.slice(1, t0, t0 + w)));  // [w, Hq] in SBUF
      const Tile v = nl::load(p.v_cache.select(0, b).slice(0, t0, t0 + w));  // [w, d]
      nisa::nc_matmul(acc, p_t, v, {.accumulate = t0 > 0});
    }
    nl::store(out.select(1, b), nl::copy(acc, out.dtype()));
  }
}

TensorView DecodeAttention(LogicalCore& lnc, const DecodeAttentionParams& params) {
  ValidateDecodeAttention(params, lnc.profile());
  TensorView out = TensorView::Create(params.q.shape(), params.q.dtype(), "attention_out");
  lnc.Launch([&](const KernelContext& ctx) { DecodeAttentionKernel(ctx, params, out); });
  return out;
}

}  // namespace nkisim::kernels
