#include "runtime/nisa/elementwise.h"

#include <initializer_list>

#include "runtime/cost_model.h"
#include "runtime/error.h"
#include "runtime/nisa/issue.h"
#include "runtime/sim_mode.h"

namespace nkisim::nisa {
namespace {

void CheckComputeEngine(const char* inst, Engine engine) {
  if (engine != Engine::kVector && engine != Engine::kScalar && engine != Engine::kGpSimd) {
    Raise(ErrorCode::kInvalidArgument,
          StrCat(inst, ": engine ", EngineName(engine), " is not a compute engine; use Vector, ",
                 "Scalar or GpSimd"));
  }
}

void CheckSameShape(const char* inst, const Tile& dst, const char* name, const Tile& t) {
  if (t.partitions() != dst.partitions() || t.free_shape() != dst.free_shape()) {
    Illegal(inst, name, t, StrCat("shape must equal dst's ", ShapeString(dst.shape()),
                                  " (broadcast size-1 free dims explicitly)"));
  }
}

void CheckColumn(const char* inst, const Tile& dst, const char* name, const Tile& column) {
  if (column.partitions() != dst.partitions() || column.free_size() != 1) {
    Illegal(inst, name, column, StrCat("a per-partition operand must be [", dst.partitions(), ", 1]"));
  }
}

struct Named {
  const char* name;
  const Tile* tile;
};

void CheckIntegerOperands(const char* inst, AluOp op, std::initializer_list<Named> operands) {
  if (!IsBitwise(op)) return;
  for (const Named& o : operands) {
    if (o.tile->valid() && !IsInteger(o.tile->dtype())) {
      Illegal(inst, o.name, *o.tile, StrCat(AluOpName(op), " needs integer dtypes on every operand"));
    }
  }
}

int64_t Bytes(std::initializer_list<const Tile*> tiles) {
  int64_t bytes = 0;
  for (const Tile* t : tiles) bytes += t->numel() * static_cast<int64_t>(SizeOf(t->dtype()));
  return bytes;
}

bool Narrow(std::initializer_list<const Tile*> tiles) {
  for (const Tile* t : tiles) {
    if (SizeOf(t->dtype()) > 2) return false;
  }
  return true;
}

float ColumnAt(const Tile& column, int64_t p) {
  float v;
  column.ReadRow(p, &v);
  return v;
}

struct ScalarReader {
  const Scalar& s;
  float at(int64_t p) const { return s.is_column() ? ColumnAt(s.column(), p) : s.value(); }
};

// Registers a column operand with the issue and checks its shape.
void ReadScalar(Issue& issue, const char* inst, const Tile& dst, const char* name, const Scalar& s) {
  if (!s.is_column()) return;
  issue.Reads(name, s.column());
  CheckColumn(inst, dst, name, s.column());
}

float Apply(AluOp op, float a, float b, bool reverse) {
  return reverse ? ApplyAlu(op, b, a) : ApplyAlu(op, a, b);
}

// Prices the instruction by its cost-table row over dst's free elements (docs/engine-costs.md).
void Finish(Issue& issue, const Tile& dst, std::initializer_list<const Tile*> tiles,
            const CostRow& row) {
  issue.CommitRow(row, dst.free_size(), Narrow(tiles), Bytes(tiles), 0);
}

bool AllBf16(std::initializer_list<const Tile*> tiles) {
  for (const Tile* t : tiles) {
    if (t->dtype() != DType::kBFloat16) return false;
  }
  return true;
}

bool InPsum(const Tile& t) { return t.memory() == MemorySpace::kPsum; }

// ISA l.1803-1812: N cycles when one input is in PSUM and the other in SBUF, or both in SBUF, all
// bf16 and op add/multiply/subtract; 2N otherwise. (Contiguity is not checked.)
const CostRow& TensorTensorRow(const Tile& dst, const Tile& a, const Tile& b, AluOp op) {
  namespace r = cost_rows;
  if (InPsum(a) != InPsum(b)) return r::kTensorTensorFast;
  const bool simple = op == AluOp::kAdd || op == AluOp::kMultiply || op == AluOp::kSubtract;
  return !InPsum(a) && simple && AllBf16({&dst, &a, &b}) ? r::kTensorTensorFast : r::kTensorTensor;
}

// ISA l.1223-1225: N when data and operand1 are bf16, op0 subtract, op1 multiply and N even.
const CostRow& SttRow(const Tile& data0, const Tile& data1, AluOp op0, AluOp op1) {
  const bool fast = AllBf16({&data0, &data1}) && op0 == AluOp::kSubtract &&
                    op1 == AluOp::kMultiply && data0.free_size() % 2 == 0;
  return fast ? cost_rows::kSttFast : cost_rows::kStt;
}

}  // namespace

void tensor_tensor(const Tile& dst, const Tile& a, const Tile& b, AluOp op, Engine engine) {
  constexpr const char* kInst = "tensor_tensor";
  CheckComputeEngine(kInst, engine);
  Issue issue(kInst, engine);
  issue.Reads("a", a).Reads("b", b).Writes("dst", dst);
  CheckSameShape(kInst, dst, "a", a);
  CheckSameShape(kInst, dst, "b", b);
  CheckIntegerOperands(kInst, op, {{"dst", &dst}, {"a", &a}, {"b", &b}});
  const int64_t n = dst.free_size();
  float* x = ScratchRow(0, n);
  float* y = ScratchRow(1, n);
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    a.ReadRow(p, x);
    b.ReadRow(p, y);
    for (int64_t i = 0; i < n; ++i) x[i] = ApplyAlu(op, x[i], y[i]);
    dst.WriteRow(p, x);
  }
  Finish(issue, dst, {&dst, &a, &b}, TensorTensorRow(dst, a, b, op));
}

void tensor_scalar(const Tile& dst, const Tile& data, const TensorScalarOps& ops, Engine engine) {
  constexpr const char* kInst = "tensor_scalar";
  CheckComputeEngine(kInst, engine);
  Issue issue(kInst, engine);
  issue.Reads("data", data).Writes("dst", dst);
  ReadScalar(issue, kInst, dst, "operand0", ops.operand0);
  ReadScalar(issue, kInst, dst, "operand1", ops.operand1);
  CheckSameShape(kInst, dst, "data", data);
  CheckIntegerOperands(kInst, ops.op0,
                       {{"dst", &dst}, {"data", &data}, {"operand0", &ops.operand0.column()}});
  CheckIntegerOperands(kInst, ops.op1,
                       {{"dst", &dst}, {"data", &data}, {"operand1", &ops.operand1.column()}});
  const int64_t n = dst.free_size();
  float* x = ScratchRow(0, n);
  const ScalarReader s0{ops.operand0}, s1{ops.operand1};
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    data.ReadRow(p, x);
    const float v0 = s0.at(p), v1 = s1.at(p);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = Apply(ops.op1, Apply(ops.op0, x[i], v0, ops.reverse0), v1, ops.reverse1);
    }
    dst.WriteRow(p, x);
  }
  Finish(issue, dst, {&dst, &data}, cost_rows::kTensorScalar);
}

void scalar_tensor_tensor(const Tile& dst, const Tile& data0, AluOp op0, const Scalar& scalar,
                          AluOp op1, const Tile& data1, Engine engine) {
  constexpr const char* kInst = "scalar_tensor_tensor";
  CheckComputeEngine(kInst, engine);
  Issue issue(kInst, engine);
  issue.Reads("data0", data0).Reads("data1", data1).Writes("dst", dst);
  ReadScalar(issue, kInst, dst, "scalar", scalar);
  CheckSameShape(kInst, dst, "data0", data0);
  CheckSameShape(kInst, dst, "data1", data1);
  CheckIntegerOperands(kInst, op0, {{"dst", &dst}, {"data0", &data0}, {"scalar", &scalar.column()}});
  CheckIntegerOperands(kInst, op1, {{"dst", &dst}, {"data0", &data0}, {"data1", &data1}});
  const int64_t n = dst.free_size();
  float* x = ScratchRow(0, n);
  float* y = ScratchRow(1, n);
  const ScalarReader s{scalar};
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    data0.ReadRow(p, x);
    data1.ReadRow(p, y);
    const float v = s.at(p);
    for (int64_t i = 0; i < n; ++i) x[i] = ApplyAlu(op1, ApplyAlu(op0, x[i], v), y[i]);
    dst.WriteRow(p, x);
  }
  Finish(issue, dst, {&dst, &data0, &data1}, SttRow(data0, data1, op0, op1));
}

void activation(const Tile& dst, ActFn fn, const Tile& data, const ActivationOptions& options) {
  constexpr const char* kInst = "activation";
  Issue issue(kInst, Engine::kScalar);
  issue.Reads("data", data).Writes("dst", dst);
  ReadScalar(issue, kInst, dst, "scale", options.scale);
  CheckSameShape(kInst, dst, "data", data);
  if (options.scale.is_column() && options.scale.column().dtype() != DType::kFloat32) {
    Illegal(kInst, "scale", options.scale.column(), "scale must be fp32");
  }
  if (options.bias.valid()) {
    issue.Reads("bias", options.bias);
    CheckColumn(kInst, dst, "bias", options.bias);
    const DType bt = options.bias.dtype();
    if (bt != DType::kFloat32 && bt != DType::kFloat16 && bt != DType::kBFloat16) {
      Illegal(kInst, "bias", options.bias, "bias dtype must be fp32, fp16 or bf16");
    }
  }
  const bool reduce = options.reduce_op != AluOp::kBypass;
  if (reduce) {
    if (!IsReduction(options.reduce_op)) {
      Raise(ErrorCode::kInvalidArgument, StrCat(kInst, ": reduce_op ", AluOpName(options.reduce_op),
                                                " is not a reduction"));
    }
    if (!options.reduce_res.valid()) {
      Raise(ErrorCode::kInvalidArgument, StrCat(kInst, ": reduce_op set without reduce_res"));
    }
    issue.Writes("reduce_res", options.reduce_res);
    CheckColumn(kInst, dst, "reduce_res", options.reduce_res);
  }
  const int64_t n = dst.free_size();
  float* x = ScratchRow(0, n);
  const ScalarReader scale{options.scale};
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    data.ReadRow(p, x);
    const float s = scale.at(p);
    const float b = options.bias.valid() ? ColumnAt(options.bias, p) : 0.0f;
    for (int64_t i = 0; i < n; ++i) x[i] = ApplyActivation(fn, x[i] * s + b);
    dst.WriteRow(p, x);
    if (reduce) {
      dst.ReadRow(p, x);  // reduce what was stored, as the hardware reads its own output
      float acc = ReductionIdentity(options.reduce_op);
      for (int64_t i = 0; i < n; ++i) acc = ApplyAlu(options.reduce_op, acc, x[i]);
      options.reduce_res.WriteRow(p, &acc);
    }
  }
  Finish(issue, dst, {&dst, &data},
         reduce ? cost_rows::kActivationReduce : cost_rows::kActivation);
}

void tensor_copy(const Tile& dst, const Tile& src, Engine engine) {
  constexpr const char* kInst = "tensor_copy";
  CheckComputeEngine(kInst, engine);
  Issue issue(kInst, engine);
  issue.Reads("src", src).Writes("dst", dst);
  CheckSameShape(kInst, dst, "src", src);
  float* x = ScratchRow(0, dst.free_size());
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    src.ReadRow(p, x);
    dst.WriteRow(p, x);
  }
  Finish(issue, dst, {&dst, &src}, cost_rows::kCopy);
}

void reciprocal(const Tile& dst, const Tile& data) {
  constexpr const char* kInst = "reciprocal";
  Issue issue(kInst, Engine::kVector);
  issue.Reads("data", data).Writes("dst", dst);
  CheckSameShape(kInst, dst, "data", data);
  const int64_t n = dst.free_size();
  float* x = ScratchRow(0, n);
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    data.ReadRow(p, x);
    for (int64_t i = 0; i < n; ++i) x[i] = 1.0f / x[i];
    dst.WriteRow(p, x);
  }
  Finish(issue, dst, {&dst, &data}, cost_rows::kReciprocal);
}

void select(const Tile& dst, const Tile& predicate, const Tile& on_true, const Tile& on_false,
            Engine engine) {
  constexpr const char* kInst = "select";
  CheckComputeEngine(kInst, engine);
  Issue issue(kInst, engine);
  issue.Reads("predicate", predicate).Reads("on_true", on_true).Reads("on_false", on_false)
      .Writes("dst", dst);
  CheckSameShape(kInst, dst, "predicate", predicate);
  CheckSameShape(kInst, dst, "on_true", on_true);
  CheckSameShape(kInst, dst, "on_false", on_false);
  const int64_t n = dst.free_size();
  float* c = ScratchRow(0, n);
  float* t = ScratchRow(1, n);
  float* f = ScratchRow(2, n);
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    predicate.ReadRow(p, c);
    on_true.ReadRow(p, t);
    on_false.ReadRow(p, f);
    for (int64_t i = 0; i < n; ++i) c[i] = c[i] != 0.0f ? t[i] : f[i];
    dst.WriteRow(p, c);
  }
  // ISA l.1521-1523 (tensor_copy_predicated): N when source and predicate sit in different
  // memories, 2N when both are in SBUF.
  const bool mixed = InPsum(predicate) != InPsum(on_true);
  Finish(issue, dst, {&dst, &predicate, &on_true, &on_false},
         mixed ? cost_rows::kSelectPsum : cost_rows::kSelect);
}

void memset(const Tile& dst, float value, Engine engine) {
  constexpr const char* kInst = "memset";
  CheckComputeEngine(kInst, engine);
  Issue issue(kInst, engine);
  issue.Writes("dst", dst);
  const int64_t n = dst.free_size();
  float* x = ScratchRow(0, n);
  for (int64_t i = 0; i < n; ++i) x[i] = value;
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) dst.WriteRow(p, x);
  const bool zero16 = value == 0.0f && (dst.dtype() == DType::kBFloat16 || dst.dtype() == DType::kFloat16);
  Finish(issue, dst, {&dst}, zero16 ? cost_rows::kMemsetZero16 : cost_rows::kMemset);
}

void iota(const Tile& dst, int64_t base, int64_t channel_multiplier,
          const std::vector<std::pair<int64_t, int64_t>>& pattern) {
  constexpr const char* kInst = "iota";
  Issue issue(kInst, Engine::kGpSimd);
  issue.Writes("dst", dst);
  Shape counts;
  for (const auto& step_count : pattern) counts.push_back(step_count.second);
  if (counts != dst.free_shape()) {
    Illegal(kInst, "dst", dst, StrCat("free shape must equal the pattern's counts ",
                                      ShapeString(counts)));
  }
  Shape steps;
  for (const auto& step_count : pattern) steps.push_back(step_count.first);
  const int64_t n = dst.free_size();
  float* x = ScratchRow(0, n);
  for (int64_t p = 0; Functional() && p < dst.partitions(); ++p) {
    int64_t i = 0;
    ForEachStridedOffset(counts, steps, base + channel_multiplier * p,
                         [&](int64_t value) { x[i++] = static_cast<float>(value); });
    dst.WriteRow(p, x);
  }
  Finish(issue, dst, {&dst}, cost_rows::kIota);
}

}  // namespace nkisim::nisa
