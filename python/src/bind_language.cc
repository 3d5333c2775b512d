// The nl language (runtime/language) as submodule `nl`: the four dispatchers with their op
// tokens, and the ops that are functions of their own. Results are new tiles on the current core,
// with the C++ routing (engine and instruction sequence per op, docs/nl-ops.md), so a Python nl
// call costs and traces exactly like the same call from C++.
#include <pybind11/stl.h>

#include <variant>

#include "python/src/bindings.h"
#include "runtime/language/nl.h"

namespace nkisim::python {
namespace {

using OperandArg = std::variant<Tile, float>;
using nl::OptDType;

nl::Operand ToOperand(const OperandArg& arg) {
  if (const Tile* t = std::get_if<Tile>(&arg)) return nl::Operand(*t);
  return nl::Operand(std::get<float>(arg));
}

nl::Buffer ToBuffer(bool psum) { return psum ? nl::Buffer::kPsum : nl::Buffer::kSbuf; }

void BindOpTable(py::module_& m) {
  py::enum_<nl::Op> op(m, "Op");
  for (const nl::OpInfo& info : nl::OpTable()) op.value(info.name, info.op);
  // (name, family, op, alu, act) per row: the package builds nl's functions and NKI's op tokens
  // (op=nl.add in nisa calls) from it.
  m.def("op_table", [] {
    py::list rows;
    for (const nl::OpInfo& info : nl::OpTable()) {
      rows.append(py::make_tuple(info.name, nl::FamilyName(info.family), info.op, info.alu,
                                 info.act));
    }
    return rows;
  });
}

void BindElementwiseOps(py::module_& m) {
  m.def("unary_op", &nl::unary_op);
  m.def("activation", &nl::activation);
  m.def("binary_op", [](const OperandArg& x, const OperandArg& y, nl::Op op, OptDType dtype) {
    return nl::binary_op(ToOperand(x), ToOperand(y), op, dtype);
  });
  m.def("bitwise_op", [](const OperandArg& x, const OperandArg& y, nl::Op op, OptDType dtype) {
    return nl::bitwise_op(ToOperand(x), ToOperand(y), op, dtype);
  });
  m.def("divide", [](const OperandArg& x, const OperandArg& y, OptDType dtype) {
    return nl::divide(ToOperand(x), ToOperand(y), dtype);
  });
  m.def("reciprocal", &nl::reciprocal);
  m.def("dropout", [](const Tile& x, const OperandArg& rate, OptDType dtype) {
    return nl::dropout(x, ToOperand(rate), dtype);
  });
  m.def("where", &nl::where);
}

void BindReductions(py::module_& m) {
  m.def("tensor_reduce", &nl::tensor_reduce);
  m.def("var", &nl::var);
  m.def("softmax", [](const Tile& x, const std::vector<int>& axis, OptDType dtype) {
    return nl::softmax(x, axis, {.dtype = dtype});
  });
  m.def("rms_norm", [](const Tile& x, const Tile& w, const std::vector<int>& axis, int64_t n,
                       float epsilon, OptDType dtype, DType compute_dtype) {
    return nl::rms_norm(x, w, axis, n,
                        {.epsilon = epsilon, .dtype = dtype, .compute_dtype = compute_dtype});
  });
  // Waits for the peer program under LNC 2: without the GIL.
  m.def("all_reduce", &nl::all_reduce, py::call_guard<py::gil_scoped_release>());
}

void BindMemoryOps(py::module_& m) {
  m.def("matmul", &nl::matmul);
  m.def("transpose", &nl::transpose);
  m.def("load", &nl::load);
  m.def("store", &nl::store);
  m.def("copy", &nl::copy);
  m.def("load_transpose2d", [](const TensorView& src, OptDType dtype) {
    return nl::load_transpose2d(src, dtype);
  });
  m.def("broadcast_to", py::overload_cast<const Tile&, const Shape&>(&nl::broadcast_to));
  m.def("broadcast_to", py::overload_cast<const TensorView&, const Shape&>(&nl::broadcast_to));
  m.def("expand_dims", &nl::expand_dims);
  m.def("gather_flattened", &nl::gather_flattened);
}

void BindCreation(py::module_& m) {
  m.def("ndarray", [](const Shape& shape, DType dtype, bool psum, const std::string& name) {
    return nl::ndarray(shape, dtype, ToBuffer(psum), name);
  });
  m.def("full", [](const Shape& shape, float value, DType dtype, bool psum, const std::string& name) {
    return nl::full(shape, value, dtype, ToBuffer(psum), name);
  });
  m.def("rand", &nl::rand);
  m.def("random_seed", &nl::random_seed);
}

}  // namespace

void BindLanguage(py::module_& m) {
  py::module_ nl = m.def_submodule("nl", "the nl language over nisa");
  BindOpTable(nl);
  BindElementwiseOps(nl);
  BindReductions(nl);
  BindMemoryOps(nl);
  BindCreation(nl);
}

}  // namespace nkisim::python
