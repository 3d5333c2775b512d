// Mixture-of-experts kernels on one logical core (LNC 1 so far), in nisa on tiles: the router
// logits matmul, the expert selection of the families (kernels/reference/moe_ref.h lists their
// rules), the token dispatch into per-expert blocks, the expert MLPs as blockwise matmuls over the
// rows each expert received, a shared expert (the same MLP over every token) and the combine.
// Goldens: kernels/reference/moe_ref.h (fp64 plain loops). docs/moe.md says what is modelled.
//
// Shapes and tiles. x [T, H] bf16 (or fp32) in HBM. H is cut into 128-partition contraction
// tiles, the last one partial when H % 128 != 0 (gpt-oss H = 2880: 22 full tiles and one of 64
// rows; nothing to pad in HBM). Tokens go in blocks of <= 128 (the PE array's M); outputs along H
// or E in 512-column PSUM banks (fp32, one 2 KiB bank); the expert's intermediate I in 128-row
// tiles, kept transposed ([I tile, tokens]) so it feeds the down projection as its stationary
// operand without a transpose.
//
// Variants. TKG (decode: few tokens, a block of <= 128 rows per expert): every weight tile of an
// expert is read once per call; the time is the weight stream (3 H I elements per active expert).
// CTE (prefill: many tokens): the same program over several 128-row blocks per expert; weight
// tiles are re-streamed per block and the PE work grows with the rows.
//
// Router skew (for studies of the slowest expert-parallel rank): SkewedRouting builds a routing
// whose expert loads follow a uniform draw, a Zipf law of exponent s, or given per-expert counts.
//
// Errors: Error(kInvalidArgument) naming the field, its value and the rule: top_k > experts,
// llama4 with top_k != 1, counts of the wrong length, a negative count, a count above the token
// count, counts that do not sum to tokens x top_k, operands of the wrong shape, LNC != 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/moe_ref.h"  // RouterFamily only (the enum, no code)
#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels::moe {

using reference::RouterFamily;

struct Routing {
  int64_t tokens = 0, top_k = 0;
  std::vector<int> expert;    // [tokens * top_k], the k choices of token t at t * top_k
  std::vector<float> weight;  // [tokens * top_k]
};

// logits [T, E] fp32 = x [T, H] @ w [H, E]; w of x's dtype. Throws on shapes and LNC != 1.
void RouterLogitsKernel(const KernelContext& ctx, const TensorView& x, const TensorView& w,
                        const TensorView& logits);
// The family's selection and normalisation on the kernel's logits (fp32), ties to the lower
// expert. Throws for top_k outside [1, E] and llama4 with top_k != 1.
Routing SelectExperts(const TensorView& logits, int64_t top_k, RouterFamily family);

struct RouterSkew {
  enum class Kind { kUniform, kZipf, kCounts } kind = Kind::kUniform;
  double zipf_s = 1.0;          // kZipf: P(expert of rank r) ~ 1 / (r + 1)^s
  std::vector<int64_t> counts;  // kCounts: tokens each expert receives; sum = tokens * top_k
};
// A routing of `tokens` tokens, top_k distinct experts each, loads following `skew`; weights are
// a softmax of random logits over the k choices. Deterministic in seed.
Routing SkewedRouting(int64_t tokens, int64_t experts, int64_t top_k, const RouterSkew& skew,
                      uint32_t seed);

// The permutation into per-expert blocks: expert e's rows are [offset[e], offset[e + 1]) of the
// permuted buffer, in token order; row_token[r] is the token of row r; slot_row[t * k + j] the row
// of choice j of token t, or -1 when dropped (capacity >= 0 and the expert already holds
// `capacity` rows). capacity -1: dropless.
struct DispatchPlan {
  int64_t experts = 0, capacity = -1, dropped = 0;
  std::vector<int64_t> offset;     // [experts + 1]
  std::vector<int64_t> row_token;  // [rows]
  std::vector<int64_t> slot_row;   // [tokens * top_k]
  int64_t rows() const { return offset.empty() ? 0 : offset.back(); }
};
DispatchPlan PlanDispatch(const Routing& routing, int64_t experts, int64_t capacity);

// x_perm [rows, H] = x[row_token[r]], in tiles of 128 permuted rows: an indirect gather of the
// tile's rows into SBUF (one DMA, partition p reading x's row row_token[r0 + p]) and one
// contiguous store, the indices of up to 512 tiles loaded by one DMA before them. DMAs:
// 2 ceil(rows / 128) + ceil(ceil(rows / 128) / 512), whatever the routing.
void DispatchKernel(const KernelContext& ctx, const DispatchPlan& plan, const TensorView& x,
                    const TensorView& x_perm);
// y [n, H] = (silu(x Wg) * (x Wu)) Wd for x [n, H] (one expert's rows), wg/wu [H, I], wd [I, H];
// all of one float dtype. n == 0 does nothing.
void ExpertMlpKernel(const KernelContext& ctx, const TensorView& x, const TensorView& wg,
                     const TensorView& wu, const TensorView& wd, const TensorView& y);
// out [T, H] = sum_j weight(t, j) * y_perm[slot_row[t * k + j]] (+ shared [T, H] when given);
// weights [T, k] fp32 in HBM (the routing's weights). Accumulates in fp32. Per 128-token tile:
// the weights [tb, k] and slot rows [tb, k] loaded by one DMA each, one indirect gather of
// y_perm's rows per choice j (a dropped choice skipped, its row zero), one store (+ the shared
// load): k + 3 (+ 1) DMAs a tile.
void CombineKernel(const KernelContext& ctx, const DispatchPlan& plan, const TensorView& weights,
                   const TensorView& y_perm, const TensorView* shared, const TensorView& out);

}  // namespace nkisim::kernels::moe
