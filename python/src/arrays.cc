#include "python/src/arrays.h"

#include <cstring>
#include <vector>

#include "runtime/error.h"
#include "runtime/sim_mode.h"

namespace nkisim::python {
namespace {

std::vector<py::ssize_t> PyShape(const Shape& shape) {
  return std::vector<py::ssize_t>(shape.begin(), shape.end());
}

py::array FloatArray(const std::vector<float>& values, const Shape& shape) {
  py::array_t<float> out(PyShape(shape));
  std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(float));
  return out;
}

// Tiles hold no storage in the timing-only mode: a host access has no values to see.
void CheckTileValues(const Tile& t, const char* what) {
  if (!Functional()) {
    Raise(ErrorCode::kNotSupported,
          StrCat(what, " of tile ", t.Describe(), ": the timing-only mode (NKISIM_TIMING_ONLY=1) "
                 "computes no values; run in the functional mode to read or write them"));
  }
}

}  // namespace

std::optional<py::dtype> NativeNumpyDType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return py::dtype::of<float>();
    case DType::kFloat16:
      return py::dtype("float16");
    case DType::kInt8:
      return py::dtype::of<int8_t>();
    case DType::kUInt8:
      return py::dtype::of<uint8_t>();
    case DType::kInt32:
      return py::dtype::of<int32_t>();
    case DType::kUInt16:
      return py::dtype::of<uint16_t>();
    case DType::kInt16:
      return py::dtype::of<int16_t>();
    case DType::kUInt32:
      return py::dtype::of<uint32_t>();
    default:
      return std::nullopt;
  }
}

void WriteArray(const TensorView& t, const py::array& array) {
  if (array.size() != t.numel()) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat("array -> HBM tensor '", t.name(), "': the array holds ", array.size(),
                 " elements, the tensor ", ShapeString(t.shape()), " holds ", t.numel()));
  }
  if (!t.is_contiguous()) {
    Raise(ErrorCode::kInternal, StrCat("array -> HBM tensor '", t.name(), "': not contiguous"));
  }
  std::byte* dst = t.numel() == 0 ? nullptr : t.element_ptr(Shape(t.rank(), 0));
  const std::optional<py::dtype> native = NativeNumpyDType(t.dtype());
  if (native && array.dtype().is(*native)) {
    auto c = py::array::ensure(array, py::array::c_style);
    std::memcpy(dst, c.data(), static_cast<size_t>(t.size_bytes()));
    return;
  }
  auto values = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(array);
  if (!values) throw py::error_already_set();
  t.FromFloats(values.data(), values.size());
}

py::array ReadArray(const TensorView& t) {
  const std::optional<py::dtype> native = NativeNumpyDType(t.dtype());
  if (!native || !t.is_contiguous()) return FloatArray(t.ToFloats(), t.shape());
  py::array out(*native, PyShape(t.shape()));
  if (t.numel() > 0) {
    std::memcpy(out.mutable_data(), t.element_ptr(Shape(t.rank(), 0)),
                static_cast<size_t>(t.size_bytes()));
  }
  return out;
}

py::array ReadTile(const Tile& t) {
  CheckTileValues(t, "host read");
  return FloatArray(t.ToFloats(), t.shape());
}

void WriteTile(const Tile& t, const py::array& array) {
  CheckTileValues(t, "host write");
  if (array.size() != t.numel()) {
    Raise(ErrorCode::kInvalidArgument, StrCat("array -> tile ", t.Describe(), ": the array holds ",
                                              array.size(), " elements, the tile ", t.numel()));
  }
  auto values = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(array);
  if (!values) throw py::error_already_set();
  t.FromFloats(std::vector<float>(values.data(), values.data() + values.size()));
}

}  // namespace nkisim::python
