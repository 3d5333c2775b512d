#include "runtime/tensor_view.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim {

std::string ShapeString(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += StrCat(i ? ", " : "", shape[i]);
  return s + "]";
}

int64_t NumElements(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

Shape ContiguousStrides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t running = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = running;
    running *= shape[d];
  }
  return strides;
}

std::string AccessPattern::ToString() const {
  std::string s = StrCat("offset=", offset, " [");
  for (size_t i = 0; i < dims.size(); ++i) {
    s += StrCat(i ? ", " : "", "[", dims[i].first, ", ", dims[i].second, "]");
  }
  return s + "]";
}

void HbmBuffer::Free::operator()(std::byte* p) const {
  if (mapped > 0) {
    munmap(p, mapped);
  } else {
    std::free(p);
  }
}

namespace {

// Zeroed, except a small buffer in the timing-only mode: that mode writes and reads no tensor
// values (runtime/sim_mode.h), and clearing heap memory the ranks' threads reuse was a quarter
// of the CPU of `nkisim serve`'s 70B step-cost table (the memset and its page faults; measured
// 17.2 -> 12.9 s of CPU, peak 187 -> 60-74 MiB, identical tables). A mapped buffer costs nothing
// until written, so it stays as it is.
std::byte* AllocateZeroed(size_t bytes) {
  if (bytes < HbmBuffer::kMapBytes && !Functional()) {
    return static_cast<std::byte*>(std::malloc(bytes == 0 ? 1 : bytes));
  }
  if (bytes < HbmBuffer::kMapBytes) return static_cast<std::byte*>(std::calloc(bytes == 0 ? 1 : bytes, 1));
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
}

}  // namespace

HbmBuffer::HbmBuffer(size_t bytes, std::string name)
    : bytes_(AllocateZeroed(bytes), Free{bytes >= kMapBytes ? bytes : 0}),
      size_(bytes),
      name_(std::move(name)) {
  if (bytes_ == nullptr) {
    Raise(ErrorCode::kOutOfResources,
          StrCat("HBM tensor '", name_, "': cannot allocate ", bytes, " bytes on the host"));
  }
}

namespace {
thread_local double t_last_marked_ns = std::numeric_limits<double>::quiet_NaN();
}  // namespace

double HbmBuffer::LastMarkedOnThread() { return t_last_marked_ns; }
void HbmBuffer::ClearLastMarkedOnThread() {
  t_last_marked_ns = std::numeric_limits<double>::quiet_NaN();
}

void HbmBuffer::MarkWritten(double end_ns) {
  t_last_marked_ns = end_ns;
  double seen = ready_at_.load(std::memory_order_relaxed);
  while (seen < end_ns && !ready_at_.compare_exchange_weak(seen, end_ns)) {
  }
}

TensorView::TensorView(std::shared_ptr<HbmBuffer> buffer, DType dtype, Shape shape,
                       Shape strides, int64_t offset)
    : buffer_(std::move(buffer)), dtype_(dtype), shape_(std::move(shape)),
      strides_(std::move(strides)), offset_(offset) {}

TensorView TensorView::Create(const Shape& shape, DType dtype, const std::string& name) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    Raise(ErrorCode::kInvalidArgument, StrCat("tensor '", name, "': rank ", shape.size(),
                                              " of shape ", ShapeString(shape), " exceeds ", kMaxRank));
  }
  for (int64_t d : shape) {
    if (d < 0) {
      Raise(ErrorCode::kInvalidArgument,
            StrCat("tensor '", name, "': shape ", ShapeString(shape), " has a negative dim"));
    }
  }
  // The byte count, checked: a shape whose size overflows is refused, not wrapped.
  uint64_t bytes = SizeOf(dtype);
  for (int64_t d : shape) {
    if (d != 0 && bytes > (uint64_t{1} << 62) / static_cast<uint64_t>(d)) {
      Raise(ErrorCode::kOutOfResources, StrCat("tensor '", name, "': shape ", ShapeString(shape),
                                               " holds more than 2^62 bytes"));
    }
    bytes *= static_cast<uint64_t>(d);
  }
  return TensorView(std::make_shared<HbmBuffer>(static_cast<size_t>(bytes), name), dtype, shape,
                    ContiguousStrides(shape), 0);
}

const std::string& TensorView::name() const {
  static const std::string kNone = "<null>";
  return buffer_ ? buffer_->name() : kNone;
}

int64_t TensorView::dim(int d) const {
  CheckDim(d, "dim");
  return shape_[d];
}

void TensorView::CheckDim(int dim, const char* op) const {
  if (dim < 0 || dim >= rank()) {
    Raise(ErrorCode::kInvalidArgument, StrCat(op, " on tensor '", name(), "' ",
                                              ShapeString(shape_), ": dim ", dim,
                                              " outside [0, ", rank(), ")"));
  }
}

TensorView TensorView::select(int dim, int64_t index) const {
  CheckDim(dim, "select");
  if (index < 0 || index >= shape_[dim]) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("select on tensor '", name(), "' ", ShapeString(shape_), ": index ", index,
                 " of dim ", dim, " outside [0, ", shape_[dim], ")"));
  }
  Shape shape = shape_, strides = strides_;
  int64_t offset = offset_ + index * strides_[dim];
  shape.erase(shape.begin() + dim);
  strides.erase(strides.begin() + dim);
  return TensorView(buffer_, dtype_, shape, strides, offset);
}

TensorView TensorView::slice(int dim, int64_t start, int64_t end, int64_t step) const {
  CheckDim(dim, "slice");
  if (step <= 0 || start < 0 || end > shape_[dim] || start > end) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("slice on tensor '", name(), "' ", ShapeString(shape_), ": [", start, ":", end,
                 ":", step, "] of dim ", dim, " must satisfy 0 <= start <= end <= ", shape_[dim],
                 " and step > 0"));
  }
  Shape shape = shape_, strides = strides_;
  shape[dim] = (end - start + step - 1) / step;
  strides[dim] = strides_[dim] * step;
  return TensorView(buffer_, dtype_, shape, strides, offset_ + start * strides_[dim]);
}

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int d = rank() - 1; d >= 0; --d) {
    if (shape_[d] != 1 && strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

TensorView TensorView::reshape(const Shape& new_shape) const {
  if (NumElements(new_shape) != numel() || new_shape.size() > static_cast<size_t>(kMaxRank)) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("reshape of tensor '", name(), "' ", ShapeString(shape_), " to ",
                 ShapeString(new_shape), ": element counts must match and rank <= ", kMaxRank));
  }
  if (!is_contiguous()) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("reshape of tensor '", name(), "' ", ShapeString(shape_),
                 ": the view is not contiguous (strides ", ShapeString(strides_),
                 "); reshape needs a contiguous view"));
  }
  return TensorView(buffer_, dtype_, new_shape, ContiguousStrides(new_shape), offset_);
}

TensorView TensorView::bitcast(DType to) const {
  const int64_t from_bytes = static_cast<int64_t>(SizeOf(dtype_));
  const int64_t to_bytes = static_cast<int64_t>(SizeOf(to));
  const int64_t last = shape_.empty() ? 1 : shape_.back();
  if (!is_contiguous() || shape_.empty() || (last * from_bytes) % to_bytes != 0 ||
      (offset_ * from_bytes) % to_bytes != 0) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("bitcast of tensor '", name(), "' ", ShapeString(shape_), " ", DTypeName(dtype_),
                 " to ", DTypeName(to), ": needs a contiguous view whose last dim (", last, " x ",
                 from_bytes, " B) and offset divide into whole ", to_bytes, " B elements"));
  }
  Shape new_shape = shape_;
  new_shape.back() = last * from_bytes / to_bytes;
  return TensorView(buffer_, to, new_shape, ContiguousStrides(new_shape),
                    offset_ * from_bytes / to_bytes);
}

TensorView TensorView::permute(const std::vector<int>& order) const {
  std::vector<int> sorted(order);
  std::sort(sorted.begin(), sorted.end());
  bool is_permutation = static_cast<int>(order.size()) == rank();
  for (int i = 0; is_permutation && i < rank(); ++i) is_permutation = sorted[i] == i;
  if (!is_permutation) {
    std::string got;
    for (int o : order) got += StrCat(got.empty() ? "" : ", ", o);
    Raise(ErrorCode::kInvalidArgument, StrCat("permute of tensor '", name(), "' ",
                                              ShapeString(shape_), ": order [", got,
                                              "] is not a permutation of 0..", rank() - 1));
  }
  Shape shape(order.size()), strides(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    shape[i] = shape_[order[i]];
    strides[i] = strides_[order[i]];
  }
  return TensorView(buffer_, dtype_, shape, strides, offset_);
}

AccessPattern TensorView::access_pattern() const {
  AccessPattern pattern;
  pattern.offset = offset_;
  for (int d = 0; d < rank(); ++d) pattern.dims.emplace_back(strides_[d], shape_[d]);
  return pattern;
}

TensorView TensorView::ap(const AccessPattern& pattern) const {
  Shape shape, strides;
  int64_t lowest = pattern.offset, highest = pattern.offset;
  for (const auto& [stride, count] : pattern.dims) {
    if (count <= 0) {
      Raise(ErrorCode::kInvalidArgument, StrCat("access pattern ", pattern.ToString(),
                                                " on tensor '", name(), "': count must be > 0"));
    }
    shape.push_back(count);
    strides.push_back(stride);
    (stride < 0 ? lowest : highest) += stride * (count - 1);
  }
  const int64_t capacity = static_cast<int64_t>(buffer_->size_bytes() / SizeOf(dtype_));
  if (shape.size() > static_cast<size_t>(kMaxRank) || lowest < 0 || highest >= capacity) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("access pattern ", pattern.ToString(), " on tensor '", name(), "' touches [",
                 lowest, ", ", highest, "]; must stay inside [0, ", capacity,
                 ") with at most ", kMaxRank, " dims"));
  }
  return TensorView(buffer_, dtype_, shape, strides, pattern.offset);
}

std::byte* TensorView::element_ptr(const std::vector<int64_t>& index) const {
  if (static_cast<int>(index.size()) != rank()) {
    Raise(ErrorCode::kInvalidArgument, StrCat("index of rank ", index.size(), " into tensor '",
                                              name(), "' of rank ", rank()));
  }
  int64_t offset = offset_;
  for (int d = 0; d < rank(); ++d) {
    if (index[d] < 0 || index[d] >= shape_[d]) {
      Raise(ErrorCode::kInvalidArgument, StrCat("index ", index[d], " of dim ", d, " of tensor '",
                                                name(), "' outside [0, ", shape_[d], ")"));
    }
    offset += index[d] * strides_[d];
  }
  return buffer_->data() + offset * static_cast<int64_t>(SizeOf(dtype_));
}

float TensorView::get(const std::vector<int64_t>& index) const {
  return ToFloat(dtype_, element_ptr(index));
}

void TensorView::set(const std::vector<int64_t>& index, float value) const {
  FromFloat(dtype_, value, element_ptr(index));
}

namespace {

// A view of rank >= 2 whose last dim has stride 1: its rows are runs of contiguous elements.
bool RowsAreContiguous(const Shape& strides) { return strides.size() > 1 && strides.back() == 1; }

// Calls fn(first element offset, row length) for each row of such a view, in row-major order.
template <typename Fn>
void ForEachRow(const Shape& shape, const Shape& strides, int64_t offset, Fn&& fn) {
  const int64_t n = shape.back();
  ForEachStridedOffset(Shape(shape.begin(), shape.end() - 1),
                       Shape(strides.begin(), strides.end() - 1), offset,
                       [&](int64_t off) { fn(off, n); });
}

}  // namespace

std::vector<float> TensorView::ToFloats() const {
  if (is_contiguous()) {  // one bulk conversion instead of a call per element
    std::vector<float> out(static_cast<size_t>(numel()));
    ToFloat(dtype_, buffer_->data() + offset_ * static_cast<int64_t>(SizeOf(dtype_)), out.data(),
            out.size());
    return out;
  }
  const size_t width = SizeOf(dtype_);
  const std::byte* base = buffer_->data();
  if (RowsAreContiguous(strides_)) {  // one bulk conversion per row
    std::vector<float> out(static_cast<size_t>(numel()));
    float* dst = out.data();
    ForEachRow(shape_, strides_, offset_, [&](int64_t off, int64_t n) {
      ToFloat(dtype_, base + off * width, dst, static_cast<size_t>(n));
      dst += n;
    });
    return out;
  }
  std::vector<float> out;
  out.reserve(static_cast<size_t>(numel()));
  ForEachOffset([&](int64_t off) { out.push_back(ToFloat(dtype_, base + off * width)); });
  return out;
}

void TensorView::FromFloats(const std::vector<float>& values) const {
  FromFloats(values.data(), static_cast<int64_t>(values.size()));
}

void TensorView::FromFloats(const float* values, int64_t count) const {
  if (count != numel()) {
    Raise(ErrorCode::kInvalidArgument, StrCat("FromFloats into tensor '", name(), "' ",
                                              ShapeString(shape_), ": got ", count,
                                              " values, need ", numel()));
  }
  const size_t width = SizeOf(dtype_);
  std::byte* base = buffer_->data();
  if (is_contiguous()) {
    FromFloat(dtype_, values, base + offset_ * static_cast<int64_t>(width),
              static_cast<size_t>(count));
    return;
  }
  if (RowsAreContiguous(strides_)) {  // one bulk conversion per row
    const float* src = values;
    ForEachRow(shape_, strides_, offset_, [&](int64_t off, int64_t n) {
      FromFloat(dtype_, src, base + off * width, static_cast<size_t>(n));
      src += n;
    });
    return;
  }
  size_t i = 0;
  ForEachOffset([&](int64_t off) { FromFloat(dtype_, values[i++], base + off * width); });
}

}  // namespace nkisim
