#include "python/src/errors.h"

#include <string>

#include "python/src/bindings.h"
#include "runtime/error.h"

namespace nkisim::python {
namespace {

PyObject* g_validation = nullptr;
PyObject* g_simulator = nullptr;
PyObject* g_comm = nullptr;

PyObject* NewClass(py::module_& m, const char* name, PyObject* base, const char* doc) {
  const std::string qualified = std::string("_nkisim.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base, nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(type));  // the module keeps a reference; so does the global
  Py_INCREF(type);
  return type;
}

PyObject* TypeFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kOutOfResources:
    case ErrorCode::kNotSupported:
      return g_validation;
    case ErrorCode::kCommError:
    case ErrorCode::kTimeout:
      return g_comm;
    default:
      return g_simulator;
  }
}

}  // namespace

PyObject* CommErrorType() { return g_comm; }

void BindErrors(py::module_& m) {
  g_validation = NewClass(m, "NkiValidationError", PyExc_AssertionError,
                          "A kernel broke a hardware rule (operand, shape, dtype, capacity).");
  g_simulator = NewClass(m, "SimulatorError", PyExc_RuntimeError,
                         "nkisim failed for a reason other than a kernel's hardware rule.");
  g_comm = NewClass(m, "CommError", g_simulator,
                    "A core-to-core or rank-to-rank exchange failed or timed out.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_Format(TypeFor(e.code()), "%s: %s", ErrorCodeName(e.code()), e.what());
    }
  });
}

}  // namespace nkisim::python
