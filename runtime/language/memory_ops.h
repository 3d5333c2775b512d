// Memory ops of the nl language: DMA between HBM TensorViews and SBUF tiles (load, store, the
// transposing load_transpose2d and the scatter-add atomic_rmw), the on-chip copy (a compute
// engine, not DMA), and broadcast_to, a zero-stride view that moves nothing.
// Errors are Error(kInvalidArgument) worded "<op>: ...", naming the operand and the rule.
#pragma once

#include <string>

#include "runtime/language/op_table.h"
#include "runtime/language/operands.h"
#include "runtime/nisa/dma_descriptors.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::nl {

// An HBM tensor as a kernel subscripts it: statically (a TensorView), or with its rows chosen at
// run time by the values of an SBUF index tile [N, 1] (NKI's tensor[indices_tile, ix]).
class Memref {
 public:
  Memref(const TensorView& view) : view_(view) {}  // NOLINT: implicit, a static subscript
  Memref(const TensorView& view, const Tile& row_indices)
      : view_(view), row_indices_(row_indices) {}
  const TensorView& view() const { return view_; }
  const Tile& row_indices() const { return row_indices_; }
  bool dynamic() const { return row_indices_.valid(); }

 private:
  TensorView view_;
  Tile row_indices_;
};

// A new SBUF tile holding src (dtype default src's; the DMA casts). src's dim 0 becomes the
// partition dim (a rank-1 src gives [n, 1], rank 0 [1, 1]). Rules: dim 0 <= partitions.
Tile load(const TensorView& src, OptDType dtype = std::nullopt);
// dst = value by DMA. Rules: the same shape once size-1 dims are dropped.
void store(const TensorView& dst, const Tile& value);
// A new SBUF tile holding src, by tensor_copy on the Vector engine (reads SBUF or PSUM).
Tile copy(const Tile& src, OptDType dtype = std::nullopt);

// A new SBUF tile [C, R] holding src [R, C] transposed, by the DMA's descriptor-generation engine.
// Rules: src is 2-D with C <= partitions. kAuto uses the hardware DGE when src meets its rules
// (R <= 16, 2-byte dtype; see nisa::HardwareDgeViolation) and the software-DGE fallback
// otherwise; kHardware refuses a src outside them.
Tile load_transpose2d(const TensorView& src, OptDType dtype = std::nullopt,
                      nisa::DgeMode dge = nisa::DgeMode::kAuto);

// dst = op(dst, value) atomically on HBM rows: dst[indices[n], :] += value[n, :].
// Rules (the seed's two named errors): op must be Op::kAdd (err_atomic_rmw_add_only), and dst
// must be indexed by a dynamic index tile (err_atomic_rmw_dynamic_index); then those of
// nisa::dma_scatter_add.
void atomic_rmw(const Memref& dst, const Tile& value, Op op);

// src viewed as `shape` by repeating its size-1 dims with a zero stride: no data moves. Rules:
// the same rank, each dim equal or 1 in src; a tile's partition dim never broadcasts (an HBM
// view's dim 0 may, e.g. a weight row loaded onto every partition).
Tile broadcast_to(const Tile& src, const Shape& shape);
TensorView broadcast_to(const TensorView& src, const Shape& shape);

}  // namespace nkisim::nl
