// A tiled matmul C[M, N] = A[M, K] @ B[K, N] on one logical core, written in nisa the way the
// projection kernels are: K on the partition in 128-row subtiles, N in 512-column PSUM banks,
// A's tiles transposed on the PE array, LNC = 2 splitting N into disjoint column halves.
// It is the single-core demo of `nkisim demo` and a workload for the cost model.
#pragma once

#include "runtime/logical_core.h"
#include "runtime/tensor_view.h"

namespace nkisim::kernels {

// Throws Error(kInvalidArgument) naming the operand unless: a is [M, K], b is [K, N], c is
// [M, N]; M and K are multiples of 128; N is a multiple of lnc; a and b share a float dtype.
void ValidateTiledMatmul(const TensorView& a, const TensorView& b, const TensorView& c, int lnc);

// The SPMD program: program ctx.prg_id computes columns [prg_id * N / n_prgs, ...) of c.
void TiledMatmulKernel(const KernelContext& ctx, const TensorView& a, const TensorView& b,
                       const TensorView& c);

}  // namespace nkisim::kernels
