// The C++ example kernels (kernels/examples: the tiled matmul in nisa, the row softmax in nl),
// run from Python on the same kind of KernelRun as a
// Python kernel: the equal-cost test (tests/python/test_equal_cost.py) and the benchmark
// (bench/python_frontend_bench.py) compare the two front ends on one kernel in one process.
#include "kernels/examples/row_softmax.h"
#include "kernels/examples/tiled_matmul.h"
#include "python/src/bindings.h"
#include "python/src/session.h"

namespace nkisim::python {

void BindExamples(py::module_& m) {
  py::module_ ex = m.def_submodule("examples", "the C++ example kernels");
  // c = a @ b by kernels::TiledMatmulKernel on run's logical core.
  ex.def("tiled_matmul", [](KernelRun& run, const TensorView& a, const TensorView& b,
                            const TensorView& c) {
    kernels::ValidateTiledMatmul(a, b, c, run.lnc().lnc());
    run.RunNative([&](const KernelContext& ctx) { kernels::TiledMatmulKernel(ctx, a, b, c); });
  });
  // y = softmax(x) over each row by kernels::RowSoftmaxKernel (written in C++ nl).
  ex.def("row_softmax", [](KernelRun& run, const TensorView& x, const TensorView& y) {
    kernels::ValidateRowSoftmax(x, y);
    run.RunNative([&](const KernelContext& ctx) { kernels::RowSoftmaxKernel(ctx, x, y); });
  });
}

}  // namespace nkisim::python
