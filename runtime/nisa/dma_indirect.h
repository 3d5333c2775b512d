// dma_copy with an indirect HBM side (NKI 0.6 `NkiTensor.ap(..., vector_offset=idx,
// indirect_dim=d)`): row p of the transfer, the on-chip side's partition p, sits in HBM at a row
// index read at run time from the SBUF tile idx[p] (a gather when HBM is the source, a scatter
// when it is the destination). The NKI library gathers a block's tokens (moe_cte) and scatters
// the top-k affinities (router_topk) this way.
//
// Cost: a DMA on the queue that frees first, as a dma_copy of the same bytes between HBM and the
// on-chip tile (FinishDmaOnChip: its partitions over the engines, one run a partition).
#pragma once

#include <cstdint>

#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::nisa {

// The HBM side: `rows` is a view of P rows (dim 0, its stride ignored) whose free dims address
// one row's elements; row p starts at rows.offset() + index[p] * index_stride elements of the
// buffer. `index` is an integer [P, 1] SBUF tile. A row reaching outside the HBM tensor is an
// error, or is skipped (left unread / unwritten) when skip_out_of_bounds (NKI's oob_mode.skip).
struct IndirectRows {
  TensorView rows;
  Tile index;
  int64_t index_stride = 1;
  bool skip_out_of_bounds = false;
};

// Rules (errors name the operand, its value and the rule): index in SBUF with an integer dtype,
// one element per partition, as many partitions as rows; the tile side has P partitions and the
// rows' free shape once size-1 dims are dropped; the destination tile is in SBUF.
void dma_copy_indirect(const Tile& dst, const IndirectRows& src);
void dma_copy_indirect(const IndirectRows& dst, const Tile& src);

}  // namespace nkisim::nisa
