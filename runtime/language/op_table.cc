#include "runtime/language/op_table.h"

#include <initializer_list>
#include <sstream>

#include "runtime/error.h"

namespace nkisim::nl {
namespace {

using nisa::ActFn;
using nisa::AluOp;

std::string Number(float v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// Steps of the dispatcher lowerings: what unary_op / binary_op / activation / tensor_reduce emit.
std::vector<Step> LoweredSteps(const OpInfo& r) {
  const std::string imm = r.imm_all_ones ? "all-ones" : Number(r.imm);
  switch (r.lowering) {
    case Lowering::kActivation:
      return {{"activation", Engine::kScalar, nisa::ActFnName(r.act)}};
    case Lowering::kTensorScalar:
      return {{"tensor_scalar", r.engine, StrCat(nisa::AluOpName(r.alu), " ", imm)}};
    case Lowering::kMinusRemainder:
      return {{"tensor_scalar", r.engine, StrCat(nisa::AluOpName(r.alu), " ", imm)},
              {"tensor_tensor", r.engine, "subtract"}};
    case Lowering::kTensorTensor:
      return {{"tensor_tensor", r.engine, nisa::AluOpName(r.alu)}};
    case Lowering::kReduce:
      return {{"tensor_reduce", r.engine, nisa::AluOpName(r.alu)}};
    case Lowering::kMeanReduce:
      return {{"tensor_reduce", r.engine, "add, mean"}};
    case Lowering::kCustom:
      return r.steps;
  }
  return {};
}

// A part of a composite: an earlier op, with its immediate-operand form when `immediate`.
struct Part {
  Op op;
  bool immediate = false;
};

class TableBuilder {
 public:
  const std::vector<OpInfo>& rows() const { return rows_; }

  void Add(OpInfo row) {
    if (static_cast<int>(rows_.size()) != static_cast<int>(row.op)) {
      Raise(ErrorCode::kInternal, StrCat("nl op table: row '", row.name, "' is out of Op order"));
    }
    row.steps = LoweredSteps(row);
    rows_.push_back(std::move(row));
  }

  void Alu(Family family, Op op, const char* name, const char* token, AluOp alu, bool bool_result,
           std::string notes = "") {
    const Lowering lowering =
        family == Family::kReduce ? Lowering::kReduce : Lowering::kTensorTensor;
    Add({.op = op,
         .name = name,
         .family = family,
         .token = token,
         .lowering = lowering,
         .alu = alu,
         .bool_result = bool_result,
         .integer_only = family == Family::kBitwise,
         .notes = std::move(notes)});
  }
  void Act(Family family, Op op, const char* name, const char* token, ActFn act,
           std::string notes = "") {
    Add({.op = op,
         .name = name,
         .family = family,
         .token = token,
         .lowering = Lowering::kActivation,
         .act = act,
         .notes = std::move(notes)});
  }
  void Custom(Op op, const char* name, Family family, const char* token, std::vector<Step> steps,
              std::string notes) {
    Add({.op = op,
         .name = name,
         .family = family,
         .token = token,
         .steps = std::move(steps),
         .notes = std::move(notes)});
  }
  // A composite's steps are those of its parts, so re-routing a part re-routes the composite.
  void Composite(Op op, const char* name, const char* token, std::initializer_list<Part> parts,
                 std::string notes) {
    std::vector<Step> steps;
    for (const Part& part : parts) {
      const OpInfo& r = rows_.at(static_cast<size_t>(part.op));
      if (part.immediate) {
        steps.push_back({"tensor_scalar", r.engine, StrCat(nisa::AluOpName(r.alu), " scalar")});
      } else {
        steps.insert(steps.end(), r.steps.begin(), r.steps.end());
      }
    }
    Custom(op, name, Family::kComposite, token, std::move(steps), std::move(notes));
  }

 private:
  std::vector<OpInfo> rows_;
};

// A unary op lowered on the Vector ALU: tensor_scalar(alu, imm), or x - that (kMinusRemainder).
OpInfo UnaryAlu(Op op, const char* name, const char* token, Lowering lowering, AluOp alu, float imm,
                std::string notes) {
  return {.op = op,
          .name = name,
          .family = Family::kUnary,
          .token = token,
          .lowering = lowering,
          .alu = alu,
          .imm = imm,
          .notes = std::move(notes)};
}

void AddUnary(TableBuilder& t) {
  const Family u = Family::kUnary;
  const std::string open = "routing left open by the seed: chosen ";
  t.Act(u, Op::kExp, "exp", "np.exp", ActFn::kExp);
  t.Act(u, Op::kLog, "log", "np.log", ActFn::kLog);
  t.Act(u, Op::kCos, "cos", "np.cos", ActFn::kCos);
  t.Act(u, Op::kSin, "sin", "np.sin", ActFn::kSin);
  t.Act(u, Op::kTan, "tan", "np.tan", ActFn::kTan);
  t.Act(u, Op::kTanh, "tanh", "np.tanh", ActFn::kTanh);
  t.Act(u, Op::kSqrt, "sqrt", "np.sqrt", ActFn::kSqrt);
  const Lowering scalar = Lowering::kTensorScalar, minus = Lowering::kMinusRemainder;
  t.Add(UnaryAlu(Op::kAbs, "abs", "np.abs", scalar, AluOp::kAbsMax, 0, "abs_max with 0 is |x|"));
  t.Add(UnaryAlu(Op::kNegative, "negative", "np.negative", scalar, AluOp::kMultiply, -1,
                 open + "Vector (x * -1; no ACT table load)"));
  t.Add(UnaryAlu(Op::kFloor, "floor", "np.floor", minus, AluOp::kMod, 1,
                 "the ALU has no rounding op: x - mod(x, 1), mod taking the divisor's sign"));
  t.Add(UnaryAlu(Op::kCeil, "ceil", "np.ceil", minus, AluOp::kMod, -1, "x - mod(x, -1)"));
  t.Add(UnaryAlu(Op::kTrunc, "trunc", "np.trunc", minus, AluOp::kFmod, 1,
                 "x - fmod(x, 1), fmod taking the dividend's sign"));
  t.Act(u, Op::kArctan, "arctan", "np.arctan", ActFn::kArctan, open + "Scalar activation");
  t.Act(u, Op::kSign, "sign", "np.sign", ActFn::kSign, open + "Scalar activation");
  OpInfo logical_not = UnaryAlu(Op::kLogicalNot, "logical_not", "np.logical_not", scalar,
                                AluOp::kEqual, 0, "x == 0, a bool result");
  logical_not.bool_result = true;
  t.Add(std::move(logical_not));
  OpInfo invert = UnaryAlu(Op::kInvert, "invert", "np.invert", scalar, AluOp::kBitwiseXor, 0,
                           "xor with the dtype's all-ones; integer dtypes other than uint32 (the "
                           "ALU computes through fp32)");
  invert.imm_all_ones = true;
  invert.integer_only = true;
  t.Add(std::move(invert));
}

void AddBinary(TableBuilder& t) {
  const Family f = Family::kBinary;
  t.Alu(f, Op::kAdd, "add", "np.add", AluOp::kAdd, false);
  t.Alu(f, Op::kSubtract, "subtract", "np.subtract", AluOp::kSubtract, false);
  t.Alu(f, Op::kMultiply, "multiply", "np.multiply", AluOp::kMultiply, false);
  t.Alu(f, Op::kMaximum, "maximum", "np.maximum", AluOp::kMax, false);
  t.Alu(f, Op::kMinimum, "minimum", "np.minimum", AluOp::kMin, false);
  t.Alu(f, Op::kPower, "power", "np.power", AluOp::kPow, false,
        "Vector for every dtype (the seed allows GpSimd for power and integer arithmetic)");
  t.Alu(f, Op::kFmod, "fmod", "np.fmod", AluOp::kFmod, false);
  t.Alu(f, Op::kMod, "mod", "np.mod", AluOp::kMod, false);
  t.Alu(f, Op::kDivide, "divide", "np.divide (binop)", AluOp::kDivide, false,
        "binop's tile-legality check: the dividend must be a tile (1 / x is reciprocal); a "
        "Vector divide, not a reciprocal-multiply");
  t.Alu(f, Op::kEqual, "equal", "np.equal", AluOp::kEqual, true);
  t.Alu(f, Op::kNotEqual, "not_equal", "np.not_equal", AluOp::kNotEqual, true);
  t.Alu(f, Op::kGreater, "greater", "np.greater", AluOp::kGreater, true);
  t.Alu(f, Op::kGreaterEqual, "greater_equal", "np.greater_equal", AluOp::kGreaterEqual, true);
  t.Alu(f, Op::kLess, "less", "np.less", AluOp::kLess, true);
  t.Alu(f, Op::kLessEqual, "less_equal", "np.less_equal", AluOp::kLessEqual, true);
  t.Alu(f, Op::kLogicalAnd, "logical_and", "np.logical_and", AluOp::kLogicalAnd, true);
  t.Alu(f, Op::kLogicalOr, "logical_or", "np.logical_or", AluOp::kLogicalOr, true);
  t.Alu(f, Op::kLogicalXor, "logical_xor", "np.logical_xor", AluOp::kLogicalXor, true);
  const Family b = Family::kBitwise;
  const std::string gate = "bitwise_op refuses non-integer operands and results";
  t.Alu(b, Op::kBitwiseAnd, "bitwise_and", "np.bitwise_and", AluOp::kBitwiseAnd, false, gate);
  t.Alu(b, Op::kBitwiseOr, "bitwise_or", "np.bitwise_or", AluOp::kBitwiseOr, false, gate);
  t.Alu(b, Op::kBitwiseXor, "bitwise_xor", "np.bitwise_xor", AluOp::kBitwiseXor, false, gate);
  t.Alu(b, Op::kLeftShift, "left_shift", "np.left_shift", AluOp::kShiftLeft, false, gate);
  t.Alu(b, Op::kRightShift, "right_shift", "np.right_shift", AluOp::kShiftRight, false,
        gate + "; arithmetic shift");
}

void AddActivations(TableBuilder& t) {
  const Family a = Family::kActivation;
  t.Act(a, Op::kSquare, "square", "np.square", ActFn::kSquare,
        "an activation, not a multiply: x^2 stays on the ACT unit");
  t.Act(a, Op::kGelu, "gelu", "native_maths.gelu", ActFn::kGelu);
  t.Act(a, Op::kGeluApprxTanh, "gelu_apprx_tanh", "native_maths.gelu_apprx_tanh",
        ActFn::kGeluApproxTanh);
  t.Act(a, Op::kGeluApprxSigmoid, "gelu_apprx_sigmoid", "native_maths.gelu_apprx_sigmoid",
        ActFn::kGeluApproxSigmoid);
  t.Act(a, Op::kGeluApprxSigmoidDx, "gelu_apprx_sigmoid_dx", "native_maths.gelu_apprx_sigmoid_dx",
        ActFn::kGeluApproxSigmoidDx);
  t.Act(a, Op::kGeluDx, "gelu_dx", "native_maths.gelu_dx", ActFn::kGeluDx);
  t.Act(a, Op::kSilu, "silu", "native_maths.silu", ActFn::kSilu);
  t.Act(a, Op::kSiluDx, "silu_dx", "native_maths.silu_dx", ActFn::kSiluDx);
  t.Act(a, Op::kRelu, "relu", "native_maths.relu", ActFn::kRelu);
  t.Act(a, Op::kErf, "erf", "native_maths.erf", ActFn::kErf);
  t.Act(a, Op::kErfDx, "erf_dx", "native_maths.erf_dx", ActFn::kErfDx);
  t.Act(a, Op::kSoftplus, "softplus", "native_maths.softplus", ActFn::kSoftplus);
  t.Act(a, Op::kMish, "mish", "native_maths.mish", ActFn::kMish);
  t.Act(a, Op::kRsqrt, "rsqrt", "native_maths.rsqrt", ActFn::kRsqrt);
  t.Act(a, Op::kSigmoid, "sigmoid", "scipy expit", ActFn::kSigmoid,
        "the token is SciPy's expit, not a native_maths function");
}

void AddPassthroughs(TableBuilder& t) {
  t.Custom(Op::kReciprocal, "reciprocal", Family::kNisa, "nisa.reciprocal",
           {{"reciprocal", Engine::kVector, ""}}, "the Vector reciprocal, not the ACT function");
  t.Custom(Op::kDropout, "dropout", Family::kNisa, "nisa.n_dropout",
           {{"dropout", Engine::kVector, ""}},
           "PRNG drop with probability rate, kept values not rescaled; reproducible after "
           "random_seed");
  t.Custom(Op::kMatmul, "matmul", Family::kNisa, "nisa.nc_transpose + nisa.nc_matmul",
           {{"nc_transpose", Engine::kVector, ""}, {"nc_matmul", Engine::kPE, ""}},
           "x [M, K] is transposed on the Vector engine, then x.T @ y on PE into PSUM fp32 "
           "[M, N]; transpose_x = true (x given as [K, M]) elides the transpose. x: partitions "
           "<= 128, free <= 128; y: partitions <= 128, free <= 512");
  t.Custom(Op::kTranspose, "transpose", Family::kNisa, "nisa.nc_transpose",
           {{"nc_transpose", Engine::kPE, ""}},
           "PE identity-matmul transpose into PSUM; x [P, F <= 128] in SBUF");
}

void AddReductions(TableBuilder& t) {
  const Family f = Family::kReduce;
  t.Alu(f, Op::kMax, "max", "np.max", AluOp::kMax, false);
  t.Alu(f, Op::kMin, "min", "np.min", AluOp::kMin, false);
  t.Alu(f, Op::kSum, "sum", "np.add", AluOp::kAdd, false,
        "no accumulator promotion: the result keeps x's dtype");
  t.Alu(f, Op::kProd, "prod", "np.multiply", AluOp::kMultiply, false,
        "no accumulator promotion: the result keeps x's dtype");
  OpInfo mean = {.op = Op::kMean,
                 .name = "mean",
                 .family = f,
                 .token = "np.mean",
                 .lowering = Lowering::kMeanReduce,
                 .alu = AluOp::kAdd,
                 .notes = "the only reduction that promotes: integer x gives an fp32 result"};
  t.Add(std::move(mean));
  t.Alu(f, Op::kAll, "all", "np.all", AluOp::kLogicalAnd, true, "logical and; a bool result");
  t.Composite(Op::kVar, "var", "mean + subtract + power",
              {{Op::kMean}, {Op::kSubtract}, {Op::kPower, true}, {Op::kMean}},
              "mean((x - mean(x))^2), population variance");
  t.Composite(
      Op::kSoftmax, "softmax", "native_maths.softmax",
      {{Op::kMax}, {Op::kSubtract}, {Op::kExp}, {Op::kSum}, {Op::kReciprocal}, {Op::kMultiply}},
      "mixed_precision (default on): shift, exp, sum and reciprocal in fp32; "
      "zero_max_mode clamps the max at 0 with one more tensor_scalar(max 0); "
      "return_max_reduce hands back the max");
  t.Composite(Op::kRmsNorm, "rms_norm", "native_maths.rms_norm",
              {{Op::kPower, true},
               {Op::kMean},
               {Op::kAdd, true},
               {Op::kSqrt},
               {Op::kReciprocal},
               {Op::kMultiply},
               {Op::kMultiply}},
              "x / sqrt(mean(x^2) + eps) * w, computed in fp32 by default (compute_dtype)");
  t.Custom(Op::kAllReduce, "all_reduce", Family::kContext, "nki_ctx.loopreduce (program axes)",
           {{"sendrecv", Engine::kDma0, ""}, {"tensor_tensor", Engine::kVector, "op"}},
           "LNC = 2: exchange with the peer program (a DMA on the sender's engines), then "
           "combine; LNC = 1 returns x");
  t.Custom(Op::kLoopReduce, "loop_reduce", Family::kContext, "nki_ctx.loopreduce (loop indices)",
           {{"tensor_copy", Engine::kVector, ""}, {"tensor_tensor", Engine::kVector, "op"}},
           "the first iteration copies x into the carried accumulator, later ones combine in "
           "place");
}

void AddCreation(TableBuilder& t) {
  const Family c = Family::kContext;
  const std::vector<Step> fill = {{"memset", Engine::kVector, ""}};
  t.Custom(Op::kNdarray, "ndarray", c, "nki_ctx.cur_scope.buffer", {},
           "uninitialised: float tiles read NaN until written");
  t.Custom(Op::kFull, "full", c, "nki_ctx.cur_scope.buffer(init)", fill, "");
  t.Custom(Op::kZeros, "zeros", c, "full(0)", fill, "");
  t.Custom(Op::kOnes, "ones", c, "full(1)", fill, "");
  t.Custom(Op::kZerosLike, "zeros_like", c, "full(a.shape, 0)", fill, "");
  t.Custom(Op::kEmptyLike, "empty_like", c, "ndarray(a.shape)", {}, "uninitialised, as ndarray");
  t.Custom(Op::kRand, "rand", c, "nisa.random", {{"random", Engine::kGpSimd, ""}},
           "uniform [0, 1) from the core's PRNG stream");
  t.Custom(Op::kRandomSeed, "random_seed", c, "nki_ctx.random_seed",
           {{"random_seed", Engine::kGpSimd, ""}}, "restarts the core's PRNG stream");
  t.Custom(Op::kSharedConstant, "shared_constant", c, "nki_ctx.shared_constant", {},
           "a host-initialised HBM tensor");
  t.Custom(Op::kSharedIdentityMatrix, "shared_identity_matrix", c, "nki_ctx.shared_identity_matrix",
           {}, "an n x n identity in HBM, uint8 by default");
}

void AddMemory(TableBuilder& t) {
  const Family c = Family::kContext;
  t.Custom(Op::kLoad, "load", c, "nki_ctx.load", {{"dma_copy", Engine::kDma0, ""}},
           "HBM to a new SBUF tile; the view's dim 0 becomes the partition dim");
  t.Custom(Op::kStore, "store", c, "nki_ctx.store", {{"dma_copy", Engine::kDma0, ""}},
           "SBUF to an existing HBM view");
  t.Custom(Op::kCopy, "copy", c, "nki_ctx.copy", {{"tensor_copy", Engine::kVector, ""}},
           "on chip, on a compute engine, not DMA");
  t.Custom(Op::kLoadTranspose2d, "load_transpose2d", c, "nki_ctx.dma_transpose",
           {{"dma_transpose", Engine::kDma0, ""}},
           "hardware DGE when src [R <= 16, C <= 128] has a 2-byte dtype, else the software-DGE "
           "fallback (dge_descriptors on GpSimd first); a src that is not 2-D or has C > 128 is "
           "refused");
  t.Custom(Op::kAtomicRmw, "atomic_rmw", c, "nki_ctx store with atomic add",
           {{"dma_scatter_add", Engine::kDma0, ""}},
           "op must be add (err_atomic_rmw_add_only); dst must be indexed by a dynamic index "
           "tile (err_atomic_rmw_dynamic_index)");
  t.Custom(Op::kBroadcastTo, "broadcast_to", Family::kView, "nki_ctx broadcast view", {},
           "zero-stride view of size-1 dims");
  t.Custom(Op::kExpandDims, "expand_dims", Family::kView, "expand_dims", {},
           "appends a size-1 dim after the last");
  t.Custom(Op::kWhere, "where", c, "nki_ctx.select", {{"select", Engine::kVector, ""}},
           "the predicated select");
  t.Custom(Op::kGatherFlattened, "gather_flattened", c, "nki_ctx.gather_flattened",
           {{"gather_flattened", Engine::kGpSimd, ""}},
           "per-partition gather over the flattened free dims");
}

std::vector<OpInfo> BuildTable() {
  TableBuilder t;
  AddUnary(t);
  AddBinary(t);
  AddActivations(t);
  AddPassthroughs(t);
  AddReductions(t);
  AddCreation(t);
  AddMemory(t);
  if (static_cast<int>(t.rows().size()) != kNumOps) {
    Raise(ErrorCode::kInternal,
          StrCat("nl op table: ", t.rows().size(), " rows for ", kNumOps, " ops"));
  }
  return t.rows();
}

// A markdown table cell: a literal '|' would end the cell.
std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string Joined(const OpInfo& r, bool engines) {
  if (r.steps.empty()) return "none";
  std::string out;
  for (const Step& s : r.steps) {
    if (!out.empty()) out += " → ";
    out += engines ? StepEngineName(s.engine) : s.ToString();
  }
  return out;
}

}  // namespace

const char* FamilyName(Family family) {
  static constexpr const char* kNames[] = {"unary_op",   "binary_op",     "bitwise_op",
                                           "activation", "tensor_reduce", "nisa",
                                           "composite",  "nki_ctx",       "view"};
  return kNames[static_cast<int>(family)];
}

std::string Step::ToString() const {
  return detail.empty() ? instruction : StrCat(instruction, "(", detail, ")");
}

std::string StepEngineName(Engine engine) {
  return IsDma(engine) || IsDmaQueue(engine) ? "DMA" : EngineName(engine);
}

const std::vector<OpInfo>& OpTable() {
  static const auto* table = new std::vector<OpInfo>(BuildTable());
  return *table;
}

const OpInfo& Info(Op op) { return OpTable().at(static_cast<size_t>(op)); }

std::string OpTableMarkdown() {
  std::string md =
      "# nl ops: dispatcher, engine and nisa instructions\n\n"
      "Generated from `runtime/language/op_table.cc` by `nl_op_table`; do not edit by hand.\n"
      "Regenerate with `build/runtime/language/nl_op_table > docs/nl-ops.md` (a language test\n"
      "fails while this file and the table disagree; another runs every op and checks that it\n"
      "records exactly these instructions on these engines).\n\n"
      "Conventions:\n\n"
      "- Results are new tiles on the current core, in SBUF unless the op says otherwise, with\n"
      "  the input's dtype unless a `dtype` is given; `bool` is `uint8` (0 / 1).\n"
      "- Binary ops take tiles or immediates. Two tiles go to `tensor_tensor` with size-1 free\n"
      "  dims broadcast by zero-stride views (the partition dim never broadcasts); a tile and an\n"
      "  immediate go to one `tensor_scalar` on the same engine. Mixed dtypes promote to the\n"
      "  float one, two floats to fp32, two integers to int32.\n"
      "- Reductions run on free axes only: a contiguous run of free dims ending at the last one.\n"
      "  The partition axis (0) is refused.\n"
      "- The instructions listed are those for tile operands; `none` means no instruction\n"
      "  (allocation, host-initialised HBM or a view). NKI's `mask` argument is not modeled.\n\n"
      "| op | dispatcher | token | engines | nisa instructions | notes |\n"
      "|---|---|---|---|---|---|\n";
  for (const OpInfo& r : OpTable()) {
    md += StrCat("| `", r.name, "` | ", FamilyName(r.family), " | ", Cell(r.token), " | ",
                 Joined(r, true), " | ", Cell(Joined(r, false)), " | ", Cell(r.notes), " |\n");
  }
  return md;
}

}  // namespace nkisim::nl
