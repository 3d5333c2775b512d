// The nl language (runtime/language) as submodule `nl`: the four dispatchers with their op
// tokens, and the ops that are functions of their own. Results are new tiles on the current core,
// with the C++ routing (engine and instruction sequence per op, docs/nl-ops.md), so a Python nl
// call costs and traces exactly like the same call from C++.
#include <pybind11/stl.h>

#include <variant>

#include "python/src/bindings.h"
#include "python/src/session.h"
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
      rows.append(
          py::make_tuple(info.name, nl::FamilyName(info.family), info.op, info.alu, info.act));
    }
    return rows;
  });
}

void BindElementwiseOps(py::module_& m) {
  DefNoGil(m, "unary_op", &nl::unary_op);
  DefNoGil(m, "activation", &nl::activation);
  DefNoGil(m, "binary_op", [](const OperandArg& x, const OperandArg& y, nl::Op op, OptDType dtype) {
    return nl::binary_op(ToOperand(x), ToOperand(y), op, dtype);
  });
  DefNoGil(m, "bitwise_op",
           [](const OperandArg& x, const OperandArg& y, nl::Op op, OptDType dtype) {
             return nl::bitwise_op(ToOperand(x), ToOperand(y), op, dtype);
           });
  DefNoGil(m, "divide", [](const OperandArg& x, const OperandArg& y, OptDType dtype) {
    return nl::divide(ToOperand(x), ToOperand(y), dtype);
  });
  DefNoGil(m, "reciprocal", &nl::reciprocal);
  DefNoGil(m, "dropout", [](const Tile& x, const OperandArg& rate, OptDType dtype) {
    return nl::dropout(x, ToOperand(rate), dtype);
  });
  DefNoGil(m, "where", &nl::where);
}

void BindReductions(py::module_& m) {
  DefNoGil(m, "tensor_reduce", &nl::tensor_reduce);
  DefNoGil(m, "var", &nl::var);
  DefNoGil(m, "softmax", [](const Tile& x, const std::vector<int>& axis, OptDType dtype) {
    return nl::softmax(x, axis, {.dtype = dtype});
  });
  DefNoGil(m, "rms_norm",
           [](const Tile& x, const Tile& w, const std::vector<int>& axis, int64_t n, float epsilon,
              OptDType dtype, DType compute_dtype) {
             return nl::rms_norm(
                 x, w, axis, n,
                 {.epsilon = epsilon, .dtype = dtype, .compute_dtype = compute_dtype});
           });
  // Waits for the peer program under LNC 2: without the GIL.
  DefNoGil(m, "all_reduce", &nl::all_reduce);
}

void BindMemoryOps(py::module_& m) {
  DefNoGil(m, "matmul", &nl::matmul);
  DefNoGil(m, "transpose", &nl::transpose);
  DefNoGil(m, "load", &nl::load);
  DefNoGil(m, "store", [](const TensorView& dst, const Tile& value) {
    OrderedHbmWrite(dst, [&] { nl::store(dst, value); });  // LNC 2: simulated-time order
  });
  DefNoGil(m, "copy", &nl::copy);
  DefNoGil(m, "load_transpose2d",
           [](const TensorView& src, OptDType dtype) { return nl::load_transpose2d(src, dtype); });
  DefNoGil(m, "broadcast_to", py::overload_cast<const Tile&, const Shape&>(&nl::broadcast_to));
  DefNoGil(m, "broadcast_to",
           py::overload_cast<const TensorView&, const Shape&>(&nl::broadcast_to));
  DefNoGil(m, "expand_dims", &nl::expand_dims);
  DefNoGil(m, "gather_flattened", &nl::gather_flattened);
}

void BindCreation(py::module_& m) {
  DefNoGil(m, "ndarray", [](const Shape& shape, DType dtype, bool psum, const std::string& name) {
    return nl::ndarray(shape, dtype, ToBuffer(psum), name);
  });
  DefNoGil(m, "full",
           [](const Shape& shape, float value, DType dtype, bool psum, const std::string& name) {
             return nl::full(shape, value, dtype, ToBuffer(psum), name);
           });
  DefNoGil(m, "rand", &nl::rand);
  DefNoGil(m, "random_seed", &nl::random_seed);
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
