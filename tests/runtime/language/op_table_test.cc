// The routing table (runtime/language/op_table.h) against the code: docs/nl-ops.md must be what
// nl_op_table prints, every op must record on the timeline exactly the instructions and engines
// of its row, and the table itself must be well formed (one row per op, in order, each dispatched
// family with a lowering its dispatcher knows).
#include "runtime/language/op_table.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/language/nl.h"
#include "runtime/logical_core.h"
#include "tests/runtime/language/nl_test_util.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::nl::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The first line where a and b differ, for the failure message.
std::string FirstDifference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(sa, la));
    const bool more_b = static_cast<bool>(std::getline(sb, lb));
    if (!more_a && !more_b) return "(none)";
    if (la != lb || more_a != more_b) {
      return "line " + std::to_string(line) + ":\n  file:      " + (more_a ? la : "<end>") +
             "\n  generated: " + (more_b ? lb : "<end>");
    }
  }
}

TEST(OpTableTest, DocsTableIsTheGeneratorsOutput) {
  const std::string path = std::string(NKISIM_SOURCE_DIR) + "/docs/nl-ops.md";
  const std::string file = ReadFile(path);
  const std::string generated = OpTableMarkdown();
  EXPECT_EQ(file, generated)
      << "docs/nl-ops.md disagrees with the routing table in runtime/language/op_table.cc; "
         "regenerate it with\n  cd build && ninja nl_op_table && "
         "./runtime/language/nl_op_table > ../docs/nl-ops.md\nfirst difference at "
      << FirstDifference(file, generated);
}

TEST(OpTableTest, OneRowPerOpInOrderWithDispatchableLowerings) {
  ASSERT_EQ(static_cast<int>(OpTable().size()), kNumOps);
  std::set<std::string> names;
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& r = Info(static_cast<Op>(i));
    EXPECT_EQ(static_cast<int>(r.op), i) << r.name;
    EXPECT_TRUE(names.insert(r.name).second) << "duplicate name " << r.name;
    EXPECT_STRNE(r.token, "") << r.name;
    switch (r.family) {
      case Family::kUnary:
        EXPECT_TRUE(r.lowering == Lowering::kActivation || r.lowering == Lowering::kTensorScalar ||
                    r.lowering == Lowering::kMinusRemainder)
            << r.name;
        break;
      case Family::kBinary:
      case Family::kBitwise:
        EXPECT_EQ(r.lowering, Lowering::kTensorTensor) << r.name;
        break;
      case Family::kActivation:
        EXPECT_EQ(r.lowering, Lowering::kActivation) << r.name;
        break;
      case Family::kReduce:
        EXPECT_TRUE(r.lowering == Lowering::kReduce || r.lowering == Lowering::kMeanReduce)
            << r.name;
        break;
      default:
        EXPECT_EQ(r.lowering, Lowering::kCustom) << r.name;
    }
  }
}

TEST(OpTableTest, SeedRoutingOfNamedOps) {
  EXPECT_EQ(Info(Op::kExp).steps[0].ToString(), "activation(exp)");
  EXPECT_EQ(Info(Op::kTanh).steps[0].engine, Engine::kScalar);
  for (Op op : {Op::kAbs, Op::kFloor, Op::kCeil, Op::kTrunc}) {
    EXPECT_EQ(Info(op).steps[0].instruction, std::string("tensor_scalar")) << Info(op).name;
    EXPECT_EQ(Info(op).steps[0].engine, Engine::kVector) << Info(op).name;
  }
  EXPECT_EQ(Info(Op::kSquare).steps[0].ToString(), "activation(square)");
  EXPECT_STREQ(Info(Op::kSigmoid).token, "scipy expit");
  EXPECT_EQ(Info(Op::kReciprocal).steps[0].engine, Engine::kVector);
  EXPECT_EQ(Info(Op::kDivide).steps[0].ToString(), "tensor_tensor(divide)");
}

TEST_F(NlTest, DispatcherRefusesATokenOfAnotherFamily) {
  Tile x = Input({4, 8}, DType::kFloat32, 0, 1);
  const std::string message =
      ::nkisim::testing::ErrorMessageOf(ErrorCode::kInternal, [&] { unary_op(x, Op::kAdd); });
  EXPECT_EQ(message, "unary_op: token add belongs to binary_op");
  EXPECT_EQ(
      ::nkisim::testing::ErrorMessageOf(ErrorCode::kInternal, [&] { activation(x, Op::kExp); }),
      "activation: token exp belongs to unary_op");
}

// Runs each op once on canonical inputs; the test compares what it recorded with its row.
class OpRoutingTest : public NlTest, public ::testing::WithParamInterface<int> {
 protected:
  // Runs op; returns the instructions it recorded (on core 0 of an LNC = 2 core for all_reduce).
  std::vector<Emitted> Probe(Op op) {
    const Tile x = Input({8, 16}, DType::kFloat32, 0.5f, 2.0f, 1);
    const Tile y = Input({8, 16}, DType::kFloat32, 0.5f, 2.0f, 2);
    const Tile ints = FromValues({8, 16}, DType::kInt32, std::vector<float>(128, 6.0f));
    const TensorView hbm = TensorView::Create({8, 16}, DType::kFloat32, "hbm");
    const Tile rows = FromValues({8, 1}, DType::kInt32, {0, 1, 2, 3, 4, 5, 6, 7});
    if (op == Op::kAllReduce) return ProbeAllReduce();
    const size_t mark = Mark();
    switch (Info(op).family) {
      case Family::kUnary:
        unary_op(Info(op).integer_only ? ints : x, op);
        break;
      case Family::kBinary:
        binary_op(x, y, op);
        break;
      case Family::kBitwise:
        bitwise_op(ints, ints, op);
        break;
      case Family::kActivation:
        activation(x, op);
        break;
      case Family::kReduce:
        tensor_reduce(x, op, {1});
        break;
      default:
        ProbeCustom(op, x, y, hbm, rows);
        break;
    }
    return Since(mark);
  }

  void ProbeCustom(Op op, const Tile& x, const Tile& y, const TensorView& hbm, const Tile& rows) {
    switch (op) {
      case Op::kReciprocal:
        reciprocal(x);
        break;
      case Op::kDropout:
        dropout(x, 0.5f);
        break;
      case Op::kMatmul:
        matmul(x, Input({16, 32}, DType::kFloat32, -1, 1));
        break;
      case Op::kTranspose:
        transpose(x);
        break;
      case Op::kVar:
        var(x, {1});
        break;
      case Op::kSoftmax:
        softmax(x, {1});
        break;
      case Op::kRmsNorm:
        rms_norm(x, y, {1}, 16);
        break;
      case Op::kLoopReduce: {
        Tile carried;
        loop_reduce(x, Op::kAdd, &carried);
        loop_reduce(y, Op::kAdd, &carried);
        break;
      }
      case Op::kNdarray:
        ndarray({8, 16}, DType::kFloat32);
        break;
      case Op::kFull:
        full({8, 16}, 3.0f, DType::kFloat32);
        break;
      case Op::kZeros:
        zeros({8, 16}, DType::kFloat32);
        break;
      case Op::kOnes:
        ones({8, 16}, DType::kFloat32);
        break;
      case Op::kZerosLike:
        zeros_like(x);
        break;
      case Op::kEmptyLike:
        empty_like(x);
        break;
      case Op::kRand:
        rand({8, 16});
        break;
      case Op::kRandomSeed:
        random_seed(5);
        break;
      case Op::kSharedConstant:
        shared_constant({1, 2, 3, 4}, {2, 2}, DType::kFloat32);
        break;
      case Op::kSharedIdentityMatrix:
        shared_identity_matrix(4);
        break;
      case Op::kLoad:
        load(hbm);
        break;
      case Op::kStore:
        store(hbm, x);
        break;
      case Op::kCopy:
        copy(x);
        break;
      case Op::kLoadTranspose2d:
        load_transpose2d(TensorView::Create({16, 128}, DType::kBFloat16, "src"));
        break;
      case Op::kAtomicRmw:
        atomic_rmw(Memref(hbm, rows), x, Op::kAdd);
        break;
      case Op::kBroadcastTo:
        broadcast_to(rows, {8, 16});
        break;
      case Op::kExpandDims:
        expand_dims(x, 2);
        break;
      case Op::kWhere:
        where(rows.broadcast(1, 16), x, y);
        break;
      case Op::kGatherFlattened:
        gather_flattened(x, rows);
        break;
      default:
        ADD_FAILURE() << "no probe for op " << Info(op).name;
    }
  }

  std::vector<Emitted> ProbeAllReduce() {
    LogicalCore lnc(2, Trn2Profile());
    lnc.Launch([](const KernelContext& ctx) {
      Tile t = ctx.core.AllocateSbuf("x", {8, 16}, DType::kFloat32);
      t.FromFloats(std::vector<float>(128, static_cast<float>(ctx.prg_id + 1)));
      all_reduce(t, Op::kAdd);
    });
    return RecordsSince(lnc.core(0), 0);
  }
};

TEST_P(OpRoutingTest, RecordsTheTablesInstructionsOnTheTablesEngines) {
  const OpInfo& info = Info(static_cast<Op>(GetParam()));
  std::vector<Emitted> expected;
  for (const Step& s : info.steps) expected.push_back({s.instruction, s.engine});
  EXPECT_EQ(Probe(info.op), expected) << info.name;
}

INSTANTIATE_TEST_SUITE_P(EveryOp, OpRoutingTest, ::testing::Range(0, kNumOps),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return std::string(Info(static_cast<Op>(p.param)).name);
                         });

// The seed's matmul contract, spelled out: one Vector transpose and one PE matmul by default,
// only the matmul with transpose_x.
TEST_F(NlTest, MatmulTransposeXElidesTheVectorTranspose) {
  const Tile x = Input({32, 64}, DType::kBFloat16, -1, 1);
  const Tile y = Input({64, 128}, DType::kBFloat16, -1, 1, 2);
  size_t mark = Mark();
  matmul(x, y);
  EXPECT_EQ(Since(mark),
            (std::vector<Emitted>{{"nc_transpose", Engine::kVector}, {"nc_matmul", Engine::kPE}}));
  mark = Mark();
  matmul(Input({64, 32}, DType::kBFloat16, -1, 1, 3), y, /*transpose_x=*/true);
  EXPECT_EQ(Since(mark), (std::vector<Emitted>{{"nc_matmul", Engine::kPE}}));
}

TEST_F(NlTest, AnImmediateOperandIsOneTensorScalar) {
  const Tile x = Input({8, 16}, DType::kFloat32, -1, 1);
  for (Op op : {Op::kAdd, Op::kSubtract, Op::kMultiply, Op::kGreater, Op::kPower}) {
    const size_t mark = Mark();
    binary_op(x, 2.0f, op);
    binary_op(2.0f, x, op);
    EXPECT_EQ(Since(mark), (std::vector<Emitted>{{"tensor_scalar", Engine::kVector},
                                                 {"tensor_scalar", Engine::kVector}}))
        << Info(op).name;
  }
}

TEST_F(NlTest, SoftmaxZeroMaxModeAddsOneClampOfTheMax) {
  const Tile x = Input({8, 16}, DType::kFloat32, -1, 1);
  const size_t mark = Mark();
  SoftmaxOptions options;
  options.zero_max_mode = true;
  softmax(x, {1}, options);
  std::vector<Emitted> expected;
  for (const Step& s : Info(Op::kSoftmax).steps) expected.push_back({s.instruction, s.engine});
  expected.insert(expected.begin() + 1, {"tensor_scalar", Engine::kVector});
  EXPECT_EQ(Since(mark), expected);
}

}  // namespace
}  // namespace nkisim::nl::testing
