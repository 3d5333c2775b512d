// The step-cost table's fast builder (each distinct layer job simulated once, launcher/commands/
// serve_step_costs.h) against the direct one (a whole predict per entry) on a small Llama at
// TP 8: every entry equal to floating-point rounding, with fewer simulated jobs, and the same
// table whether its jobs run one or two at a time. The buckets cover a prefill chunked over
// predict's 1,024-token limit (2,048: two chunks sharing the 1,024 bucket's job). No simulated
// time is hard-coded: the cost model changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "launcher/commands/serve_step_costs.h"
#include "tests/testing/files.h"

namespace nkisim::launcher {
namespace {

int g_lines = 0;
void Count(const std::string&) { ++g_lines; }

PredictRequest TinyLlama() {
  const nlohmann::json config = {
      {"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 1024},
      {"intermediate_size", 1024}, {"num_hidden_layers", 4}, {"num_attention_heads", 8},
      {"num_key_value_heads", 2}, {"head_dim", 128}, {"vocab_size", 32000}, {"rms_norm_eps", 1e-5},
      {"tie_word_embeddings", false}, {"hidden_act", "silu"}, {"torch_dtype", "bfloat16"},
      {"max_position_embeddings", 4096}, {"rope_theta", 10000.0}};
  const std::string path = testing::TempPath("nkisim_step_cost_builder_", "tiny.json");
  std::ofstream(path) << config.dump();
  PredictRequest r;
  r.model = LoadHfConfig(path);
  r.plans = {ParsePlan("tp=8")};
  return r;
}

TEST(StepCostBuilderTest, FastTableEqualsOnePredictPerEntry) {
  const PredictRequest base = TinyLlama();
  const std::vector<int> prefill = {128, 1024, 2048}, batch = {1, 4}, kv = {256, 700, 1024};
  g_lines = 0;
  const serving::StepCostTable fast = BuildStepCostTable(base, prefill, batch, kv, 32, Count, /*workers=*/2);
  const int fast_jobs = g_lines;
  const serving::StepCostTable one_at_a_time = BuildStepCostTable(base, prefill, batch, kv, 32, nullptr, 1);
  EXPECT_EQ(serving::StepCostTableJson(fast), serving::StepCostTableJson(one_at_a_time));
  g_lines = 0;
  const serving::StepCostTable direct = BuildStepCostTableDirect(base, prefill, batch, kv, 32, Count);
  const int direct_predicts = g_lines;
  // Fast: chunk lengths 128 and 1,024 (2,048 = two chunks of 1,024), one job per decode entry;
  // direct: one predict (a prefill job and a decode job: two) per entry.
  EXPECT_EQ(fast_jobs, 2 + 6);
  EXPECT_EQ(direct_predicts, 3 + 6);

  const double rtol = 1e-9;
  double worst = 0;
  std::string where;
  auto compare = [&](double a, double golden, const std::string& what) {
    ASSERT_GT(golden, 0) << what;
    const double err = std::abs(a - golden) / golden;
    if (err >= worst) {
      worst = err;
      where = what + ": fast " + std::to_string(a) + " vs direct " + std::to_string(golden);
    }
  };
  ASSERT_EQ(fast.prefill_ms.size(), prefill.size());
  for (size_t i = 0; i < prefill.size(); ++i) {
    compare(fast.prefill_ms[i], direct.prefill_ms[i], "prefill " + std::to_string(prefill[i]));
  }
  ASSERT_EQ(fast.decode_ms.size(), batch.size());
  for (size_t b = 0; b < batch.size(); ++b) {
    ASSERT_EQ(fast.decode_ms[b].size(), kv.size());
    for (size_t k = 0; k < kv.size(); ++k) {
      compare(fast.decode_ms[b][k], direct.decode_ms[b][k],
              "decode batch " + std::to_string(batch[b]) + " KV " + std::to_string(kv[k]));
    }
  }
  EXPECT_LE(worst, rtol) << "worst element: " << where;
  // The 2,048 bucket is two chunks: more than twice the 1,024 bucket (the second chunk's attention
  // over the first), so the shared job did not price it as one chunk.
  EXPECT_GT(fast.prefill_ms[2], 2 * fast.prefill_ms[1] * 0.999);
  EXPECT_EQ(fast.host_ms_per_step, direct.host_ms_per_step);
  EXPECT_EQ(fast.kv_blocks, direct.kv_blocks);
  EXPECT_GT(fast.kv_blocks, 0);
}

}  // namespace
}  // namespace nkisim::launcher
