// The routing table of the nl kernel language: for every nl op, the dispatcher (family) it goes
// through, the op token it hands that dispatcher (NKI's np.<ufunc>, native_maths.<fn>, expit...),
// and the nisa instructions it emits, with the engine of each.
//
// This is the one place routing lives. The dispatchers (dispatch.h) read their lowering and engine
// from the row of the token they are given; docs/nl-ops.md is printed from this table by the
// nl_op_table program (OpTableMarkdown); the language tests run every op and check that the
// instructions it records on the timeline are the row's steps, in order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/nisa/activation_functions.h"
#include "runtime/nisa/alu.h"
#include "runtime/timeline.h"

namespace nkisim::nl {

// Op tokens, one per nl op, in table order.
enum class Op : uint8_t {
  // unary_op
  kExp,
  kLog,
  kCos,
  kSin,
  kTan,
  kTanh,
  kSqrt,
  kAbs,
  kNegative,
  kFloor,
  kCeil,
  kTrunc,
  kArctan,
  kSign,
  kLogicalNot,
  kInvert,
  // binary_op
  kAdd,
  kSubtract,
  kMultiply,
  kMaximum,
  kMinimum,
  kPower,
  kFmod,
  kMod,
  kDivide,
  kEqual,
  kNotEqual,
  kGreater,
  kGreaterEqual,
  kLess,
  kLessEqual,
  kLogicalAnd,
  kLogicalOr,
  kLogicalXor,
  // bitwise_op
  kBitwiseAnd,
  kBitwiseOr,
  kBitwiseXor,
  kLeftShift,
  kRightShift,
  // activation
  kSquare,
  kGelu,
  kGeluApprxTanh,
  kGeluApprxSigmoid,
  kGeluApprxSigmoidDx,
  kGeluDx,
  kSilu,
  kSiluDx,
  kRelu,
  kErf,
  kErfDx,
  kSoftplus,
  kMish,
  kRsqrt,
  kSigmoid,
  // direct nisa passthroughs
  kReciprocal,
  kDropout,
  kMatmul,
  kTranspose,
  // tensor_reduce
  kMax,
  kMin,
  kSum,
  kProd,
  kMean,
  kAll,
  // composites
  kVar,
  kSoftmax,
  kRmsNorm,
  // reductions across programs and loop iterations
  kAllReduce,
  kLoopReduce,
  // creation
  kNdarray,
  kFull,
  kZeros,
  kOnes,
  kZerosLike,
  kEmptyLike,
  kRand,
  kRandomSeed,
  kSharedConstant,
  kSharedIdentityMatrix,
  // memory
  kLoad,
  kStore,
  kCopy,
  kLoadTranspose2d,
  kAtomicRmw,
  kBroadcastTo,
  // shape and indexing
  kExpandDims,
  kWhere,
  kGatherFlattened,
};
inline constexpr int kNumOps = static_cast<int>(Op::kGatherFlattened) + 1;

// The dispatcher an op goes through (the seed's module-global it fetches).
enum class Family : uint8_t {
  kUnary,       // unary_op
  kBinary,      // binary_op
  kBitwise,     // bitwise_op
  kActivation,  // activation
  kReduce,      // tensor_reduce
  kNisa,        // a direct nisa passthrough
  kComposite,   // several nl ops
  kContext,     // an nki_ctx build-context call (creation, memory, select, loopreduce)
  kView,        // a view of existing storage: no instruction
};
const char* FamilyName(Family family);  // "unary_op", "binary_op", ..., "view"

// How a dispatcher lowers a token. kCustom ops are written out by their own function.
enum class Lowering : uint8_t {
  kActivation,      // activation(act) on the Scalar engine
  kTensorScalar,    // tensor_scalar(alu, imm)
  kMinusRemainder,  // rem = tensor_scalar(alu, imm); tensor_tensor(x - rem)
  kTensorTensor,    // tensor_tensor(alu); tensor_scalar when one operand is an immediate
  kReduce,          // tensor_reduce(alu)
  kMeanReduce,      // tensor_reduce(add) with the mean option
  kCustom,
};

// One instruction of an op's sequence. Engine::kDma0 stands for "any DMA queue".
struct Step {
  const char* instruction;  // the nisa mnemonic recorded on the timeline
  Engine engine;
  std::string detail;            // e.g. "exp", "abs_max 0"; may be empty
  std::string ToString() const;  // "activation(exp)"
};
std::string StepEngineName(Engine engine);  // EngineName, with every DMA queue as "DMA"

struct OpInfo {
  Op op = Op::kExp;
  const char* name = "";  // the nl name
  Family family = Family::kUnary;
  const char* token = "";  // the op token of the seed
  Lowering lowering = Lowering::kCustom;
  Engine engine = Engine::kVector;  // of the tensor_scalar / tensor_tensor / reduce lowerings
  nisa::ActFn act = nisa::ActFn::kIdentity;
  nisa::AluOp alu = nisa::AluOp::kBypass;
  float imm = 0.0f;
  bool imm_all_ones = false;     // imm is the dtype's all-ones bit pattern (invert)
  bool bool_result = false;      // the result dtype defaults to kBool
  bool integer_only = false;     // operands and result must have integer dtypes
  std::vector<Step> steps = {};  // what the op emits for tile operands (derived unless kCustom)
  std::string notes = {};
};

// Every op, indexed by Op. Throws Error(kInternal) if the table is inconsistent.
const std::vector<OpInfo>& OpTable();
const OpInfo& Info(Op op);

// docs/nl-ops.md: a heading, the conventions, and one table row per op.
std::string OpTableMarkdown();

}  // namespace nkisim::nl
