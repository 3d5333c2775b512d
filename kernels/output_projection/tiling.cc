#include "kernels/output_projection/tiling.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::kernels::oproj {

HeadPacking PackHeads(int64_t n_heads, int64_t head_dim, int64_t partitions, bool allowed) {
  int64_t group = 1;
  if (allowed) {
    for (int64_t g = n_heads; g > 1; --g) {
      if (n_heads % g == 0 && g * head_dim <= partitions) {
        group = g;
        break;
      }
    }
  }
  return {group, n_heads / group, head_dim * group};
}

std::vector<Range> Split(int64_t begin, int64_t size, int64_t step) {
  std::vector<Range> pieces;
  for (int64_t off = 0; off < size; off += step) {
    pieces.push_back({begin + off, std::min(step, size - off)});
  }
  return pieces;
}

int64_t BlockColumns(int64_t columns, int64_t subtile, int64_t bytes_per_column,
                     int64_t budget_bytes) {
  const int64_t fit = std::max<int64_t>(1, budget_bytes / std::max<int64_t>(1, bytes_per_column));
  if (fit >= columns) return columns;
  return fit >= subtile ? fit / subtile * subtile : fit;
}

int64_t WeightBlockBudget(const HardwareProfile& p) {
  return static_cast<int64_t>(p.sbuf_bytes_per_partition() / 3);
}

int64_t AttentionTileBudget(const HardwareProfile& p) {
  return static_cast<int64_t>(p.sbuf_bytes_per_partition() / 10);
}

int64_t DmaChunkBytes(const HardwareProfile& p) {
  // Two full descriptors on every partition: each engine then runs within 1% of its sustained
  // rate (runtime/dma_engines.h), and the chunks in flight overlap their fixed latencies.
  return static_cast<int64_t>(p.partitions()) * 2 * p.dma_descriptor_max_bytes();
}

Tile Heads(const Tile& t, int64_t head, int64_t count) {
  return count == 1 ? t.select(1, head) : t.slice(1, head, head + count);
}

Tile SliceLast(const Tile& t, const Range& r) {
  return t.slice(static_cast<int>(t.free_shape().size()), r.begin, r.end());
}

Tile SelectLast(const Tile& t, int64_t index) {
  return t.select(static_cast<int>(t.free_shape().size()), index);
}

PiecedTile::PiecedTile(Tile whole)
    : ranges_{{0, whole.free_shape().back()}}, pieces_{{std::move(whole)}} {}

PiecedTile PiecedTile::Load(NeuronCore& core, const std::string& name, const TensorView& src,
                            DType dtype, int64_t unit, int64_t head_group) {
  const int last_dim = src.rank() - 1;
  if (src.rank() < (head_group > 0 ? 3 : 2)) {
    Raise(ErrorCode::kInternal, StrCat("PiecedTile::Load: ", ShapeString(src.shape()),
                                       " has too few dims for '", name, "'"));
  }
  const int64_t last = src.dim(last_dim);
  const int64_t heads = head_group > 0 ? src.dim(1) : 1;
  const int64_t group = head_group > 0 ? std::min(head_group, heads) : 1;
  const int64_t element_bytes = static_cast<int64_t>(std::max(SizeOf(dtype), SizeOf(src.dtype())));
  const int64_t transfer_bytes = src.numel() / heads * group * element_bytes;
  const int64_t units = (last + unit - 1) / unit;
  const int64_t count =
      std::clamp<int64_t>(transfer_bytes / DmaChunkBytes(core.profile()), 1, units);
  PiecedTile t;
  t.head_group_ = head_group > 0 ? group : 0;
  t.ranges_ = Split(0, last, (units + count - 1) / count * unit);
  for (const Range& r : t.ranges_) {
    std::vector<Tile>& row = t.pieces_.emplace_back();
    const TensorView part = src.slice(last_dim, r.begin, r.end());
    for (const Range& g : Split(0, heads, head_group > 0 ? group : heads)) {
      const TensorView box = head_group > 0 ? part.slice(1, g.begin, g.end()) : part;
      Tile piece = core.AllocateSbuf(name, box.shape(), dtype);
      nisa::dma_copy(piece, box);
      row.push_back(std::move(piece));
    }
  }
  return t;
}

const Tile& PiecedTile::Piece(const Range& r, int64_t head, Range* within,
                              int64_t* head_in_group) const {
  const int64_t g = head_group_ > 0 ? head / head_group_ : 0;
  for (size_t i = 0; i < ranges_.size(); ++i) {
    if (r.begin >= ranges_[i].begin && r.end() <= ranges_[i].end()) {
      *within = {r.begin - ranges_[i].begin, r.size};
      *head_in_group = head - g * head_group_;
      return pieces_[i].at(static_cast<size_t>(g));
    }
  }
  Raise(ErrorCode::kInternal,
        StrCat("PiecedTile: range [", r.begin, ", ", r.end(), ") crosses a piece boundary"));
}

Tile PiecedTile::Slice(const Range& r) const {
  if (head_group_ > 0) Raise(ErrorCode::kInternal, "PiecedTile::Slice: heads are cut; use Heads");
  Range within;
  int64_t unused = 0;
  return SliceLast(Piece(r, 0, &within, &unused), within);
}

Tile PiecedTile::Heads(const Range& r, int64_t head, int64_t count) const {
  Range within;
  int64_t local = 0;
  const Tile& piece = Piece(r, head, &within, &local);
  return oproj::Heads(SliceLast(piece, within), local, count);
}

PiecedTile PiecedTile::Map(const std::function<Tile(const Tile&)>& fn) const {
  PiecedTile t = *this;
  for (std::vector<Tile>& row : t.pieces_) {
    for (Tile& piece : row) piece = fn(piece);
  }
  return t;
}

void AccumulateHeads(const Tile& psum, int64_t heads, bool double_row,
                     const HeadOperand& stationary, const HeadOperand& moving) {
  for (int64_t n = 0; n < heads;) {
    const int64_t count = double_row && n + 1 < heads ? 2 : 1;
    nisa::nc_matmul(psum, stationary(n, count), moving(n, count),
                    {.accumulate = n > 0,
                     .perf_mode = count == 2 ? nisa::PerfMode::kDoubleRow : nisa::PerfMode::kNone});
    n += count;
  }
}

}  // namespace nkisim::kernels::oproj
