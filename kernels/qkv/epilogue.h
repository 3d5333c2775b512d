// Internal to kernels/qkv: what happens to the fused [B * S, I] result after the matmul.
//   * Epilogue: PSUM eviction with the per-column dequantisation and the bias, computed in fp32
//     from the accumulator and rounded once into the destination's dtype. STATIC multiplies the
//     Q, K and V column segments by s_w[0 | 1 | 2] * s_in (one scalar_tensor_tensor per segment
//     piece, as the reference's eviction does); ROW multiplies column i by s_w[i].
//   * FusedOutput: the output tensor addressed as rows x columns of the fused result, whatever
//     its layout (BSD [B, S, I] or NBSd [I / d, B, S, d]).
// Both issue instructions on the calling thread's current core.
#pragma once

#include <cstdint>

#include "kernels/qkv/config.h"
#include "kernels/qkv/qkv.h"
#include "runtime/neuron_core.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"
#include "runtime/timeline.h"

namespace nkisim::kernels {

class Epilogue {
 public:
  // Loads the scale rows and, when add_bias and params.bias is given, the bias row (held in
  // bias_dtype) onto `partitions` partitions.
  Epilogue(NeuronCore& core, const QkvConfig& cfg, const QkvParams& params, int64_t partitions,
           DType bias_dtype, bool add_bias);

  // dst = psum * scale + bias for the fused columns [col0, col0 + width), width = dst's free
  // size. REQUIRES: dst and psum [n, width], n <= partitions. ROW rescales psum in place.
  void Evict(const Tile& dst, const Tile& psum, int64_t col0, Engine engine) const;

 private:
  QkvConfig cfg_;
  Tile bias_;       // [P, I], or invalid
  Tile seg_scale_;  // STATIC: [P, 3] fp32, s_w[j] * s_in
  Tile col_scale_;  // ROW: [P, I] fp32, s_w[i]
};

class FusedOutput {
 public:
  FusedOutput(const TensorView& output, QkvOutputLayout layout, int64_t d);

  // Stores tile [n, w] as rows [r0, r0 + n) and columns [c0, c0 + w) of the fused result, as
  // `pieces` DMAs of consecutive rows. NBSd: c0 and w are multiples of d (whole heads) and
  // tile's free dim is contiguous.
  void Store(const Tile& tile, int64_t r0, int64_t c0, int64_t pieces = 1) const;

 private:
  TensorView rows_;  // BSD: [B * S, I]; NBSd: [I / d, B * S, d]
  QkvOutputLayout layout_;
  int64_t d_;
};

}  // namespace nkisim::kernels
