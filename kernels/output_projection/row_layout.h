// The row-major output layout shared by output_projection_cte (rows s of one batch of
// out[B, S, H]) and output_projection_tkg without TRANSPOSE_OUT (rows b*S + s of out[B*S, H]).
//
// A block of output columns holds, in SBUF, the weights [D', N', cols] of every packed head and
// the column-wise epilogue terms repeated over the row partitions (the bias broadcast on chip,
// the ROW scale rows as the (P, H) tensor already repeats them). Each
// (128-row subtile, 512-column subtile) group accumulates the N' heads into one PSUM bank
// (attention [D', rows] stationary, weights [D', cols] moving), is evicted through the epilogue
// and written straight to its own columns of out: cores write disjoint columns, no collective.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/output_projection/epilogue.h"
#include "kernels/output_projection/tiling.h"
#include "runtime/neuron_core.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::kernels::oproj {

struct RowBlock {
  Range columns;      // output columns [begin, end) of H
  int64_t heads = 0;  // N'
  PiecedTile weight;  // [D', N', cols] in the matmul operand dtype, pieces per head group
  Epilogue epilogue;  // bias_row / scale_row [rows, cols], scale_column [>= rows, 1]
};

// What a block needs from HBM: weight viewed [N', D', H]; bias [1, H] and row_scale [P, H]
// (ROW) may be invalid views; the bias and ROW scale are broadcast over `rows` partitions.
struct RowBlockSource {
  TensorView weight_heads;
  TensorView bias;
  TensorView row_scale;
  Tile dequant_column;  // STATIC: s_w * s_in, else invalid
  int64_t rows = 0;
  bool double_row = false;  // fp8 head pairs: weights loaded in pairs of heads
};

// Bytes per partition one output column of a block takes (weights of every head, bias, scale).
int64_t RowBlockBytesPerColumn(const RowBlockSource& source);

// The bias row of one core's columns [1, shard], loaded once at kernel start (a few KiB), so a
// block's on-chip broadcast of it never waits behind the weight stream. Invalid without bias.
Tile LoadBiasRow(NeuronCore& core, const RowBlockSource& source, const Range& shard);

// Broadcasts the block's bias on chip (bias_row is LoadBiasRow's, whose first column is
// shard_begin), issues the ROW scale rows (the (P, H) tensor is already broadcast), then the
// weights in 512-column pieces, column-piece-major (the order the groups consume them).
RowBlock LoadRowBlock(NeuronCore& core, const RowBlockSource& source, const Tile& bias_row,
                      int64_t shard_begin, const Range& columns);

// Projects attention [D', N', R] (operand dtype, packed heads on dim 1, pieces of whole
// 128-row subtiles and of the block's head groups) onto block, writing out_rows[0:R, block
// columns] (out_rows is [R, H]). Groups run column-subtile-major, so the first weight piece
// feeds every row subtile before the next piece is needed.
void ProjectRows(const PiecedTile& attention, const RowBlock& block, const TensorView& out_rows,
                 bool double_row, EvictionEngines& engines);

// Runs the whole row layout of one core: every column block of `shard` (sized to
// WeightBlockBudget) times every row step, pipelined one step ahead. Row step i's attention tile
// [D', N', R] (operand dtype) comes from load_attention(i), which issues its DMAs; its result
// rows go to out_rows(i) [R, H]. Weight blocks are loaded once and reused across row steps.
void RunRowLayout(NeuronCore& core, const RowBlockSource& source, const Range& shard,
                  int64_t row_steps, const std::function<PiecedTile(int64_t)>& load_attention,
                  const std::function<TensorView(int64_t)>& out_rows);

// [rows, C] copies (in row's dtype) of an SBUF row [1, C]: per 512-column piece a K = 1 matmul of
// a ones row against it into PSUM and a GpSimd copy out. A broadcast DMA would move rows * C
// elements through the HBM port; this moves none.
Tile BroadcastRow(NeuronCore& core, const char* name, const Tile& row, int64_t rows);

}  // namespace nkisim::kernels::oproj
