// A row softmax y[R, C] = softmax(x[R, C]) over each row, on one logical core, written in the nl
// language. The programs of the logical core split the rows into contiguous shares (LNC sharding
// by ctx.prg_id); each walks its share in blocks of up to `partitions` rows. A block's columns are
// cut into chunks of pe_max_moving_free (512) columns, each loaded by its own DMA (so they spread
// over the DMA queues and overlap the compute); the row max and the exp-sum are carried across
// the chunks with nl::loop_reduce, the shift, exp and sum run in fp32, and each chunk is
// normalised and stored as soon as the row sum is known. It is the example kernel of
// `nkisim example softmax`.
#pragma once

#include <vector>

#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

// Throws Error(kInvalidArgument) "row_softmax: ..." unless x and y are 2-D views of one shape
// [R, C] with R, C >= 1 and float dtypes. (A row that does not fit SBUF fails at allocation with
// Error(kOutOfResources).)
void ValidateRowSoftmax(const TensorView& x, const TensorView& y);

// The SPMD program: program ctx.prg_id normalises rows [R * prg_id / n_prgs, R * (prg_id + 1) /
// n_prgs) of x into y.
void RowSoftmaxKernel(const KernelContext& ctx, const TensorView& x, const TensorView& y);

// The golden: each row's softmax in plain fp64 loops (max-shifted), returned row-major as floats.
std::vector<float> RowSoftmaxGolden(const TensorView& x);

}  // namespace nkisim::kernels
