#include "kernels/output_projection/row_layout.h"

#include <vector>

#include "runtime/nisa/nisa.h"

namespace nkisim::kernels::oproj {

Tile BroadcastRow(NeuronCore& core, const char* name, const Tile& row, int64_t rows) {
  Tile ones = core.AllocateSbuf("oproj_ones", {1, rows}, row.dtype());
  nisa::memset(ones, 1.0f, Engine::kGpSimd);
  Tile result = core.AllocateSbuf(name, {rows, row.free_size()}, row.dtype());
  for (const Range& c : Split(0, row.free_size(), core.profile().pe_max_moving_free())) {
    Tile psum = core.AllocatePsum("oproj_broadcast_psum", {rows, c.size});
    nisa::nc_matmul(psum, ones, SliceLast(row, c));
    nisa::tensor_copy(SliceLast(result, c), psum, Engine::kVector);
  }
  return result;
}

Tile LoadBiasRow(NeuronCore& core, const RowBlockSource& s, const Range& shard) {
  if (!s.bias.valid()) return Tile();
  Tile row = core.AllocateSbuf("oproj_bias_row", {1, shard.size}, s.bias.dtype());
  nisa::dma_copy(row, s.bias.slice(1, shard.begin, shard.end()));
  return row;
}

int64_t RowBlockBytesPerColumn(const RowBlockSource& s) {
  int64_t bytes = s.weight_heads.dim(0) * static_cast<int64_t>(SizeOf(s.weight_heads.dtype()));
  if (s.bias.valid()) bytes += static_cast<int64_t>(SizeOf(s.bias.dtype()));
  if (s.row_scale.valid()) bytes += static_cast<int64_t>(SizeOf(DType::kFloat32));
  return bytes;
}

RowBlock LoadRowBlock(NeuronCore& core, const RowBlockSource& s, const Tile& bias_row,
                      int64_t shard_begin, const Range& columns) {
  const int64_t subtile = core.profile().pe_max_moving_free();
  RowBlock block{columns, s.weight_heads.dim(0), PiecedTile(), Epilogue{}};
  Epilogue& e = block.epilogue;
  e.scale_column = s.dequant_column;
  if (bias_row.valid()) {
    e.bias_row = PiecedTile(
        BroadcastRow(core, "oproj_bias",
                     SliceLast(bias_row, {columns.begin - shard_begin, columns.size}), s.rows));
  }
  if (s.row_scale.valid()) {
    e.scale_row =
        PiecedTile::Load(core, "oproj_row_scale",
                         s.row_scale.slice(0, 0, s.rows).slice(1, columns.begin, columns.end()),
                         DType::kFloat32, subtile, 0);
  }
  block.weight =
      PiecedTile::Load(core, "oproj_weight",
                       s.weight_heads.slice(2, columns.begin, columns.end()).permute({1, 0, 2}),
                       s.weight_heads.dtype(), subtile, s.double_row ? 2 : 1);
  return block;
}

namespace {

// ProjectRows when every (row tile, column subtile) accumulator fits PSUM at once: heads outer,
// so each head's matmuls run as soon as its weights land (the head-major weight DMAs arrive one
// after the other) instead of every column group waiting for the last head; one store a row tile.
void ProjectRowsHeadsOuter(const PiecedTile& attention, const RowBlock& block,
                           const TensorView& out_rows, bool double_row, EvictionEngines& engines,
                           const std::vector<Range>& col_groups, const std::vector<Range>& row_groups) {
  NeuronCore& core = CurrentCore();
  std::vector<Tile> psum;
  for (const Range& r : row_groups) {
    for (const Range& cols : col_groups) psum.push_back(core.AllocatePsum("oproj_psum", {r.size, cols.size}));
  }
  for (int64_t n = 0; n < block.heads;) {
    const int64_t count = double_row && n + 1 < block.heads ? 2 : 1;
    size_t i = 0;
    for (const Range& r : row_groups) {
      for (const Range& cols : col_groups) {
        nisa::nc_matmul(psum[i++], attention.Heads(r, n, count), block.weight.Heads(cols, n, count),
                        {.accumulate = n > 0,
                         .perf_mode = count == 2 ? nisa::PerfMode::kDoubleRow : nisa::PerfMode::kNone});
      }
    }
    n += count;
  }
  size_t i = 0;
  for (const Range& r : row_groups) {
    Tile result = core.AllocateSbuf("oproj_result", {r.size, block.columns.size}, out_rows.dtype());
    for (const Range& cols : col_groups) {
      Evict(SliceLast(result, cols), psum[i++], block.epilogue.Cut(r.size, cols), engines.Next());
    }
    nisa::dma_copy(out_rows.slice(0, r.begin, r.end())
                       .slice(1, block.columns.begin, block.columns.begin + block.columns.size),
                   result);
  }
}

}  // namespace

void ProjectRows(const PiecedTile& attention, const RowBlock& block, const TensorView& out_rows,
                 bool double_row, EvictionEngines& engines) {
  NeuronCore& core = CurrentCore();
  const HardwareProfile& prof = core.profile();
  const std::vector<Range> col_groups = Split(0, block.columns.size, prof.pe_max_moving_free());
  const std::vector<Range> row_groups = Split(0, out_rows.dim(0), prof.pe_cols());
  if (static_cast<int64_t>(col_groups.size() * row_groups.size()) <= prof.psum_banks()) {
    ProjectRowsHeadsOuter(attention, block, out_rows, double_row, engines, col_groups, row_groups);
    return;
  }
  for (const Range& cols : Split(0, block.columns.size, prof.pe_max_moving_free())) {
    for (const Range& r : Split(0, out_rows.dim(0), prof.pe_cols())) {
      Tile psum = core.AllocatePsum("oproj_psum", {r.size, cols.size});
      AccumulateHeads(
          psum, block.heads, double_row,
          [&](int64_t n, int64_t count) { return attention.Heads(r, n, count); },
          [&](int64_t n, int64_t count) { return block.weight.Heads(cols, n, count); });
      Tile result = core.AllocateSbuf("oproj_result", {r.size, cols.size}, out_rows.dtype());
      Evict(result, psum, block.epilogue.Cut(r.size, cols), engines.Next());
      const int64_t h = block.columns.begin + cols.begin;
      nisa::dma_copy(out_rows.slice(0, r.begin, r.end()).slice(1, h, h + cols.size), result);
    }
  }
}

void RunRowLayout(NeuronCore& core, const RowBlockSource& source, const Range& shard,
                  int64_t row_steps, const std::function<PiecedTile(int64_t)>& load_attention,
                  const std::function<TensorView(int64_t)>& out_rows) {
  const HardwareProfile& prof = core.profile();
  const std::vector<Range> blocks =
      Split(shard.begin, shard.size,
            BlockColumns(shard.size, prof.pe_max_moving_free(), RowBlockBytesPerColumn(source),
                         WeightBlockBudget(prof)));
  const Tile bias_row = LoadBiasRow(core, source, shard);
  EvictionEngines engines;
  RunBlockPipeline<RowBlock, PiecedTile>(
      blocks.size(), static_cast<size_t>(row_steps),
      [&](size_t block) {
        return LoadRowBlock(core, source, bias_row, shard.begin, blocks[block]);
      },
      [&](size_t step) { return load_attention(static_cast<int64_t>(step)); },
      [&](const RowBlock& block, const PiecedTile& attention, size_t step) {
        ProjectRows(attention, block, out_rows(static_cast<int64_t>(step)), source.double_row,
                    engines);
      });
}

}  // namespace nkisim::kernels::oproj
