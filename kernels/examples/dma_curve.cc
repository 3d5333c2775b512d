#include "kernels/examples/dma_curve.h"

#include <algorithm>
#include <array>
#include <utility>

#include "runtime/cost_model.h"
#include "runtime/neuron_core.h"
#include "runtime/nisa/dma.h"
#include "runtime/nisa/dma_descriptors.h"
#include "runtime/sim_mode.h"

namespace nkisim::kernels {
namespace {

constexpr int64_t kPartitions = 128;
constexpr int kStreamTransfers = 24;  // the steady state is measured over the second half

// Relative throughput read off nki-dma-intro-1.jpg, each point as a percentage of the 32 KiB one.
constexpr std::array<std::pair<int64_t, double>, 11> kPublished = {{{32, 1.4},
                                                                    {64, 2.6},
                                                                    {128, 5.0},
                                                                    {256, 10.3},
                                                                    {512, 20.9},
                                                                    {1024, 42.4},
                                                                    {2048, 81.3},
                                                                    {4096, 96.6},
                                                                    {8192, 98.3},
                                                                    {16384, 99.0},
                                                                    {32768, 100.0}}};

// The completion times of the transfers recorded on one queue's row, in order.
std::vector<double> QueueCompletions(const NeuronCore& core, int queue) {
  std::vector<double> done;
  for (const InstructionRecord& r : core.timeline().records()) {
    if (r.engine == DmaQueue(queue)) done.push_back(r.end_ns);
  }
  return done;
}

std::pair<double, double> SweepPoint(const HardwareProfile& p, int64_t bytes_per_partition) {
  const int64_t cols = bytes_per_partition / 2;
  const double bytes = static_cast<double>(kPartitions * bytes_per_partition);
  double stream_gbps = 0, isolated_gbps = 0;
  {
    NeuronCore core(0, p);
    ScopedCurrentCore scope(core);
    TensorView src = TensorView::Create({kPartitions, cols}, DType::kBFloat16, "src");
    Tile dst = core.AllocateSbuf("dst", {kPartitions, cols}, DType::kBFloat16);
    nisa::DmaOptions queue0;
    queue0.queue = 0;
    for (int i = 0; i < kStreamTransfers; ++i) nisa::dma_copy(dst, src, queue0);
    const std::vector<double> done = QueueCompletions(core, 0);
    const int half = kStreamTransfers / 2;
    stream_gbps = bytes * half / (done.back() - done[static_cast<size_t>(half - 1)]);
  }
  {
    const DmaExampleResult alone = DmaIsolatedTransfer(p, kPartitions, cols);
    isolated_gbps = bytes / alone.trigger_to_completion_ns;
  }
  return {stream_gbps, isolated_gbps};
}

// Wall time covered by the DMA engines' busy intervals.
double EngineActiveNs(const NeuronCore& core) {
  std::vector<std::pair<double, double>> busy;
  for (const InstructionRecord& r : core.timeline().shares()) {
    if (r.end_ns > r.start_ns) busy.emplace_back(r.start_ns, r.end_ns);
  }
  std::sort(busy.begin(), busy.end());
  double total = 0, end = -1;
  for (const auto& [s, e] : busy) {
    if (s >= end) {
      total += e - s;
      end = e;
    } else if (e > end) {
      total += e - end;
      end = e;
    }
  }
  return total;
}

}  // namespace

std::vector<DmaSweepPoint> DmaSweep(const HardwareProfile& p) {
  ScopedSimMode timing(SimMode::kTimingOnly);
  std::vector<DmaSweepPoint> points;
  for (const auto& [bytes, published] : kPublished) {
    const auto [stream, isolated] = SweepPoint(p, bytes);
    points.push_back({bytes, stream, isolated, 0, 0, published});
  }
  const DmaSweepPoint& top = points.back();
  for (DmaSweepPoint& point : points) {
    point.stream_percent = 100.0 * point.stream_gbps / top.stream_gbps;
    point.isolated_percent = 100.0 * point.isolated_gbps / top.isolated_gbps;
  }
  return points;
}

DmaExampleResult DmaIsolatedTransfer(const HardwareProfile& p, int64_t partitions,
                                     int64_t columns) {
  ScopedSimMode timing(SimMode::kTimingOnly);
  NeuronCore core(0, p);
  ScopedCurrentCore scope(core);
  TensorView src = TensorView::Create({partitions, columns}, DType::kBFloat16, "A");
  Tile dst = core.AllocateSbuf("A_sbuf", {partitions, columns}, DType::kBFloat16);
  nisa::dma_copy(dst, src);
  DmaExampleResult result;
  for (const InstructionRecord& r : core.timeline().records()) {
    if (IsDmaQueue(r.engine)) result.trigger_to_completion_ns = r.end_ns - r.start_ns;
  }
  for (const InstructionRecord& r : core.timeline().shares()) {
    if (r.bytes > 0) {
      ++result.engines_with_data;
      result.largest_share_ns =
          std::max(result.largest_share_ns, r.end_ns - r.start_ns - DmaSemaphoreNs(p));
    }
    ++result.engines_with_semaphore;
  }
  return result;
}

DmaMixedKernelResult DmaMixedDgeKernel(const HardwareProfile& p, int64_t tile_cols) {
  ScopedSimMode timing(SimMode::kTimingOnly);
  constexpr int kTiles = 16, kModes = 4, kBuffers = 4, kTransposes = 4;
  NeuronCore core(0, p);
  ScopedCurrentCore scope(core);
  const int64_t width = kTiles * tile_cols;
  TensorView in = TensorView::Create({kPartitions, width}, DType::kBFloat16, "input0");
  TensorView out = TensorView::Create({kPartitions, width}, DType::kBFloat16, "output0");
  std::vector<Tile> buffers;
  for (int b = 0; b < kBuffers; ++b) {
    buffers.push_back(core.AllocateSbuf("tile", {kPartitions, tile_cols}, DType::kBFloat16));
  }
  double bytes = 0;
  for (int i = 0; i < kTiles; ++i) {
    nisa::DmaOptions mode;
    mode.queue = i % kModes;  // one queue per DGE mode (none, swdge, hwdge, unknown)
    const Tile& t = buffers[static_cast<size_t>(i % kBuffers)];
    nisa::dma_copy(t, in.slice(1, i * tile_cols, (i + 1) * tile_cols), mode);
    nisa::dma_copy(out.slice(1, i * tile_cols, (i + 1) * tile_cols), t, mode);
    bytes += 2.0 * kPartitions * tile_cols * 2;
  }
  Tile square = core.AllocateSbuf("square", {kPartitions, kPartitions}, DType::kBFloat16);
  Tile square2 = core.AllocateSbuf("square2", {kPartitions, kPartitions}, DType::kBFloat16);
  for (int i = 0; i < kTransposes; ++i) {
    nisa::dma_transpose(square, in.slice(1, i * kPartitions, (i + 1) * kPartitions));
    nisa::dma_copy(square2, square);
    bytes += 2.0 * kPartitions * kPartitions * 2;
  }
  nisa::dma_copy(out.slice(0, 0, 16).slice(1, 0, kPartitions), square2.slice(0, 0, 16));
  bytes += 16.0 * kPartitions * 2;
  DmaMixedKernelResult result;
  result.bytes = bytes;
  result.engine_active_ns = EngineActiveNs(core);
  result.achieved_gbps = bytes / result.engine_active_ns;
  double first = 1e300, last = 0;
  for (const InstructionRecord& r : core.timeline().records()) {
    if (!IsDmaQueue(r.engine)) continue;
    first = std::min(first, r.start_ns);
    last = std::max(last, r.end_ns);
  }
  result.kernel_ns = last - first;
  return result;
}

}  // namespace nkisim::kernels
