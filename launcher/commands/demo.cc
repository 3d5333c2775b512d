#include "launcher/commands/demo.h"

#include <chrono>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "kernels/examples/tiled_matmul.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/matmul_ref.h"
#include "launcher/commands/kernel_io.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"

namespace nkisim::launcher {

void AddDemoCommand(CLI::App* demo, int* exit_code) {
  auto options = std::make_shared<DemoOptions>();
  demo->add_option("--m", options->m, "rows of A and C (multiple of 128)")->capture_default_str();
  demo->add_option("--k", options->k, "contraction size (multiple of 128)")->capture_default_str();
  demo->add_option("--n", options->n, "columns of B and C (multiple of --lnc)")->capture_default_str();
  demo->add_option("--dtype", options->dtype, "input dtype: bf16, fp16, fp32, fp8_e4m3, ...")
      ->capture_default_str();
  AddCommonOptions(demo, &options->common, kLncFlag | kSeedFlag | kProfileFlag | kTraceFlag,
                   {.profile_path = "", .seed = 1, .lnc = 2,
                    .trace_path = "nkisim-demo.trace.json"});
  demo->callback([options, exit_code] { *exit_code = RunDemo(*options); });
}

int RunDemo(const DemoOptions& o) {
  const auto host_start = std::chrono::steady_clock::now();
  const HardwareProfile profile = LoadProfile(o.common);
  const DType dtype = ParseDType(o.dtype);

  TensorView a = LoadOrRandomInput("", "A", {o.m, o.k}, dtype, o.common.seed, -1.0f, 1.0f);
  TensorView b = LoadOrRandomInput("", "B", {o.k, o.n}, dtype, o.common.seed, -1.0f, 1.0f);
  TensorView c = TensorView::Create({o.m, o.n}, DType::kFloat32, "C");
  kernels::ValidateTiledMatmul(a, b, c, o.common.lnc);

  std::printf("nkisim demo: C[%lld, %lld] = A[%lld, %lld] @ B[%lld, %lld], %s in, fp32 out, "
              "LNC = %d, profile %s\n",
              static_cast<long long>(o.m), static_cast<long long>(o.n), static_cast<long long>(o.m),
              static_cast<long long>(o.k), static_cast<long long>(o.k), static_cast<long long>(o.n),
              DTypeName(dtype), o.common.lnc, profile.name().c_str());
  LogicalCore lnc(o.common.lnc, profile);
  lnc.Launch([&](const KernelContext& ctx) { kernels::TiledMatmulKernel(ctx, a, b, c); });

  ReportLogicalCore(lnc, 2.0 * o.m * o.k * o.n, o.common.trace_path);

  // fp32 accumulation over K = 1024 products of |x| <= 1 inputs: 1e-3 relative is ample.
  const reference::Comparison check =
      reference::Compare(c.ToFloats(), reference::Matmul(a, b), {1e-4, 1e-3});
  std::printf("check vs fp64 golden (atol 1e-4, rtol 1e-3): %s\n", check.ToString().c_str());
  PrintHostTime(host_start);
  return check.pass() ? 0 : 1;
}

}  // namespace nkisim::launcher
