#include "launcher/kernel_io.h"

#include <cstdio>
#include <filesystem>

#include "runtime/error.h"
#include "runtime/npy.h"
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

std::string WriteOutput(const std::string& out_dir, const std::string& name,
                        const TensorView& tensor) {
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    Raise(ErrorCode::kBadConfig, StrCat("output directory '", out_dir, "': ", ec.message()));
  }
  const std::string path = (std::filesystem::path(out_dir) / (name + ".npy")).string();
  WriteNpy(path, tensor);
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

}  // namespace nkisim::launcher
