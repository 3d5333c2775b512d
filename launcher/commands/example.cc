#include "launcher/commands/example.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>

#include "kernels/examples/row_softmax.h"
#include "kernels/reference/compare.h"
#include "launcher/commands/kernel_io.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"

namespace nkisim::launcher {

void AddSoftmaxExampleCommand(CLI::App* softmax, int* exit_code) {
  auto options = std::make_shared<SoftmaxExampleOptions>();
  softmax->add_option("--rows", options->rows, "rows of x (split across the LNC programs)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  softmax->add_option("--cols", options->cols, "columns of x: the softmax axis")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  softmax->add_option("--dtype", options->dtype, "dtype of x and y")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  AddCommonOptions(softmax, &options->common, kLncFlag | kSeedFlag | kProfileFlag | kTraceFlag,
                   {.profile_path = "", .seed = 1, .lnc = 1,
                    .trace_path = "nkisim-softmax.trace.json"});
  softmax->callback([options, exit_code] { *exit_code = RunSoftmaxExample(*options); });
}

int RunSoftmaxExample(const SoftmaxExampleOptions& o) {
  const auto host_start = std::chrono::steady_clock::now();
  const HardwareProfile profile = LoadProfile(o.common);
  const DType dtype = ParseDType(o.dtype);
  const TensorView x = LoadOrRandomInput("", "x", {o.rows, o.cols}, dtype, o.common.seed, -4.0f, 4.0f);
  const TensorView y = TensorView::Create({o.rows, o.cols}, dtype, "y");
  kernels::ValidateRowSoftmax(x, y);

  std::printf(
      "nkisim example softmax: y[%lld, %lld] = softmax(x) over each row, %s, LNC = %d, "
      "profile %s\n",
      static_cast<long long>(o.rows), static_cast<long long>(o.cols), DTypeName(dtype), o.common.lnc,
      profile.name().c_str());
  LogicalCore lnc(o.common.lnc, profile);
  lnc.Launch([&](const KernelContext& ctx) { kernels::RowSoftmaxKernel(ctx, x, y); });

  ReportLogicalCore(lnc, 0.0, o.common.trace_path);
  ReportRoofline(lnc, static_cast<double>(x.size_bytes() + y.size_bytes()), 0.0);

  // The result is rounded once into its dtype: half an ulp, 2^-8 relative for bf16, 2^-11 for
  // fp16; fp32 keeps ~1e-7 from fp32 exp and sums.
  const reference::Tolerance tol = dtype == DType::kFloat32 ? reference::Tolerance{1e-7, 1e-5}
                                                            : reference::Tolerance{1e-7, 8e-3};
  const reference::Comparison check =
      reference::Compare(y.ToFloats(), kernels::RowSoftmaxGolden(x), tol);
  std::printf("check vs fp64 golden (atol %.0e, rtol %.0e): %s\n", tol.atol, tol.rtol,
              check.ToString().c_str());
  PrintHostTime(host_start);
  return check.pass() ? 0 : 1;
}

}  // namespace nkisim::launcher
