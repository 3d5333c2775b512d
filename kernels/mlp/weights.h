// Internal to kernels/mlp: the weights cut into the chunks the kernels stream through a
// WeightStream (kernels/common/tiling.h), in the order the PE consumes them, each about
// DmaTargetBytes so the DMA queues together keep the HBM port busy.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/mlp/config.h"
#include "runtime/hardware_profile.h"
#include "runtime/neuron_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

// Chunks of a [P, J, I] partition-major weight view (element (p, j, i) is the row the matmul's
// subtile j holds on partition p) for columns [c0, c1): [P, hc, c1 - c0] views over j (hc even
// for STATIC's double-row matmuls).
// target_bytes: a chunk's size (0: DmaTargetBytes).
void AppendGateUpChunks(const TensorView& w, int64_t c0, int64_t c1, const MlpConfig& cfg,
                        const HardwareProfile& profile, std::vector<TensorView>* chunks,
                        int64_t target_bytes = 0);

// Chunks of down_w [I, H] for output columns [h0, h1) and the I chunks [c0, c1) of 128 rows
// (default: all of I): [rows, cc, h1 - h0] views, element (p, q, x) the row (c + q) P + p of I
// chunk c + q; full 128-row chunks are grouped (in pairs at least for STATIC's double-row
// matmuls), the short last chunk of I stands alone. In I order.
void AppendDownChunks(const TensorView& down_w, int64_t h0, int64_t h1, const MlpConfig& cfg,
                      const HardwareProfile& profile, std::vector<TensorView>* chunks,
                      int64_t c0 = 0, int64_t c1 = -1, int64_t target_bytes = 0);

// The elements per partition of the largest chunk (the WeightStream's slot size).
int64_t LargestChunkElements(const std::vector<TensorView>& chunks);

// Ring slots for chunks of `slot_elements` of `dtype`: two per DMA queue as far as SBUF allows
// (three quarters of what is free: the kernels allocate their other tiles first), at least 1 and at
// most the number of chunks.
// reserve_bytes: bytes a partition kept free for tiles allocated after the ring.
int64_t StreamSlots(const NeuronCore& core, int64_t slot_elements, DType dtype, int64_t chunks,
                    int64_t reserve_bytes = 0);

}  // namespace nkisim::kernels
