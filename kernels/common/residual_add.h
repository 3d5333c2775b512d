// The residual connection of a decoder layer on one logical core: out = a + b over [rows, cols]
// HBM views (the layer's hidden state and a block's output), written in nl. The add is
// element-wise, so the kernel sees the flat elements: pieces of [<= 128 partitions, c] whose
// bytes are contiguous in HBM, loaded by DMA over the queues, one Vector add each (fp32,
// rounded into out's dtype), stored by DMA. LNC 2 gives each core half the elements (disjoint
// writes, no core-to-core traffic).
// REQUIRES: a, b and out contiguous 2-D views of one shape with float dtypes; throws Error(kInvalidArgument)
// naming the operand and the rule otherwise. Runs on the LogicalCore's threads and returns when
// every core is done; timing-only mode moves no values at the same simulated cost.
#pragma once

#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

void ResidualAdd(LogicalCore& lnc, const TensorView& a, const TensorView& b, const TensorView& out);

}  // namespace nkisim::kernels
