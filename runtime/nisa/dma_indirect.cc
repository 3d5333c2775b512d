#include "runtime/nisa/dma_indirect.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/error.h"
#include "runtime/nisa/dma_descriptors.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

constexpr const char* kInst = "dma_copy (indirect)";

Shape WithoutUnitDims(Shape s) {
  s.erase(std::remove(s.begin(), s.end(), int64_t{1}), s.end());
  return s;
}

std::string DescribeRows(const IndirectRows& r) {
  return StrCat("'", r.rows.name(), "' ", ShapeString(r.rows.shape()), " ",
                DTypeName(r.rows.dtype()), " HBM indexed by '", r.index.name(), "'");
}

void Check(const Tile& chip, const char* chip_role, const IndirectRows& r) {
  const Tile& idx = r.index;
  if (idx.memory() != MemorySpace::kSbuf) Illegal(kInst, "vector_offset", idx, "must be in SBUF");
  if (IsFloat(idx.dtype())) Illegal(kInst, "vector_offset", idx, "must have an integer dtype");
  if (idx.free_size() != 1) {
    Illegal(kInst, "vector_offset", idx, "must hold one index per partition ([P, 1])");
  }
  if (r.rows.rank() < 1 || idx.partitions() != r.rows.shape()[0]) {
    Illegal(kInst, "vector_offset", idx,
            StrCat("must have one partition per indexed row of ", DescribeRows(r), " (",
                   r.rows.rank() ? r.rows.shape()[0] : 0, ")"));
  }
  if (chip.partitions() != idx.partitions()) {
    Illegal(kInst, chip_role, chip,
            StrCat("must have one partition per indexed row (", idx.partitions(), ")"));
  }
  const Shape row(r.rows.shape().begin() + 1, r.rows.shape().end());
  if (WithoutUnitDims(chip.free_shape()) != WithoutUnitDims(row)) {
    Illegal(kInst, chip_role, chip,
            StrCat("free shape must be the indexed rows' ", ShapeString(row),
                   " once size-1 dims are dropped"));
  }
}

// Copies row by row; to_hbm: the tile's rows go to HBM, else HBM rows come to the tile.
// Returns the rows moved.
int64_t CopyRows(const Tile& chip, const IndirectRows& r, bool to_hbm) {
  if (!Functional()) return chip.partitions();  // timing-only: no index values, every row counts
  const TensorView& v = r.rows;
  const Shape row_shape(v.shape().begin() + 1, v.shape().end());
  const Shape row_strides(v.strides().begin() + 1, v.strides().end());
  std::vector<int64_t> hbm, tile;
  ForEachStridedOffset(row_shape, row_strides, 0, [&](int64_t off) { hbm.push_back(off); });
  chip.ForEachFreeOffset([&](int64_t off) { tile.push_back(off); });
  const auto [lo, hi] = std::minmax_element(hbm.begin(), hbm.end());
  const int64_t capacity = static_cast<int64_t>(v.buffer().size_bytes() / SizeOf(v.dtype()));
  const size_t hw = SizeOf(v.dtype());
  const bool same = v.dtype() == chip.dtype();
  std::byte* const base = v.buffer().data();
  int64_t moved = 0;
  for (int64_t p = 0; p < chip.partitions(); ++p) {
    const float raw = r.index.get(p, std::vector<int64_t>(r.index.free_shape().size(), 0));
    const auto index = static_cast<int64_t>(raw);
    const int64_t start = v.offset() + index * r.index_stride;
    if (start + *lo < 0 || start + *hi >= capacity) {
      if (r.skip_out_of_bounds) continue;
      Raise(ErrorCode::kInvalidArgument,
            StrCat(kInst, ": vector_offset '", r.index.name(), "' partition ", p, " holds ",
                   index, ": its row of ", DescribeRows(r), " spans elements [", start + *lo,
                   ", ", start + *hi, "], outside the tensor's [0, ", capacity,
                   ") (oob_mode.skip skips such rows)"));
    }
    for (size_t j = 0; j < hbm.size(); ++j) {
      std::byte* h = base + (start + hbm[j]) * hw;
      std::byte* t = chip.element_ptr(p, tile[j]);
      if (same) {
        std::memcpy(to_hbm ? h : t, to_hbm ? t : h, hw);
      } else if (to_hbm) {
        FromFloat(v.dtype(), ToFloat(chip.dtype(), t), h);
      } else {
        FromFloat(chip.dtype(), ToFloat(v.dtype(), h), t);
      }
    }
    ++moved;
  }
  return moved;
}

void Finish(Issue& issue, const Tile& chip, const IndirectRows& r, int64_t rows) {
  const int64_t row_elements = chip.free_size();
  const int64_t width =
      static_cast<int64_t>(std::max(SizeOf(chip.dtype()), SizeOf(r.rows.dtype())));
  const int64_t bytes = std::max<int64_t>(rows, 1) * row_elements * width;
  FinishDmaOnChip(issue, 0.0, chip, bytes, bytes, 1.0);
}

}  // namespace

void dma_copy_indirect(const Tile& dst, const IndirectRows& src) {
  Issue issue(kInst, DmaQueue(CurrentCore().EarliestDmaQueue()));
  issue.Reads("src", src.rows).Reads("vector_offset", src.index).Writes("dst", dst);
  if (dst.memory() != MemorySpace::kSbuf) {
    Illegal(kInst, "dst", dst, "DMA writes on-chip memory only in SBUF");
  }
  Check(dst, "dst", src);
  Finish(issue, dst, src, CopyRows(dst, src, false));
}

void dma_copy_indirect(const IndirectRows& dst, const Tile& src) {
  Issue issue(kInst, DmaQueue(CurrentCore().EarliestDmaQueue()));
  issue.Reads("src", src).Reads("vector_offset", dst.index).Writes("dst", dst.rows);
  Check(src, "src", dst);
  Finish(issue, src, dst, CopyRows(src, dst, true));
}

}  // namespace nkisim::nisa
