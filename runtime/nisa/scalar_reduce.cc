#include "runtime/nisa/scalar_reduce.h"

#include <limits>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

void CheckColumn(const char* inst, const char* name, const Tile& t, int64_t partitions) {
  if (t.partitions() != partitions || t.free_size() != 1) {
    Illegal(inst, name, t, StrCat("must be [", partitions, ", 1]"));
  }
}

float Identity(AluOp op) {
  switch (op) {
    case AluOp::kAdd: return 0.0f;
    case AluOp::kMultiply: return 1.0f;
    case AluOp::kMax: return -std::numeric_limits<float>::infinity();
    default: return std::numeric_limits<float>::infinity();  // kMin
  }
}

float At(const Scalar& s, int64_t p) {
  if (!s.is_column()) return s.value();
  float v;
  s.column().ReadRow(p, &v);
  return v;
}

}  // namespace

void tensor_scalar_reduce(const Tile& dst, const Tile& data, AluOp op0, const Scalar& operand0,
                          AluOp reduce_op, const Tile& reduce_res, bool load_init,
                          const Scalar& reduce_init, bool negate) {
  constexpr const char* kInst = "tensor_scalar_reduce";
  Issue issue(kInst, Engine::kVector);
  issue.Reads("data", data).Writes("dst", dst);
  if (operand0.is_column()) issue.Reads("operand0", operand0.column());
  if (load_init && reduce_init.is_column()) issue.Reads("reduce_init", reduce_init.column());
  if (reduce_res.valid()) issue.Writes("reduce_res", reduce_res);
  if (data.partitions() != dst.partitions() || data.free_size() != dst.free_size()) {
    Illegal(kInst, "data", data, StrCat("must have dst's shape ", ShapeString(dst.shape())));
  }
  if (IsBitwise(op0)) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": op0 ", AluOpName(op0), " is bitwise; it must be arithmetic"));
  }
  if (reduce_op != AluOp::kAdd && reduce_op != AluOp::kMultiply && reduce_op != AluOp::kMax &&
      reduce_op != AluOp::kMin) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(kInst, ": reduce_op ", AluOpName(reduce_op),
                 " must be add, multiply, max or min"));
  }
  if (operand0.is_column()) CheckColumn(kInst, "operand0", operand0.column(), dst.partitions());
  if (load_init && reduce_init.is_column()) {
    CheckColumn(kInst, "reduce_init", reduce_init.column(), dst.partitions());
  }
  if (reduce_res.valid()) CheckColumn(kInst, "reduce_res", reduce_res, dst.partitions());
  const int64_t n = dst.free_size();
  float* x = ScratchRow(0, n);
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    data.ReadRow(p, x);
    const float s = At(operand0, p);
    for (int64_t i = 0; i < n; ++i) x[i] = ApplyAlu(op0, x[i], s);
    dst.WriteRow(p, x);
    if (!reduce_res.valid()) continue;
    dst.ReadRow(p, x);  // reduce what was stored, as the engine reads its own output
    float acc = load_init ? At(reduce_init, p) : Identity(reduce_op);
    for (int64_t i = 0; i < n; ++i) acc = ApplyAlu(reduce_op, acc, x[i]);
    if (negate) acc = -acc;
    reduce_res.WriteRow(p, &acc);
  }
  const int64_t bytes = dst.numel() * static_cast<int64_t>(SizeOf(dst.dtype())) +
                        data.numel() * static_cast<int64_t>(SizeOf(data.dtype()));
  issue.Commit(ComputeOpNs(issue.profile(), Engine::kVector, n,
                           SizeOf(dst.dtype()) <= 2 && SizeOf(data.dtype()) <= 2),
               bytes, 2 * dst.numel());
}

}  // namespace nkisim::nisa
