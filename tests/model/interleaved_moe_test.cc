// Interleaved dense / MoE layers (Llama 4 Maverick: interleave_moe_layer_step 2, 24 MoE layers
// and 24 dense layers whose MLP has intermediate_size_mlp 16384). Predict prices each layer type
// with its own count: the stacks are n_moe x the MoE block + n_dense x the dense MLP + the
// attention blocks of all L layers, checked against the same model with every layer an MoE block
// (whose attention is identical) by hand arithmetic; the rules refuse bad values by field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <string>

#include "model/hf_config.h"
#include "model/moe_block.h"
#include "model/predict.h"
#include "tests/testing/predict_request.h"
#include "runtime/error.h"
#include "runtime/hardware_profile.h"

namespace nkisim::launcher {
namespace {

using ::testing::HasSubstr;

std::string Maverick() {
  std::ifstream in(std::string(NKISIM_SOURCE_DIR) + "/configs/models/Llama-4-Maverick-17B-128E.config.json");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void Replace(std::string& text, const std::string& from, const std::string& to) {
  const size_t a = text.find(from);
  ASSERT_NE(a, std::string::npos) << from;
  text.replace(a, from.size(), to);
}

std::string Problem(const std::string& text) {
  try {
    ParseHfConfig(text, "maverick");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    return e.what();
  }
  return "";
}

const PhaseTime* Row(const std::vector<PhaseTime>& phases, const std::string& name) {
  for (const PhaseTime& p : phases) {
    if (p.phase == name) return &p;
  }
  return nullptr;
}

TEST(InterleavedMoeTest, MaverickReadsAs24MoeAnd24DenseLayers) {
  const HfModel m = ParseHfConfig(Maverick(), "maverick");
  EXPECT_TRUE(m.moe);
  EXPECT_EQ(m.layers, 48);
  EXPECT_EQ(m.moe_step, 2);
  EXPECT_EQ(m.moe_layers, 24);
  EXPECT_EQ(m.dense_layers(), 24);
  EXPECT_EQ(m.dense_inter, 16384);
  EXPECT_EQ(m.experts, 128);
  EXPECT_EQ(m.top_k, 1);
  EXPECT_EQ(m.expert_inter, 8192);
  EXPECT_EQ(m.shared_inter, 8192);
  // Scout (step 1): every layer MoE, no dense MLP priced.
  std::ifstream in(std::string(NKISIM_SOURCE_DIR) + "/configs/models/Llama-4-Scout-17B-16E.config.json");
  const HfModel scout =
      ParseHfConfig(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), "scout");
  EXPECT_EQ(scout.moe_layers, 48);
  EXPECT_EQ(scout.dense_layers(), 0);
  EXPECT_EQ(scout.dense_inter, 0);
}

TEST(InterleavedMoeTest, StacksAreDenseCountTimesDensePlusMoeCountTimesMoePlusTheRest) {
  const HfModel inter = ParseHfConfig(Maverick(), "maverick");
  HfModel all = inter;  // the same model with every layer an MoE block
  all.moe_step = 1;
  all.moe_layers = all.layers;
  all.dense_inter = 0;
  PredictRequest r = nkisim::testing::OnePlanRequest(inter, "tp=8", 4, 256, 4);
  const PlanPrediction pi = Predict(r).front();
  r.model = all;
  const PlanPrediction pa = Predict(r).front();
  ASSERT_TRUE(pi.simulated);
  ASSERT_TRUE(pa.simulated);
  const int L = 48, n_moe = 24, n_dense = 24, k = pi.prefill_chunks;
  ASSERT_EQ(k, pa.prefill_chunks);
  // The MoE block is the same in both (same routing, same tokens).
  ASSERT_DOUBLE_EQ(pi.moe_prefill.total_ns(), pa.moe_prefill.total_ns());
  ASSERT_DOUBLE_EQ(pi.moe_decode.total_ns(), pa.moe_decode.total_ns());
  ASSERT_TRUE(pa.dense_prefill.phases.empty());
  // The dense MLP's price is the block priced on its own (B x C tokens prefill, B decode).
  MoeShape shape;
  shape.hidden = 5120;
  shape.experts = 128;
  shape.top_k = 1;
  shape.expert_inter = 8192;
  shape.shared_inter = 8192;
  shape.dense_inter = 16384;
  shape.family = reference::RouterFamily::kLlama4;
  MoePlan plan;
  plan.tp = 8;
  plan.ep = 1;
  plan.moe_tp = 8;
  plan.lnc = 2;
  const double dense_prefill = PriceDenseMlpBlock(shape, plan, int64_t{4} * pi.prefill_chunk_tokens, Trn2Profile()).total_ns();
  const double dense_decode = PriceDenseMlpBlock(shape, plan, 4, Trn2Profile()).total_ns();
  EXPECT_DOUBLE_EQ(pi.dense_prefill.total_ns(), dense_prefill);
  EXPECT_DOUBLE_EQ(pi.dense_decode.total_ns(), dense_decode);
  EXPECT_GT(dense_prefill, 0);
  // rest = the all-MoE stack minus its L MoE blocks (attention blocks, identical in both).
  const double moe_p = pa.moe_prefill.total_ns(), moe_d = pa.moe_decode.total_ns();
  const double rest_p = pa.prefill_stack_ns - double(k) * L * moe_p;
  const double want_p = rest_p + double(k) * (n_moe * moe_p + n_dense * dense_prefill);
  EXPECT_NEAR(pi.prefill_stack_ns, want_p, 1e-9 * want_p);
  const double rest_d = pa.decode_stack_mean_ns - L * moe_d;
  const double want_d = rest_d + n_moe * moe_d + n_dense * dense_decode;
  EXPECT_NEAR(pi.decode_stack_mean_ns, want_d, 1e-9 * want_d);
  // HBM: 24 dense MLPs of 3 x 5120 x (16384 / 8) x 2 bytes instead of 24 MoE blocks.
  const int64_t dense_bytes = int64_t{3} * 5120 * (16384 / 8) * 2;
  ASSERT_EQ(dense_bytes, 62914560);
  EXPECT_EQ(pa.hbm_bytes - pi.hbm_bytes, n_dense * (pa.moe_bytes_per_layer - dense_bytes));
  // The rows carry their layer counts (all-MoE: 0, every layer).
  ASSERT_NE(Row(pi.decode_phases, "experts"), nullptr);
  EXPECT_EQ(Row(pi.decode_phases, "experts")->layers, n_moe);
  ASSERT_NE(Row(pi.prefill_phases, "dense_mlp"), nullptr);
  EXPECT_EQ(Row(pi.prefill_phases, "dense_mlp")->layers, n_dense);
  EXPECT_EQ(Row(pi.prefill_phases, "qkv")->layers, 0);
  EXPECT_EQ(Row(pa.decode_phases, "experts")->layers, 0);
  EXPECT_EQ(Row(pa.decode_phases, "dense_mlp"), nullptr);
  // --json says which rows run in how many layers (absent: every layer).
  r.model = inter;
  const nlohmann::json doc = nlohmann::json::parse(PredictionsJson(r, {pi}));
  const nlohmann::json& layers = doc["plans"][0]["moe"]["phase_layers"];
  EXPECT_EQ(layers["experts"], n_moe);
  EXPECT_EQ(layers["dense_mlp"], n_dense);
  EXPECT_FALSE(layers.contains("qkv"));
  std::printf("Maverick tp8 B4 S256: prefill MoE block %.1f us, dense MLP %.1f us; decode %.1f / %.1f us; "
              "TTFT %.2f ms (all-MoE %.2f), TPOT %.3f ms (all-MoE %.3f)\n",
              moe_p / 1e3, dense_prefill / 1e3, moe_d / 1e3, dense_decode / 1e3, pi.ttft_ms, pa.ttft_ms, pi.tpot_ms,
              pa.tpot_ms);
}

TEST(InterleavedMoeTest, BadInterleavingIsRefusedByField) {
  std::string zero = Maverick();
  Replace(zero, "\"interleave_moe_layer_step\": 2", "\"interleave_moe_layer_step\": 0");
  EXPECT_THAT(Problem(zero), HasSubstr("interleave_moe_layer_step: 0: must be an integer in [1, 1024]"));
  std::string big = Maverick();
  Replace(big, "\"interleave_moe_layer_step\": 2", "\"interleave_moe_layer_step\": 49");
  EXPECT_THAT(Problem(big), HasSubstr("interleave_moe_layer_step: 49: must be <= num_hidden_layers (48)"));
  std::string three = Maverick();  // step 3 implies layers 2, 5, ..., not the file's 1, 3, 5, ...
  Replace(three, "\"interleave_moe_layer_step\": 2", "\"interleave_moe_layer_step\": 3");
  EXPECT_THAT(Problem(three), HasSubstr("moe_layers: [1,3,5,"));
  EXPECT_THAT(Problem(three), HasSubstr("must list the layers interleave_moe_layer_step (3) makes MoE blocks: [2,5,8,"));
  std::string no_mlp = Maverick();
  Replace(no_mlp, "\"intermediate_size_mlp\": 16384,", "");
  EXPECT_THAT(Problem(no_mlp), HasSubstr("intermediate_size_mlp: missing: required when interleave_moe_layer_step "
                                         "(2) leaves 24 dense layers"));
  std::string text = Maverick();
  Replace(text, "\"interleave_moe_layer_step\": 2", "\"interleave_moe_layer_step\": 1.5");
  EXPECT_THAT(Problem(text), HasSubstr("interleave_moe_layer_step: 1.5: must be an integer"));
  // Another family with the key: refused, not ignored.
  std::ifstream in(std::string(NKISIM_SOURCE_DIR) + "/configs/models/Qwen3-30B-A3B.config.json");
  std::string qwen((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  qwen.insert(qwen.find('{') + 1, "\"interleave_moe_layer_step\": 2, ");
  EXPECT_THAT(Problem(qwen), HasSubstr("interleave_moe_layer_step: 2: must be 1 for Qwen3MoeForCausalLM"));
  // A plan whose tp does not divide the dense MLP's I.
  MoeShape s;
  s.hidden = 5120;
  s.experts = 128;
  s.top_k = 1;
  s.expert_inter = 8192;
  s.dense_inter = 16388;  // 16388 / 8 = 2048.5
  MoePlan p;
  p.tp = 8;
  p.ep = 8;
  p.moe_tp = 1;
  const std::vector<std::string> problems = MoePlanProblems(s, p, "tp8_ep8");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("tp: 8: must divide the dense layers' intermediate size (intermediate_size_mlp 16388)"));
}

}  // namespace
}  // namespace nkisim::launcher
