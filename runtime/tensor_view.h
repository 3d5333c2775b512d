// HBM tensors and zero-copy views onto them.
//
// A TensorView is a handle: it shares its HbmBuffer with every view made from it, so views stay
// valid as long as any handle lives. Views chain like the seed's
//   TensorView(t).select(0, b).slice(1, start, end)
// and never copy data. Shapes are row-major, rank 0..kMaxRank, strides and offsets in elements.
// An HbmBuffer may be read and written by the two physical cores of one logical core at once;
// its simulated ready time is updated atomically.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/dtype.h"

namespace nkisim {

inline constexpr int kMaxRank = 5;
using Shape = std::vector<int64_t>;

std::string ShapeString(const Shape& shape);  // "[2, 3, 4]"
int64_t NumElements(const Shape& shape);

// NKI-style access pattern: [[stride, count], ...] outermost first, plus a start offset, all in
// elements of the underlying buffer.
struct AccessPattern {
  int64_t offset = 0;
  std::vector<std::pair<int64_t, int64_t>> dims;  // {stride, count}
  std::string ToString() const;                    // "offset=8 [[512, 128], [1, 64]]"
};

class HbmBuffer {
 public:
  // Buffers of this size or more are mapped rather than calloc'd (below).
  static constexpr size_t kMapBytes = size_t{1} << 20;

  HbmBuffer(size_t bytes, std::string name);
  std::byte* data() { return bytes_.get(); }
  const std::byte* data() const { return bytes_.get(); }
  size_t size_bytes() const { return size_; }
  const std::string& name() const { return name_; }

  // Simulated time (ns) at which the last write to this buffer completes.
  double ready_at() const { return ready_at_.load(std::memory_order_relaxed); }
  void MarkWritten(double end_ns);
  // The end_ns of the last MarkWritten on the calling thread, on any buffer (NaN when none since
  // ClearLastMarked): runtime/hbm_write_order.h reads it around one instruction to learn when
  // that instruction's HBM write completes.
  static double LastMarkedOnThread();
  static void ClearLastMarkedOnThread();

 private:
  struct Free {
    size_t mapped = 0;  // bytes of an mmap'd buffer; 0: calloc'd
    void operator()(std::byte* p) const;
  };
  // Buffers of kMapBytes or more are anonymous mappings: zero pages the kernel maps on first
  // write, so a timing-only run (which writes no values) holds almost none of its tensors in
  // memory. (calloc gives that only while malloc's mmap threshold stays below the size; glibc
  // raises it to every freed mapping's size, after which calloc clears heap memory and a 64-rank
  // timing-only 70B layer held 1.8 GiB of zeros.) Smaller ones are calloc'd.
  std::unique_ptr<std::byte[], Free> bytes_;
  size_t size_;
  std::string name_;
  std::atomic<double> ready_at_{0.0};
};

class TensorView {
 public:
  TensorView() = default;
  // A new zero-filled HBM tensor (in the timing-only mode, which reads no values, a buffer under
  // kMapBytes is left uncleared).
  static TensorView Create(const Shape& shape, DType dtype, const std::string& name = "");

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int d) const;
  int64_t numel() const { return NumElements(shape_); }
  int64_t size_bytes() const { return numel() * static_cast<int64_t>(SizeOf(dtype_)); }
  bool valid() const { return buffer_ != nullptr; }
  const std::string& name() const;
  HbmBuffer& buffer() const { return *buffer_; }
  bool SameBuffer(const TensorView& other) const { return buffer_ == other.buffer_; }

  // Views. Each throws Error(kInvalidArgument) naming the argument and the rule it breaks.
  TensorView select(int dim, int64_t index) const;                  // drops dim
  TensorView slice(int dim, int64_t start, int64_t end, int64_t step = 1) const;
  TensorView reshape(const Shape& new_shape) const;                 // REQUIRES: contiguous
  TensorView permute(const std::vector<int>& order) const;
  // The same bytes seen as `to` (uint32 [H/4, I] as fp8_e4m3fn_x4, fp8 [.., 4 n] as an x4 [.., n]).
  // REQUIRES: a contiguous view whose last dim and offset divide into whole `to` elements.
  TensorView bitcast(DType to) const;
  bool is_contiguous() const;

  AccessPattern access_pattern() const;
  // A view of the same buffer described by an access pattern (as DMA descriptors see memory).
  TensorView ap(const AccessPattern& pattern) const;

  // Element access for host code and tests (converts through fp32).
  std::byte* element_ptr(const std::vector<int64_t>& index) const;
  float get(const std::vector<int64_t>& index) const;
  void set(const std::vector<int64_t>& index, float value) const;

  // Row-major copies through fp32, for host set-up and checks.
  std::vector<float> ToFloats() const;
  void FromFloats(const std::vector<float>& values) const;
  // The same from `count` values at `values` (REQUIRES: count == numel()).
  void FromFloats(const float* values, int64_t count) const;

  // Calls fn(element_offset) for every element in row-major order of this view.
  template <typename Fn>
  void ForEachOffset(Fn&& fn) const;

 private:
  TensorView(std::shared_ptr<HbmBuffer> buffer, DType dtype, Shape shape, Shape strides,
             int64_t offset);
  void CheckDim(int dim, const char* op) const;

  std::shared_ptr<HbmBuffer> buffer_;
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  Shape strides_;
  int64_t offset_ = 0;
};

// Row-major contiguous strides of a shape.
Shape ContiguousStrides(const Shape& shape);

// Visits, in row-major order, the element offsets of a strided box: fn(offset).
template <typename Fn>
void ForEachStridedOffset(const Shape& shape, const Shape& strides, int64_t base, Fn&& fn) {
  const int rank = static_cast<int>(shape.size());
  if (NumElements(shape) == 0) return;
  if (rank == 0) {
    fn(base);
    return;
  }
  int64_t index[kMaxRank + 1] = {};
  const int64_t inner = shape[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  int64_t outer_offset = base;
  while (true) {
    for (int64_t i = 0; i < inner; ++i) fn(outer_offset + i * inner_stride);
    int d = rank - 2;
    for (; d >= 0; --d) {
      outer_offset += strides[d];
      if (++index[d] < shape[d]) break;
      outer_offset -= strides[d] * shape[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

template <typename Fn>
void TensorView::ForEachOffset(Fn&& fn) const {
  ForEachStridedOffset(shape_, strides_, offset_, fn);
}

}  // namespace nkisim
