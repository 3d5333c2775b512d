// The DMA engines of one physical core, as the hardware runs a transfer (docs/dma.md):
//
//   trigger   the transfer's operands are ready and its queue's issue stage is free;
//   issue     the queue's descriptor generation and trigger hold the queue for dma_issue_ns
//             (serial within a queue: the next transfer of the queue issues after it);
//   start     the engines begin dma_latency_ns - dma_issue_ns - one semaphore descriptor after
//             the trigger (synchronisation, semaphore-to-start: overlaps other transfers);
//   shares    the transfer is split over the engines by partition groups (SplitOverEngines); each
//             engine moves its share as descriptors, in order within its queue, and its data path
//             is shared by every transfer in flight: a share takes the first gap of the engine
//             that fits it (work-conserving; the queues' round-robin at packet boundaries is
//             not modelled share by share); the core's HBM port bounds the sum of all engines' HBM bytes
//             (each engine moves them at no more than its 1 / dma_engines part of the port);
//   complete  every engine, even one with no bytes, writes a 4 B semaphore (one descriptor); the
//             transfer is complete when the last of them lands.
//
// So an isolated transfer takes dma_latency_ns plus its largest share, a stream on one queue one
// transfer every max(dma_issue_ns, largest share), and transfers on several queues overlap their
// latencies and share the engines.
//
// Not thread-safe: one core's engines are scheduled by that core's thread only. All times are
// simulated ns; bytes are bytes.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "runtime/hardware_profile.h"
#include "runtime/timeline.h"
#include <string_view>

namespace nkisim {

inline constexpr int kMaxDmaEngines = 16;

// How one transfer's bytes fall on the engines.
struct DmaSplit {
  std::array<int64_t, kMaxDmaEngines> bytes{};
  std::array<int64_t, kMaxDmaEngines> descriptors{};
  int64_t total_bytes() const;
  int engines_used() const;  // engines with at least one byte
};

// The split of a transfer of `units` rows of unit_bytes each. Rows are SBUF partitions
// [first_unit, first_unit + units) when by_partition (partition p goes to engine
// p / (partitions / dma_engines)), else rows of an HBM -> HBM copy, spread evenly over the
// engines in order. Each row moves in contiguous runs of run_bytes (run_bytes <= unit_bytes, or a
// multiple of it when runs_cross_rows: the HBM side is contiguous over whole rows and the SBUF side
// writes each partition's row contiguously, so one run covers several of an engine's rows); a
// descriptor covers at most dma_descriptor_max_bytes of a run.
// REQUIRES: units >= 1, unit_bytes >= 1, 1 <= run_bytes.
DmaSplit SplitOverEngines(const HardwareProfile& p, int64_t first_unit, int64_t units,
                          int64_t unit_bytes, int64_t run_bytes, bool runs_cross_rows,
                          bool by_partition);

// A transfer to schedule.
struct DmaRequest {
  int queue = 0;              // 0 <= queue < dma_queues
  double ready_ns = 0;        // every operand ready: the trigger may fire
  int64_t hbm_bytes = 0;      // bytes through the core's HBM port (read + written)
  double efficiency = 1.0;    // engine rate factor (transposes: < 1)
  DmaSplit split;
};

struct DmaTiming {
  double trigger_ns = 0;      // the issue stage began
  double start_ns = 0;        // the engines may begin
  double done_ns = 0;         // the last semaphore landed
  std::array<double, kMaxDmaEngines> share_start_ns{}, share_end_ns{};
  // The engine time each share takes (its end - start).
  std::array<double, kMaxDmaEngines> share_busy_ns{};
};

// Records a scheduled transfer on `clock`: each engine's share on that engine's row (it occupies
// the engine) and the whole transfer, trigger to completion, on its queue's row (an instruction of
// `bytes`, with `shapes`).
void RecordDmaTransfer(Timeline& clock, const HardwareProfile& p, const char* name,
                       const DmaRequest& request, const DmaTiming& timing, int64_t bytes,
                       std::string_view shapes);

class DmaEngines {
 public:
  explicit DmaEngines(const HardwareProfile& p);

  // The queue whose issue stage frees first (lowest index on ties).
  int EarliestQueue() const;
  double queue_free_ns(int queue) const { return queue_free_ns_[static_cast<size_t>(queue)]; }

  // Places the transfer on the queue, the engines and the HBM port; returns when each part ran.
  DmaTiming Schedule(const DmaRequest& request);

  // Holds `bytes` of the core's HBM port no earlier than earliest_ns (first gap that fits);
  // returns when they are through.
  double ReserveHbm(double earliest_ns, int64_t bytes);
  // Holds every engine for its share of `bytes` moved in descriptors of at most
  // descriptor_bytes from earliest_ns on (a collective's DMA rings, which share the engines with
  // the kernels' transfers); returns when the last engine is done.
  double ReserveAllEngines(double earliest_ns, int64_t bytes, int64_t descriptor_bytes,
                           std::array<double, kMaxDmaEngines>* starts,
                           std::array<double, kMaxDmaEngines>* ends);
  int engines() const { return engines_; }

 private:
  // Busy intervals of one resource, sorted, merged when they touch; only the last kWindow are
  // kept (nothing is placed before the oldest kept one), so a placement costs O(kWindow).
  class Calendar {
   public:
    // The earliest start >= earliest_ns of a free gap of duration_ns.
    double FindSlot(double earliest_ns, double duration_ns) const;
    void Insert(double start_ns, double end_ns);

   private:
    static constexpr size_t kWindow = 32;
    std::vector<std::array<double, 2>> busy_;
    double floor_ns_ = 0;
  };


  const HardwareProfile& profile_;
  int engines_;
  std::array<double, kMaxDmaEngines> queue_free_ns_{};
  // In order within a queue on an engine: the end of the queue's last share there.
  std::array<std::array<double, kMaxDmaEngines>, kMaxDmaEngines> queue_engine_end_ns_{};
  std::array<Calendar, kMaxDmaEngines> engine_;
  Calendar hbm_;
};

}  // namespace nkisim
