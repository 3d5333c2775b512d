// dma_copy: the DMA engines' copy between HBM and SBUF (either way), SBUF to SBUF, PSUM to SBUF
// and HBM to HBM, over strided views or access patterns. Both sides must have the same shape
// once size-1 dims are dropped; a dtype change is converted through fp32 (DMA casting).
//
// Cost (runtime/dma_engines.h, docs/dma.md): the transfer's queue issues it (dma_issue_ns, in order
// within the queue), its partitions are split over the 16 DMA engines (8 partitions an engine at
// 128), each engine moves its share as descriptors of contiguous runs, shared with every transfer
// in flight, the core's HBM port bounds the sum, and it completes when every engine's semaphore
// has landed: dma_latency_ns plus its largest share when alone.
#pragma once

#include <cstdint>
#include <optional>

#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::nisa {

// An offset read at run time from a tensor: the HBM-side view is shifted along `dim` by
// index_value * scale elements of that dim. `extent` is the size of `dim` in the tensor the view
// was cut from: the shifted window must stay inside [0, extent).
struct DynamicOffset {
  TensorView index;   // one integer element (e.g. iota_workers.slice(0, r, r + 1))
  int dim = 0;
  int64_t scale = 1;
  int64_t extent = 0;
};

struct DmaOptions {
  int queue = -1;  // DMA queue ID (across all engines); negative: the queue whose issue stage
                   // frees first
  std::optional<DynamicOffset> src_offset;  // only for an HBM source
  std::optional<DynamicOffset> dst_offset;  // only for an HBM destination
};

void dma_copy(const Tile& dst, const TensorView& src, const DmaOptions& options = {});
void dma_copy(const TensorView& dst, const Tile& src, const DmaOptions& options = {});
void dma_copy(const Tile& dst, const Tile& src, const DmaOptions& options = {});
void dma_copy(const TensorView& dst, const TensorView& src, const DmaOptions& options = {});

}  // namespace nkisim::nisa
