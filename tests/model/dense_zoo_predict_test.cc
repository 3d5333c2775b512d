// The wider dense zoo of `nkisim predict` (issue 42, item 4): head_dim 256 (Gemma), priced as two
// heads of 128. Checked against plain arithmetic on the public config (the KV cache and the
// weights a rank holds), against the model it is defined to equal (heads of 128, twice as many),
// and the plans and configs it refuses by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model/hf_config.h"
#include "model/predict.h"
#include "tests/testing/predict_request.h"
#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

using ::testing::HasSubstr;

std::string ReadModel(const std::string& name) {
  std::ifstream in(std::string(NKISIM_SOURCE_DIR) + "/configs/models/" + name);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

PredictRequest Request(const HfModel& m, const std::string& plan, int batch, int input, int output) {
  return nkisim::testing::OnePlanRequest(m, plan, batch, input, output);
}

double Phase(const std::vector<PhaseTime>& phases, const std::string& name) {
  for (const PhaseTime& p : phases) {
    if (p.phase == name) return p.us;
  }
  return -1;
}

TEST(GemmaPredictTest, Gemma7bReadsWithHeadDim256AndTiedEmbeddings) {
  const HfModel m = ParseHfConfig(ReadModel("gemma-7b.config.json"), "gemma-7b");
  EXPECT_EQ(m.architecture, "GemmaForCausalLM");
  EXPECT_EQ(m.head_dim, 256);
  EXPECT_EQ(m.n_q_heads, 16);
  EXPECT_EQ(m.n_kv_heads, 16);
  EXPECT_EQ(m.hidden, 3072);
  EXPECT_EQ(m.activation, "gelu");
  EXPECT_TRUE(m.tie_word_embeddings);  // Gemma's default: the public config does not say
  EXPECT_FALSE(m.moe);
}

// Prefill and decode both run; the KV cache and the weights per rank are the real model's
// (d 256 on 16 / tp KV heads), computed here by hand.
TEST(GemmaPredictTest, HeadDim256RunsThroughPrefillAndDecode) {
  const HfModel m = ParseHfConfig(ReadModel("gemma-7b.config.json"), "gemma-7b");
  const int B = 4, S = 256, N = 8, tp = 8;
  const PlanPrediction p = Predict(Request(m, "tp=8", B, S, N)).front();
  ASSERT_TRUE(p.simulated) << p.error;
  for (const char* row : {"qkv", "attention", "o_proj", "mlp"}) {
    EXPECT_GT(Phase(p.decode_phases, row), 0) << row;
    EXPECT_GT(Phase(p.prefill_phases, row), 0) << row;
  }
  EXPECT_GT(p.ttft_ms, 0);
  EXPECT_GT(p.tpot_ms, 0);
  // K and V, 16 / 8 = 2 heads of d 256 a rank, 2 bytes, B x (S + N) tokens.
  EXPECT_EQ(p.layers_hbm.kv_cache_per_layer, int64_t{2} * (16 / tp) * 256 * 2 * B * (S + N));
  // Q, K, V and o_proj columns of 16 x 256 each over 8 ranks, the gated MLP's 3 x H x I / 8.
  const int64_t h = 3072, attn = 16 * 256, inter = 24576;
  EXPECT_EQ(p.layers_hbm.weights_per_layer,
            2 * (h * 3 * attn / tp + attn / tp * h + 3 * h * inter / tp) + 2 * h * 2);  // + 2 norm weights
  // Tied: one [V, H] table, vocab-parallel.
  EXPECT_EQ(p.embedding_bytes, int64_t{256000} * 3072 * 2 / tp);
}

// The pricing rule: a head of 256 costs what two heads of 128 cost, Q and KV alike.
TEST(GemmaPredictTest, HeadDim256IsPricedAsTwoHeadsOf128) {
  const HfModel m = ParseHfConfig(ReadModel("gemma-7b.config.json"), "gemma-7b");
  HfModel halves = m;
  halves.head_dim = 128;
  halves.n_q_heads = 32;
  halves.n_kv_heads = 32;
  const PlanPrediction a = Predict(Request(m, "tp=8", 4, 256, 4)).front();
  const PlanPrediction b = Predict(Request(halves, "tp=8", 4, 256, 4)).front();
  for (const char* row : {"qkv", "attention", "o_proj", "mlp"}) {
    EXPECT_DOUBLE_EQ(Phase(a.decode_phases, row), Phase(b.decode_phases, row)) << row;
    EXPECT_DOUBLE_EQ(Phase(a.prefill_phases, row), Phase(b.prefill_phases, row)) << row;
  }
  EXPECT_EQ(a.hbm_bytes, b.hbm_bytes);
}

TEST(GemmaPredictTest, WhatIsNotModeledIsRefusedByName) {
  const HfModel m = ParseHfConfig(ReadModel("gemma-7b.config.json"), "gemma-7b");
  try {
    Predict(Request(m, "tp=32", 1, 64, 4));
    ADD_FAILURE() << "tp 32 over 16 KV heads of d 256 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_THAT(e.what(), HasSubstr("plan 'tp32': tp: 32: must divide num_key_value_heads (16) at head_dim 256"));
  }
  std::string text = ReadModel("gemma-7b.config.json");
  const std::string d256 = "\"head_dim\": 256";
  ASSERT_NE(text.find(d256), std::string::npos);
  text.replace(text.find(d256), d256.size(), "\"head_dim\": 192");
  try {
    ParseHfConfig(text, "g");
    ADD_FAILURE() << "head_dim 192 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_THAT(e.what(), HasSubstr("head_dim: 192: must be <= 128 (one head on the partitions) or 256"));
  }
}

}  // namespace
}  // namespace nkisim::launcher
