#include "runtime/tile.h"

#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim {

TileBuffer::TileBuffer(NeuronCore* core, std::shared_ptr<OnChipAllocator> allocator,
                       std::string name, DType dtype, int64_t partitions, Shape free_shape)
    : core_(core), allocator_(std::move(allocator)), name_(std::move(name)), dtype_(dtype),
      partitions_(partitions), free_shape_(std::move(free_shape)),
      row_elements_(NumElements(free_shape_)) {
  const uint64_t row_bytes = static_cast<uint64_t>(row_elements_) * SizeOf(dtype_);
  Shape full{partitions_};
  full.insert(full.end(), free_shape_.begin(), free_shape_.end());
  offset_ = allocator_->Allocate(StrCat("'", name_, "' ", ShapeString(full), " ", DTypeName(dtype_)),
                                 row_bytes);
  if (!Functional()) return;  // timing-only: no values, so no storage
  // Uninitialised float memory reads as NaN: all-ones bytes are a NaN in every float dtype (fp32,
  // bf16, fp16 and the three fp8s), so one pass writes it; other dtypes read as zero.
  data_.assign(row_bytes * static_cast<uint64_t>(partitions_),
               IsFloat(dtype_) ? std::byte{0xFF} : std::byte{0});
}

TileBuffer::~TileBuffer() { allocator_->Free(offset_); }

Tile::Tile(std::shared_ptr<TileBuffer> buffer)
    : buffer_(std::move(buffer)), dtype_(buffer_->dtype()), partitions_(buffer_->partitions()),
      free_shape_(buffer_->free_shape()), free_strides_(ContiguousStrides(free_shape_)) {}

Shape Tile::shape() const {
  Shape s{partitions_};
  s.insert(s.end(), free_shape_.begin(), free_shape_.end());
  return s;
}

bool Tile::free_contiguous() const {
  int64_t expected = 1;
  for (int d = static_cast<int>(free_shape_.size()) - 1; d >= 0; --d) {
    if (free_shape_[d] != 1 && free_strides_[d] != expected) return false;
    expected *= free_shape_[d];
  }
  return true;
}

std::string Tile::Describe() const {
  if (!valid()) return "<null tile>";
  return StrCat("'", name(), "' ", ShapeString(shape()), " ", DTypeName(dtype()), " ",
                MemorySpaceName(memory()));
}

Tile Tile::slice(int dim, int64_t start, int64_t end, int64_t step) const {
  const int rank = 1 + static_cast<int>(free_shape_.size());
  const int64_t extent = dim == 0 ? partitions_ : (dim > 0 && dim < rank ? free_shape_[dim - 1] : 0);
  if (dim < 0 || dim >= rank || step <= 0 || start < 0 || start > end || end > extent ||
      (dim == 0 && step != 1)) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("slice of tile ", Describe(), ": [", start, ":", end, ":", step, "] of dim ", dim,
                 " must satisfy 0 <= dim < ", rank, ", 0 <= start <= end <= dim size, step > 0 ",
                 "(1 on the partition dim)"));
  }
  Tile t = *this;
  if (dim == 0) {
    t.partition_start_ += start;
    t.partitions_ = end - start;
  } else {
    t.free_offset_ += start * free_strides_[dim - 1];
    t.free_shape_[dim - 1] = (end - start + step - 1) / step;
    t.free_strides_[dim - 1] *= step;
  }
  return t;
}

Tile Tile::select(int dim, int64_t index) const {
  const int rank = 1 + static_cast<int>(free_shape_.size());
  if (dim < 1 || dim >= rank || index < 0 || index >= free_shape_[dim - 1]) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("select of tile ", Describe(), ": index ", index, " of dim ", dim,
                 "; dim must be a free dim in [1, ", rank, ") and the index inside it"));
  }
  Tile t = *this;
  t.free_offset_ += index * free_strides_[dim - 1];
  t.free_shape_.erase(t.free_shape_.begin() + (dim - 1));
  t.free_strides_.erase(t.free_strides_.begin() + (dim - 1));
  return t;
}

Tile Tile::reshape(const Shape& new_free_shape) const {
  if (NumElements(new_free_shape) != free_size() || !free_contiguous() ||
      new_free_shape.size() > static_cast<size_t>(kMaxFreeRank)) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("reshape of tile ", Describe(), " free dims to ", ShapeString(new_free_shape),
                 ": needs contiguous free dims, the same element count and at most ",
                 kMaxFreeRank, " free dims"));
  }
  Tile t = *this;
  t.free_shape_ = new_free_shape;
  t.free_strides_ = ContiguousStrides(new_free_shape);
  return t;
}

Tile Tile::broadcast(int dim, int64_t size) const {
  const int rank = 1 + static_cast<int>(free_shape_.size());
  if (dim < 1 || dim >= rank || free_shape_[dim - 1] != 1 || size < 1) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("broadcast of tile ", Describe(), " dim ", dim, " to ", size,
                 ": only a free dim of size 1 can be broadcast"));
  }
  Tile t = *this;
  t.free_shape_[dim - 1] = size;
  t.free_strides_[dim - 1] = 0;
  return t;
}

Tile Tile::ap(int64_t partitions, const std::vector<std::pair<int64_t, int64_t>>& free_pattern,
              int64_t offset) const {
  const int64_t row = partition_stride();
  int64_t start = free_offset_ + offset;
  int64_t p0 = partition_start_;
  if (start >= 0) {
    p0 += start / row;
    start %= row;
  } else {
    const int64_t back = (-start + row - 1) / row;
    p0 -= back;
    start += back * row;
  }
  int64_t last = start;
  bool ok = partitions >= 1 && p0 >= 0 && p0 + partitions <= buffer_->partitions() &&
            free_pattern.size() <= static_cast<size_t>(kMaxFreeRank);
  for (const auto& [step, count] : free_pattern) {
    ok = ok && step >= 0 && count >= 1;
    last += (count - 1) * step;
  }
  if (!ok || last >= row) {
    std::string pattern;
    for (const auto& [step, count] : free_pattern) pattern += StrCat("[", step, ", ", count, "]");
    Raise(ErrorCode::kInvalidArgument,
          StrCat("ap of tile ", Describe(), ": ", partitions, " partitions from partition ", p0,
                 ", free pattern ", pattern, " from element ", start,
                 ": must address partitions inside the buffer's ", buffer_->partitions(),
                 ", elements inside its row of ", row, ", with steps >= 0, counts >= 1 and at "
                 "most ", kMaxFreeRank, " free dims"));
  }
  Tile t = *this;
  t.partition_start_ = p0;
  t.partitions_ = partitions;
  t.free_offset_ = start;
  t.free_shape_.clear();
  t.free_strides_.clear();
  for (const auto& [step, count] : free_pattern) {
    t.free_shape_.push_back(count);
    t.free_strides_.push_back(step);
  }
  if (t.free_shape_.empty()) {
    t.free_shape_.push_back(1);
    t.free_strides_.push_back(1);
  }
  return t;
}

int64_t Tile::partition_stride() const {
  return buffer_->row_elements() * static_cast<int64_t>(SizeOf(buffer_->dtype())) /
         static_cast<int64_t>(SizeOf(dtype_));
}

Tile Tile::bitcast(DType to) const {
  const int64_t from_bytes = static_cast<int64_t>(SizeOf(dtype_));
  const int64_t to_bytes = static_cast<int64_t>(SizeOf(to));
  const int64_t row_bytes = buffer_->row_elements() * static_cast<int64_t>(SizeOf(buffer_->dtype()));
  const int64_t last = free_shape_.empty() ? 1 : free_shape_.back();
  if (!free_contiguous() || free_shape_.empty() || (last * from_bytes) % to_bytes != 0 ||
      (free_offset_ * from_bytes) % to_bytes != 0 || row_bytes % to_bytes != 0) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("bitcast of tile ", Describe(), " to ", DTypeName(to),
                 ": needs contiguous free dims whose last dim (", last, " x ", from_bytes,
                 " B), offset and partition row divide into whole ", to_bytes, " B elements"));
  }
  Tile t = *this;
  t.dtype_ = to;
  t.free_offset_ = free_offset_ * from_bytes / to_bytes;
  t.free_shape_.back() = last * from_bytes / to_bytes;
  t.free_strides_ = ContiguousStrides(t.free_shape_);
  return t;
}

std::byte* Tile::element_ptr(int64_t p, int64_t free_element_offset) const {
  const int64_t row_bytes = (partition_start_ + p) * buffer_->row_elements() *
                            static_cast<int64_t>(SizeOf(buffer_->dtype()));
  return buffer_->data() + row_bytes + free_element_offset * static_cast<int64_t>(SizeOf(dtype()));
}

int64_t Tile::CheckedFreeOffset(int64_t partition, const std::vector<int64_t>& free_index) const {
  bool inside = partition >= 0 && partition < partitions_ && free_index.size() == free_shape_.size();
  int64_t off = free_offset_;
  for (size_t d = 0; inside && d < free_index.size(); ++d) {
    inside = free_index[d] >= 0 && free_index[d] < free_shape_[d];
    off += free_index[d] * free_strides_[d];
  }
  if (!inside) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("element access into tile ", Describe(), ": partition ", partition, " free index ",
                 ShapeString(Shape(free_index.begin(), free_index.end())), " is outside the tile"));
  }
  return off;
}

float Tile::get(int64_t partition, const std::vector<int64_t>& free_index) const {
  return ToFloat(dtype(), element_ptr(partition, CheckedFreeOffset(partition, free_index)));
}

void Tile::set(int64_t partition, const std::vector<int64_t>& free_index, float value) const {
  FromFloat(dtype(), value, element_ptr(partition, CheckedFreeOffset(partition, free_index)));
}

void Tile::ReadRow(int64_t p, float* out) const {
  if (free_contiguous()) {
    ToFloat(dtype(), element_ptr(p, free_offset_), out, static_cast<size_t>(free_size()));
    return;
  }
  const DType dt = dtype();
  const size_t width = SizeOf(dt);
  std::byte* row = element_ptr(p, 0);
  ForEachFreeOffset([&](int64_t off) { *out++ = ToFloat(dt, row + off * width); });
}

void Tile::WriteRow(int64_t p, const float* in) const {
  if (free_contiguous()) {
    FromFloat(dtype(), in, element_ptr(p, free_offset_), static_cast<size_t>(free_size()));
    return;
  }
  const DType dt = dtype();
  const size_t width = SizeOf(dt);
  std::byte* row = element_ptr(p, 0);
  ForEachFreeOffset([&](int64_t off) { FromFloat(dt, *in++, row + off * width); });
}

std::vector<float> Tile::ToFloats() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  for (int64_t p = 0; p < partitions_; ++p) ReadRow(p, out.data() + p * free_size());
  return out;
}

void Tile::FromFloats(const std::vector<float>& values) const {
  if (static_cast<int64_t>(values.size()) != numel()) {
    Raise(ErrorCode::kInvalidArgument, StrCat("FromFloats into tile ", Describe(), ": got ",
                                              values.size(), " values, need ", numel()));
  }
  for (int64_t p = 0; p < partitions_; ++p) WriteRow(p, values.data() + p * free_size());
}

}  // namespace nkisim
