// `nkisim predict` with a deployment's compiled buckets (--context-encoding-buckets,
// --token-generation-buckets): the prompt is prefilled padded to its context bucket, each decode
// step runs at its generation bucket's KV length. Checked against plain arithmetic (the bucket
// lookup, the step-weighted mean) and against unpadded predictions of the padded shapes, which
// the bucketed ones are defined to equal; bad buckets are refused by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "model/hf_config.h"
#include "model/predict.h"
#include "tests/testing/predict_request.h"
#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

using ::testing::HasSubstr;

// A small Llama on 8 ranks (every kernel limit met, d 128 for the prefill).
HfModel Tiny() {
  return ParseHfConfig(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024,
      "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
      "head_dim": 128, "vocab_size": 32000, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
      "hidden_act": "silu", "torch_dtype": "bfloat16", "max_position_embeddings": 4096})",
                       "tiny");
}

PredictRequest Request(int input, int output, std::vector<int> cte = {}, std::vector<int> tkg = {}) {
  PredictRequest r = nkisim::testing::OnePlanRequest(Tiny(), "tp=8", 2, input, output);
  r.context_encoding_buckets = std::move(cte);
  r.token_generation_buckets = std::move(tkg);
  return r;
}

TEST(PredictBucketsTest, PaddedToBucketIsTheSmallestBucketThatHolds) {
  const std::vector<int> b = {128, 512, 2048};
  EXPECT_EQ(PaddedToBucket(b, 1), 128);
  EXPECT_EQ(PaddedToBucket(b, 128), 128);
  EXPECT_EQ(PaddedToBucket(b, 129), 512);
  EXPECT_EQ(PaddedToBucket(b, 2048), 2048);
  EXPECT_EQ(PaddedToBucket({}, 300), 300);  // no buckets: unpadded
}

// KV 500 .. 699: the steps cross the buckets 512 and 1024; without buckets, the samples.
TEST(PredictBucketsTest, DecodeLengthsAreTheBucketsTheStepsCross) {
  EXPECT_EQ(DecodeLengths(Request(500, 200, {}, {256, 512, 1024, 2048})), (std::vector<int>{512, 1024}));
  EXPECT_EQ(DecodeLengths(Request(600, 10, {}, {256, 512, 1024, 2048})), (std::vector<int>{1024}));
  EXPECT_EQ(DecodeLengths(Request(500, 13, {}, {512, 1024})), (std::vector<int>{512}));         // 500 .. 512
  EXPECT_EQ(DecodeLengths(Request(500, 14, {}, {512, 1024})), (std::vector<int>{512, 1024}));   // and 513
  EXPECT_EQ(DecodeLengths(Request(500, 200)), DecodeSampleLengths(500, 200, 2));
}

// KV 4000 .. 4199: 4000 .. 4096 (97 steps) at the 4096 bucket's 10, 4097 .. 4199 (103) at 8192's 20.
TEST(PredictBucketsTest, MeanBucketedWeighsEachBucketByItsSteps) {
  const std::vector<std::pair<int, double>> samples = {{4096, 10.0}, {8192, 20.0}, {3000, 99.0}};
  EXPECT_DOUBLE_EQ(MeanBucketed(samples, {2048, 4096, 8192}, 4000, 200), (97 * 10.0 + 103 * 20.0) / 200);
  EXPECT_THROW(MeanBucketed({{4096, 1.0}}, {4096, 8192}, 4000, 200), Error);  // 8192's sample missing
}

// The padded prompt costs exactly what an unpadded prompt of the bucket's length costs; a decode
// inside one generation bucket costs its bucket's sample at every step.
TEST(PredictBucketsTest, ABucketedRequestCostsItsPaddedShape) {
  const PlanPrediction bucketed = Predict(Request(300, 4, {128, 512, 1024}, {512, 1024})).front();
  const PlanPrediction padded = Predict(Request(512, 4)).front();
  ASSERT_TRUE(bucketed.simulated) << bucketed.error;
  EXPECT_EQ(bucketed.prefill_tokens, 512);
  EXPECT_DOUBLE_EQ(bucketed.prefill_stack_ns, padded.prefill_stack_ns);
  EXPECT_DOUBLE_EQ(bucketed.ttft_ms, padded.ttft_ms);
  ASSERT_EQ(bucketed.samples.size(), 1u);
  EXPECT_EQ(bucketed.samples.front().first, 512);
  ASSERT_FALSE(padded.samples.empty());
  EXPECT_EQ(padded.samples.front().first, 512);
  EXPECT_DOUBLE_EQ(bucketed.samples.front().second, padded.samples.front().second);
  // The unpadded prompt of 300 rows computes fewer rows than the bucket's 512.
  const PlanPrediction unpadded = Predict(Request(300, 4)).front();
  EXPECT_EQ(unpadded.prefill_tokens, 300);
  EXPECT_LT(unpadded.ttft_ms, bucketed.ttft_ms);
}

TEST(PredictBucketsTest, APromptOrContextBeyondTheLargestBucketIsRefusedByName) {
  const auto message = [](const PredictRequest& r) {
    try {
      CheckPredictRequest(r);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(message(Request(600, 4, {128, 512})),
              HasSubstr("--input-tokens: 600: longer than the largest --context-encoding-buckets bucket (512)"));
  EXPECT_THAT(message(Request(500, 20, {}, {256, 512})),
              HasSubstr("--input-tokens + --output-tokens - 1: 519: the last step's KV length exceeds the largest "
                        "--token-generation-buckets bucket (512)"));
  EXPECT_THAT(message(Request(100, 4, {512, 256})),
              HasSubstr("--context-encoding-buckets: 256: must be >= 1 and strictly ascending"));
  EXPECT_THAT(message(Request(100, 4, {}, {0, 512})),
              HasSubstr("--token-generation-buckets: 0: must be >= 1 and strictly ascending"));
}

}  // namespace
}  // namespace nkisim::launcher
