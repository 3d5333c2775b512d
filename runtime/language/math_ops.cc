#include "runtime/language/math_ops.h"

#include "runtime/error.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::nl {

Tile divide(const Operand& x, const Operand& y, OptDType dtype) {
  if (!x.is_tile()) {
    Fail("divide", StrCat("dividend x is the ", x.Describe(), "; it must be a tile (use ",
                          "reciprocal for 1 / y, or multiply)"));
  }
  return binary_op(x, y, Op::kDivide, dtype);
}

Tile reciprocal(const Tile& x, OptDType dtype) {
  CheckTile("reciprocal", "x", x);
  Tile out = NewTile("reciprocal", x.shape(), dtype ? *dtype : x.dtype());
  nisa::reciprocal(out, x);
  return out;
}

Tile dropout(const Tile& x, const Operand& rate, OptDType dtype) {
  CheckTile("dropout", "x", x);
  Tile out = NewTile("dropout", x.shape(), dtype ? *dtype : x.dtype());
  nisa::dropout(out, x, rate.is_tile() ? nisa::Scalar(rate.tile()) : nisa::Scalar(rate.value()));
  return out;
}

}  // namespace nkisim::nl
