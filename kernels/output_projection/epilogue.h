// The quantization steps around the output projection's matmul and its PSUM -> SBUF eviction.
//   STATIC: the attention is quantized as x * (1 / s_in) stored into the fp8 weight dtype, whose
//           saturating conversion (runtime/dtype.h) is the reference's clip to +-max(fp8); the
//           fp32 product is dequantized by s_w * s_in.
//   ROW:    the product is dequantized by s_w[h], one scale per output column.
// The bias is added last, after the dequantization, as the reference does.
// All functions issue instructions on the calling thread's current core.
#pragma once

#include "kernels/common/psum_eviction.h"
#include "kernels/output_projection/tiling.h"
#include "runtime/neuron_core.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"
#include "runtime/timeline.h"

namespace nkisim::kernels::oproj {

// Per-partition columns derived from the STATIC scales (input_scale and weight_scale are HBM
// [P, 1] tensors with identical rows, P = partitions).
struct StaticScales {
  Tile inverse_input;  // [P, 1] fp32: 1 / s_in
  Tile dequant;        // [P, 1] fp32: s_w * s_in
};
StaticScales LoadStaticScales(NeuronCore& core, const TensorView& input_scale,
                              const TensorView& weight_scale);

// A new tile of x's shape in dtype (fp8): x * inverse_input, saturated to +-MaxValue(dtype).
// Runs on GpSimd, which the evictions do not use, so it never delays one.
// REQUIRES: inverse_input has at least x.partitions() partitions.
Tile Quantize(const Tile& x, const Tile& inverse_input, DType dtype);

// The terms of a block of output columns in the row layout: a dequant column shared by all
// groups, and rows [P, cols] loaded in pieces (bias, ROW scale).
struct Epilogue {
  Tile scale_column;
  PiecedTile scale_row;
  PiecedTile bias_row;
  // The terms for a psum of `partitions` partitions covering `columns` of the block.
  EvictionTerms Cut(int64_t partitions, const Range& columns) const;
};

// Alternates evictions between two engines, by default Vector and Scalar (the reference's parity
// rule), so that an eviction overlaps the next group's matmuls on the other engine. The MX path
// takes Scalar for both: its Vector runs quantize_mx, whose in-order queue would hold evictions
// behind the next step's activations, and GpSimd cannot read PSUM (Scalar and Vector: 1.26x
// and 1.30x the bound at S 4096, N 8, H 4096; Scalar alone 1.22x and 1.23x).
class EvictionEngines {
 public:
  EvictionEngines() = default;
  EvictionEngines(Engine first, Engine second) : first_(first), second_(second) {}
  Engine Next() { return count_++ % 2 == 0 ? first_ : second_; }

 private:
  Engine first_ = Engine::kVector;
  Engine second_ = Engine::kScalar;
  int64_t count_ = 0;
};

}  // namespace nkisim::kernels::oproj
