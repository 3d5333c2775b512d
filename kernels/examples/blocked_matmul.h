// The careful twin of the tiled matmul (kernels/examples/tiled_matmul.h): the same product
// C[M, N] = A[M, K] @ B[K, N], the same tiles on the PE (K in 128-row subtiles, N in 512-column
// PSUM banks, A transposed on the PE, LNC 2 splitting N), the same bytes moved, but each DMA is
// shaped for the engines (docs/dma.md): A's row block [128, K] in one load (K x dtype contiguous
// bytes a partition), B in [128, up to 2048] blocks (4 KiB a partition in bf16) that feed up to 4
// PSUM banks at once, and one store a block of 4 banks. The tiled matmul loads [128, 128] A tiles
// (256 B a partition) and [128, 512] B tiles (1 KiB) and stores [128, 512] banks: its engines
// spend their time on descriptors, 27.5 ns each on trn2 for 256 B to 1 KiB of data.
// `nkisim example matmul` runs both side by side; MatmulDmaEngineNs is what the DMA curve implies.
#pragma once

#include <cstdint>

#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

// PSUM banks one B block feeds (the block's columns: kBlockBanks x 512).
inline constexpr int64_t kBlockBanks = 4;

// Same contract as TiledMatmulKernel (ValidateTiledMatmul holds for both).
void BlockedMatmulKernel(const KernelContext& ctx, const TensorView& a, const TensorView& b,
                         const TensorView& c);

enum class MatmulLayout { kTiled, kBlocked };

// The DMA engine time one physical core's transfers of the kernel occupy its busiest engine,
// summed over the transfers, from their shapes alone (runtime/dma_engines.h's split and
// cost_model.h's DmaShareNs, with no overlap or latency): what the DMA curve implies the kernel
// costs where the engines bind. M, K, N are the product's; in_bytes is a's and b's element size,
// c_bytes c's.
double MatmulDmaEngineNs(const HardwareProfile& p, MatmulLayout layout, int64_t m, int64_t k,
                         int64_t n, int lnc, int64_t in_bytes, int64_t c_bytes);

}  // namespace nkisim::kernels
