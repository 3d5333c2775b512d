// nkisim::Error at the Python boundary. Codes map onto three Python exception classes, created
// in the extension and re-exported by the packages:
//   invalid argument, out of resources, not supported -> NkiValidationError (a subclass of
//     AssertionError, the type the NKI simulator guide shows for a broken hardware rule; exported
//     as nki.isa.NkiValidationError, the 0.6 reference's name for it)
//   communication error, timeout                     -> CommError (subclass of SimulatorError)
//   bad config, internal                             -> SimulatorError (a RuntimeError)
// The message is "<code>: <nkisim's message>", the CLI's wording.
#pragma once

#include <pybind11/pybind11.h>

namespace nkisim::python {

// The CommError class object (the launch code tells a peer's consequence from a root error).
PyObject* CommErrorType();

}  // namespace nkisim::python
