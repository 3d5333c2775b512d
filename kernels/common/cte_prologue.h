// The CTE (prefill) norm front end of QKV and the MLP: everything before the first matmul for one
// tile of up to 128 token rows (tokens on the partitions, H on the free axis), after
// qkv_cte.py:873-1100:
//   1. DMA the rows in, cast to the compute dtype (bf16 for fp32 input);
//   2. fused residual add, in column chunks, held in the compute dtype;
//   3. RMS: sum of squares by the activation engine's reduce, rsqrt(sum / H_actual + eps);
//      LayerNorm: bn_stats over 512-column chunks, bn_aggr, (x - mean) * rsqrt(var + eps);
//      eps is held in the compute dtype, as the reference's bf16 tile holds it;
//   4. PE transposes of 128-column subtiles into one PSUM bank at a time; the eviction multiplies
//      by gamma (a per-partition value once H is on the partitions), adds the LayerNorm bias and,
//      for STATIC, scales by 1 / s_in, clamps to the fp8 range and casts to fp8.
// Load, Prepare (steps 2-3, Scalar / Vector / GpSimd) and Transpose (step 4, PE) are separate
// calls so a kernel can issue each ahead of the previous tile's matmuls on the engine it uses.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/front_end.h"
#include "runtime/neuron_core.h"
#include "runtime/tile.h"

namespace nkisim::kernels {

// Which row of H the value of partition p in transposed subtile j holds (non-MX; the contraction
// is correct in either order as long as the weights are read in the same one):
//   kStrided: h = j P + p (subtile j is the columns [j P, (j + 1) P) of the rows);
//   kBlocked: h = p (H / P) + j, so partition p holds the CONSECUTIVE rows [p H / P, (p + 1) H / P)
//     of a row-major [H, N] weight: one contiguous run of (H / P) N elements a partition, and
//     gamma / beta load as a plain [P, H / P] reshape (one run a partition) instead of a
//     per-element transposed view.
enum class HOrder { kStrided, kBlocked };

class CtePrologue {
 public:
  // buffers: row tiles in flight. Allocates its SBUF and two PSUM banks. h_order: see HOrder
  // (MX keeps its own quad order and ignores it).
  CtePrologue(NeuronCore& core, const FrontEndConfig& cfg, const FrontEndInputs& in, int buffers,
              HOrder h_order = HOrder::kStrided);

  // Issues the DMAs bringing token rows [r0, r0 + n) (n <= partitions) into buffer `slot`.
  void Load(int slot, int64_t r0, int64_t n);
  // Residual add and norm of buffer `slot`'s rows, in place; with StoreFusedHidden, the rows'
  // residual sum (held in the compute dtype) is also stored before the norm.
  void Prepare(int slot);
  // Prepare also stores each buffer's sum x + residuals into rows of fused_hidden [B, S, H]
  // (the MLP's store_fused_hidden; QKV CTE returns none).
  void StoreFusedHidden(const TensorView& fused_hidden) { fused_hidden_ = fused_hidden; }
  // Transposes buffer `slot`'s rows into x_t [P, H / P, >= n]: x_t[p, j, r] = normalised row r
  // at column j * P + p, or p * (H / P) + j for HOrder::kBlocked (or cfg.h_blocked, the MLP's
  // way of asking for it) (times gamma, plus beta; for
  // STATIC divided by s_in, clamped, fp8).
  void Transpose(int slot, const Tile& x_t);
  // MX: the same transposes, read so that chunk c of 4 x P rows of H lands as x4 elements: the
  // normalised rows go to a bf16 staging tile [P, chunks, n, 4] (value j of partition p in chunk c
  // is the row the packed weights hold there: 4 (c P + p) + j, or its MX_INTERLEAVED source),
  // then nisa::quantize_mx writes x4_t [P, H / 4P, >= n] and its scales xs_t (same shape, uint8).
  // Every MX front end transposes on the PE, with or without a norm: the reference's
  // DMA-transposed input load (qkv_cte.py: gen3+, NO_NORM) as a dma_copy of the quad view moves
  // one 8-byte descriptor per 4 values (docs/dma.md), 11-35x the kernel's bound on trn3.
  void TransposeMx(int slot, const Tile& x4_t, const Tile& xs_t);

  // The dtype Transpose writes into x_t.
  DType transposed_dtype() const { return cfg_.matmul_input_dtype(); }

 private:
  void ResidualAdd(const Tile& x, int64_t r0);
  void Normalize(const Tile& x);
  void EvictTransposed(const Tile& dst, const Tile& src, int64_t j0);
  // MX: the first column of H and the column step of subtile j = 4 c + value.
  int64_t MxColumn(int64_t j) const;
  int64_t MxStride() const { return cfg_.mx_interleaved_input() ? 2 : 4; }
  TensorView fused_hidden_;  // or invalid: no store

  FrontEndConfig cfg_;
  FrontEndInputs in_;
  HOrder h_order_ = HOrder::kStrided;
  std::vector<Tile> rows_;       // [P, H] compute dtype, one per buffer
  std::vector<int64_t> r0_, n_;  // the rows each buffer holds
  Tile residual_[2];             // [P, chunk] compute dtype
  Tile gamma_t_;                 // [P, H / P] compute dtype: gamma (/ s_in for STATIC), or invalid
  Tile beta_t_;                  // [P, H / P] compute dtype: LayerNorm bias (/ s_in), or invalid
  Tile eps_;                     // [P, 1] compute dtype
  Tile squares_;                 // [P, chunk] fp32: the activation's discarded output
  Tile stats_;                   // [P, k] fp32 partial sums / bn_stats groups
  Tile mean_var_, rstd_;         // [P, 2], [P, 1] fp32
  Tile scaled_;                  // [P, G, P] fp32 eviction scratch (STATIC or beta)
  Tile transposed_[2];           // [P, G, P] PSUM in the compute dtype (one bank each);
                                 // MX: [P, G / 4, P, 4]
  Tile mx_stage_;                // MX: [P, G / 4, P, 4] compute dtype, quantize_mx's source
  int64_t group_ = 0;            // subtiles per transpose bank
  int64_t turn_ = 0;
  float fp8_max_ = 0;
};

}  // namespace nkisim::kernels
