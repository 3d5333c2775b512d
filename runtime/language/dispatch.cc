#include "runtime/language/dispatch.h"

#include <utility>

#include "runtime/error.h"
#include "runtime/nisa/nisa.h"

namespace nkisim::nl {
namespace {

// The row of `op`, which must belong to one of the dispatcher's families.
const OpInfo& Route(const char* dispatcher, Op op, Family family) {
  const OpInfo& info = Info(op);
  if (info.family != family) {
    Raise(ErrorCode::kInternal,
          StrCat(dispatcher, ": token ", info.name, " belongs to ", FamilyName(info.family)));
  }
  return info;
}

// what: "operand 'x' <tile>" or "result dtype".
void CheckInteger(const OpInfo& info, const std::string& what, DType dtype) {
  if (IsInteger(dtype)) return;
  constexpr const char* kIntegers = "(int8, uint8, int32, uint16, uint32)";
  Fail(info.name, StrCat(what, ": ", info.name, " needs integer dtypes ", kIntegers, ", not ",
                         DTypeName(dtype)));
}

// The dtype's all-ones bit pattern as the ALU sees it (fp32 holds it exactly below 2^24).
float AllOnes(const OpInfo& info, DType dtype) {
  if (dtype == DType::kUInt32) {
    const std::string why = "the ALU computes through fp32, exact only below 2^24";
    Raise(ErrorCode::kNotSupported, StrCat(info.name, ": uint32 is not supported: ", why));
  }
  const bool is_unsigned = dtype == DType::kUInt8 || dtype == DType::kUInt16;
  return is_unsigned ? static_cast<float>(MaxValue(dtype)) : -1.0f;
}

nisa::TensorScalarOps OneStage(nisa::AluOp op, float operand, bool reverse = false) {
  nisa::TensorScalarOps ops;
  ops.op0 = op;
  ops.operand0 = operand;
  ops.reverse0 = reverse;
  return ops;
}

Tile Elementwise(const OpInfo& info, const Operand& x, const Operand& y, OptDType dtype) {
  if (!x.is_tile() && !y.is_tile()) {
    Fail(info.name, StrCat("x and y are both immediates (", x.value(), ", ", y.value(),
                           "); at least one must be a tile"));
  }
  if (x.is_tile() && y.is_tile()) {
    const Shape shape = BroadcastShape(info.name, x.tile(), y.tile());
    const DType dt =
        dtype ? *dtype
              : (info.bool_result ? kBool : PromoteDTypes(x.tile().dtype(), y.tile().dtype()));
    Tile out = NewTile(info.name, shape, dt);
    nisa::tensor_tensor(out, BroadcastView(x.tile(), shape), BroadcastView(y.tile(), shape),
                        info.alu, info.engine);
    return out;
  }
  const Tile& t = x.is_tile() ? x.tile() : y.tile();
  const float imm = x.is_tile() ? y.value() : x.value();
  Tile out = NewTile(info.name, t.shape(), dtype ? *dtype : (info.bool_result ? kBool : t.dtype()));
  nisa::tensor_scalar(out, t, OneStage(info.alu, imm, !x.is_tile()), info.engine);
  return out;
}

}  // namespace

Tile unary_op(const Tile& x, Op op, OptDType dtype) {
  const OpInfo& info = Route("unary_op", op, Family::kUnary);
  CheckTile(info.name, "x", x);
  const DType dt = dtype ? *dtype : (info.bool_result ? kBool : x.dtype());
  if (info.integer_only) {
    CheckInteger(info, StrCat("operand 'x' ", x.Describe()), x.dtype());
    CheckInteger(info, "result dtype", dt);
  }
  Tile out = NewTile(info.name, x.shape(), dt);
  switch (info.lowering) {
    case Lowering::kActivation:
      nisa::activation(out, info.act, x);
      break;
    case Lowering::kTensorScalar:
      nisa::tensor_scalar(out, x,
                          OneStage(info.alu, info.imm_all_ones ? AllOnes(info, dt) : info.imm),
                          info.engine);
      break;
    case Lowering::kMinusRemainder: {
      Tile remainder = NewTile(StrCat(info.name, "_remainder"), x.shape(), DType::kFloat32);
      nisa::tensor_scalar(remainder, x, OneStage(info.alu, info.imm), info.engine);
      nisa::tensor_tensor(out, x, remainder, nisa::AluOp::kSubtract, info.engine);
      break;
    }
    default:
      Raise(ErrorCode::kInternal, StrCat("unary_op: ", info.name, " has no unary lowering"));
  }
  return out;
}

Tile binary_op(const Operand& x, const Operand& y, Op op, OptDType dtype) {
  return Elementwise(Route("binary_op", op, Family::kBinary), x, y, dtype);
}

Tile bitwise_op(const Operand& x, const Operand& y, Op op, OptDType dtype) {
  const OpInfo& info = Route("bitwise_op", op, Family::kBitwise);
  for (const auto& [name, operand] : {std::pair<const char*, const Operand&>{"x", x}, {"y", y}}) {
    if (operand.is_tile()) {
      CheckInteger(info, StrCat("operand '", name, "' ", operand.Describe()),
                   operand.tile().dtype());
    }
  }
  if (dtype) CheckInteger(info, "result dtype", *dtype);
  return Elementwise(info, x, y, dtype);
}

Tile activation(const Tile& x, Op op, OptDType dtype) {
  const OpInfo& info = Route("activation", op, Family::kActivation);
  CheckTile(info.name, "x", x);
  Tile out = NewTile(info.name, x.shape(), dtype ? *dtype : x.dtype());
  nisa::activation(out, info.act, x);
  return out;
}

Tile tensor_reduce(const Tile& x, Op op, const std::vector<int>& axis, bool keepdims,
                   OptDType dtype) {
  const OpInfo& info = Route("tensor_reduce", op, Family::kReduce);
  CheckTile(info.name, "x", x);
  const std::vector<int> axes = CheckFreeAxes(info.name, x, axis);
  const bool mean = info.lowering == Lowering::kMeanReduce;
  DType dt = info.bool_result ? kBool : x.dtype();
  if (mean && IsInteger(x.dtype())) dt = DType::kFloat32;
  Tile out = NewTile(info.name, ReducedShape(x, axes, keepdims), dtype ? *dtype : dt);
  nisa::ReduceOptions options;
  options.mean = mean;
  nisa::tensor_reduce(out, info.alu, x, axes, options, info.engine);
  return out;
}

}  // namespace nkisim::nl
