// The DMA transpose between two SBUF tiles: dst[C, R] = src[R, C]^T, src's R partitions becoming
// dst's free dim (the NKI library's attention_cte moves its exp tile to the PV matmul's layout
// this way). The HBM-to-SBUF transpose is dma_transpose in dma_descriptors.h.
//
// Cost: the DMA queue that frees first is held for dma_fixed_ns + bytes / dma_queue_gbps, as an
// SBUF-to-SBUF dma_copy; no HBM port is used. Descriptors are written by GpSimd first (one per
// element, spread over the partitions) unless the transfer meets the hardware DGE's rules (R <=
// kHwDgeMaxRows, C <= partitions, a 2-byte dtype), as for the HBM transpose.
#pragma once

#include "runtime/nisa/dma_descriptors.h"
#include "runtime/tile.h"

namespace nkisim::nisa {

// Rules: src and dst are SBUF tiles, dst [C, R] for src [R, C] (R partitions, C elements per
// partition); with DgeMode::kHardware the hardware DGE's rules. dst's dtype may differ from
// src's (DMA casting). Throws Error(kInvalidArgument) naming the operand and the rule.
void dma_transpose(const Tile& dst, const Tile& src, DgeMode mode = DgeMode::kAuto);

}  // namespace nkisim::nisa
