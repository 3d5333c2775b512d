// The `_nkisim` extension: the C++ runtime, nl language and collectives as the Python packages
// `nki` and `nkisim` (python/nki, python/nkisim) use them. Not an API for users: they import nki.
#include "python/src/bindings.h"

PYBIND11_MODULE(_nkisim, m) {
  m.doc() = "nkisim runtime bindings (use the nki and nkisim packages)";
  using namespace nkisim::python;
  BindErrors(m);
  BindMemory(m);
  BindIsa(m);
  BindLanguage(m);
  BindSession(m);
  BindCollectives(m);
  BindExamples(m);
}
