// Matmul and transpose of the nl language: direct passthroughs to the Tensor (PE) engine.
// Limits come from the hardware profile: partitions (128), pe_cols (128), pe_max_moving_free (512).
#pragma once

#include "runtime/language/operands.h"
#include "runtime/tile.h"

namespace nkisim::nl {

// x @ y into a new PSUM tile [M, N] fp32. With transpose_x = false, x is [M, K] and is first
// transposed on the Vector engine (nc_transpose), then nc_matmul(x^T, y) runs on PE; with
// transpose_x = true, x is already [K, M] and only the matmul runs.
// Rules: x has one free dim, partitions <= 128 and free size <= 128; y has one free dim,
// partitions K <= 128 matching x's contraction size, and free size N <= 512; x and y both fp32
// or both 16/8-bit floats; y (and x when transpose_x) in SBUF. Throws Error(kInvalidArgument)
// "matmul: ..." naming the operand and the limit.
Tile matmul(const Tile& x, const Tile& y, bool transpose_x = false);

// x^T into a new PSUM tile [F, P] (dtype default x's, or fp32) by the PE identity-matmul
// transpose. Rules: x in SBUF with one free dim, F <= 128.
Tile transpose(const Tile& x, OptDType dtype = std::nullopt);

}  // namespace nkisim::nl
