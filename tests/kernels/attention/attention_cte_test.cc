// The prefill (CTE) attention kernel: the golden grid that fits CI time (S 1, 128, 300 and 2048
// with n_q / n_kv 8 / 8, 32 / 8, 64 / 8 where fast enough; LNC 1 and 2; bf16 and fp32), LNC 1 vs 2
// agreement, the causal work split, the skipped blocks, and every validation rule with its words.
// The S = 2048 cases with 32 and 64 query heads and the roofline checks are in
// attention_cte_slow_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <numeric>

#include "kernels/reference/compare.h"
#include "runtime/hardware_profile.h"
#include "tests/kernels/attention/attention_cte_test_util.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::kernels::testing {
namespace {

using ::nkisim::testing::InvalidArgumentMessage;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr DType kF32 = DType::kFloat32;

TEST_P(CteCaseTest, MatchesGolden) {
  const CteCase& c = GetParam();
  ExpectCteMatchesGolden(c, RunCte(c));
}

INSTANTIATE_TEST_SUITE_P(
    GoldenGrid, CteCaseTest,
    ::testing::Values(
        CteCase{"s1_h8_8_lnc1", 1, 1, 8, 8, 128, 1}, CteCase{"s1_h8_8_lnc2", 1, 1, 8, 8, 128, 2},
        CteCase{"s1_h32_8_lnc1", 1, 1, 32, 8, 128, 1},
        CteCase{"s1_h64_8_lnc2", 1, 1, 64, 8, 128, 2},
        CteCase{"s128_h8_8_lnc1", 1, 128, 8, 8, 128, 1},
        CteCase{"s128_h8_8_lnc2", 1, 128, 8, 8, 128, 2},
        CteCase{"s128_h32_8_lnc1", 1, 128, 32, 8, 128, 1},
        CteCase{"s128_h32_8_lnc2", 1, 128, 32, 8, 128, 2},
        CteCase{"s128_h64_8_lnc1", 1, 128, 64, 8, 128, 1},
        CteCase{"s128_h64_8_lnc2", 1, 128, 64, 8, 128, 2},
        CteCase{"s300_h8_8_lnc1", 1, 300, 8, 8, 128, 1},
        CteCase{"s300_h8_8_lnc2", 1, 300, 8, 8, 128, 2},
        CteCase{"s300_h32_8_lnc1", 1, 300, 32, 8, 128, 1},
        CteCase{"s300_h32_8_lnc2", 1, 300, 32, 8, 128, 2},
        CteCase{"s300_h64_8_lnc1", 1, 300, 64, 8, 128, 1},
        CteCase{"s300_h64_8_lnc2", 1, 300, 64, 8, 128, 2},
        CteCase{"s2048_h8_8_lnc1", 1, 2048, 8, 8, 128, 1},
        CteCase{"s2048_h8_8_lnc2", 1, 2048, 8, 8, 128, 2},
        // Off the grid: batch 2, a GQA ratio of 6 (head groups of 4 and 2), d < 128, fp16.
        CteCase{"b2_s700_h12_2_d64_lnc2", 2, 700, 12, 2, 64, 2},
        CteCase{"s640_h4_1_fp16_lnc2", 1, 640, 4, 1, 128, 2, DType::kFloat16},
        // fp32: fp32 matmuls, a tighter tolerance.
        CteCase{"fp32_s1_h8_8_lnc1", 1, 1, 8, 8, 128, 1, kF32},
        CteCase{"fp32_s128_h32_8_lnc2", 1, 128, 32, 8, 128, 2, kF32},
        CteCase{"fp32_s300_h8_8_lnc1", 1, 300, 8, 8, 128, 1, kF32},
        CteCase{"fp32_s300_h32_8_lnc2", 1, 300, 32, 8, 128, 2, kF32},
        CteCase{"fp32_s1100_h8_8_lnc2", 1, 1100, 8, 8, 128, 2, kF32}),
    CteCaseName);

// LNC 1 and LNC 2 compute every tile the same way: the outputs agree within the tolerance (in
// fact bit for bit).
TEST(AttentionCteTest, Lnc1AndLnc2Agree) {
  for (const DType dtype : {DType::kBFloat16, kF32}) {
    const CteCase one{"one", 1, 1100, 8, 4, 128, 1, dtype};
    CteCase two = one;
    two.lnc = 2;
    const AttentionCteParams inputs = MakeCteInputs(one);
    const std::vector<float> a = RunCte(one, inputs).out.ToFloats();
    const std::vector<float> b = RunCte(two, inputs).out.ToFloats();
    const reference::Comparison cmp = reference::Compare(b, a, CteTolerance(dtype));
    std::cout << "    LNC 2 vs LNC 1 (" << DTypeName(dtype) << "): " << cmp.ToString() << "\n";
    EXPECT_TRUE(cmp.pass()) << cmp.ToString();
    EXPECT_EQ(a, b);
  }
}

// The zigzag split gives both cores the same causal work when the tile count is a multiple of 4.
TEST(AttentionCteTest, ZigzagSplitBalancesTheCausalWork) {
  for (int64_t s : {2048, 4096}) {
    int64_t work[2] = {0, 0};
    std::vector<int64_t> all;
    for (int prg = 0; prg < 2; ++prg) {
      for (int64_t i : AttentionCteTilesOfProgram(s, prg, 2)) {
        work[prg] += i + 1;
        all.push_back(i);
      }
    }
    EXPECT_EQ(work[0], work[1]) << "S = " << s;
    std::sort(all.begin(), all.end());
    std::vector<int64_t> want(static_cast<size_t>(s / 128));
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(all, want);
  }
  EXPECT_EQ(AttentionCteTilesOfProgram(300, 0, 1), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(AttentionCteTilesOfProgram(100, 1, 2).empty());
}

// Blocks above the diagonal are skipped: the QK^T matmuls are one per (head, tile, 512-key block
// up to the diagonal), plus one mask matmul per (head, tile).
TEST(AttentionCteTest, SkipsFullyMaskedBlocks) {
  const CteCase c{"count", 1, 1024, 4, 1, 128, 1};
  const CteRun run = RunCte(c);
  int64_t matmuls = 0;
  for (const auto& r : run.lnc->core(0).timeline().records()) {
    if (std::string(r.name) == "nc_matmul") ++matmuls;
  }
  // Tiles 0..7: blocks 1,1,1,1,2,2,2,2 (QK) + 1 mask each; PV chunks = keys / 128 = i + 1.
  const int64_t qk = 4 * (4 * 1 + 4 * 2), mask = 4 * 8, pv = (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8);
  // PV matmuls serve the 4 heads of an item at once.
  EXPECT_EQ(matmuls, qk + mask + pv);
}

TEST(AttentionCteTest, FlopCounts) {
  // S = 256: tiles of 128 rows see 128 and 256 keys; exact: 256 * 257 / 2 pairs.
  EXPECT_DOUBLE_EQ(AttentionCteFlops(1, 1, 256, 128), 4.0 * 128 * (128 * 128 + 128 * 256));
  EXPECT_DOUBLE_EQ(AttentionCausalFlops(2, 3, 256, 64), 4.0 * 64 * 6 * 256 * 257 / 2);
  EXPECT_DOUBLE_EQ(AttentionCteFlops(1, 1, 300, 128),
                   4.0 * 128 * (128.0 * 128 + 128.0 * 256 + 44.0 * 300));
}

// ---- Validation: every rule names the operand, its shape and the rule. ----

TensorView T(const Shape& shape, DType dtype = DType::kBFloat16) {
  return TensorView::Create(shape, dtype, "t");
}
AttentionCteParams Valid(int64_t n_q = 4, int64_t n_kv = 2, int64_t s = 16, int64_t d = 32) {
  return {T({n_q, 1, s, d}), T({n_kv, 1, s, d}), T({n_kv, 1, s, d})};
}
std::string ErrorOf(const AttentionCteParams& p) {
  return InvalidArgumentMessage([&] {
    LogicalCore core(2, Trn2Profile());
    AttentionCte(core, p);
  });
}

TEST(AttentionCteValidationTest, ValidCallRuns) {
  LogicalCore core(2, Trn2Profile());
  EXPECT_EQ(AttentionCte(core, Valid()).shape(), (Shape{1, 4, 32, 16}));
}

TEST(AttentionCteValidationTest, HeadDimAbove128) {
  EXPECT_THAT(ErrorOf(Valid(4, 2, 16, 129)),
              AllOf(HasSubstr("attention_cte: q [4, 1, 16, 129] bf16: d = 129 must be in [1, 128]"),
                    HasSubstr("contraction on the partitions")));
}

TEST(AttentionCteValidationTest, QueryHeadsNotDivisibleByKvHeads) {
  AttentionCteParams p = Valid(6, 4);
  EXPECT_THAT(ErrorOf(p), HasSubstr("attention_cte: q [6, 1, 16, 32] bf16: n_q = 6 must be "
                                    "divisible by n_kv = 4 (k [4, 1, 16, 32])"));
}

TEST(AttentionCteValidationTest, EmptySequence) {
  EXPECT_THAT(ErrorOf(Valid(4, 2, 0)),
              HasSubstr("attention_cte: q [4, 1, 0, 32] bf16: S = 0 must be >= 1"));
}

TEST(AttentionCteValidationTest, ShapesDisagree) {
  AttentionCteParams p = Valid();
  p.k = T({2, 1, 15, 32});
  EXPECT_THAT(ErrorOf(p), HasSubstr("attention_cte: k [2, 1, 15, 32] bf16: must be [n_kv, 1, 16, "
                                    "32] (q's B, S and d)"));
  p = Valid();
  p.v = T({2, 2, 16, 32});
  EXPECT_THAT(ErrorOf(p), HasSubstr("attention_cte: v [2, 2, 16, 32] bf16: must be [n_kv, 1, 16, "
                                    "32]"));
  p = Valid();
  p.v = T({1, 1, 16, 32});
  EXPECT_THAT(ErrorOf(p), HasSubstr("attention_cte: v [1, 1, 16, 32] bf16: heads must equal k's "
                                    "n_kv = 2"));
  p = Valid();
  p.q = T({4, 16, 32});
  EXPECT_THAT(ErrorOf(p), HasSubstr("attention_cte: q [4, 16, 32] bf16: must be a 4-D tensor "
                                    "[heads, B, S, d] (NBSd)"));
  p = Valid();
  p.k = TensorView();
  EXPECT_THAT(ErrorOf(p), HasSubstr("attention_cte: k <none>: must be a 4-D tensor"));
}

TEST(AttentionCteValidationTest, NonFloatAndMixedDtypes) {
  AttentionCteParams p = Valid();
  p.q = T({4, 1, 16, 32}, DType::kInt32);
  EXPECT_THAT(ErrorOf(p), HasSubstr("attention_cte: q [4, 1, 16, 32] int32: dtype must be bf16, "
                                    "fp16 or fp32"));
  p = Valid();
  p.v = T({2, 1, 16, 32}, DType::kFp8E4M3);
  EXPECT_THAT(ErrorOf(p), HasSubstr("attention_cte: v [2, 1, 16, 32]"));
  EXPECT_THAT(ErrorOf(p), HasSubstr("dtype must be bf16, fp16 or fp32"));
  p = Valid();
  p.k = T({2, 1, 16, 32}, DType::kFloat32);
  EXPECT_THAT(ErrorOf(p), HasSubstr("attention_cte: k [2, 1, 16, 32] fp32: dtype must equal q's "
                                    "(bf16)"));
}

TEST(AttentionCteValidationTest, SequenceTooLongForSbuf) {
  EXPECT_THAT(ErrorOf(Valid(1, 1, 20000, 8)),
              AllOf(HasSubstr("attention_cte: q [1, 1, 20000, 8] bf16: S = 20000"),
                    HasSubstr("must fit in half of SBUF")));
}

TEST(AttentionCteValidationTest, OutputShape) {
  const AttentionCteParams p = Valid();
  EXPECT_THAT(InvalidArgumentMessage([&] {
                ValidateAttentionCte(p, T({1, 4, 16, 32}), Trn2Profile());
              }),
              HasSubstr("attention_cte: out [1, 4, 16, 32] bf16: must be [1, 4, 32, 16]"));
}

}  // namespace
}  // namespace nkisim::kernels::testing
