#include "runtime/host_blas.h"

#include <cblas.h>

#include "runtime/error.h"

namespace nkisim {

std::string HostBlasDescription() {
  const int threads = openblas_get_num_threads();
  return StrCat("OpenBLAS ", openblas_get_corename(), ", ", threads, threads == 1 ? " thread" : " threads");
}

}  // namespace nkisim
