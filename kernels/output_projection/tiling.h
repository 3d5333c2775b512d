// Tiling shared by the output-projection kernels (CTE and TKG): head packing, ranges and blocks of
// the output columns under an SBUF budget, DMA loads cut into pieces spread over the queues, the
// accumulation of all heads into one PSUM bank, and a one-step look-ahead pipeline.
//
// All sizes are elements unless named *_bytes; byte budgets are per partition. Every function
// runs on the calling thread's current core (inside LogicalCore::Launch).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/common/tiling.h"  // StoreInPieces
#include "runtime/hardware_profile.h"
#include "runtime/neuron_core.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::kernels::oproj {

// Heads folded into the partition (contraction) dim: N' = N / group packed heads of
// D' = group * D partitions. A pure view: head n = n' * group + j of packed head n' sits at
// partitions [j * D, (j + 1) * D).
struct HeadPacking {
  int64_t group = 1;
  int64_t heads = 0;     // N'
  int64_t head_dim = 0;  // D'
};
// group = the largest divisor g of n_heads with g * head_dim <= partitions, or 1 when !allowed.
HeadPacking PackHeads(int64_t n_heads, int64_t head_dim, int64_t partitions, bool allowed);

struct Range {
  int64_t begin = 0;
  int64_t size = 0;
  int64_t end() const { return begin + size; }
};
// [begin, begin + size) in consecutive pieces of at most step (the last one shorter).
std::vector<Range> Split(int64_t begin, int64_t size, int64_t step);

// Columns per block so that block * bytes_per_column <= budget_bytes: a multiple of subtile when
// at least one subtile fits, never more than columns, never less than 1.
int64_t BlockColumns(int64_t columns, int64_t subtile, int64_t bytes_per_column,
                     int64_t budget_bytes);

// SBUF budgets per partition, in bytes. Two weight blocks may be live (the one in use and the
// prefetched next one), and two attention tiles, leaving about a seventh of SBUF for results,
// epilogue temporaries and scales.
int64_t WeightBlockBudget(const HardwareProfile& profile);    // a third of SBUF
int64_t AttentionTileBudget(const HardwareProfile& profile);  // a tenth of SBUF

// The DMA size from which the fixed cost per transfer is hidden: transfers of this size on every
// queue together outrun the core's HBM port (79 KiB on trn2). Bytes.
int64_t DmaChunkBytes(const HardwareProfile& profile);

// A tile loaded from HBM in pieces, each piece its own SBUF tile: the scoreboard tracks readiness
// per tile, so a reader waits only for the DMAs of the piece it reads. Pieces cut the last dim
// and, optionally, free dim 1 (the packed heads) into groups of heads.
class PiecedTile {
 public:
  PiecedTile() = default;
  explicit PiecedTile(Tile whole);  // one piece

  // Allocates pieces of src's shape (dims {partitions, free...}) in dtype and loads src with one
  // DMA per piece. Along the last dim pieces are whole `unit`s, sized so that one head group's
  // transfer is near DmaChunkBytes; head_group > 0 also cuts free dim 1 into groups of that many
  // heads. DMAs are issued column-piece-major, so the first columns of every head arrive first
  // (the HBM port serves DMAs in issue order).
  static PiecedTile Load(NeuronCore& core, const std::string& name, const TensorView& src,
                         DType dtype, int64_t unit, int64_t head_group);

  bool valid() const { return !pieces_.empty(); }
  // The view of [r.begin, r.end()) of the last dim. REQUIRES: free dim 1 is not cut and r lies
  // inside one piece (true for whole units inside one unit-aligned piece).
  Tile Slice(const Range& r) const;
  // Heads(Slice(r), head, count) for a tile whose free dim 1 may be cut into head groups.
  // REQUIRES: [head, head + count) inside one group.
  Tile Heads(const Range& r, int64_t head, int64_t count) const;
  // The same pieces, each replaced by fn(piece).
  PiecedTile Map(const std::function<Tile(const Tile&)>& fn) const;

 private:
  const Tile& Piece(const Range& r, int64_t head, Range* within, int64_t* head_in_group) const;

  std::vector<Range> ranges_;              // along the last dim
  int64_t head_group_ = 0;                 // 0: free dim 1 not cut
  std::vector<std::vector<Tile>> pieces_;  // [range][head group]
};

// View helpers on tiles whose free dim 1 indexes (packed) heads.
// count 1: head `head` with dim 1 dropped; count 2: heads [head, head + 2) kept as dim 1.
Tile Heads(const Tile& t, int64_t head, int64_t count);
Tile SliceLast(const Tile& t, const Range& r);
Tile SelectLast(const Tile& t, int64_t index);

// The operand of a head (count 1) or of a double-row head pair (count 2).
using HeadOperand = std::function<Tile(int64_t head, int64_t count)>;

// psum = sum over heads [0, heads) of stationary(n)^T @ moving(n), accumulated in one PSUM bank.
// With double_row (fp8), heads go in pairs through the double-row matmul (K = 2 D' at the cost of
// one); an odd last head takes a plain matmul.
void AccumulateHeads(const Tile& psum, int64_t heads, bool double_row,
                     const HeadOperand& stationary, const HeadOperand& moving);

// Runs every (block, row step) pair, block-major, with one step of look-ahead: the loads of
// step i + 1 are issued before the compute of step i, so they stream in while it computes. A
// step's rows (attention) are loaded first, being small and needed by its first group; a block
// (weights, column-wise terms) is loaded once, with its first step, and reused by the block's
// later steps. At most two blocks and two row tiles are live.
template <typename Block, typename Rows>
void RunBlockPipeline(size_t blocks, size_t row_steps,
                      const std::function<Block(size_t)>& load_block,
                      const std::function<Rows(size_t)>& load_rows,
                      const std::function<void(const Block&, const Rows&, size_t)>& compute) {
  struct Loaded {
    size_t block = 0;
    Block weights;
    Rows rows;
  };
  auto load = [&](size_t i, const Loaded* previous) {
    Loaded next{i / row_steps, Block{}, load_rows(i % row_steps)};
    const bool same_block = previous != nullptr && previous->block == next.block;
    next.weights = same_block ? previous->weights : load_block(next.block);
    return next;
  };
  const size_t steps = blocks * row_steps;
  if (steps == 0) return;
  Loaded next = load(0, nullptr);
  for (size_t i = 0; i < steps; ++i) {
    Loaded current = std::move(next);
    if (i + 1 < steps) next = load(i + 1, &current);
    compute(current.weights, current.rows, i % row_steps);
  }
}

}  // namespace nkisim::kernels::oproj
