#include "runtime/language/reduction_ops.h"

#include "runtime/error.h"
#include "runtime/language/math_ops.h"
#include "runtime/language/memory_ops.h"
#include "runtime/logical_core.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::nl {
namespace {

// The ALU op of a binary token usable as a reduction across tiles.
nisa::AluOp ReductionOf(const char* name, Op op) {
  const OpInfo& info = Info(op);
  if (info.family != Family::kBinary || !nisa::IsReduction(info.alu)) {
    Fail(name,
         StrCat("op ", info.name, " is not a reduction; use add, multiply, maximum, minimum, ",
                "logical_and or logical_or"));
  }
  return info.alu;
}

}  // namespace

Tile var(const Tile& x, const std::vector<int>& axis, bool keepdims, OptDType dtype) {
  CheckTile("var", "x", x);
  CheckFreeAxes("var", x, axis);
  const Tile m = mean(x, axis, /*keepdims=*/true);
  const Tile d = subtract(x, m, m.dtype());
  return mean(power(d, 2.0f), axis, keepdims, dtype);
}

Tile all_reduce(const Tile& x, Op op, OptDType dtype) {
  CheckTile("all_reduce", "x", x);
  const nisa::AluOp alu = ReductionOf("all_reduce", op);
  NeuronCore& core = CurrentCore();
  if (core.logical_core() == nullptr || core.logical_core()->lnc() == 1) {
    return dtype && *dtype != x.dtype() ? copy(x, dtype) : x;
  }
  Tile peer = NewTile("all_reduce_peer", x.shape(), x.dtype());
  nisa::sendrecv(x, peer);
  Tile out = NewTile("all_reduce", x.shape(), dtype ? *dtype : x.dtype());
  nisa::tensor_tensor(out, x, peer, alu);
  return out;
}

Tile loop_reduce(const Tile& x, Op op, Tile* carried, OptDType dtype) {
  CheckTile("loop_reduce", "x", x);
  const nisa::AluOp alu = ReductionOf("loop_reduce", op);
  if (carried == nullptr) Fail("loop_reduce", "carried accumulator pointer is null");
  if (!carried->valid()) {
    *carried = NewTile("loop_reduce", x.shape(), dtype ? *dtype : x.dtype());
    nisa::tensor_copy(*carried, x);
    return *carried;
  }
  if (carried->shape() != x.shape()) {
    Fail("loop_reduce", StrCat("x ", x.Describe(), " does not match the carried accumulator ",
                               carried->Describe()));
  }
  nisa::tensor_tensor(*carried, *carried, x, alu);
  return *carried;
}

}  // namespace nkisim::nl
