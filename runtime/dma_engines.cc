#include "runtime/dma_engines.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "runtime/cost_model.h"

namespace nkisim {

int64_t DmaSplit::total_bytes() const {
  int64_t sum = 0;
  for (int64_t b : bytes) sum += b;
  return sum;
}

int DmaSplit::engines_used() const {
  int n = 0;
  for (int64_t b : bytes) n += b > 0;
  return n;
}

namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Descriptors for `rows` rows of one engine.
int64_t Descriptors(int64_t rows, int64_t unit_bytes, int64_t run_bytes, bool runs_cross_rows,
                    int64_t max_bytes) {
  if (rows <= 0) return 0;
  if (runs_cross_rows) {
    // One contiguous range of rows * unit_bytes, cut into runs of run_bytes (whole rows).
    const int64_t total = rows * unit_bytes, run = std::min(run_bytes, total);
    return CeilDiv(total, run) * CeilDiv(run, max_bytes);
  }
  const int64_t run = std::min(run_bytes, unit_bytes);
  return rows * CeilDiv(unit_bytes, run) * CeilDiv(run, max_bytes);
}

}  // namespace

DmaSplit SplitOverEngines(const HardwareProfile& p, int64_t first_unit, int64_t units,
                          int64_t unit_bytes, int64_t run_bytes, bool runs_cross_rows,
                          bool by_partition) {
  const int engines = static_cast<int>(p.dma_engines());
  const int64_t max_bytes = p.dma_descriptor_max_bytes();
  std::array<int64_t, kMaxDmaEngines> rows{};
  if (by_partition) {
    const int64_t group = std::max<int64_t>(1, p.partitions() / engines);
    for (int64_t u = first_unit; u < first_unit + units; ++u) {
      ++rows[static_cast<size_t>(std::min<int64_t>(u / group, engines - 1))];
    }
  } else {
    for (int e = 0; e < engines; ++e) {
      rows[static_cast<size_t>(e)] = units * (e + 1) / engines - units * e / engines;
    }
  }
  DmaSplit split;
  for (int e = 0; e < engines; ++e) {
    const size_t i = static_cast<size_t>(e);
    split.bytes[i] = rows[i] * unit_bytes;
    split.descriptors[i] = Descriptors(rows[i], unit_bytes, run_bytes, runs_cross_rows, max_bytes);
  }
  return split;
}

double DmaEngines::Calendar::FindSlot(double earliest_ns, double duration_ns) const {
  double candidate = std::max(earliest_ns, floor_ns_);
  // The first interval ending after the candidate (ends are sorted: intervals do not overlap).
  auto it = std::upper_bound(busy_.begin(), busy_.end(), candidate,
                             [](double t, const std::array<double, 2>& b) { return t < b[1]; });
  for (; it != busy_.end(); ++it) {
    if ((*it)[0] >= candidate + duration_ns) return candidate;  // fits in the gap before it
    candidate = std::max(candidate, (*it)[1]);
  }
  return candidate;
}

void DmaEngines::Calendar::Insert(double start_ns, double end_ns) {
  if (end_ns <= start_ns) return;
  auto it = std::lower_bound(busy_.begin(), busy_.end(), start_ns,
                             [](const std::array<double, 2>& b, double t) { return b[0] < t; });
  it = busy_.insert(it, {start_ns, end_ns});
  // Merge with touching neighbours, so a stream of back-to-back shares stays one interval.
  if (it + 1 != busy_.end() && (*(it + 1))[0] <= (*it)[1]) {
    (*it)[1] = std::max((*it)[1], (*(it + 1))[1]);
    busy_.erase(it + 1);
  }
  if (it != busy_.begin() && (*(it - 1))[1] >= (*it)[0]) {
    (*(it - 1))[1] = std::max((*(it - 1))[1], (*it)[1]);
    busy_.erase(it);
  }
  if (busy_.size() > kWindow) {
    floor_ns_ = std::max(floor_ns_, busy_.front()[1]);
    busy_.erase(busy_.begin());
  }
}

DmaEngines::DmaEngines(const HardwareProfile& p)
    : profile_(p), engines_(static_cast<int>(std::min<uint32_t>(p.dma_engines(), kMaxDmaEngines))) {}

int DmaEngines::EarliestQueue() const {
  const int queues = static_cast<int>(profile_.dma_queues());
  int best = 0;
  for (int q = 1; q < queues; ++q) {
    if (queue_free_ns_[static_cast<size_t>(q)] < queue_free_ns_[static_cast<size_t>(best)]) best = q;
  }
  return best;
}

double DmaEngines::ReserveHbm(double earliest_ns, int64_t bytes) {
  if (bytes <= 0) return earliest_ns;
  const double duration = HbmTransferNs(profile_, bytes);
  const double start = hbm_.FindSlot(earliest_ns, duration);
  hbm_.Insert(start, start + duration);
  return start + duration;
}

DmaTiming DmaEngines::Schedule(const DmaRequest& r) {
  const HardwareProfile& p = profile_;
  const size_t q = static_cast<size_t>(r.queue);
  DmaTiming t;
  t.trigger_ns = std::max(r.ready_ns, queue_free_ns_[q]);
  queue_free_ns_[q] = t.trigger_ns + p.dma_issue_ns();
  t.start_ns = t.trigger_ns + p.dma_issue_ns() + DmaStartLatencyNs(p);
  // The core's HBM port bounds the engines' sum: each engine moves its HBM bytes at no more than
  // its part of the port, hbm_gbps_per_core / dma_engines (exact when all the engines stream,
  // the case where the port binds: trn2's 16 x 23 B/ns is 1.5% above its 362.5 GB/s).
  const int64_t total = r.split.total_bytes();
  const double hbm_per_byte =
      total > 0 ? static_cast<double>(r.hbm_bytes) / static_cast<double>(total) : 0.0;
  const double port_gbps = p.hbm_gbps_per_core() / engines_;
  const double semaphore = DmaSemaphoreNs(p);
  t.done_ns = t.start_ns;
  for (int e = 0; e < engines_; ++e) {
    const size_t i = static_cast<size_t>(e);
    const int64_t bytes = r.split.bytes[i];
    const double port_ns = static_cast<double>(bytes) * hbm_per_byte / port_gbps;
    const double duration =
        std::max(DmaShareNs(p, bytes, r.split.descriptors[i], r.efficiency), port_ns) + semaphore;
    const double earliest = std::max(t.start_ns, queue_engine_end_ns_[q][i]);
    // Each engine serves its shares in the order they are placed, backfilling gaps (a transfer
    // waiting for its operand does not hold the engine from later ready ones). The queues'
    // round-robin at packet boundaries is not modelled share by share: a small share behind a
    // large one of another queue waits for it. That keeps the engine's work conserved (its busy
    // time never exceeds the time it had), which a small share passing a placed backlog would
    // not: the backlog's transfers are already timed and cannot be moved back.
    const double start = engine_[i].FindSlot(earliest, duration);
    const double end = start + duration;
    engine_[i].Insert(start, end);
    t.share_start_ns[i] = start;
    t.share_end_ns[i] = end;
    t.share_busy_ns[i] = duration;
    queue_engine_end_ns_[q][i] = end;
    t.done_ns = std::max(t.done_ns, end);
  }
  return t;
}

void RecordDmaTransfer(Timeline& clock, const HardwareProfile& p, const char* name,
                       const DmaRequest& r, const DmaTiming& t, int64_t bytes,
                       std::string_view shapes) {
  const bool keep = clock.keeps_shares();
  char label[40] = "";
  const int engines = std::min<int>(static_cast<int>(p.dma_engines()), kMaxDmaEngines);
  for (int e = 0; e < engines; ++e) {
    const size_t i = static_cast<size_t>(e);
    if (keep) {
      std::snprintf(label, sizeof label, "queue %d, %lld descriptors", r.queue,
                    static_cast<long long>(r.split.descriptors[i]));
    }
    clock.RecordShare(name, DmaEngine(e), t.share_start_ns[i], t.share_end_ns[i],
                      t.share_busy_ns[i], r.split.bytes[i], label);
  }
  clock.Record(name, DmaQueue(r.queue), t.trigger_ns, t.done_ns, bytes, 0, shapes);
}

double DmaEngines::ReserveAllEngines(double earliest_ns, int64_t bytes, int64_t descriptor_bytes,
                                     std::array<double, kMaxDmaEngines>* starts,
                                     std::array<double, kMaxDmaEngines>* ends) {
  const HardwareProfile& p = profile_;
  const int64_t per_engine = (bytes + engines_ - 1) / engines_;
  const int64_t descriptors =
      (per_engine + descriptor_bytes - 1) / std::max<int64_t>(1, descriptor_bytes);
  const double duration = DmaShareNs(p, per_engine, descriptors, 1.0);
  double done = earliest_ns;
  for (int e = 0; e < engines_; ++e) {
    const size_t i = static_cast<size_t>(e);
    const double start = engine_[i].FindSlot(earliest_ns, duration);
    engine_[i].Insert(start, start + duration);
    (*starts)[i] = start;
    (*ends)[i] = start + duration;
    done = std::max(done, start + duration);
  }
  return done;
}

}  // namespace nkisim
