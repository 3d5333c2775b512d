#include "runtime/nisa/dma.h"

#include <algorithm>
#include <cstring>

#include "runtime/cost_model.h"
#include "runtime/dma_engines.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

constexpr const char* kInst = "dma_copy";

// One side of a transfer, flattened to a strided box over raw bytes.
struct Endpoint {
  const char* role;
  std::string what;  // description for errors
  std::byte* base;
  DType dtype;
  Shape shape;
  Shape strides;
  int64_t offset;
  bool hbm;
  // The engines' view (runtime/dma_engines.h): an on-chip side's partitions, and the elements of
  // the longest run contiguous in memory (an on-chip side: within one partition).
  int64_t partition_start = 0, partitions = 1, row_elements = 1, run_elements = 1;
};

// Elements of the innermost dims that are contiguous (stride 1, then the product of the inner
// sizes), size-1 dims ignored.
int64_t ContiguousRun(const Shape& shape, const Shape& strides, size_t first_dim) {
  int64_t run = 1;
  for (size_t i = shape.size(); i-- > first_dim;) {
    if (shape[i] == 1) continue;
    if (strides[i] != run) break;
    run *= shape[i];
  }
  return run;
}

Endpoint FromTile(const char* role, const Tile& t) {
  Shape shape = t.shape(), strides{t.partition_stride()};
  strides.insert(strides.end(), t.free_strides().begin(), t.free_strides().end());
  const int64_t offset = t.partition_start() * t.partition_stride() + t.free_offset();
  Endpoint e{role, t.Describe(), t.buffer().data(), t.dtype(), shape, strides, offset, false};
  e.partition_start = t.partition_start();
  e.partitions = t.partitions();
  e.row_elements = t.free_size();
  e.run_elements = ContiguousRun(shape, strides, 1);
  return e;
}

Endpoint FromTensor(const char* role, const TensorView& v) {
  Endpoint e{role,
             StrCat("'", v.name(), "' ", ShapeString(v.shape()), " ", DTypeName(v.dtype()), " HBM"),
             v.buffer().data(),
             v.dtype(),
             v.shape(),
             v.strides(),
             v.offset(),
             true};
  e.run_elements = ContiguousRun(v.shape(), v.strides(), 0);
  return e;
}

// How a copy of `elements` elements of `width` bytes falls on the engines: by the partitions of
// its on-chip side (the destination's when both are on chip), or, HBM -> HBM, by the outer dim
// of the common shape `ds` (a 1-D copy in 4 KiB rows), spread over the engines.
DmaSplit SplitCopy(const HardwareProfile& p, const Endpoint& dst, const Endpoint& src,
                   const Shape& ds, int64_t width) {
  const int64_t elements = NumElements(ds);
  if (dst.hbm && src.hbm) {
    const int64_t run = std::min(dst.run_elements, src.run_elements);
    int64_t rows = ds.size() >= 2 ? ds[0] : 1;
    if (rows == 1) rows = std::clamp<int64_t>(elements * width / p.dma_descriptor_max_bytes(), 1,
                                              p.dma_engines());
    const int64_t row = std::max<int64_t>(1, elements / rows);
    const bool crosses = run >= elements;
    return SplitOverEngines(p, 0, rows, row * width, (crosses ? elements : std::min(run, row)) * width,
                            crosses, false);
  }
  const Endpoint& chip = dst.hbm ? src : dst;
  const Endpoint& other = dst.hbm ? dst : src;
  const int64_t row = std::max<int64_t>(1, chip.row_elements);
  const bool chip_rows_whole = chip.run_elements >= row;
  if (other.hbm && chip_rows_whole && other.run_elements >= row) {
    // The HBM side runs on over whole rows: one descriptor run covers several partitions' rows.
    const int64_t run_rows = other.run_elements / row;
    return SplitOverEngines(p, chip.partition_start, chip.partitions, row * width,
                            run_rows * row * width, true, true);
  }
  const int64_t run = std::min({row, chip.run_elements, other.run_elements});
  return SplitOverEngines(p, chip.partition_start, chip.partitions, row * width, run * width, false,
                          true);
}

// Applies a run-time offset read from its index tensor; checks the window stays in bounds.
void ApplyDynamicOffset(Issue& issue, Endpoint& e, const DynamicOffset& d) {
  issue.Reads("index", d.index);
  if (d.index.numel() != 1 || IsFloat(d.index.dtype())) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": dynamic offset index tensor '", d.index.name(), "' ",
                 ShapeString(d.index.shape()), " ", DTypeName(d.index.dtype()),
                 " must hold exactly one integer element"));
  }
  if (d.dim < 0 || d.dim >= static_cast<int>(e.shape.size())) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": dynamic offset dim ", d.dim, " outside the ", e.role, " view ", e.what));
  }
  int64_t value = 0;  // timing-only: no values in HBM, the offset counts as 0
  if (Functional()) d.index.ForEachOffset([&](int64_t off) {
    value = static_cast<int64_t>(
        ToFloat(d.index.dtype(), d.index.buffer().data() + off * SizeOf(d.index.dtype())));
  });
  const int64_t start = value * d.scale;
  if (start < 0 || start + e.shape[d.dim] > d.extent) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": dynamic offset read from '", d.index.name(), "' is ", value, " (x",
                 d.scale, " = ", start, "); the ", e.role, " window of ", e.shape[d.dim],
                 " along dim ", d.dim, " must stay inside [0, ", d.extent, ")"));
  }
  e.offset += start * e.strides[d.dim];
}

void DropUnitDims(Shape& shape, Shape& strides) {
  Shape s, st;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] != 1) {
      s.push_back(shape[i]);
      st.push_back(strides[i]);
    }
  }
  shape = s;
  strides = st;
}

// Visits a box of `shape` in row-major order with two stride sets at once: fn(offset_a, offset_b).
template <typename Fn>
void ForEachOffsetPair(const Shape& shape, const Shape& strides_a, int64_t a,
                       const Shape& strides_b, int64_t b, Fn&& fn) {
  const int rank = static_cast<int>(shape.size());
  if (NumElements(shape) == 0) return;
  int64_t index[kMaxRank + 1] = {};
  while (true) {
    const int64_t inner = rank ? shape[rank - 1] : 1;
    const int64_t sa = rank ? strides_a[rank - 1] : 0, sb = rank ? strides_b[rank - 1] : 0;
    for (int64_t i = 0; i < inner; ++i) fn(a + i * sa, b + i * sb);
    int d = rank - 2;
    for (; d >= 0; --d) {
      a += strides_a[d];
      b += strides_b[d];
      if (++index[d] < shape[d]) break;
      a -= strides_a[d] * shape[d];
      b -= strides_b[d] * shape[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

void Copy(Issue& issue, Endpoint dst, Endpoint src) {
  Shape ds = dst.shape, dstr = dst.strides, ss = src.shape, sstr = src.strides;
  DropUnitDims(ds, dstr);
  DropUnitDims(ss, sstr);
  if (ds != ss) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": dst ", dst.what, " and src ", src.what,
                 " must have the same shape once size-1 dims are dropped"));
  }
  const size_t dw = SizeOf(dst.dtype), sw = SizeOf(src.dtype);
  const bool same_dtype = dst.dtype == src.dtype;
  if (!same_dtype && (IsX4(dst.dtype) || IsX4(src.dtype))) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": dst ", dst.what, " and src ", src.what, ": an x4 container moves only ",
                 "to or from the same dtype (bitcast the other side)"));
  }
  if (!Functional()) {
    // Timing-only: the shapes are checked, nothing moves.
  } else if (same_dtype && !ds.empty() && dstr.back() == 1 && sstr.back() == 1) {
    // Contiguous rows on both sides: one memcpy per row.
    const size_t row_bytes = static_cast<size_t>(ds.back()) * dw;
    Shape outer(ds.begin(), ds.end() - 1), outer_d(dstr.begin(), dstr.end() - 1),
        outer_s(sstr.begin(), sstr.end() - 1);
    ForEachOffsetPair(outer, outer_d, dst.offset, outer_s, src.offset, [&](int64_t d, int64_t s) {
      std::memcpy(dst.base + d * dw, src.base + s * sw, row_bytes);
    });
  } else {
    ForEachOffsetPair(ds, dstr, dst.offset, sstr, src.offset, [&](int64_t d, int64_t s) {
      if (same_dtype) {
        std::memcpy(dst.base + d * dw, src.base + s * sw, sw);
      } else {
        FromFloat(dst.dtype, ToFloat(src.dtype, src.base + s * sw), dst.base + d * dw);
      }
    });
  }

  const int64_t width = static_cast<int64_t>(std::max(dw, sw));
  const int64_t bytes = NumElements(ds) * width;
  DmaRequest request;
  request.split = SplitCopy(issue.profile(), dst, src, ds, width);
  request.hbm_bytes = (dst.hbm ? bytes : 0) + (src.hbm ? bytes : 0);
  issue.FinishTransfer(request, bytes);
}

Engine PickQueue(const DmaOptions& options) {
  NeuronCore& core = CurrentCore();
  const int queues = static_cast<int>(core.profile().dma_queues());
  if (options.queue < 0) return DmaQueue(core.EarliestDmaQueue());
  if (options.queue >= queues) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": queue ", options.queue, " outside [0, ", queues, ")"));
  }
  return DmaQueue(options.queue);
}

void CheckNoOffset(const std::optional<DynamicOffset>& offset, const char* side) {
  if (offset) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": a dynamic offset on the ", side, " needs an HBM ", side));
  }
}

void CheckWritableTile(const Tile& dst) {
  if (dst.memory() != MemorySpace::kSbuf) {
    Illegal(kInst, "dst", dst,
            "DMA writes on-chip memory only in SBUF (PSUM is written by engines)");
  }
}

}  // namespace

void dma_copy(const Tile& dst, const TensorView& src, const DmaOptions& options) {
  Issue issue(kInst, PickQueue(options));
  issue.Reads("src", src).Writes("dst", dst);
  CheckWritableTile(dst);
  CheckNoOffset(options.dst_offset, "dst");
  Endpoint s = FromTensor("src", src);
  if (options.src_offset) ApplyDynamicOffset(issue, s, *options.src_offset);
  Copy(issue, FromTile("dst", dst), s);
}

void dma_copy(const TensorView& dst, const Tile& src, const DmaOptions& options) {
  Issue issue(kInst, PickQueue(options));
  issue.Reads("src", src).Writes("dst", dst);
  CheckNoOffset(options.src_offset, "src");
  Endpoint d = FromTensor("dst", dst);
  if (options.dst_offset) ApplyDynamicOffset(issue, d, *options.dst_offset);
  Copy(issue, d, FromTile("src", src));
}

void dma_copy(const Tile& dst, const Tile& src, const DmaOptions& options) {
  Issue issue(kInst, PickQueue(options));
  issue.Reads("src", src).Writes("dst", dst);
  CheckWritableTile(dst);
  CheckNoOffset(options.src_offset, "src");
  CheckNoOffset(options.dst_offset, "dst");
  Copy(issue, FromTile("dst", dst), FromTile("src", src));
}

void dma_copy(const TensorView& dst, const TensorView& src, const DmaOptions& options) {
  Issue issue(kInst, PickQueue(options));
  issue.Reads("src", src).Writes("dst", dst);
  Endpoint s = FromTensor("src", src), d = FromTensor("dst", dst);
  if (options.src_offset) ApplyDynamicOffset(issue, s, *options.src_offset);
  if (options.dst_offset) ApplyDynamicOffset(issue, d, *options.dst_offset);
  Copy(issue, d, s);
}

}  // namespace nkisim::nisa
