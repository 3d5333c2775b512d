// dma_copy: the DMA engines' copy between HBM and SBUF (either way), SBUF to SBUF, PSUM to SBUF
// and HBM to HBM, over strided views or access patterns. Both sides must have the same shape
// once size-1 dims are dropped; a dtype change is converted through fp32 (DMA casting).
//
// Cost: the queue is held for dma_fixed_ns + bytes / dma_queue_gbps; a transfer touching HBM also
// passes through the core's HBM port (hbm_gbps_per_core), which transfers on all queues share.
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
  int queue = -1;  // DMA queue index; negative picks the queue that frees first
  std::optional<DynamicOffset> src_offset;  // only for an HBM source
  std::optional<DynamicOffset> dst_offset;  // only for an HBM destination
};

void dma_copy(const Tile& dst, const TensorView& src, const DmaOptions& options = {});
void dma_copy(const TensorView& dst, const Tile& src, const DmaOptions& options = {});
void dma_copy(const Tile& dst, const Tile& src, const DmaOptions& options = {});
void dma_copy(const TensorView& dst, const TensorView& src, const DmaOptions& options = {});

}  // namespace nkisim::nisa
