// The MoE block of `nkisim predict` (model/moe_block.h) and predict's MoE plans, in process.
// Relations only (the device cost model moves under these tests): a Zipf router slows the step
// against uniform routing by what the busiest EP rank's extra rows cost, re-priced here by running
// the expert kernel on that rank's rows; an EP plan differs from a TP plan by the MoE rows alone;
// the experts' HBM per rank is the model's expert weights over the ranks; bad plans are refused
// naming the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <iterator>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/moe/moe.h"
#include "model/hf_config.h"
#include "model/moe_block.h"
#include "model/predict.h"
#include "tests/testing/predict_request.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/sim_mode.h"

namespace nkisim::launcher {
namespace {

using ::testing::HasSubstr;
namespace moe = kernels::moe;

std::string Model(const std::string& name) { return std::string(NKISIM_SOURCE_DIR) + "/configs/models/" + name; }

// Qwen3-30B-A3B's MoE block.
MoeShape Qwen30b() {
  MoeShape s;
  s.hidden = 2048;
  s.experts = 128;
  s.top_k = 8;
  s.expert_inter = 768;
  return s;
}

moe::RouterSkew Zipf(double s) {
  moe::RouterSkew k;
  k.kind = moe::RouterSkew::Kind::kZipf;
  k.zipf_s = s;
  return k;
}

// One expert's MLP over n rows at I, on a fresh core (what the test re-prices independently).
double ExpertKernelNs(const HardwareProfile& hw, int64_t n, int64_t h, int64_t inter) {
  SetSimMode(SimMode::kTimingOnly);
  LogicalCore core(1, hw);
  const TensorView x = TensorView::Create({n, h}, DType::kBFloat16, "x");
  const TensorView wg = TensorView::Create({h, inter}, DType::kBFloat16, "wg");
  const TensorView wu = TensorView::Create({h, inter}, DType::kBFloat16, "wu");
  const TensorView wd = TensorView::Create({inter, h}, DType::kBFloat16, "wd");
  const TensorView y = TensorView::Create({n, h}, DType::kBFloat16, "y");
  const double t0 = core.now();
  core.Launch([&](const KernelContext& c) { moe::ExpertMlpKernel(c, x, wg, wu, wd, y); });
  return core.now() - t0;
}

// The busiest rank's expert time from its per-expert rows: expert e on core e % lnc, the slowest
// core's sum.
double SlotNs(const HardwareProfile& hw, const std::vector<int64_t>& rows, int lnc, int64_t h, int64_t inter) {
  std::vector<double> core(static_cast<size_t>(lnc), 0.0);
  for (size_t e = 0; e < rows.size(); ++e) {
    if (rows[e] > 0) core[e % lnc] += ExpertKernelNs(hw, rows[e], h, inter);
  }
  return *std::max_element(core.begin(), core.end());
}

TEST(MoeBlockTest, ZipfRouterSlowsTheStepByTheBusiestRanksExtraRows) {
  const HardwareProfile hw = Trn2Profile();
  const MoeShape s = Qwen30b();
  const MoePlan ep{8, 8, 1, 2};
  const int64_t tokens = 512;  // a prefill chunk: rows per expert past one 128-row block
  const MoeBlockCost uniform = PriceMoeBlock(s, ep, tokens, moe::RouterSkew{}, hw);
  const MoeBlockCost skewed = PriceMoeBlock(s, ep, tokens, Zipf(1.2), hw);
  // Every choice lands somewhere: the rows sum to T x k under both routings.
  for (const MoeBlockCost* c : {&uniform, &skewed}) {
    EXPECT_EQ(std::accumulate(c->rank_rows.begin(), c->rank_rows.end(), int64_t{0}), tokens * s.top_k);
  }
  const int64_t busiest_uniform = uniform.rank_rows[uniform.busiest];
  const int64_t busiest_skewed = skewed.rank_rows[skewed.busiest];
  // Zipf puts the hot experts (0, 1, ...) on EP rank 0: it holds far more than the mean T k / ep.
  EXPECT_EQ(skewed.busiest, 0);
  EXPECT_GT(busiest_skewed, 2 * busiest_uniform) << busiest_skewed << " vs " << busiest_uniform;
  // The experts row is the busiest rank's experts re-priced here from its rows.
  const double uniform_slot = SlotNs(hw, uniform.busiest_expert_rows, ep.lnc, s.hidden, s.expert_inter);
  const double skewed_slot = SlotNs(hw, skewed.busiest_expert_rows, ep.lnc, s.hidden, s.expert_inter);
  EXPECT_NEAR(uniform.phase_ns("experts"), uniform_slot, 1e-6 * uniform_slot);
  EXPECT_NEAR(skewed.phase_ns("experts"), skewed_slot, 1e-6 * skewed_slot);
  // Visibly slower, and the experts' extra time is most of the difference; the rest is the
  // all_to_all_v carrying the extra rows to and from that rank (dispatch and combine).
  const double extra = skewed.total_ns() - uniform.total_ns();
  EXPECT_GT(skewed.total_ns(), 1.5 * uniform.total_ns());
  const double explained = (skewed_slot - uniform_slot) + (skewed.phase_ns("dispatch") - uniform.phase_ns("dispatch")) +
                           (skewed.phase_ns("combine") - uniform.phase_ns("combine"));
  EXPECT_NEAR(extra, explained, 1e-6 * extra);
  EXPECT_GT(skewed_slot - uniform_slot, 0.5 * extra);
  // The router runs on every token whatever the routing.
  EXPECT_DOUBLE_EQ(skewed.phase_ns("router"), uniform.phase_ns("router"));
}

TEST(MoeBlockTest, TpOnlyHasNoExchangeAndEpExchangesTheRows) {
  const HardwareProfile hw = Trn2Profile();
  const MoeShape s = Qwen30b();
  const MoeBlockCost tp = PriceMoeBlock(s, MoePlan{8, 1, 8, 2}, 64, moe::RouterSkew{}, hw);
  const MoeBlockCost ep = PriceMoeBlock(s, MoePlan{8, 8, 1, 2}, 64, moe::RouterSkew{}, hw);
  // TP only: one EP slot holds every row; EP 8: the slots split them.
  ASSERT_EQ(tp.rank_rows.size(), 1u);
  EXPECT_EQ(tp.rank_rows[0], 64 * 8);
  ASSERT_EQ(ep.rank_rows.size(), 8u);
  // TP only: its dispatch is the local permutation alone; EP adds the all_to_all_v.
  const MoeBlockCost ep_local = PriceMoeBlock(s, MoePlan{1, 1, 1, 2}, 8, moe::RouterSkew{}, hw);
  EXPECT_GT(ep.phase_ns("dispatch"), ep_local.phase_ns("dispatch"));
  for (const MoeBlockCost* c : {&tp, &ep}) {
    std::vector<std::string> names;
    for (const MoePhaseCost& p : c->phases) names.push_back(p.phase);
    EXPECT_THAT(names, ::testing::ElementsAre("router", "dispatch", "experts", "combine", "moe_collectives"));
  }
}

TEST(MoeBlockTest, ExpertsWeightsPerRankAreTheModelsExpertsOverTheRanks) {
  MoeShape s;  // Qwen3-235B-A22B
  s.hidden = 4096;
  s.experts = 128;
  s.top_k = 8;
  s.expert_inter = 1536;
  const int64_t router = 2 * 4096 * 128;
  const int64_t all_experts = int64_t{2} * 128 * 3 * 4096 * 1536;
  for (const MoePlan p : {MoePlan{64, 1, 64, 2}, MoePlan{64, 32, 2, 2}, MoePlan{64, 64, 1, 2}}) {
    EXPECT_EQ(MoeWeightBytesPerRank(s, p), router + all_experts / 64) << p.ep << " x " << p.moe_tp;
  }
  s.shared_inter = 2048;
  EXPECT_EQ(MoeWeightBytesPerRank(s, MoePlan{8, 4, 2, 2}), router + all_experts / 8 + 2 * 3 * 4096 * 2048 / 8);
}

TEST(MoeBlockTest, BadPlansNameTheField) {
  const MoeShape s = Qwen30b();
  EXPECT_TRUE(MoePlanProblems(s, MoePlan{64, 32, 2, 2}, "p").empty());
  EXPECT_THAT(MoePlanProblems(s, MoePlan{6, 6, 1, 2}, "p"),
              ::testing::ElementsAre(HasSubstr("moe_ep: 6: must divide the experts (num_experts 128)")));
  EXPECT_THAT(MoePlanProblems(s, MoePlan{8, 2, 2, 2}, "p"),
              ::testing::ElementsAre(HasSubstr("moe_ep x moe_tp: 2 x 2 = 4: must equal tp (8)")));
  EXPECT_THAT(MoePlanProblems(s, MoePlan{5, 1, 5, 2}, "p"),
              ::testing::ElementsAre(HasSubstr("moe_tp: 5: must divide the expert's intermediate size (768)")));
  EXPECT_THROW(ParseRouterSkew("zipf:", "--router-skew"), Error);
  EXPECT_THROW(ParseRouterSkew("zipf:-1", "--router-skew"), Error);
  EXPECT_THROW(ParseRouterSkew("counts:x", "--router-skew"), Error);
  EXPECT_EQ(ParseRouterSkew("zipf:1.2", "--router-skew").zipf_s, 1.2);
}

PredictRequest Request(const std::string& model, std::vector<PredictPlan> plans) {
  PredictRequest r;
  r.model = LoadHfConfig(Model(model));
  r.plans = std::move(plans);
  r.batch = 4;
  r.input_tokens = 128;
  r.output_tokens = 8;
  return r;
}

PredictPlan Plan(const std::string& text) { return ParsePlan(text); }

double Phase(const std::vector<PhaseTime>& phases, const std::string& name) {
  for (const PhaseTime& p : phases) {
    if (p.phase == name) return p.us;
  }
  return -1;
}

// The attention block is the same under both plans (same tp): the plans differ by the MoE rows,
// and the TPOT and TTFT differences are L x those rows' differences.
TEST(MoePredictTest, EpAndTpPlansDifferByTheirMoeRows) {
  PredictRequest r = Request("Qwen3-30B-A3B.config.json", {Plan("tp=8"), Plan("tp=8,moe_ep=8,moe_tp=1")});
  const std::vector<PlanPrediction> p = Predict(r);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1].plan.name, "tp8_ep8");
  for (const char* row : {"qkv", "attention", "o_proj", "all_reduce"}) {
    EXPECT_DOUBLE_EQ(Phase(p[0].decode_phases, row), Phase(p[1].decode_phases, row)) << row;
    EXPECT_DOUBLE_EQ(Phase(p[0].prefill_phases, row), Phase(p[1].prefill_phases, row)) << row;
  }
  for (const char* row : {"router", "dispatch", "experts", "combine", "moe_collectives"}) {
    EXPECT_GT(Phase(p[0].decode_phases, row), 0) << row;
    EXPECT_GT(Phase(p[1].decode_phases, row), 0) << row;
  }
  const int L = r.model.layers;
  const double moe_diff = p[0].moe_decode.total_ns() - p[1].moe_decode.total_ns();
  EXPECT_NEAR(p[0].decode_stack_mean_ns - p[1].decode_stack_mean_ns, L * moe_diff, 1e-6 * std::abs(L * moe_diff) + 1);
  const double moe_prefill_diff = p[0].moe_prefill.total_ns() - p[1].moe_prefill.total_ns();
  EXPECT_NEAR(p[0].prefill_stack_ns - p[1].prefill_stack_ns, L * moe_prefill_diff,
              1e-6 * std::abs(L * moe_prefill_diff) + 1);
  // Both plans hold all 128 experts' weights over their 8 ranks: the same HBM per rank.
  EXPECT_EQ(p[0].moe_bytes_per_layer, p[1].moe_bytes_per_layer);
  EXPECT_EQ(p[0].hbm_bytes, p[1].hbm_bytes);
  EXPECT_EQ(p[0].hbm_bytes - p[0].layers_hbm.total() - p[0].embedding_bytes, int64_t{L} * p[0].moe_bytes_per_layer);
}

TEST(MoePredictTest, ZipfSkewSlowsTheTtftByTheMoeBlocksExtraTime) {
  PredictRequest r = Request("Qwen3-30B-A3B.config.json", {Plan("tp=8,moe_ep=8,moe_tp=1")});
  const PlanPrediction uniform = Predict(r).front();
  r.skew = Zipf(1.2);
  const PlanPrediction skewed = Predict(r).front();
  const double ttft_extra_ns = (skewed.ttft_ms - uniform.ttft_ms) * 1e6;
  const double block_extra_ns = skewed.moe_prefill.total_ns() - uniform.moe_prefill.total_ns();
  EXPECT_GT(skewed.ttft_ms, 1.2 * uniform.ttft_ms);
  EXPECT_NEAR(ttft_extra_ns, r.model.layers * uniform.prefill_chunks * block_extra_ns, 1e-6 * ttft_extra_ns);
  EXPECT_GT(skewed.moe_prefill.rank_rows[skewed.moe_prefill.busiest],
            uniform.moe_prefill.rank_rows[uniform.moe_prefill.busiest]);
}

std::string WriteCounts(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "moe_counts_" + name + ".txt";
  std::ofstream(path) << text;
  return path;
}

std::string Repeat(const std::string& item, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += item + " ";
  return out;
}

// --router-skew counts:FILE: the file's grammar, and each rule the counts break for the model.
TEST(MoePredictTest, CountsFilesAreReadAndCheckedByRule) {
  int64_t tokens = -1;
  const moe::RouterSkew s = ParseRouterSkew(
      "counts:" + WriteCounts("ok", "# a sample\ntokens: 3  # three tokens\n3 2\n1 0 # tail\n"), "--router-skew", &tokens);
  EXPECT_EQ(s.kind, moe::RouterSkew::Kind::kCounts);
  EXPECT_EQ(s.counts, (std::vector<int64_t>{3, 2, 1, 0}));
  EXPECT_EQ(tokens, 3);
  ParseRouterSkew("counts:" + WriteCounts("nohdr", "1 1"), "--router-skew", &tokens);
  EXPECT_EQ(tokens, 0);
  auto error = [](const std::string& text) {
    try {
      ParseRouterSkew("counts:" + WriteCounts("bad", text), "--router-skew");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error("1 2\n3 x\n"), HasSubstr("line 2: count 'x' (expert 3): must be an integer in [0, 1e9]"));
  EXPECT_THAT(error("1 -2"), HasSubstr("count '-2' (expert 1)"));
  EXPECT_THAT(error("1 2\ntokens: 4"), HasSubstr("tokens: '4': must be one integer in [1, 1e9], before the counts"));
  EXPECT_THAT(error("# nothing\n"), HasSubstr("no counts"));
  EXPECT_THAT(error("tokens: 0\n1"), HasSubstr("tokens: '0'"));

  MoeShape shape;
  shape.experts = 4;
  shape.top_k = 2;
  auto problems = [&](std::vector<int64_t> counts, int64_t sample) {
    moe::RouterSkew k;
    k.kind = moe::RouterSkew::Kind::kCounts;
    k.counts = std::move(counts);
    const std::vector<std::string> p = RouterSkewProblems(k, sample, shape, "--router-skew counts:f");
    return p.empty() ? std::string() : p.front();
  };
  EXPECT_EQ(problems({3, 2, 1, 0}, 3), "");
  EXPECT_EQ(problems({3, 2, 1, 0}, 0), "");
  EXPECT_EQ(problems({3, 2, 1}, 3), "--router-skew counts:f: 3 counts: the rule is one per expert (num_experts 4)");
  EXPECT_EQ(problems({3, 2, 1, 1}, 3),
            "--router-skew counts:f: the counts sum to 7: the rule is tokens x num_experts_per_tok = 3 x 2 = 6");
  EXPECT_THAT(problems({3, 2, 1, 1}, 0), HasSubstr("the counts sum to 7: the rule is the sample's tokens x "
                                                   "num_experts_per_tok: a positive multiple of 2"));
  EXPECT_THAT(problems({0, 0, 0, 0}, 0), HasSubstr("the counts sum to 0"));
  EXPECT_EQ(problems({4, 2, 0, 0}, 0), "--router-skew counts:f: count of expert 0: 4: must be <= the sample's tokens "
                                       "(3): a token picks an expert at most once");
  moe::RouterSkew zipf = Zipf(1.2);
  EXPECT_TRUE(RouterSkewProblems(zipf, 0, shape, "x").empty());
}

// A sample's counts carried to a step: exact at the sample's tokens, proportional elsewhere with
// the largest remainders rounding up (values worked by hand), always tokens x k rows, none above
// the step's tokens.
TEST(MoePredictTest, CountsAreScaledToEachStep) {
  const std::vector<int64_t> c = {20, 10, 6, 4, 0, 0, 0, 0};  // 20 tokens x top 2
  EXPECT_EQ(CountsForStep(c, 20, 2), c);
  EXPECT_EQ(CountsForStep(c, 40, 2), (std::vector<int64_t>{40, 20, 12, 8, 0, 0, 0, 0}));
  // 5 tokens: ideal 5, 2.5, 1.5, 1 -> floors 5 2 1 1 (9), the tied 0.5 remainders: expert 1 first.
  EXPECT_EQ(CountsForStep(c, 5, 2), (std::vector<int64_t>{5, 3, 1, 1, 0, 0, 0, 0}));
  // 3 tokens: ideal 3, 1.5, 0.9, 0.6 -> 3 1 0 0 (4); remainders 0.9 and 0.6 round up.
  EXPECT_EQ(CountsForStep(c, 3, 2), (std::vector<int64_t>{3, 1, 1, 1, 0, 0, 0, 0}));
  for (int64_t t : {1, 2, 7, 33, 1000}) {
    const std::vector<int64_t> s = CountsForStep(c, t, 2);
    EXPECT_EQ(std::accumulate(s.begin(), s.end(), int64_t{0}), 2 * t) << t;
    for (int64_t n : s) EXPECT_LE(n, t) << t;
  }
}

// Predict with a counts file: every choice on EP slot 0's experts puts all the step's rows on
// rank 0 at every step size, and at the sample's own size the ranks receive exactly the file's
// per-slot sums.
TEST(MoePredictTest, CountsSkewPutsTheRowsWhereTheFileSays) {
  PredictRequest r = Request("Qwen3-30B-A3B.config.json", {Plan("tp=8,moe_ep=8,moe_tp=1")});
  // Batch 4 x top 8 = 32 choices a decode step: experts 0..7 (slot 0: experts 0..15) 4 each.
  r.skew = ParseRouterSkew("counts:" + WriteCounts("hot", "tokens: 4\n" + Repeat("4", 8) + Repeat("0", 120)),
                           "--router-skew", &r.skew_sample_tokens);
  const PlanPrediction hot = Predict(r).front();
  EXPECT_EQ(hot.moe_decode.busiest, 0);
  EXPECT_EQ(hot.moe_decode.rank_rows[0], 32);
  const int64_t chunk_rows = int64_t{r.batch} * hot.prefill_chunk_tokens * 8;
  EXPECT_EQ(hot.moe_prefill.rank_rows[0], chunk_rows);
  for (size_t j = 1; j < 8; ++j) EXPECT_EQ(hot.moe_prefill.rank_rows[j], 0) << j;

  // A spread sample of 4 tokens: expert e takes the counts below; slot j's rows are the sum of
  // its 16 experts' counts.
  std::vector<int64_t> counts(128, 0);
  for (int e = 0; e < 32; ++e) counts[static_cast<size_t>(e * 4 + (e % 3))] = 1;  // 32 choices
  std::string text;
  for (int64_t n : counts) text += std::to_string(n) + " ";
  r.skew = ParseRouterSkew("counts:" + WriteCounts("spread", text), "--router-skew", &r.skew_sample_tokens);
  EXPECT_EQ(r.skew_sample_tokens, 0);
  const PlanPrediction spread = Predict(r).front();
  for (int j = 0; j < 8; ++j) {
    int64_t slot = 0;
    for (int e = 16 * j; e < 16 * (j + 1); ++e) slot += counts[static_cast<size_t>(e)];
    EXPECT_EQ(spread.moe_decode.rank_rows[static_cast<size_t>(j)], slot) << j;
  }
  EXPECT_LT(spread.moe_decode.rank_rows[spread.moe_decode.busiest], 32);

  // The file's rules go through Predict: 64 counts for 128 experts.
  r.skew = ParseRouterSkew("counts:" + WriteCounts("short", Repeat("1", 64)), "--router-skew", &r.skew_sample_tokens);
  r.skew_text = "--router-skew counts:short";
  try {
    Predict(r);
    ADD_FAILURE() << "64 counts for 128 experts accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_THAT(e.what(), HasSubstr("--router-skew counts:short: 64 counts: the rule is one per expert (num_experts 128)"));
  }
}

TEST(MoePredictTest, ConfigsThatDisagreeOrAreAbsurdAreRefusedByField) {
  auto problems = [](const std::string& json) {
    try {
      ParseHfConfig(json, "c.json");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string base = R"({"architectures": ["MixtralForCausalLM"], "model_type": "mixtral",
    "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 32000, )";
  EXPECT_EQ(problems(base + R"("num_hidden_layers": 32, "num_local_experts": 8, "num_experts_per_tok": 2})"), "");
  EXPECT_THAT(problems(base + R"("num_hidden_layers": 32, "num_local_experts": 8, "num_experts_per_tok": 9})"),
              HasSubstr("num_experts_per_tok: 9: must be <= the experts (8)"));
  EXPECT_THAT(problems(base + R"("num_hidden_layers": 32, "num_local_experts": 8, "num_experts": 16,
                                 "num_experts_per_tok": 2})"),
              HasSubstr("num_local_experts: 8: disagrees with the other expert count given (16)"));
  EXPECT_THAT(problems(base + R"("num_hidden_layers": 1000000000, "num_local_experts": 8, "num_experts_per_tok": 2})"),
              HasSubstr("num_hidden_layers: 1000000000: must be <= 1024"));
  EXPECT_THAT(problems(base + R"("num_hidden_layers": 1e9, "num_local_experts": 8, "num_experts_per_tok": 2})"),
              HasSubstr("num_hidden_layers: 1000000000.0: must be a positive integer"));
  EXPECT_THAT(problems(base + R"("num_hidden_layers": 32, "num_local_experts": 8, "num_experts_per_tok": 2,
                                 "rope_scaling": {"rope_type": "linear", "factor": 1e9}})"),
              HasSubstr("rope_scaling.factor: 1000000000.0: must be a number in (0, 256]"));
  EXPECT_THAT(problems(base + R"("num_hidden_layers": 32, "num_experts_per_tok": 2})"),
              HasSubstr("num_experts / num_local_experts: missing: required for MixtralForCausalLM"));
}

}  // namespace
}  // namespace nkisim::launcher

namespace nkisim::launcher {
namespace {

// gpt-oss-20b as shipped, with `edit` applied to its JSON text.
HfModel GptOss20b(const std::function<void(std::string&)>& edit = nullptr) {
  std::ifstream in(Model("gpt-oss-20b.config.json"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (edit) edit(text);
  return ParseHfConfig(text, "gpt-oss-20b");
}

void Erase(std::string& text, const std::string& from, const std::string& to) {
  const size_t a = text.find(from);
  ASSERT_NE(a, std::string::npos) << from;
  const size_t b = text.find(to, a);
  ASSERT_NE(b, std::string::npos) << to;
  text.erase(a, b - a);
}

PlanPrediction PredictOne(const HfModel& m, int batch, int input, int output) {
  return Predict(nkisim::testing::OnePlanRequest(m, "tp=8", batch, input, output)).front();
}

TEST(GptOssPredictTest, ConfigReadsAsAlternatingSlidingLayersWithBiasesAndPaddedH) {
  const HfModel m = GptOss20b();
  EXPECT_EQ(m.architecture, "GptOssForCausalLM");
  EXPECT_TRUE(m.moe);
  EXPECT_EQ(m.router, "gpt_oss");
  EXPECT_EQ(m.experts, 32);
  EXPECT_EQ(m.top_k, 4);
  EXPECT_EQ(m.expert_inter, 2880);
  EXPECT_EQ(m.sliding_window, 128);
  EXPECT_EQ(m.sliding_layers, 12);
  EXPECT_TRUE(m.attention_bias);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.padded_hidden(1), 2944);
  EXPECT_EQ(m.padded_hidden(2), 3072);
  // experts_per_token and num_experts_per_tok name the same count.
  EXPECT_THROW(GptOss20b([](std::string& t) { t.replace(t.find("\"experts_per_token\": 4"), 22, "\"experts_per_token\": 2"); }),
               Error);
  // The public checkpoint's MXFP4 experts are not modelled: refused by name.
  try {
    GptOss20b([](std::string& t) { t.insert(1, "\"quantization_config\": {\"quant_method\": \"mxfp4\"},"); });
    ADD_FAILURE() << "quantization_config accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("quantization_config: {\"quant_method\":\"mxfp4\"}: not modeled"));
  }
}

// The sliding layers attend min(KV, 128) keys: each decode sample is the all-full-attention
// model's minus the sliding layers' (layer at KV - layer at 128), the latter read off a
// prediction of the full model at KV 128.
TEST(GptOssPredictTest, SlidingLayersDecodeAtTheWindowsLength) {
  const HfModel sliding = GptOss20b();
  const HfModel full = GptOss20b([](std::string& t) {
    Erase(t, "\"layer_types\"", "\"max_position_embeddings\"");
    t.replace(t.find("\"sliding_window\": 128"), 21, "\"sliding_window\": null");
  });
  ASSERT_EQ(full.sliding_layers, 0);
  const PlanPrediction a = PredictOne(sliding, 4, 1024, 8);
  const PlanPrediction b = PredictOne(full, 4, 1024, 8);
  const PlanPrediction c = PredictOne(full, 4, 128, 1);
  const int L = sliding.layers, slide = sliding.sliding_layers;
  ASSERT_EQ(a.samples.size(), b.samples.size());
  const double at_window = c.samples.front().second / L;  // one layer + the MoE block at KV 128
  for (size_t j = 0; j < a.samples.size(); ++j) {
    const double per_layer = b.samples[j].second / L;
    const double expected = b.samples[j].second - slide * (per_layer - at_window);
    EXPECT_NEAR(a.samples[j].second, expected, 1e-9 * expected) << "KV " << a.samples[j].first;
    // Fewer keys, but not necessarily a cheaper step: under the DMA engine model a 128-token
    // cache moves in short runs (descriptor-bound), so the sliding layers' attention costs about
    // what the 1024-token one does. It may not cost more than 0.5% beyond it.
    EXPECT_LT(a.samples[j].second, 1.005 * b.samples[j].second);
  }
}

// H not a multiple of 128 runs its attention block at H padded to the LNC's tiles: the same
// attention rows as the model whose H is the padded one.
TEST(GptOssPredictTest, UnalignedHiddenIsPricedAsThePaddedHidden) {
  const HfModel m = GptOss20b();
  HfModel padded = m;
  padded.hidden = 3072;
  const PlanPrediction a = PredictOne(m, 4, 256, 4);
  const PlanPrediction b = PredictOne(padded, 4, 256, 4);
  for (const char* row : {"qkv", "attention", "o_proj", "all_reduce"}) {
    EXPECT_DOUBLE_EQ(Phase(a.decode_phases, row), Phase(b.decode_phases, row)) << row;
    EXPECT_DOUBLE_EQ(Phase(a.prefill_phases, row), Phase(b.prefill_phases, row)) << row;
  }
  // The MoE block runs at H 2880 itself: cheaper than at 3072.
  EXPECT_LT(a.moe_decode.phase_ns("experts"), b.moe_decode.phase_ns("experts"));
}

}  // namespace
}  // namespace nkisim::launcher

namespace nkisim::launcher {
namespace {

// Llama 4 Scout's text model read from its multimodal config: an MoE block a layer with a shared
// expert, sigmoid top-1, chunked attention on the 36 RoPE layers; Maverick's interleaving refused.
TEST(Llama4PredictTest, ScoutReadsItsTextConfig) {
  std::ifstream in(Model("Llama-4-Scout-17B-16E.config.json"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const HfModel m = ParseHfConfig(text, "scout");
  EXPECT_EQ(m.architecture, "Llama4ForConditionalGeneration");
  EXPECT_EQ(m.hidden, 5120);
  EXPECT_EQ(m.layers, 48);
  EXPECT_EQ(m.router, "llama4");
  EXPECT_EQ(m.experts, 16);
  EXPECT_EQ(m.top_k, 1);
  EXPECT_EQ(m.expert_inter, 8192);
  EXPECT_EQ(m.shared_inter, 8192);
  EXPECT_EQ(m.sliding_window, 8192);
  EXPECT_EQ(m.sliding_layers, 36);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(m.vocab, 202048);
  // Step 2 with Scout's every-layer moe_layers list: the list contradicts the step (interleaved
  // models themselves: tests/model/interleaved_moe_test.cc).
  std::string maverick = text;
  maverick.replace(maverick.find("\"interleave_moe_layer_step\": 1"), 30, "\"interleave_moe_layer_step\": 2");
  try {
    ParseHfConfig(maverick, "maverick");
    ADD_FAILURE() << "interleave step 2 with every layer listed in moe_layers accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("must list the layers interleave_moe_layer_step (2) makes MoE blocks: [1,3,5,"));
  }
  std::string wrapped = text;
  wrapped.insert(1, "\"hidden_size\": 5120, ");
  EXPECT_THROW(ParseHfConfig(wrapped, "wrapped"), Error);  // a text key outside text_config
  // The shared expert is a row of the MoE block, and its weights are in HBM.
  const MoeBlockCost c = PriceMoeBlock(MoeShapeOf(m), MoePlan{8, 8, 1, 2}, 8, moe::RouterSkew{}, Trn2Profile());
  EXPECT_GT(c.phase_ns("shared_expert"), 0);
  EXPECT_EQ(MoeWeightBytesPerRank(MoeShapeOf(m), MoePlan{8, 8, 1, 2}),
            2 * (int64_t{5120} * 16 + 2 * 3 * int64_t{5120} * 8192 + 3 * int64_t{5120} * 8192 / 8));
}

}  // namespace
}  // namespace nkisim::launcher

namespace nkisim::launcher {
namespace {

HfModel Dense(int head_dim, int hidden) {
  return ParseHfConfig(StrCat(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": )", hidden,
                              R"(, "intermediate_size": 8192, "num_hidden_layers": 4, "num_attention_heads": 32,
                              "num_key_value_heads": 8, "head_dim": )", head_dim,
                              R"(, "vocab_size": 32000, "hidden_act": "silu", "torch_dtype": "bfloat16"})"),
                       "dense");
}

// head_dim 64 / 80 / 96 run prefill and decode: the decode at d itself, the prefill at d 128 (its
// QKV CTE's heads), so its rows equal the d-128 model's.
TEST(DenseZooPredictTest, SmallHeadDimsDecodeAtDAndPrefillAsD128) {
  for (const int d : {64, 80, 96}) {
    const PlanPrediction small = PredictOne(Dense(d, 32 * d), 4, 256, 4);
    const PlanPrediction wide = PredictOne(Dense(128, 32 * d), 4, 256, 4);
    ASSERT_TRUE(small.simulated) << d;
    for (const char* row : {"qkv", "attention", "o_proj", "mlp"}) {
      EXPECT_DOUBLE_EQ(Phase(small.prefill_phases, row), Phase(wide.prefill_phases, row)) << d << " " << row;
    }
    // The decode runs d itself: its attention is not the d-128 model's (at these shapes d 64 is
    // even slower: 64-element rows cost the DMAs more per byte).
    EXPECT_GT(Phase(small.decode_phases, "attention"), 0) << d;
    EXPECT_NE(Phase(small.decode_phases, "attention"), Phase(wide.decode_phases, "attention")) << d;
    EXPECT_LT(small.hbm_bytes, wide.hbm_bytes) << d;  // smaller QKV, o_proj and KV cache
  }
}

}  // namespace
}  // namespace nkisim::launcher
