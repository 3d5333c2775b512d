// The pieces of the `_nkisim` extension module, each adding its classes and functions to the
// module (or a submodule). module.cc calls them in order. Every binding that can throw
// nkisim::Error lets it propagate: errors.h translates it into a Python exception at the
// boundary, so no C++ exception ever reaches the interpreter.
#pragma once

#include <pybind11/pybind11.h>

#include <utility>

namespace nkisim::python {

namespace py = pybind11;

// Binds an instruction or op without the GIL while it runs: under LNC 2 the other program's
// Python runs meanwhile (the C++ instructions touch no Python object; arguments are converted
// before and results after).
template <typename F, typename... Extra>
void DefNoGil(py::module_& m, const char* name, F&& f, const Extra&... extra) {
  m.def(name, std::forward<F>(f), py::call_guard<py::gil_scoped_release>(), extra...);
}

void BindErrors(py::module_& m);       // errors.cc: exception classes + translator
void BindMemory(py::module_& m);       // bind_memory.cc: DType, Engine, Tile, TensorView
void BindIsa(py::module_& m);          // bind_isa.cc: the nisa instructions (submodule isa)
void BindLanguage(py::module_& m);     // bind_language.cc: the nl ops (submodule nl)
void BindSession(py::module_& m);      // bind_session.cc: kernel launch, run report, trace
void BindCollectives(py::module_& m);  // bind_collectives.cc: MPI ranks, replica groups
void BindExamples(py::module_& m);     // bind_examples.cc: the C++ example kernels

}  // namespace nkisim::python
