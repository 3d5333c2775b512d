// Internal to kernels/mlp: what both variants do around the projections, on the calling thread's
// current core.
//   * GateUp: the step between gate / up and down for one chunk of up to 128 rows of I on the
//     partitions (the products come out of the PE as [I rows, tokens]):
//       h = act(gate * s_g + b_g) * (up * s_u + b_u)
//     the activation on Scalar (fn(data * scale + bias) with per-partition scale and bias
//     columns: I is on the partitions, so a bias or ROW scale of I is one value per partition),
//     the product on Vector (scalar_tensor_tensor: (up * s_u) * act), both reading PSUM or SBUF
//     fp32 and rounding once into the down projection's stationary dtype. STATIC folds 1 / s_in of
//     the down input into s_u and writes fp8 (the conversion saturates: the clamp).
//   * DownTerms: the down projection's eviction terms (scale and bias along the output columns).
//   * Scale helpers for the quantized modes.
#pragma once

#include <cstdint>

#include "kernels/common/psum_eviction.h"
#include "kernels/mlp/config.h"
#include "runtime/neuron_core.h"
#include "runtime/nisa/nisa.h"
#include "runtime/tile.h"

namespace nkisim::kernels {

// A [R, I] HBM row (row 0 used) as a [P, ceil(I / P)] fp32 tile: element (p, c) = row[c P + p]
// (the tail chunk's unused partitions are left unset).
Tile LoadColumns(NeuronCore& core, const char* name, const TensorView& rows, int64_t partitions);

// The [P, 1] fp32 column s_w * s_in of two STATIC scale tensors [1 | P, 1] (s_in invalid: s_w).
Tile StaticDequant(NeuronCore& core, const TensorView& w_scale, const TensorView& in_scale,
                   int64_t partitions);

// x [P, T, J] as a new fp8 tile [P, J, T] (the double-row matmul's moving layout, subtiles
// before tokens): x / s_in (the conversion saturates to the fp8 range), s_in read from row 0 of
// in_scale [1 | P, 1]; one instruction per subtile j, taken in turn by GpSimd, Vector and Scalar
// (x_hat is in SBUF): the front end's last step, before the first matmul.
Tile QuantizeInputSubtiles(NeuronCore& core, const Tile& x, const TensorView& in_scale,
                           DType dtype);

class GateUp {
 public:
  // free: the widest free size Apply takes (B*S for TKG, a block of tokens for CTE).
  GateUp(NeuronCore& core, const MlpConfig& cfg, const MlpParams& p, int64_t free);

  // dst [rows, F] = h of I chunk c (rows = cfg.i_rows(c)) from gate, up [rows, F] fp32.
  void Apply(const Tile& dst, const Tile& gate, const Tile& up, int64_t c);
  // Apply in two halves, for a caller that keeps the activation itself (its gate accumulator is
  // reused for up): act [rows, F] fp32 = act(gate * s_g + b_g), then dst = act * (up * s_u + b_u).
  void Activate(const Tile& act, const Tile& gate, int64_t c);
  void Combine(const Tile& dst, const Tile& up, const Tile& act, int64_t c);

 private:
  nisa::Scalar Column(const Tile& cols, int64_t c, int64_t rows) const;

  MlpConfig cfg_;
  nisa::ActFn fn_;
  Tile gate_bias_, up_bias_;    // [P, chunks] fp32, or invalid
  Tile gate_scale_, up_scale_;  // ROW: [P, chunks]; STATIC: [P, 1]; else invalid
  Tile up_scale_quant_;         // STATIC: s_u / s_in_down [P, 1]
  Tile inverse_down_in_;        // STATIC: 1 / s_in_down [P, 1]
  Tile act_[2], up_[2];         // [P, free] fp32 scratch, alternating
  int turn_ = 0, combine_turn_ = 0;
};

// The down eviction's terms for output columns [c0, c0 + width) on `rows` partitions, of the
// columns [h0, h1) the core evicts (default: all of H; TKG at LNC 2: its shard, so each core
// reads only its half of the bias and ROW scale rows, each broadcast onto `rows` partitions as one
// DMA, see LoadRowBroadcast).
class DownTerms {
 public:
  DownTerms(NeuronCore& core, const MlpConfig& cfg, const MlpParams& p, int64_t rows,
            int64_t h0 = 0, int64_t h1 = -1);
  // REQUIRES: [c0, c0 + width) within [h0, h1).
  EvictionTerms Cut(int64_t rows, int64_t c0, int64_t width) const;

 private:
  int64_t h0_;
  Tile bias_;          // [rows, h1 - h0] bias row broadcast, or invalid
  Tile scale_row_;     // ROW: [rows, h1 - h0]
  Tile scale_column_;  // STATIC: [rows, 1] s_w * s_in
};

}  // namespace nkisim::kernels
