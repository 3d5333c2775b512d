#include "launcher/commands/dma_curve.h"

#include <cstdio>
#include <memory>

#include <CLI/CLI.hpp>

#include "kernels/examples/dma_curve.h"
#include "launcher/commands/common_options.h"
#include "launcher/commands/kernel_io.h"
#include "runtime/cost_model.h"

namespace nkisim::launcher {
namespace {

// Published figures (docs/dma.md): nki-dma-overview.rst's examples (trn2 profiles) and the
// worked example of dma_efficiency.md (one trn2 core).
constexpr double kExample1ShareNs = 1416, kExample1TotalNs = 2400, kExample2TotalNs = 1200;
constexpr double kWorked1KiBGbps = 259, kWorked4KiBGbps = 354;

double ErrorPercent(double model, double published) {
  return 100.0 * (model - published) / published;
}

void PrintSweep(const HardwareProfile& p) {
  std::printf("[128, n] bf16 HBM -> SBUF, relative throughput (%% of the 32 KiB point; published: "
              "nki-dma-intro-1.jpg, read +-2 points)\n");
  std::printf("%10s %12s %12s %10s %12s %12s\n", "bytes/part", "stream GB/s", "stream %",
              "published", "stream-pub", "isolated %");
  for (const kernels::DmaSweepPoint& s : kernels::DmaSweep(p)) {
    std::printf("%10lld %12.1f %12.1f %10.1f %+12.1f %12.1f\n",
                static_cast<long long>(s.bytes_per_partition), s.stream_gbps, s.stream_percent,
                s.published_percent, s.stream_percent - s.published_percent, s.isolated_percent);
  }
  const double peak = std::min(p.dma_engines() * p.dma_engine_gbps(), p.hbm_gbps_per_core());
  const kernels::DmaSweepPoint top = kernels::DmaSweep(p).back();
  std::printf("peak of [128, 32 KiB]: stream %.1f GB/s, alone %.1f GB/s; min(%u engines x %.1f, "
              "HBM %.1f) = %.1f GB/s: %+.1f%% (stream)\n\n",
              top.stream_gbps, top.isolated_gbps, p.dma_engines(), p.dma_engine_gbps(),
              p.hbm_gbps_per_core(), peak, ErrorPercent(top.stream_gbps, peak));
}

void PrintExamples(const HardwareProfile& p) {
  const kernels::DmaExampleResult e1 = kernels::DmaIsolatedTransfer(p, 4, 4096);
  const kernels::DmaExampleResult e2 = kernels::DmaIsolatedTransfer(p, 128, 128);
  std::printf("example 1, A[4, 4096] bf16 -> SBUF: %d engine(s) with data, %d semaphores; share "
              "%.0f ns (published 1416: %+.1f%%), trigger to completion %.0f ns (about 2400: "
              "%+.1f%%)\n",
              e1.engines_with_data, e1.engines_with_semaphore, e1.largest_share_ns,
              ErrorPercent(e1.largest_share_ns, kExample1ShareNs), e1.trigger_to_completion_ns,
              ErrorPercent(e1.trigger_to_completion_ns, kExample1TotalNs));
  std::printf("example 2, A[128, 128] bf16 -> SBUF: %d engine(s) with data; share %.0f ns (about "
              "97), trigger to completion %.0f ns (about 1200: %+.1f%%)\n\n",
              e2.engines_with_data, e2.largest_share_ns, e2.trigger_to_completion_ns,
              ErrorPercent(e2.trigger_to_completion_ns, kExample2TotalNs));
}

void PrintWorkedExample(const HardwareProfile& p) {
  std::printf("mixed-DGE copy kernel (16 loads + 16 stores on 4 queues, 4 transposes, 4 SBUF copies; "
              "bytes / time any engine was active):\n");
  for (const auto& [cols, published] : {std::pair<int64_t, double>{512, kWorked1KiBGbps},
                                        std::pair<int64_t, double>{2048, kWorked4KiBGbps}}) {
    const kernels::DmaMixedKernelResult r = kernels::DmaMixedDgeKernel(p, cols);
    std::printf("  128 x %lld tiles (%lld B a partition): %.2f MB in %.1f us of engine activity = "
                "%.0f GB/s (published %.0f: %+.1f%%); kernel %.1f us\n",
                static_cast<long long>(cols), static_cast<long long>(cols * 2), r.bytes / 1e6,
                r.engine_active_ns / 1e3, r.achieved_gbps, published,
                ErrorPercent(r.achieved_gbps, published), r.kernel_ns / 1e3);
  }
}

}  // namespace

void AddDmaCurveCommand(CLI::App* cmd, int* exit_code) {
  auto common = std::make_shared<CommonOptions>();
  AddCommonOptions(cmd, common.get(), kProfileFlag, {});
  cmd->callback([common, exit_code] {
    const HardwareProfile p = LoadProfile(*common);
    std::printf("nkisim dma-curve, profile %s: %u DMA engines x %.1f GB/s (raw %.1f), %u B "
                "descriptors (%.1f ns each), issue %.0f ns a transfer a queue, latency %.0f ns\n\n",
                p.name().c_str(), p.dma_engines(), p.dma_engine_gbps(), p.dma_engine_raw_gbps(),
                p.dma_descriptor_max_bytes(), DmaDescriptorNs(p), p.dma_issue_ns(),
                p.dma_latency_ns());
    PrintSweep(p);
    PrintExamples(p);
    PrintWorkedExample(p);
    *exit_code = 0;
  });
}

}  // namespace nkisim::launcher
