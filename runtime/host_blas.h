// The host BLAS the simulator computes with (OpenBLAS): which kernels it runs and on how many
// threads, as `nkisim --version` reports them.
#pragma once

#include <string>

namespace nkisim {

// "OpenBLAS <core>, <n> thread(s)", e.g. "OpenBLAS SkylakeX, 1 thread". <core> is the kernel set the
// library chose for this CPU (OPENBLAS_CORETYPE, or its own detection); <n> its thread count,
// which launcher/main.cc sets to 1 (every BLAS call here is single-threaded).
std::string HostBlasDescription();

}  // namespace nkisim
