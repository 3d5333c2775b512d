// The MoE kernels against their fp64 plain-loop goldens (kernels/reference/moe_ref.h) at two
// real family shapes, TKG and CTE: Qwen3-30B-A3B (H 2048, 128 experts, top 8, expert I 768) and
// gpt-oss-120b (H 2880 = 22.5 tiles of 128, 128 experts, top 4, expert I 2880). The rule:
// |actual - golden| <= atol + rtol * max|golden|, worst element reported. Times are never
// hard-coded (the DMA model is being replaced); only relations are asserted.
#include "kernels/moe/moe.h"
#include "kernels/moe/moe_case.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "kernels/reference/compare.h"
#include "kernels/reference/moe_ref.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "runtime/timeline.h"

namespace nkisim::kernels::moe {
namespace {

using reference::Compare;
using reference::Comparison;
using reference::Tolerance;
using ::testing::HasSubstr;

struct Shape4 {
  const char* name;
  int64_t h, experts, top_k, inter;
};
constexpr Shape4 kQwen3{"qwen3-30b-a3b", 2048, 128, 8, 768};
constexpr Shape4 kGptOss{"gpt-oss-120b", 2880, 128, 4, 2880};


Comparison Check(const char* what, const std::vector<float>& got, const std::vector<double>& gold,
                 Tolerance tol) {
  const Comparison c = Compare(got, gold, tol);
  std::printf("%s: %s\n", what, c.ToString().c_str());
  return c;
}

void RouterCase(const Shape4& s, int64_t tokens, RouterFamily family) {
  const int64_t k = family == RouterFamily::kLlama4 ? 1 : s.top_k;
  Operand x = Random({tokens, s.h}, 1.0f, 11, "x");
  Operand w = Random({s.h, s.experts}, 1.0f / std::sqrt(float(s.h)), 12, "w_router");
  TensorView logits = TensorView::Create({tokens, s.experts}, DType::kFloat32, "logits");
  LogicalCore lnc(1, Trn2Profile());
  lnc.Launch([&](const KernelContext& ctx) { RouterLogitsKernel(ctx, x.view, w.view, logits); });
  const std::vector<double> gold = reference::RouterLogitsRef(x.values, w.values, tokens, s.h, s.experts);
  const std::string label = StrCat(s.name, " T=", tokens, " ", reference::RouterFamilyName(family));
  EXPECT_TRUE(Check((label + " logits").c_str(), logits.ToFloats(), gold, {1e-4, 1e-4}).pass());
  const Routing got = SelectExperts(logits, k, family);
  const reference::RoutingRef want = reference::RouteRef(gold, tokens, s.experts, k, family);
  // Choices: equal, except where the golden's k-th and (k+1)-th logits are closer than the
  // logits' tolerance (a near tie the fp32 accumulation may break either way).
  int64_t mismatched = 0, near_ties = 0;
  std::vector<float> gw;
  std::vector<double> ww;
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<double> row(gold.begin() + t * s.experts, gold.begin() + (t + 1) * s.experts);
    std::vector<double> sorted = row;
    std::sort(sorted.rbegin(), sorted.rend());
    const bool tie = k < s.experts && sorted[k - 1] - sorted[k] < 1e-3;
    for (int64_t j = 0; j < k; ++j) {
      const size_t i = static_cast<size_t>(t * k + j);
      if (got.expert[i] != want.expert[i]) (tie ? near_ties : mismatched)++;
      gw.push_back(got.weight[i]);
      ww.push_back(want.weight[i]);
    }
  }
  EXPECT_EQ(mismatched, 0) << label;
  if (near_ties == 0) EXPECT_TRUE(Check((label + " weights").c_str(), gw, ww, {1e-4, 1e-3}).pass());
}

TEST(MoeRouterTest, Qwen3TkgAndCte) {
  for (int64_t t : {4, 256}) RouterCase(kQwen3, t, RouterFamily::kQwen3);
}
TEST(MoeRouterTest, GptOssTkgAndCte) {
  for (int64_t t : {4, 256}) RouterCase(kGptOss, t, RouterFamily::kGptOss);
}
TEST(MoeRouterTest, MixtralAndLlama4RulesAtQwen3Shape) {
  RouterCase(kQwen3, 16, RouterFamily::kMixtral);
  RouterCase(kQwen3, 16, RouterFamily::kLlama4);
}

// Dispatch, every active expert's MLP, the combine; against the golden pipeline given the same
// routing: the golden gathers each expert's tokens by its own loop and runs ExpertMlpRef.
// Weights are made one expert at a time (128 experts of gpt-oss are 2 GiB of bf16).
struct LayerResult {
  double expert_ns = 0, total_ns = 0;
  int64_t active = 0;
};
LayerResult LayerCase(const Shape4& s, int64_t tokens, const RouterSkew& skew, int64_t capacity,
                      bool with_shared) {
  const std::string label = StrCat(s.name, " T=", tokens, capacity >= 0 ? " capacity " : " dropless",
                                   capacity >= 0 ? std::to_string(capacity) : "",
                                   with_shared ? " +shared" : "");
  Operand x = Random({tokens, s.h}, 1.0f, 21, "x");
  const Routing routing = SkewedRouting(tokens, s.experts, s.top_k, skew, 5);
  const DispatchPlan plan = PlanDispatch(routing, s.experts, capacity);
  TensorView x_perm = TensorView::Create({std::max<int64_t>(plan.rows(), 1), s.h}, DType::kBFloat16, "x_perm");
  TensorView y_perm = TensorView::Create({std::max<int64_t>(plan.rows(), 1), s.h}, DType::kBFloat16, "y_perm");
  LogicalCore lnc(1, Trn2Profile());
  LayerResult result;
  const double t0 = lnc.now();
  lnc.Launch([&](const KernelContext& ctx) {
    DispatchKernel(ctx, plan, x.view, x_perm.slice(0, 0, plan.rows()));
  });
  // The golden's per-slot expert outputs, [tokens * k][H].
  std::vector<std::vector<double>> gold_slot(static_cast<size_t>(tokens * s.top_k));
  std::vector<int64_t> held(static_cast<size_t>(s.experts), 0);
  std::vector<std::vector<int64_t>> slots_of(static_cast<size_t>(s.experts));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < s.top_k; ++j) {
      const int e = routing.expert[static_cast<size_t>(t * s.top_k + j)];
      if (capacity >= 0 && held[e] >= capacity) continue;
      ++held[e];
      slots_of[e].push_back(t * s.top_k + j);
    }
  }
  const float ws = 1.0f / std::sqrt(float(s.h)), wds = 1.0f / std::sqrt(float(s.inter));
  std::vector<float> got_rows;
  std::vector<double> gold_rows;
  const double e0 = lnc.now();
  for (int64_t e = 0; e < s.experts; ++e) {
    const int64_t n = plan.offset[e + 1] - plan.offset[e];
    EXPECT_EQ(n, static_cast<int64_t>(slots_of[e].size())) << "expert " << e;
    if (n == 0) continue;
    ++result.active;
    Operand wg = Random({s.h, s.inter}, ws, 1000 + 3 * e, "wg");
    Operand wu = Random({s.h, s.inter}, ws, 1001 + 3 * e, "wu");
    Operand wd = Random({s.inter, s.h}, wds, 1002 + 3 * e, "wd");
    const TensorView xe = x_perm.slice(0, plan.offset[e], plan.offset[e + 1]);
    const TensorView ye = y_perm.slice(0, plan.offset[e], plan.offset[e + 1]);
    lnc.Launch([&](const KernelContext& ctx) { ExpertMlpKernel(ctx, xe, wg.view, wu.view, wd.view, ye); });
    std::vector<float> rows;
    for (int64_t slot : slots_of[e]) {
      const int64_t t = slot / s.top_k;
      rows.insert(rows.end(), x.values.begin() + t * s.h, x.values.begin() + (t + 1) * s.h);
    }
    const std::vector<double> y = reference::ExpertMlpRef(rows, n, s.h, s.inter, wg.values, wu.values, wd.values);
    for (int64_t r = 0; r < n; ++r) {
      gold_slot[static_cast<size_t>(slots_of[e][r])].assign(y.begin() + r * s.h, y.begin() + (r + 1) * s.h);
    }
    const std::vector<float> got = ye.ToFloats();
    got_rows.insert(got_rows.end(), got.begin(), got.end());
    gold_rows.insert(gold_rows.end(), y.begin(), y.end());
  }
  result.expert_ns = lnc.now() - e0;
  EXPECT_TRUE(Check((label + " expert rows").c_str(), got_rows, gold_rows, {1e-2, 1e-2}).pass());
  // Shared expert (Qwen-style / Llama 4: one more MLP over every token, weight 1).
  std::vector<double> gold_out(static_cast<size_t>(tokens * s.h), 0.0);
  TensorView shared = TensorView::Create({tokens, s.h}, DType::kBFloat16, "shared");
  if (with_shared) {
    Operand wg = Random({s.h, s.inter}, ws, 7, "sg");
    Operand wu = Random({s.h, s.inter}, ws, 8, "su");
    Operand wd = Random({s.inter, s.h}, wds, 9, "sd");
    lnc.Launch([&](const KernelContext& ctx) { ExpertMlpKernel(ctx, x.view, wg.view, wu.view, wd.view, shared); });
    gold_out = reference::ExpertMlpRef(x.values, tokens, s.h, s.inter, wg.values, wu.values, wd.values);
    EXPECT_TRUE(Check((label + " shared expert").c_str(), shared.ToFloats(), gold_out, {1e-2, 1e-2}).pass());
  }
  TensorView weights = TensorView::Create({tokens, s.top_k}, DType::kFloat32, "weights");
  weights.FromFloats(routing.weight);
  TensorView out = TensorView::Create({tokens, s.h}, DType::kBFloat16, "out");
  lnc.Launch([&](const KernelContext& ctx) {
    CombineKernel(ctx, plan, weights, y_perm.slice(0, 0, std::max<int64_t>(plan.rows(), 1)),
                  with_shared ? &shared : nullptr, out);
  });
  for (int64_t t = 0; t < tokens; ++t) {  // the golden combine, in token order
    for (int64_t j = 0; j < s.top_k; ++j) {
      const std::vector<double>& y = gold_slot[static_cast<size_t>(t * s.top_k + j)];
      if (y.empty()) continue;  // dropped
      const double w = routing.weight[static_cast<size_t>(t * s.top_k + j)];
      for (int64_t h = 0; h < s.h; ++h) gold_out[static_cast<size_t>(t * s.h + h)] += w * y[h];
    }
  }
  EXPECT_TRUE(Check((label + " combined output").c_str(), out.ToFloats(), gold_out, {1e-2, 1e-2}).pass());
  result.total_ns = lnc.now() - t0;
  std::printf("%s: %lld active experts, %lld rows, %lld dropped; simulated experts %.1f us, layer %.1f us\n",
              label.c_str(), static_cast<long long>(result.active), static_cast<long long>(plan.rows()),
              static_cast<long long>(plan.dropped), result.expert_ns / 1e3, result.total_ns / 1e3);
  return result;
}

RouterSkew Uniform() { return {}; }
RouterSkew Counts(int64_t experts, std::vector<std::pair<int, int64_t>> nonzero) {
  RouterSkew s;
  s.kind = RouterSkew::Kind::kCounts;
  s.counts.assign(static_cast<size_t>(experts), 0);
  for (auto [e, c] : nonzero) s.counts[static_cast<size_t>(e)] = c;
  return s;
}

TEST(MoeLayerTest, Qwen3TkgUniformWithShared) { LayerCase(kQwen3, 4, Uniform(), -1, true); }

TEST(MoeLayerTest, Qwen3CteCountsTwoBlocksPerHotExpert) {
  // 136 tokens x top 8 = 1088 rows on 8 experts: every expert takes every token, so each runs
  // a full 128-row block and an 8-row one (the CTE path).
  std::vector<std::pair<int, int64_t>> c;
  for (int e = 0; e < 8; ++e) c.push_back({e * 16, 136});
  LayerCase(kQwen3, 136, Counts(128, c), -1, false);
}

TEST(MoeLayerTest, GptOssTkgZipf) {
  RouterSkew z;
  z.kind = RouterSkew::Kind::kZipf;
  z.zipf_s = 1.2;
  LayerCase(kGptOss, 2, z, -1, false);
}

TEST(MoeLayerTest, GptOssCteCountsWithCapacityDrops) {
  // 32 tokens x top 4 on 4 experts (32 rows each); capacity 24 drops 8 rows of each.
  const LayerResult r = LayerCase(kGptOss, 32, Counts(128, {{3, 32}, {40, 32}, {77, 32}, {127, 32}}), 24, false);
  EXPECT_EQ(r.active, 4);
}

TEST(MoeLayerTest, SkewSlowsTheExpertsOfOneRankRelation) {
  // The same 16 x 8 = 128 rows: spread thin over 128 experts (one row each) costs more weight
  // streaming than packed into 8 experts (16 rows each) — TKG is weight-bound.
  std::vector<std::pair<int, int64_t>> packed, spread;
  for (int e = 0; e < 8; ++e) packed.push_back({e, 16});
  for (int e = 0; e < 128; ++e) spread.push_back({e, 1});
  const Shape4 small{"qwen3-30b-a3b", 2048, 128, 8, 768};
  const LayerResult p = LayerCase(small, 16, Counts(128, packed), -1, false);
  const LayerResult q = LayerCase(small, 16, Counts(128, spread), -1, false);
  EXPECT_GT(q.expert_ns, p.expert_ns);
}

// DMA instructions (records on the DMA queues' rows) the launch of `kernel` issues.
template <typename Kernel>
int64_t DmaCount(LogicalCore& lnc, Kernel kernel) {
  const auto dmas = [&] {
    int64_t n = 0;
    for (const InstructionRecord& r : lnc.core(0).timeline().records()) n += IsDmaQueue(r.engine);
    return n;
  };
  const int64_t before = dmas();
  lnc.Launch(kernel);
  return dmas() - before;
}

// The dispatch and combine move rows in 128-row tiles (indirect gathers), so their DMA count
// follows the tiles, never the rows: N tokens x k choices = N k rows in ceil(N k / 128) tiles.
// The row-at-a-time schedule issued one DMA a permuted row (and one per kept choice in the
// combine): N k of them, which these bounds refuse. The permuted rows are checked bit for bit
// against a plain gather, the combine against the fp64 weighted sum.
TEST(MoeDispatchTest, DmaCountBoundedByTilesNotRows) {
  const int64_t k = kQwen3.top_k, h = kQwen3.h;
  for (const int64_t tokens : {int64_t{256}, int64_t{300}}) {
    RouterSkew z;
    z.kind = RouterSkew::Kind::kZipf;
    z.zipf_s = 1.2;
    const Routing routing = SkewedRouting(tokens, kQwen3.experts, k, z, 3);
    const DispatchPlan plan = PlanDispatch(routing, kQwen3.experts, -1);
    const int64_t rows = plan.rows(), tiles = (rows + 127) / 128, token_tiles = (tokens + 127) / 128;
    ASSERT_EQ(rows, tokens * k);
    Operand x = Random({tokens, h}, 1.0f, 31, "x");
    TensorView x_perm = TensorView::Create({rows, h}, DType::kBFloat16, "x_perm");
    LogicalCore lnc(1, Trn2Profile());
    const int64_t dispatch = DmaCount(lnc, [&](const KernelContext& c) { DispatchKernel(c, plan, x.view, x_perm); });
    // The bound: a gather and a store a tile, one index load per 512 tiles.
    EXPECT_LE(dispatch, 2 * tiles + (tiles + 511) / 512) << tokens << " tokens";
    EXPECT_LT(dispatch, rows / 8) << tokens << " tokens";
    const std::vector<float> got = x_perm.ToFloats();
    int64_t wrong = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = plan.row_token[r];
      for (int64_t j = 0; j < h; ++j) wrong += got[r * h + j] != x.values[t * h + j];
    }
    EXPECT_EQ(wrong, 0) << "permuted elements differing from x[row_token]";
    // Combine: y_perm = x_perm (any rows will do), out = sum_j w(t, j) y_perm[slot_row(t, j)].
    TensorView weights = TensorView::Create({tokens, k}, DType::kFloat32, "weights");
    weights.FromFloats(routing.weight);
    TensorView out = TensorView::Create({tokens, h}, DType::kBFloat16, "out");
    const int64_t combine = DmaCount(lnc, [&](const KernelContext& c) {
      CombineKernel(c, plan, weights, x_perm, nullptr, out);
    });
    EXPECT_LE(combine, (k + 3) * token_tiles) << tokens << " tokens";
    EXPECT_LT(combine, rows / 8) << tokens << " tokens";
    std::vector<double> gold(static_cast<size_t>(tokens * h), 0.0);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        const int64_t r = plan.slot_row[t * k + j];
        for (int64_t e = 0; e < h; ++e) gold[t * h + e] += routing.weight[t * k + j] * got[r * h + e];
      }
    }
    EXPECT_TRUE(Check(StrCat("combine T=", tokens).c_str(), out.ToFloats(), gold, {1e-2, 1e-2}).pass());
    std::printf("T=%lld: %lld rows in %lld tiles; dispatch %lld DMAs, combine %lld DMAs\n",
                static_cast<long long>(tokens), static_cast<long long>(rows), static_cast<long long>(tiles),
                static_cast<long long>(dispatch), static_cast<long long>(combine));
  }
}

TEST(MoeBadInputTest, ErrorsNameFieldValueAndRule) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  TensorView logits = TensorView::Create({2, 8}, DType::kFloat32, "logits");
  EXPECT_THAT(message([&] { SelectExperts(logits, 9, RouterFamily::kQwen3); }),
              HasSubstr("top_k = 9; the rule is 1 <= top_k <= experts (8)"));
  EXPECT_THAT(message([&] { SelectExperts(logits, 2, RouterFamily::kLlama4); }),
              HasSubstr("top_k = 2; the rule for llama4 (sigmoid top-1) is top_k = 1"));
  EXPECT_THAT(message([&] { reference::RouteRef(std::vector<double>(16), 2, 8, 9, RouterFamily::kMixtral); }),
              HasSubstr("top_k = 9; the rule is 1 <= top_k <= experts (8)"));
  EXPECT_THAT(message([&] { SkewedRouting(4, 8, 9, Uniform(), 1); }), HasSubstr("top_k = 9"));
  RouterSkew bad = Counts(8, {{0, 4}, {1, 3}});
  EXPECT_THAT(message([&] { SkewedRouting(4, 8, 2, bad, 1); }),
              HasSubstr("counts sum to 7; the rule is tokens x top_k = 4 x 2 = 8"));
  bad.counts.resize(5);
  EXPECT_THAT(message([&] { SkewedRouting(4, 8, 2, bad, 1); }),
              HasSubstr("counts has 5 entries; the rule is one per expert (8)"));
  RouterSkew over = Counts(8, {{0, 5}, {1, 3}});
  EXPECT_THAT(message([&] { SkewedRouting(4, 8, 2, over, 1); }),
              HasSubstr("counts[0] = 5; the rule is 0 <= count <= tokens (4)"));
  EXPECT_THAT(message([] { reference::ParseRouterFamily("deepseek"); }),
              HasSubstr("'deepseek' is not one of qwen3, mixtral, gpt_oss, llama4"));
}

}  // namespace
}  // namespace nkisim::kernels::moe
