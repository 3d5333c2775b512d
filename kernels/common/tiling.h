// What the kernels share for moving data (QKV, MLP): how big a DMA should be, sized from the
// hardware profile, and how weights stream through a ring of SBUF slots.
//   * DMA sizing: the cost model holds a queue for dma_fixed_ns + bytes / dma_queue_gbps and
//     serialises every HBM transfer of a core on its port, so transfers should be cut into pieces
//     just big enough that the queues together keep the port busy (DmaTargetBytes), and spread
//     over the queues (each piece goes to the queue that frees first).
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

// Bytes per DMA: twice the size at which dma_queues concurrent transfers, each paying
// dma_fixed_ns, just saturate hbm_gbps_per_core (for trn2 about 155 KiB). If the queues cannot
// saturate the port at any size, the size whose fixed cost is 5% of its transfer time.
int64_t DmaTargetBytes(const HardwareProfile& profile);

// Where the DMA queues together cannot saturate the HBM port (trn3: 16 x 38.3 GB/s = the
// 612.5 GB/s port), how many queues a transfer of `bytes` should be spread over: up to all of
// them, with pieces no smaller than 4 x a DMA's fixed cost; 1 where they can (trn2).
int64_t QueueSpreadPieces(const HardwareProfile& profile, int64_t bytes);

// Copies src into dst as several DMAs cut along `dim` (a dim index shared by both: 0 is the
// partition dim, which is never cut), each about DmaTargetBytes, and in at least
// QueueSpreadPieces. REQUIRES: dst.shape() ==
// src.shape(), dim >= 1.
void DmaInPieces(const Tile& dst, const TensorView& src, int dim);

// Copies src into dst as `pieces` DMAs (at most src.dim(dim)) cut along `dim` (>= 1), each on the
// queue that frees first: a load on a kernel's critical path then lands about dma_fixed_ns +
// bytes / (pieces x dma_queue_gbps) after it is issued instead of one queue's bytes /
// dma_queue_gbps. REQUIRES: dst.shape() == src.shape().
void DmaOverQueues(const Tile& dst, const TensorView& src, int dim, int64_t pieces);

// Stores src into dst (same shape once size-1 dims drop) in DMAs of whole partitions, each moving
// about dma_fixed_ns worth of queue bandwidth, spread over the queues: the last store of a kernel
// is its tail, and a store split k ways finishes about k times sooner.
void StoreInPieces(const TensorView& dst, const Tile& src);

// The same for a kernel's last stores, which nothing after them hides: DMAs of whole partitions
// over half the DMA queues (the other half stay for a store beside it; at most one DMA per
// partition), so a store ends about dma_fixed_ns + bytes / (queues / 2 x dma_queue_gbps) after
// src is ready (trn2, 32 KiB: 0.75 us) where StoreInPieces' pieces take 2 x dma_fixed_ns.
void StoreAcrossQueues(const TensorView& dst, const Tile& src);

// Bytes per partition still free in the core's SBUF (its largest free range).
int64_t SbufFreeBytes(const NeuronCore& core);

// A [partitions, F] tile of `dtype` holding row 0 of the HBM view `rows` ([R, F]) on every
// partition: DMAs whose partition stride is 0 (each partition reads the row again), one, or
// `pieces` cut along F (a large broadcast then lands over several queues at once).
Tile LoadRowBroadcast(NeuronCore& core, const std::string& name, const TensorView& rows,
                      int64_t partitions, DType dtype, int64_t pieces = 1);

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
  // Chunks [0, k) are each issued as `pieces` DMAs cut along their last dim, so the first ones
  // land over several queues at once instead of each holding one queue for its whole transfer.
  // Call before any chunk is issued.
  void SplitFirst(int64_t k, int64_t pieces);
  // The same for the last k chunks: they land sooner after they are issued, so less of the
  // stream arrives at once at its end, where nothing after it hides the consumer's backlog.
  // Chunks in both ranges take SplitFirst's pieces.
  void SplitLast(int64_t k, int64_t pieces);
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
  int64_t split_chunks_ = 0, split_pieces_ = 1;
  int64_t split_last_chunks_ = 0, split_last_pieces_ = 1;
};

}  // namespace nkisim::kernels
