#include "launcher/commands/example_matmul.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "kernels/examples/blocked_matmul.h"
#include "kernels/examples/tiled_matmul.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/matmul_ref.h"
#include "launcher/commands/kernel_io.h"
#include "runtime/cost_model.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/trace.h"

namespace nkisim::launcher {
namespace {

// What one run of one kernel cost core 0 (the LNC's cores run mirror-image halves).
struct MatmulRun {
  const char* name;
  double sim_ns = 0;
  int64_t transfers = 0, descriptors = 0, dma_bytes = 0;
  double busiest_engine_ns = 0;
  reference::Comparison check;
};

// Descriptors of one kept engine share: its label reads "queue Q, D descriptors".
int64_t ShareDescriptors(const InstructionRecord& share) {
  const char* comma = std::strchr(share.shapes.data(), ',');
  return comma ? std::strtoll(comma + 1, nullptr, 10) : 0;
}

MatmulRun RunOne(const char* name, kernels::MatmulLayout layout, const HardwareProfile& profile,
                 int lnc_size, const TensorView& a, const TensorView& b, const TensorView& c,
                 const std::vector<float>& golden, const std::string& trace_path) {
  LogicalCore lnc(lnc_size, profile);
  lnc.Launch([&](const KernelContext& ctx) {
    if (layout == kernels::MatmulLayout::kTiled) {
      kernels::TiledMatmulKernel(ctx, a, b, c);
    } else {
      kernels::BlockedMatmulKernel(ctx, a, b, c);
    }
  });
  MatmulRun r;
  r.name = name;
  const NeuronCore& core = lnc.core(0);
  const CoreSummary s = core.Summary();
  r.sim_ns = lnc.now();
  r.dma_bytes = s.dma_bytes;
  for (const InstructionRecord& rec : core.timeline().records()) r.transfers += IsDmaQueue(rec.engine);
  for (const InstructionRecord& share : core.timeline().shares()) {
    r.descriptors += ShareDescriptors(share);
  }
  for (int e = 0; e < static_cast<int>(profile.dma_engines()); ++e) {
    r.busiest_engine_ns = std::max(r.busiest_engine_ns, s.busy_ns[EngineIndex(DmaEngine(e))]);
  }
  // fp32 accumulation over K products of |x| <= 1 inputs: 1e-3 relative is ample.
  r.check = reference::Compare(c.ToFloats(), golden, {1e-4, 1e-3});
  if (!trace_path.empty()) {
    ChromeTrace trace;
    for (int i = 0; i < lnc.lnc(); ++i) {
      trace.AddProcess(i, "core " + std::to_string(i), lnc.core(i).timeline());
    }
    trace.WriteFile(trace_path);
  }
  return r;
}

std::string TracePath(const std::string& base, const char* which) {
  if (base.empty()) return "";
  const size_t dot = base.rfind(".trace.json");
  const std::string stem = dot == std::string::npos ? base : base.substr(0, dot);
  return stem + "." + which + ".trace.json";
}

}  // namespace

void AddMatmulExampleCommand(CLI::App* cmd, int* exit_code) {
  auto options = std::make_shared<MatmulExampleOptions>();
  cmd->add_option("--m", options->m, "rows of A and C (multiple of 128)")->capture_default_str();
  cmd->add_option("--k", options->k, "contraction size (multiple of 128)")->capture_default_str();
  cmd->add_option("--n", options->n, "columns of B and C (multiple of --lnc)")->capture_default_str();
  cmd->add_option("--dtype", options->dtype, "input dtype: bf16, fp16, fp32")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  AddCommonOptions(cmd, &options->common, kLncFlag | kSeedFlag | kProfileFlag | kTraceFlag,
                   {.profile_path = "", .seed = 1, .lnc = 1,
                    .trace_path = "nkisim-matmul.trace.json"});
  cmd->callback([options, exit_code] { *exit_code = RunMatmulExample(*options); });
}

int RunMatmulExample(const MatmulExampleOptions& o) {
  const auto host_start = std::chrono::steady_clock::now();
  const HardwareProfile profile = LoadProfile(o.common);
  const DType dtype = ParseDType(o.dtype);
  const TensorView a = LoadOrRandomInput("", "A", {o.m, o.k}, dtype, o.common.seed, -1.0f, 1.0f);
  const TensorView b = LoadOrRandomInput("", "B", {o.k, o.n}, dtype, o.common.seed, -1.0f, 1.0f);
  const TensorView c = TensorView::Create({o.m, o.n}, DType::kFloat32, "C");
  kernels::ValidateTiledMatmul(a, b, c, o.common.lnc);
  std::printf("nkisim example matmul: C[%lld, %lld] = A[%lld, %lld] @ B[%lld, %lld], %s in, fp32 "
              "out, LNC = %d, profile %s\n",
              static_cast<long long>(o.m), static_cast<long long>(o.n),
              static_cast<long long>(o.m), static_cast<long long>(o.k),
              static_cast<long long>(o.k), static_cast<long long>(o.n), DTypeName(dtype),
              o.common.lnc, profile.name().c_str());
  const std::vector<float> golden = reference::Matmul(a, b);
  const MatmulRun runs[] = {
      RunOne("tiled (naive): [128, 128] A and [128, 512] B loads, [128, 512] stores",
             kernels::MatmulLayout::kTiled, profile, o.common.lnc, a, b, c, golden,
             TracePath(o.common.trace_path, "tiled")),
      RunOne("blocked (careful): [128, K] A and [128, 2048] B loads, [128, 2048] stores",
             kernels::MatmulLayout::kBlocked, profile, o.common.lnc, a, b, c, golden,
             TracePath(o.common.trace_path, "blocked")),
  };
  std::printf("\n%-76s %12s %9s %11s %11s %14s\n", "kernel (core 0)", "simulated ns", "DMAs",
              "descriptors", "B/descr.", "busiest engine");
  for (const MatmulRun& r : runs) {
    std::printf("%-76s %12.1f %9lld %11lld %11.0f %11.1f ns\n", r.name, r.sim_ns,
                static_cast<long long>(r.transfers), static_cast<long long>(r.descriptors),
                r.descriptors > 0 ? static_cast<double>(r.dma_bytes) / r.descriptors : 0.0,
                r.busiest_engine_ns);
  }
  const int64_t in_bytes = static_cast<int64_t>(SizeOf(dtype)), c_bytes = 4;
  const double implied =
      kernels::MatmulDmaEngineNs(profile, kernels::MatmulLayout::kTiled, o.m, o.k, o.n,
                                 o.common.lnc, in_bytes, c_bytes) /
      kernels::MatmulDmaEngineNs(profile, kernels::MatmulLayout::kBlocked, o.m, o.k, o.n,
                                 o.common.lnc, in_bytes, c_bytes);
  const double ratio = runs[0].sim_ns / runs[1].sim_ns;
  std::printf("\nnaive / careful: %.2fx simulated; the DMA curve implies %.2fx (the busiest engine's "
              "time of each kernel's transfers, from their shapes alone: descriptors x %.1f ns + "
              "bytes at the raw rate); difference %+.1f%%\n",
              ratio, implied, DmaDescriptorNs(profile), 100.0 * (ratio / implied - 1.0));
  bool pass = true;
  for (const MatmulRun& r : runs) {
    std::printf("check %s vs fp64 golden (atol 1e-4, rtol 1e-3): %s\n",
                r.name[0] == 't' ? "tiled" : "blocked", r.check.ToString().c_str());
    pass = pass && r.check.pass();
  }
  if (!o.common.trace_path.empty()) {
    std::printf("traces: %s, %s (open in the Perfetto UI: rows DMA0 ... DMA15 are the engines)\n",
                TracePath(o.common.trace_path, "tiled").c_str(),
                TracePath(o.common.trace_path, "blocked").c_str());
  }
  PrintHostTime(host_start);
  return pass ? 0 : 1;
}

}  // namespace nkisim::launcher
