// Shape and indexing ops of the nl language: expand_dims (a view), where (the predicated select)
// and gather_flattened (the GpSimd per-partition gather). Errors are Error(kInvalidArgument)
// worded "<op>: ...".
#pragma once

#include "runtime/language/operands.h"
#include "runtime/tile.h"

namespace nkisim::nl {

// data with a size-1 dim appended: axis must be data's rank (NKI expands after the last index
// only). A view; no instruction. Rules: contiguous free dims, fewer than 4 of them.
Tile expand_dims(const Tile& data, int axis);

// condition != 0 ? x : y, element-wise over the broadcast shape of the three (select, Vector).
// dtype default: x and y promoted.
Tile where(const Tile& condition, const Tile& x, const Tile& y, OptDType dtype = std::nullopt);

// out[p, j...] = data[p].flat[indices[p, j...]]: out has the indices' shape (dtype default
// data's). Throws as nisa::gather_flattened (integer indices, each inside data's free size).
Tile gather_flattened(const Tile& data, const Tile& indices, OptDType dtype = std::nullopt);

}  // namespace nkisim::nl
