// What the kernels share for moving data (QKV, MLP): how big a DMA should be, sized from the
// hardware profile, and how weights stream through a ring of SBUF slots.
//   * DMA sizing: every transfer is split over the 16 DMA engines by partitions and pays a fixed
//     latency (runtime/dma_engines.h), so one transfer of full rows already moves at the engines'
//     rate once each partition's row is a few full descriptors long: loads are cut only into
//     pieces of DmaTargetBytes (so a consumer can start on the first while the rest arrive), never
//     spread "over queues" for bandwidth.
//   * WeightStream: weight chunks flow from HBM through a fixed ring of SBUF slots; a refill waits
//     on the scoreboard for the readers of the chunk it replaces, so the simulated time reflects a
//     bounded buffer (a fresh tile per chunk would model unlimited prefetch).
//   * LoadRowBroadcast: a [1, F] HBM row copied onto every partition.
// All functions issue instructions on the calling thread's current core.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/hardware_profile.h"
#include "runtime/neuron_core.h"
#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::kernels {

// Bytes per DMA: two full descriptors on every partition (trn2: 128 x 2 x 4 KiB = 1 MiB), where
// an engine's descriptors are long enough to run within 1% of its sustained rate.
int64_t DmaTargetBytes(const HardwareProfile& profile);

// Copies src into dst as several DMAs cut along `dim` (a dim index shared by both: 0 is the
// partition dim, which is never cut), each about DmaTargetBytes. REQUIRES: dst.shape() ==
// src.shape(), dim >= 1.
void DmaInPieces(const Tile& dst, const TensorView& src, int dim);

// Bytes per partition still free in the core's SBUF (its largest free range).
int64_t SbufFreeBytes(const NeuronCore& core);

// A [partitions, F] tile of `dtype` holding row 0 of the HBM view `rows` ([R, F]) on every
// partition: one DMA whose partition stride is 0 (each partition reads the row again).
Tile LoadRowBroadcast(NeuronCore& core, const std::string& name, const TensorView& rows,
                      int64_t partitions, DType dtype);

// dst = 1 / sqrt(data * scale + eps) on the activation engine: the norms' reciprocal standard
// deviation. eps is a [P, 1] column of dst's partitions.
void ReciprocalStd(const Tile& dst, const Tile& data, float scale, const Tile& eps);

class WeightStream {
 public:
  // chunks: how many chunks flow through; source(k) is chunk k's HBM view [P, ...] with at most
  // slot_elements elements per partition. slots: the ring's size (>= 1).
  WeightStream(NeuronCore& core, int64_t slot_elements, DType dtype, int64_t chunks, int64_t slots,
               std::function<TensorView(int64_t)> source);

  // Issues the DMAs of the first `slots` chunks. Separate from construction, so a kernel can put
  // the loads it needs first ahead of the weights on the HBM port.
  void Start();
  // Issues the DMAs of chunks up to (not including) k, as far as the ring has room: a kernel can
  // interleave the first chunks with its other loads on the queues, then Start() the rest.
  void IssueUpTo(int64_t k);
  // The slot holding chunk k, viewed with chunk k's shape. REQUIRES: chunk k is resident (its
  // DMA issued, the chunk not released); otherwise throws Error(kInternal).
  Tile Get(int64_t k) const;
  // Marks chunk k consumed (chunks are released in order) and issues the DMA of chunk k + slots
  // into the slot it frees.
  void Release(int64_t k);
  // The same, for a consumer that takes the chunks one by one: Front() is the oldest resident
  // chunk (Get of the first not released), PopFront() releases it.
  Tile Front() const { return Get(released_); }
  void PopFront() { Release(released_); }

  int64_t slots() const { return static_cast<int64_t>(slots_.size()); }

 private:
  void Issue(int64_t k);
  // Slot `slot` viewed with the shape of `view`.
  Tile SlotView(size_t slot, const TensorView& view) const;

  std::vector<Tile> slots_;
  std::vector<TensorView> resident_;  // the HBM view of the chunk in each slot
  std::function<TensorView(int64_t)> source_;
  int64_t chunks_;
  int64_t issued_ = 0;
  int64_t released_ = 0;
};

}  // namespace nkisim::kernels
