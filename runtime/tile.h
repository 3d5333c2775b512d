// SBUF and PSUM tiles. A Tile is a handle onto a TileBuffer (the allocated on-chip storage) plus a
// view: a partition range and up to four strided free dims. Dim 0 of a tile is always the
// partition dim (<= 128); views never copy. The storage is released back to its core's allocator
// when the last handle is dropped.
//
// Uninitialised float tiles read as NaN, so a use before write shows up in results.
// A tile belongs to one physical core; only that core's thread may issue instructions on it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/dtype.h"
#include "runtime/tensor_view.h"

namespace nkisim {

class NeuronCore;

inline constexpr int kMaxFreeRank = 4;

class TileBuffer {
 public:
  TileBuffer(NeuronCore* core, std::shared_ptr<OnChipAllocator> allocator, std::string name,
             DType dtype, int64_t partitions, Shape free_shape);
  ~TileBuffer();
  TileBuffer(const TileBuffer&) = delete;
  TileBuffer& operator=(const TileBuffer&) = delete;

  NeuronCore* core() const { return core_; }
  MemorySpace memory() const { return allocator_->space(); }
  const std::string& name() const { return name_; }
  DType dtype() const { return dtype_; }
  int64_t partitions() const { return partitions_; }
  const Shape& free_shape() const { return free_shape_; }
  int64_t row_elements() const { return row_elements_; }  // elements per partition
  uint64_t offset() const { return offset_; }              // byte address within the partition
  std::byte* data() { return data_.data(); }

  // Scoreboard state, in simulated ns: when the last write completes (later reads wait for it)
  // and when the last read completes (later writes wait for it). Writes are not ordered against
  // earlier writes: tiled kernels write disjoint parts of a tile from several engines or queues.
  double ready_at = 0.0;
  double readers_done_at = 0.0;

 private:
  NeuronCore* core_;
  std::shared_ptr<OnChipAllocator> allocator_;
  std::string name_;
  DType dtype_;
  int64_t partitions_;
  Shape free_shape_;
  int64_t row_elements_;
  uint64_t offset_;
  std::vector<std::byte> data_;
};

class Tile {
 public:
  Tile() = default;
  explicit Tile(std::shared_ptr<TileBuffer> buffer);

  bool valid() const { return buffer_ != nullptr; }
  TileBuffer& buffer() const { return *buffer_; }
  NeuronCore* core() const { return buffer_->core(); }
  MemorySpace memory() const { return buffer_->memory(); }
  const std::string& name() const { return buffer_->name(); }
  DType dtype() const { return dtype_; }  // the view's: the buffer's unless bitcast
  int64_t partitions() const { return partitions_; }
  // Elements of dtype() from one partition row to the next.
  int64_t partition_stride() const;
  int64_t partition_start() const { return partition_start_; }
  const Shape& free_shape() const { return free_shape_; }
  const Shape& free_strides() const { return free_strides_; }
  int64_t free_offset() const { return free_offset_; }
  int64_t free_size() const { return NumElements(free_shape_); }  // elements per partition
  int64_t numel() const { return partitions_ * free_size(); }
  Shape shape() const;  // {partitions, free...}
  bool free_contiguous() const;
  bool SameBuffer(const Tile& other) const { return buffer_ == other.buffer_; }
  // "'x' [128, 512] bf16 SBUF"
  std::string Describe() const;

  // Views; dim 0 is the partition dim. Throw Error(kInvalidArgument) naming the rule.
  Tile slice(int dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tile select(int dim, int64_t index) const;                // free dims only (dim >= 1)
  Tile reshape(const Shape& free_shape) const;              // REQUIRES: contiguous free dims
  // Repeats a size-1 free dim by a zero stride (a view, no copy): e.g. [P, 1] -> [P, 512].
  Tile broadcast(int dim, int64_t size) const;
  // The same bytes seen as `to` (e.g. fp8 [P, 4 F] as fp8_e4m3fn_x4 [P, F], how a kernel hands
  // per-tensor fp8 values to nc_matmul_mx). REQUIRES: contiguous free dims whose bytes, offset and
  // row size divide into whole `to` elements; the last free dim is rescaled.
  Tile bitcast(DType to) const;
  // An explicit access pattern over the buffer (NKI's NkiTensor.ap on SBUF / PSUM): `partitions`
  // consecutive partitions and the free dims {step, count}, in elements of dtype(), starting
  // `offset` elements from this view's first element (whole rows of partition_stride() elements
  // move the start partition). Steps may be 0 (a repeat). Throws unless every addressed element
  // lies inside the buffer.
  Tile ap(int64_t partitions, const std::vector<std::pair<int64_t, int64_t>>& free_pattern,
          int64_t offset) const;

  // Element access through fp32 (host code and tests; no simulated cost).
  float get(int64_t partition, const std::vector<int64_t>& free_index) const;
  void set(int64_t partition, const std::vector<int64_t>& free_index, float value) const;
  std::vector<float> ToFloats() const;  // row-major over {partitions, free...}
  void FromFloats(const std::vector<float>& values) const;

  // Pointer to the first element of partition p (0-based within the view) and free offset off.
  std::byte* element_ptr(int64_t p, int64_t free_element_offset) const;
  // Reads / writes one partition row of the view in row-major free order, converting via fp32.
  void ReadRow(int64_t p, float* out) const;
  void WriteRow(int64_t p, const float* in) const;

  template <typename Fn>
  void ForEachFreeOffset(Fn&& fn) const {
    ForEachStridedOffset(free_shape_, free_strides_, free_offset_, fn);
  }

 private:
  int64_t CheckedFreeOffset(int64_t partition, const std::vector<int64_t>& free_index) const;

  std::shared_ptr<TileBuffer> buffer_;
  DType dtype_ = DType::kFloat32;
  int64_t partition_start_ = 0;
  int64_t partitions_ = 0;
  Shape free_shape_;
  Shape free_strides_;
  int64_t free_offset_ = 0;
};

}  // namespace nkisim
