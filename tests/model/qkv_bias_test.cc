// model.qkv_bias (Qwen2's q, k and v biases) priced, against hand arithmetic on Qwen2.5-7B at
// TP 4 (a rank: 28 / 4 = 7 Q heads, 4 / 4 = 1 KV head, d 128, so I = (7 + 2) x 128 = 1152 local
// QKV columns):
//   * the QKV kernel with the bias issues exactly one more DMA, the bias row [1, I] broadcast onto
//     the T token partitions (T x I x 2 bytes), and the same number of compute instructions, each
//     of its ceil(I / 512) = 3 PSUM evictions a tensor_tensor add instead of a tensor_copy;
//   * predict holds (7 + 2 x 1) x 128 x 2 = 2304 more bytes a layer per rank (x 28 layers), its qkv
//     prefill qkv row takes longer, its decode one no less, and no other row moves.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "kernels/qkv/qkv.h"
#include "kernels/qkv/qkv_case.h"
#include "model/hf_config.h"
#include "model/predict.h"
#include "tests/testing/predict_request.h"
#include "runtime/hardware_profile.h"
#include "runtime/logical_core.h"
#include "runtime/timeline.h"

namespace nkisim::launcher {
namespace {

struct Counts {
  int64_t dmas = 0, dma_bytes = 0, compute = 0;
  std::map<std::string, int64_t> by_name;  // compute instructions by mnemonic
};

Counts RunQkv(bool bias, int64_t tokens) {
  kernels::QkvCaseOptions o;
  o.b = tokens;
  o.s = 1;
  o.h = 3584;
  o.n_q = 7;
  o.n_kv = 1;
  o.d = 128;
  o.norm = kernels::NormType::kRmsNorm;
  o.layout = kernels::QkvOutputLayout::kNBSd;
  o.bias = bias;
  const kernels::QkvParams p = kernels::MakeQkvCase(o);
  LogicalCore lnc(1, Trn2Profile());
  const kernels::QkvResult r = kernels::Qkv(lnc, p, kernels::QkvVariant::kTkg);
  EXPECT_EQ(r.variant, kernels::QkvVariant::kTkg);
  Counts c;
  for (const InstructionRecord& rec : lnc.core(0).timeline().records()) {
    if (IsDmaQueue(rec.engine)) {
      ++c.dmas;
      c.dma_bytes += rec.bytes;
    } else if (!IsDma(rec.engine)) {
      ++c.compute;
      ++c.by_name[rec.name];
    }
  }
  return c;
}

TEST(QkvBiasTest, KernelAddsOneBroadcastDmaAndTurnsEachEvictionIntoAnAdd) {
  for (const int64_t tokens : {int64_t{8}, int64_t{64}}) {
    Counts with = RunQkv(true, tokens), without = RunQkv(false, tokens);
    const int64_t i = (7 + 2 * 1) * 128, banks = (i + 511) / 512;
    ASSERT_EQ(i, 1152);
    ASSERT_EQ(banks, 3);
    EXPECT_EQ(with.dmas - without.dmas, 1) << tokens;
    EXPECT_EQ(with.dma_bytes - without.dma_bytes, tokens * i * 2) << tokens;
    EXPECT_EQ(with.compute, without.compute) << tokens;
    EXPECT_EQ(with.by_name["tensor_tensor"] - without.by_name["tensor_tensor"], banks) << tokens;
    EXPECT_EQ(without.by_name["tensor_copy"] - with.by_name["tensor_copy"], banks) << tokens;
  }
}

HfModel Qwen25() {
  std::ifstream in(std::string(NKISIM_SOURCE_DIR) + "/configs/models/Qwen2.5-7B-Instruct.config.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return ParseHfConfig(text, "Qwen2.5-7B-Instruct");
}

double Phase(const std::vector<PhaseTime>& phases, const std::string& name) {
  for (const PhaseTime& p : phases) {
    if (p.phase == name) return p.us;
  }
  return -1;
}

TEST(QkvBiasTest, Qwen25PredictHoldsAndPricesTheBias) {
  const HfModel biased = Qwen25();
  EXPECT_EQ(biased.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(biased.qkv_bias);  // Qwen2's code biases q, k, v; the config has no key for it
  EXPECT_EQ(biased.hidden, 3584);
  EXPECT_EQ(biased.n_q_heads, 28);
  EXPECT_EQ(biased.n_kv_heads, 4);
  EXPECT_EQ(biased.head_dim, 128);
  HfModel plain = biased;
  plain.qkv_bias = false;
  PredictRequest r = nkisim::testing::OnePlanRequest(biased, "tp=4", 8, 256, 4);
  const PlanPrediction with = Predict(r).front();
  r.model = plain;
  const PlanPrediction without = Predict(r).front();
  ASSERT_TRUE(with.simulated);
  ASSERT_TRUE(without.simulated);
  const int64_t per_layer = (28 / 4 + 2 * (4 / 4)) * 128 * 2;
  ASSERT_EQ(per_layer, 2304);
  EXPECT_EQ(with.layers_hbm.weights_per_layer - without.layers_hbm.weights_per_layer, per_layer);
  EXPECT_EQ(with.hbm_bytes - without.hbm_bytes, 28 * per_layer);
  // Decode (8 tokens): the bias row's DMA overlaps the weight stream and the adds replace the
  // copies one for one, so the row may not move; prefill (2048 tokens a rank): the adds read a
  // second operand per eviction, so it grows.
  EXPECT_GE(Phase(with.decode_phases, "qkv"), Phase(without.decode_phases, "qkv"));
  EXPECT_GT(Phase(with.prefill_phases, "qkv"), Phase(without.prefill_phases, "qkv"));
  for (const char* row : {"attention", "o_proj", "mlp"}) {  // equal up to summation order
    const double d = Phase(without.decode_phases, row), pf = Phase(without.prefill_phases, row);
    EXPECT_NEAR(Phase(with.decode_phases, row), d, 1e-9 * d) << row;
    EXPECT_NEAR(Phase(with.prefill_phases, row), pf, 1e-9 * pf) << row;
  }
  std::printf("Qwen2.5-7B tp4 B8: decode qkv %.3f us with the bias, %.3f without; prefill qkv %.3f / %.3f us\n",
              Phase(with.decode_phases, "qkv"), Phase(without.decode_phases, "qkv"),
              Phase(with.prefill_phases, "qkv"), Phase(without.prefill_phases, "qkv"));
}

}  // namespace
}  // namespace nkisim::launcher
