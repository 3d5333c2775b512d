// DType, Engine, HBM tensors (TensorView) and on-chip tiles (Tile) as Python classes. Views are
// the runtime's own (zero copy, same rules, same errors); the nki package wraps them in
// NkiTensor (python/nki/language/_tensor.py), which adds NKI's indexing.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "python/src/arrays.h"
#include "python/src/bindings.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"
#include "runtime/timeline.h"

namespace nkisim::python {
namespace {

py::tuple ShapeTuple(const Shape& shape) {
  py::tuple out(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) out[i] = shape[i];
  return out;
}

void BindEnums(py::module_& m) {
  py::enum_<DType> dtype(m, "DType");
  for (DType d : kAllDTypes) dtype.value(DTypeName(d), d);
  for (DType d : kX4DTypes) dtype.value(DTypeName(d), d);
  m.def("dtype_size", [](DType d) { return SizeOf(d); });
  m.def("dtype_is_float", [](DType d) { return IsFloat(d); });
  m.def("parse_dtype", [](const std::string& name) { return ParseDType(name); });
  m.def("native_numpy_dtype", [](DType d) -> py::object {
    auto native = NativeNumpyDType(d);
    return native ? py::object(*native) : py::object(py::none());
  });
  py::enum_<Engine>(m, "Engine")
      .value("PE", Engine::kPE)
      .value("Vector", Engine::kVector)
      .value("Scalar", Engine::kScalar)
      .value("GpSimd", Engine::kGpSimd);
}

void BindTensorView(py::module_& m) {
  py::class_<TensorView>(m, "TensorView")
      .def_static("create", &TensorView::Create, py::arg("shape"), py::arg("dtype"),
                  py::arg("name") = "")
      .def_property_readonly("shape", [](const TensorView& t) { return ShapeTuple(t.shape()); })
      .def_property_readonly("strides", [](const TensorView& t) { return ShapeTuple(t.strides()); })
      .def_property_readonly("offset", &TensorView::offset)
      .def_property_readonly("dtype", &TensorView::dtype)
      .def_property_readonly("name", &TensorView::name)
      .def_property_readonly("size_bytes", &TensorView::size_bytes)
      // When the last instruction writing the buffer ends (0: never written by one).
      .def_property_readonly("written_at",
                             [](const TensorView& t) { return t.buffer().ready_at(); })
      .def("select", &TensorView::select)
      .def("slice", &TensorView::slice, py::arg("dim"), py::arg("start"), py::arg("end"),
           py::arg("step") = 1)
      .def("reshape", &TensorView::reshape)
      .def("permute", &TensorView::permute)
      .def("bitcast", &TensorView::bitcast)
      .def("is_contiguous", &TensorView::is_contiguous)
      .def("same_buffer", &TensorView::SameBuffer)
      .def("access_pattern",
           [](const TensorView& t) {
             const AccessPattern ap = t.access_pattern();
             return py::make_tuple(ap.offset, ap.dims);
           })
      .def("ap",
           [](const TensorView& t, int64_t offset,
              const std::vector<std::pair<int64_t, int64_t>>& dims) {
             return t.ap(AccessPattern{offset, dims});
           })
      .def("write", &WriteArray)
      .def("read", &ReadArray)
      .def("__repr__", [](const TensorView& t) {
        return StrCat("TensorView('", t.name(), "' ", ShapeString(t.shape()), " ",
                      DTypeName(t.dtype()), " HBM)");
      });
}

void BindTile(py::module_& m) {
  py::class_<Tile>(m, "Tile")
      .def_property_readonly("shape", [](const Tile& t) { return ShapeTuple(t.shape()); })
      .def_property_readonly("dtype", &Tile::dtype)
      .def_property_readonly("name", &Tile::name)
      .def_property_readonly("is_psum",
                             [](const Tile& t) { return t.memory() == MemorySpace::kPsum; })
      .def_property_readonly("partition_start", &Tile::partition_start)
      .def_property_readonly("free_strides",
                             [](const Tile& t) { return ShapeTuple(t.free_strides()); })
      .def_property_readonly("free_offset", &Tile::free_offset)
      .def("free_contiguous", &Tile::free_contiguous)
      .def("slice", &Tile::slice, py::arg("dim"), py::arg("start"), py::arg("end"),
           py::arg("step") = 1)
      .def("select", &Tile::select)
      .def("reshape", &Tile::reshape)
      .def("broadcast", &Tile::broadcast)
      .def("bitcast", &Tile::bitcast)
      .def("ap", &Tile::ap, py::arg("partitions"), py::arg("free_pattern"), py::arg("offset"))
      .def("same_buffer", &Tile::SameBuffer)
      .def("read", &ReadTile)
      .def("write", &WriteTile)
      .def("__repr__", [](const Tile& t) { return "Tile(" + t.Describe() + ")"; });
}

}  // namespace

void BindMemory(py::module_& m) {
  BindEnums(m);
  BindTensorView(m);
  BindTile(m);
}

}  // namespace nkisim::python
