#include "runtime/language/indexing_ops.h"

#include "runtime/error.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::nl {

Tile expand_dims(const Tile& data, int axis) {
  CheckTile("expand_dims", "data", data);
  const int rank = static_cast<int>(data.shape().size());
  if (axis != rank) {
    Fail("expand_dims", StrCat("axis ", axis, " of data ", data.Describe(), ": only expanding ",
                               "after the last index (axis = ", rank, ") is supported"));
  }
  Shape free = data.free_shape();
  free.push_back(1);
  return data.reshape(free);
}

Tile where(const Tile& condition, const Tile& x, const Tile& y, OptDType dtype) {
  CheckTile("where", "condition", condition);
  CheckTile("where", "x", x);
  CheckTile("where", "y", y);
  const Shape values = BroadcastShape("where", x, y);
  const Shape shape =
      BroadcastShape("where", condition, BroadcastView(x, values), "condition", "x and y");
  Tile out = NewTile("where", shape, dtype.value_or(PromoteDTypes(x.dtype(), y.dtype())));
  nisa::select(out, BroadcastView(condition, shape), BroadcastView(x, shape),
               BroadcastView(y, shape));
  return out;
}

Tile gather_flattened(const Tile& data, const Tile& indices, OptDType dtype) {
  CheckTile("gather_flattened", "data", data);
  CheckTile("gather_flattened", "indices", indices);
  Tile out = NewTile("gather_flattened", indices.shape(), dtype.value_or(data.dtype()));
  nisa::gather_flattened(out, data, indices);
  return out;
}

}  // namespace nkisim::nl
