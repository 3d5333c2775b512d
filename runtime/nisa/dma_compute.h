// dma_compute: the DMA engines' own arithmetic, dst = srcs[0] * scales[0] + srcs[1] * scales[1]
// + ..., element by element in fp32 with each source cast to fp32 on the way in and the sum cast
// to dst's dtype on the way out (NKI 0.6: reduce_op is nl.add and every scale 1.0). The NKI
// library sums partial outputs this way (moe_cte's two shards, qkv_tkg's fused residual).
//
// Cost: the DMA queue that frees first is held for dma_fixed_ns + bytes / dma_queue_gbps over
// every byte read and written, as a dma_copy of that many bytes; the HBM operands' bytes also
// pass the core's HBM port.
#pragma once

#include <variant>
#include <vector>

#include "runtime/tensor_view.h"
#include "runtime/tile.h"

namespace nkisim::nisa {

// An operand in HBM (a TensorView) or SBUF (a Tile).
using DmaOperand = std::variant<Tile, TensorView>;

// Rules: at least one source; every source the shape of dst once size-1 dims are dropped; one
// scale per source, each 1.0; tiles in SBUF, not PSUM. Throws Error(kInvalidArgument) naming
// the operand, its value and the rule broken.
void dma_compute(const DmaOperand& dst, const std::vector<DmaOperand>& srcs,
                 const std::vector<float>& scales);

}  // namespace nkisim::nisa
