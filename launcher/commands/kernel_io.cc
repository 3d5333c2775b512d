#include "launcher/commands/kernel_io.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/sim_mode.h"
#include "runtime/npy.h"
#include "runtime/output_file.h"
#include "runtime/rng.h"
#include "runtime/trace.h"

namespace nkisim::launcher {

TensorView LoadOrRandomInput(const std::string& npy_path, const std::string& name,
                             const Shape& shape, DType dtype, uint64_t seed, float lo, float hi) {
  if (npy_path.empty()) {
    TensorView t = TensorView::Create(shape, dtype, name);
    FillUniform(t, CounterRng(seed, TensorIdFromName(name)), lo, hi);
    return t;
  }
  TensorView t = ReadNpyAs(npy_path, dtype);
  if (t.shape() != shape) {
    Raise(ErrorCode::kBadConfig, StrCat("input '", name, "' from ", npy_path, " has shape ",
                                        ShapeString(t.shape()), "; expected ", ShapeString(shape)));
  }
  return t;
}

TensorView NpyExchangeView(const TensorView& tensor) {
  if (!IsX4(tensor.dtype())) return tensor;
  return tensor.bitcast(SizeOf(tensor.dtype()) == 4 ? DType::kUInt32 : DType::kUInt16);
}

TensorView ReadX4Npy(const std::string& npy_path, const std::string& name, const Shape& shape,
                     DType x4) {
  const DType label = SizeOf(x4) == 4 ? DType::kUInt32 : DType::kUInt16;
  const TensorView t = ReadNpy(npy_path);
  if (t.dtype() != label || t.shape() != shape) {
    Raise(ErrorCode::kBadConfig,
          StrCat("input '", name, "' from ", npy_path, " is ", ShapeString(t.shape()), " ",
                 DTypeName(t.dtype()), "; expected ", ShapeString(shape), " ", DTypeName(label),
                 " holding ", DTypeName(x4), " elements (as `nkisim pack-weights` writes them)"));
  }
  return t.bitcast(x4);
}

void PrepareKernelOutputDir(const std::string& out_dir, const char* what) {
  if (Functional()) PrepareOutputDir(out_dir, what);
}

void PrepareKernelOutputs(const std::string& command, const std::string& out_dir,
                          const std::string& trace_path) {
  // The trace first: a refused command creates no directory.
  if (!trace_path.empty()) CheckWritable(trace_path, StrCat(command, ": --trace").c_str());
  PrepareKernelOutputDir(out_dir, StrCat(command, ": --out-dir").c_str());
}

std::string WriteOutput(const std::string& out_dir, const std::string& name,
                        const TensorView& tensor) {
  if (!Functional()) return "not written (timing-only: no values computed)";
  PrepareOutputDir(out_dir, "--out-dir");
  const std::string path = (std::filesystem::path(out_dir) / (name + ".npy")).string();
  WriteNpy(path, NpyExchangeView(tensor));
  return path;
}

void ReportLogicalCore(const LogicalCore& lnc, double flops, const std::string& trace_path) {
  ChromeTrace trace;
  for (int i = 0; i < lnc.lnc(); ++i) {
    std::printf("%s", FormatSummary(lnc.core(i).Summary()).c_str());
    trace.AddProcess(i, "core " + std::to_string(i), lnc.core(i).timeline());
  }
  const double sim_ns = lnc.now();
  std::printf("logical core: simulated time %.1f ns, %.2f TFLOP/s (peak %.2f TFLOP/s x %d cores)\n",
              sim_ns, sim_ns > 0 ? flops / sim_ns / 1000.0 : 0.0, PeakBf16Tflops(lnc.profile()),
              lnc.lnc());
  if (!trace_path.empty()) {
    trace.WriteFile(trace_path);
    std::printf("trace: %s (open in the Perfetto UI)\n", trace_path.c_str());
  }
}

void PrintHostTime(std::chrono::steady_clock::time_point start) {
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("host time: %.1f ms\n", ms);
}

namespace {

struct BusiestEngine {
  Engine engine = Engine::kPE;
  double work_ns = 0;
  int core = 0;
};

// The compute engine (PE, Vector, Scalar, GpSimd) with the most instruction time on any core.
BusiestEngine FindBusiestEngine(const LogicalCore& lnc) {
  BusiestEngine b;
  for (int c = 0; c < lnc.lnc(); ++c) {
    const CoreSummary summary = lnc.core(c).Summary();
    for (Engine e : {Engine::kPE, Engine::kVector, Engine::kScalar, Engine::kGpSimd}) {
      if (summary.busy_ns[EngineIndex(e)] > b.work_ns) b = {e, summary.busy_ns[EngineIndex(e)], c};
    }
  }
  return b;
}

}  // namespace

double ReportRoofline(const LogicalCore& lnc, double hbm_bytes, double flops, bool mx) {
  const HardwareProfile& p = lnc.profile();
  const double peak = mx ? PeakMxTflops(p) : PeakBf16Tflops(p);
  const double memory_ns = hbm_bytes / (p.hbm_gbps_per_core() * lnc.lnc());
  const double compute_ns = flops / (peak * 1000.0 * lnc.lnc());
  const double bound = std::max(memory_ns, compute_ns);
  const double sim_ns = lnc.now();
  std::printf("roofline: HBM %.1f ns (%.3f MB at %.1f GB/s x %d cores), PE %.1f ns (%.3f GFLOP at "
              "%.2f TFLOP/s%s x %d); %s-bound; simulated %.1f ns = %.2fx the bound\n",
              memory_ns, hbm_bytes / 1e6, p.hbm_gbps_per_core(), lnc.lnc(), compute_ns, flops / 1e9,
              peak, mx ? " MX" : "", lnc.lnc(), memory_ns >= compute_ns ? "HBM" : "PE", sim_ns,
              bound > 0 ? sim_ns / bound : 0.0);
  double target_ns = bound;
  const char* target = memory_ns >= compute_ns ? "the HBM bound" : "the PE bound";
  if (memory_ns >= compute_ns && memory_ns > 0) {
    // What no kernel beats under the profile's DMA costs (runtime/cost_model.h), the traffic
    // shared evenly by the cores.
    const double floor_ns = StreamFloorNs(p, hbm_bytes / lnc.lnc());
    std::printf("stream floor: %.1f ns = HBM %.1f ns + about 2 x %.0f ns (the first load's and "
                "the store's fixed DMA latency, which no stream hides) = %.2fx the HBM bound; "
                "simulated = %.2fx the floor\n",
                floor_ns, memory_ns, p.dma_latency_ns(), floor_ns / memory_ns, sim_ns / floor_ns);
    if (floor_ns > target_ns) {
      target_ns = floor_ns;
      target = "the stream floor";
    }
  }
  // No schedule finishes before its busiest compute engine has done all its instructions.
  const BusiestEngine busiest = FindBusiestEngine(lnc);
  if (busiest.work_ns > 0 && (compute_ns > memory_ns || busiest.work_ns > target_ns)) {
    std::printf("engine floor: %s %.1f ns of instructions on core %d (the busiest compute "
                "engine) = %.2fx the %s bound; simulated = %.2fx the floor\n",
                EngineName(busiest.engine).c_str(), busiest.work_ns, busiest.core,
                busiest.work_ns / bound, memory_ns >= compute_ns ? "HBM" : "PE",
                sim_ns / busiest.work_ns);
  }
  if (busiest.work_ns > target_ns) {
    target_ns = busiest.work_ns;
    target = "the engine floor";
  }
  // The target a kernel is held to: the bound, or the higher of the floors where one is above it.
  if (target_ns > 0) {
    std::printf("target: %s, %.1f ns; simulated = %.2fx the target\n", target, target_ns,
                sim_ns / target_ns);
  }
  return bound;
}

void CheckKernelFlags(const char* command, std::initializer_list<SizeFlag> sizes,
                      double host_bytes) {
  constexpr int64_t kMaxSize = int64_t{1} << 24;
  for (const SizeFlag& f : sizes) {
    if (f.value < 1 || f.value > kMaxSize) {
      Raise(ErrorCode::kInvalidArgument, StrCat(command, ": ", f.flag, " ", f.value,
                                                " must be in [1, ", kMaxSize, "]"));
    }
  }
  constexpr double kMaxHostBytes = 16.0 * (1 << 30);
  if (!(host_bytes <= kMaxHostBytes)) {
    Raise(ErrorCode::kOutOfResources,
          StrCat(command, ": the case needs about ", host_bytes / (1 << 30),
                 " GiB of host memory (inputs, outputs, golden); the limit is 16 GiB"));
  }
}

}  // namespace nkisim::launcher
