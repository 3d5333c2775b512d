// `nkisim serve` end to end on a small Llama (8 ranks): a synchronous run (concurrency 1) against
// `nkisim predict` computed in the same test (TTFT = predict's + one step's host time when the
// prompt fills its bucket; TPOT within the KV bucket's padding), --find-max-rate monotone and
// reproducible on two plans, and bad inputs refused with exit 14 naming the field, value and
// rule, with nothing written. No simulated time is hard-coded: the cost model changes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/testing/files.h"
#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;
using nlohmann::json;
using nkisim::testing::ReadFile;

std::string TempPath(const std::string& name) { return nkisim::testing::TempPath("nkisim_serve_", name); }

json TinyConfig() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 1024},
          {"intermediate_size", 1024}, {"num_hidden_layers", 4}, {"num_attention_heads", 8},
          {"num_key_value_heads", 2}, {"head_dim", 128}, {"vocab_size", 32000}, {"rms_norm_eps", 1e-5},
          {"tie_word_embeddings", false}, {"hidden_act", "silu"}, {"torch_dtype", "bfloat16"},
          {"max_position_embeddings", 4096}, {"rope_theta", 10000.0}};
}

std::string Model() {
  const std::string path = TempPath("tiny.json");
  std::ofstream(path) << TinyConfig().dump();
  return path;
}

struct Result {
  int exit_code = -1;
  std::string output;
  json doc;
};

Result Nkisim(const std::string& command, const std::string& flags, const std::string& json_path) {
  std::filesystem::remove(json_path);
  const auto r = nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + " " + command + " " + flags +
                                                 " --json " + json_path, 240);
  Result res{r.exit_code, r.output, {}};
  if (std::filesystem::exists(json_path)) res.doc = json::parse(ReadFile(json_path));
  return res;
}

TEST(ServeE2eTest, SynchronousRunReproducesPredict) {
  const std::string model = Model();
  const Result p = Nkisim("predict", "--model " + model + " --tp 8 --batch 1 --input-tokens 256 --output-tokens 64",
                       TempPath("predict.json"));
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const json& plan = p.doc["plans"][0];
  const double ttft = plan["ttft_ms"].get<double>(), tpot = plan["tpot_ms"].get<double>();
  const double host = plan["host_ms_per_step"].get<double>();
  // The prompt fills its context-encoding bucket; the KV bucket is the longest context (320).
  const Result s = Nkisim("serve", "--model " + model + " --tp 8 --concurrency 1 --num-prompts 3 --input-len 256 "
                       "--output-len 64 --context-encoding-buckets 256 --token-generation-buckets 320 "
                       "--batch-buckets 1 --max-num-seqs 1 --max-model-len 320",
                       TempPath("serve.json"));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(s.doc["completed"], 3);
  // TTFT: predict's prefill + LM head, and the step's host time (predict reports it apart).
  EXPECT_NEAR(s.doc["median_ttft_ms"].get<double>(), ttft + host, 1e-6 * ttft);
  // TPOT: every step pays KV 320 (the bucket), predict's mean is over KV 256..319; the step at
  // the bucket is at least the mean, and the padding of at most 64 tokens costs little.
  const double serve_tpot = s.doc["median_tpot_ms"].get<double>();
  EXPECT_GE(serve_tpot, tpot * 0.995);
  EXPECT_LE(serve_tpot, tpot * 1.03);
  // Little's law on the run.
  EXPECT_NEAR(s.doc["littles_law"]["L_time_average_in_system"].get<double>(),
              s.doc["littles_law"]["lambda_times_W"].get<double>(),
              0.02 * s.doc["littles_law"]["lambda_times_W"].get<double>());
}

// The table's entries against predict run directly at each bucket: a prefill bucket is predict's
// TTFT exactly; a decode entry is predict's L layers simulated at that very KV length + its LM
// head, exactly (no interpolation anywhere in the table).
TEST(ServeE2eTest, StepCostTableMatchesPredictAtEachBucket) {
  const std::string model = Model();
  const std::string costs = TempPath("table.json");
  std::filesystem::remove(costs);
  const Result s = Nkisim("serve", "--model " + model + " --tp 8 --concurrency 1 --num-prompts 1 --input-len 100 "
                          "--output-len 4 --max-model-len 1024 --context-encoding-buckets 128,384 "
                          "--token-generation-buckets 256,700,1024 --batch-buckets 1,4 --max-num-seqs 4 "
                          "--save-step-costs " + costs, TempPath("t.json"));
  ASSERT_EQ(s.exit_code, 0) << s.output;
  const json table = json::parse(ReadFile(costs));
  const int prefill[] = {128, 384};
  for (int i = 0; i < 2; ++i) {
    const Result p = Nkisim("predict", "--model " + model + " --tp 8 --batch 1 --input-tokens " +
                            std::to_string(prefill[i]) + " --output-tokens 1", TempPath("pp.json"));
    ASSERT_EQ(p.exit_code, 0) << p.output;
    EXPECT_DOUBLE_EQ(table["prefill_ms"][i].get<double>(), p.doc["plans"][0]["ttft_ms"].get<double>());
  }
  const int batch[] = {1, 4}, kv[] = {256, 700, 1024};
  for (int b = 0; b < 2; ++b) {
    for (int k = 0; k < 3; ++k) {
      const Result p = Nkisim("predict", "--model " + model + " --tp 8 --batch " + std::to_string(batch[b]) +
                              " --input-tokens " + std::to_string(kv[k]) + " --output-tokens 1", TempPath("pd.json"));
      ASSERT_EQ(p.exit_code, 0) << p.output;
      const json& plan = p.doc["plans"][0];
      ASSERT_EQ(plan["decode_samples"][0]["kv_length"], kv[k]);
      const double direct_ms = plan["decode_samples"][0]["layers_ns"].get<double>() / 1e6 +
                               plan["lm_head_decode_ms"].get<double>();
      EXPECT_NEAR(table["decode_ms"][b][k].get<double>(), direct_ms, 1e-9 * direct_ms)
          << "batch " << batch[b] << " KV " << kv[k];
    }
  }
}

TEST(ServeE2eTest, FindMaxRateIsMonotoneAndReproducibleOnTwoPlans) {
  const std::string model = Model();
  double rates[2] = {0, 0};
  int i = 0;
  for (const char* tp : {"8", "4"}) {
    const std::string costs = TempPath(std::string("costs_tp") + tp + ".json");
    const std::string common = " --request-rate 5 --num-prompts 400 --input-len uniform:100,400 --output-len 32 "
                               "--max-num-seqs 8 --max-model-len 1024 --slo ttft_p99_ms=300,tpot_p99_ms=20 "
                               "--find-max-rate ";
    const Result a = Nkisim("serve", std::string("--model ") + model + " --tp " + tp + " --save-step-costs " + costs +
                         common, TempPath("a.json"));
    ASSERT_EQ(a.exit_code, 0) << a.output;
    const Result b = Nkisim("serve", "--step-costs " + costs + common, TempPath("b.json"));
    ASSERT_EQ(b.exit_code, 0) << b.output;
    const double max_rate = a.doc["find_max_rate"]["max_request_rate"].get<double>();
    EXPECT_GT(max_rate, 0);
    EXPECT_EQ(max_rate, b.doc["find_max_rate"]["max_request_rate"].get<double>());
    for (const json& point : a.doc["find_max_rate"]["points"]) {
      EXPECT_EQ(point["meets"].get<bool>(), point["request_rate"].get<double>() <= max_rate) << point.dump();
    }
    rates[i++] = max_rate;
  }
  // The two plans price their steps differently (their tables differ); their max rates may still
  // coincide on this tiny model, whose steps are bound by fixed DMA latencies more than by work.
  EXPECT_NE(ReadFile(TempPath("costs_tp8.json")), ReadFile(TempPath("costs_tp4.json")));
  EXPECT_GT(rates[0], 0);
  EXPECT_GT(rates[1], 0);
}

// Several plans: each one's max rate, and the verdict names the one of most requests per second
// per physical NeuronCore; that rate is each plan's own --find-max-rate answer.
TEST(ServeE2eTest, SeveralPlansNameTheCheapest) {
  const std::string model = Model();
  const std::string common = " --request-rate 5 --num-prompts 300 --input-len uniform:100,400 --output-len 32 "
                             "--max-num-seqs 8 --max-model-len 1024 --slo ttft_p99_ms=300,tpot_p99_ms=20 "
                             "--find-max-rate ";
  const Result both = Nkisim("serve", "--model " + model + " --plan tp=4 --plan tp=8 --target-rate 37" + common,
                             TempPath("both.json"));
  ASSERT_EQ(both.exit_code, 0) << both.output;
  ASSERT_EQ(both.doc["plans"].size(), 2u);
  // --target-rate 37: each plan's copies = ceil(37 / its max rate), chips = ceil(copies x cores /
  // cores per chip); the verdict names the fewest chips (a tie: the more capacity).
  const int64_t per_chip = both.doc["physical_cores_per_chip"].get<int64_t>();
  ASSERT_GE(per_chip, 1);
  std::string fewest;
  int64_t fewest_chips = 0;
  double fewest_capacity = 0;
  for (const json& row : both.doc["plans"]) {
    const double max_rate = row["max_request_rate"].get<double>();
    ASSERT_GT(max_rate, 0) << row.dump();
    const int64_t copies = static_cast<int64_t>(std::ceil(37.0 / max_rate));
    const int64_t chips = (copies * row["physical_cores"].get<int64_t>() + per_chip - 1) / per_chip;
    EXPECT_EQ(row["copies_for_target_rate"].get<int64_t>(), copies) << row["plan"];
    EXPECT_EQ(row["chips_for_target_rate"].get<int64_t>(), chips) << row["plan"];
    if (fewest.empty() || chips < fewest_chips || (chips == fewest_chips && copies * max_rate > fewest_capacity)) {
      fewest = row["plan"];
      fewest_chips = chips;
      fewest_capacity = copies * max_rate;
    }
  }
  EXPECT_EQ(both.doc["fewest_chips_plan"], fewest);
  EXPECT_EQ(both.doc["fewest_chips"].get<int64_t>(), fewest_chips);
  EXPECT_THAT(both.output, HasSubstr("verdict: fewest chips serving 37 req/s within ttft_p99_ms=300,tpot_p99_ms=20: " +
                                     fewest + " (" + std::to_string(fewest_chips) + " chip(s))"));
  double best = 0;
  std::string best_plan;
  for (const json& row : both.doc["plans"]) {
    const Result one = Nkisim("serve", "--model " + model + " --plan " + "tp=" +
                              row["plan"].get<std::string>().substr(2) + common, TempPath("one.json"));
    ASSERT_EQ(one.exit_code, 0) << one.output;
    EXPECT_EQ(row["max_request_rate"], one.doc["find_max_rate"]["max_request_rate"]);
    const double per_core = row["request_rate_per_core"].get<double>();
    if (per_core > best) {
      best = per_core;
      best_plan = row["plan"];
    }
  }
  EXPECT_EQ(both.doc["cheapest_plan"], best_plan);
  EXPECT_THAT(both.output, HasSubstr("verdict: cheapest plan meeting ttft_p99_ms=300,tpot_p99_ms=20: " + best_plan));
  // Several plans without --find-max-rate: refused.
  const Result bad = Nkisim("serve", "--model " + model + " --plan tp=4 --plan tp=8 --request-rate 1", TempPath("x.json"));
  EXPECT_EQ(bad.exit_code, 14) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("--plan: several plans: compared only with --find-max-rate"));
  // --target-rate with one plan, or not > 0: refused.
  const Result one_plan = Nkisim("serve", "--model " + model + " --plan tp=4 --target-rate 5" + common, TempPath("y.json"));
  EXPECT_EQ(one_plan.exit_code, 14) << one_plan.output;
  EXPECT_THAT(one_plan.output, HasSubstr("--target-rate: needs several plans"));
  const Result negative =
      Nkisim("serve", "--model " + model + " --plan tp=4 --plan tp=8 --target-rate -1" + common, TempPath("z.json"));
  EXPECT_EQ(negative.exit_code, 14) << negative.output;
  EXPECT_THAT(negative.output, HasSubstr("--target-rate: -1: must be > 0"));
  EXPECT_FALSE(std::filesystem::exists(TempPath("y.json")) || std::filesystem::exists(TempPath("z.json")));
}

// Each bad input: exit 14, the message naming field, value and rule, no JSON written.
TEST(ServeE2eTest, BadInputsExit14AndWriteNothing) {
  const std::string model = Model();
  const std::string costs = TempPath("bad_costs.json");
  ASSERT_EQ(Nkisim("serve", "--model " + model + " --tp 8 --concurrency 1 --num-prompts 1 --input-len 100 "
                "--output-len 4 --max-model-len 512 --save-step-costs " + costs, TempPath("ok.json")).exit_code, 0);
  auto trace = [](const std::string& name, const std::string& text) {
    const std::string path = TempPath(name);
    std::ofstream(path) << text;
    return path;
  };
  const struct {
    std::string flags, message;
  } cases[] = {
      {"--trace-file " + trace("neg.jsonl", "{\"arrival_ms\": -5, \"input_tokens\": 10, \"output_tokens\": 3}\n"),
       "neg.jsonl:1: arrival_ms: -5: must be >= 0"},
      {"--trace-file " + trace("order.jsonl", "{\"arrival_ms\": 5, \"input_tokens\": 10, \"output_tokens\": 3}\n"
                                              "{\"arrival_ms\": 4, \"input_tokens\": 10, \"output_tokens\": 3}\n"),
       "order.jsonl:2: arrival_ms: 4: must not be before the previous line's"},
      {"--trace-file " + trace("zero.jsonl", "{\"arrival_ms\": 0, \"input_tokens\": 10, \"output_tokens\": 0}\n"),
       "zero.jsonl:1: output_tokens: 0: must be an integer >= 1"},
      {"--request-rate 0", "--request-rate: 0: must be > 0"},
      {"--request-rate 1 --slo ttft_p50_ms=3", "--slo: 'ttft_p50_ms': unknown SLO"},
      {"--request-rate 1 --find-max-rate", "--find-max-rate: needs --slo"},
      {"--request-rate 1 --max-num-seqs 0", "--max-num-seqs: 0: must be >= 1"},
      {"--request-rate 1 --load-balance random", "--load-balance: 'random': unknown"},
      {"--request-rate 1 --input-len normal:-4,1", "--input-len: 'normal:-4,1'"},
      // The table holds contexts up to 512 (it was built with --max-model-len 512): longer is refused.
      {"--request-rate 1 --max-model-len 1024",
       "--max-model-len: 1024: must be <= the largest token_generation_bucket of --step-costs"},
      {"--request-rate 1 --model " + model + " --max-model-len 8192", "--max-model-len: 8192: must be <="},
  };
  for (const auto& c : cases) {
    const std::string out = TempPath("bad.json");
    const Result r = Nkisim("serve", "--step-costs " + costs + " " + c.flags, out);
    EXPECT_EQ(r.exit_code, 14) << c.flags << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.flags;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.flags;
  }
  // With the table, --max-model-len within it runs; over the model's context (a table of buckets
  // up to 8192 claimed for this 4096-token model) it is refused by the model's rule.
  EXPECT_EQ(Nkisim("serve", "--step-costs " + costs + " --request-rate 1 --num-prompts 2 --input-len 100 "
                   "--output-len 4 --max-model-len 512", TempPath("ok2.json")).exit_code, 0);
  {
    std::ifstream in(costs);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("\"token_generation_buckets\"");
    ASSERT_NE(at, std::string::npos);
    const size_t last = text.find("512", at);
    ASSERT_NE(last, std::string::npos);
    text.replace(last, 3, "8192");
    std::ofstream(TempPath("long_costs.json")) << text;
  }
  const Result over_model = Nkisim("serve", "--step-costs " + TempPath("long_costs.json") + " --model " + model +
                                   " --request-rate 1 --max-model-len 8192", TempPath("om.json"));
  EXPECT_EQ(over_model.exit_code, 14) << over_model.output;
  EXPECT_THAT(over_model.output,
              HasSubstr("--max-model-len: 8192: must be <= the model's max_position_embeddings (4096)"));
  EXPECT_FALSE(std::filesystem::exists(TempPath("om.json")));
  // A model context the plan cannot hold, a bucket over it: exit 14 before any simulation.
  const Result r = Nkisim("serve", "--model " + model + " --tp 8 --request-rate 1 --max-model-len 8192",
                       TempPath("bad2.json"));
  EXPECT_EQ(r.exit_code, 14) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--max-model-len: 8192: must be <= the model's max_position_embeddings (4096)"));
  const Result replicas = Nkisim("serve", "--model " + model + " --tp 8 --replicas 9 --request-rate 1", TempPath("r.json"));
  EXPECT_EQ(replicas.exit_code, 14) << replicas.output;
  EXPECT_THAT(replicas.output, HasSubstr("--replicas: 9 x tp 8 = 72 ranks: more than 1 instance holds (64 ranks"));
  // No plan; a batch the decode kernels cannot run: refused before any predict is simulated.
  const Result no_plan = Nkisim("serve", "--model " + model + " --request-rate 1", TempPath("np.json"));
  EXPECT_EQ(no_plan.exit_code, 14) << no_plan.output;
  EXPECT_THAT(no_plan.output, HasSubstr("--tp / --plan: none given"));
  const Result big = Nkisim("serve", "--model " + model + " --tp 8 --request-rate 1 --max-num-seqs 256 --max-model-len 512",
                            TempPath("big.json"));
  EXPECT_EQ(big.exit_code, 14) << big.output;
  EXPECT_THAT(big.output, HasSubstr("batch: 256 must be <= 128 for decode"));
  EXPECT_THAT(big.output, ::testing::Not(HasSubstr("step costs: prefill bucket")));
  // A request longer than the largest bucket is refused per request, counted, the run goes on.
  const Result refused = Nkisim("serve", "--step-costs " + costs + " --trace-file " +
                             trace("long.jsonl", "{\"arrival_ms\": 0, \"input_tokens\": 10, \"output_tokens\": 3}\n"
                                                 "{\"arrival_ms\": 1, \"input_tokens\": 900, \"output_tokens\": 3}\n"),
                             TempPath("refused.json"));
  EXPECT_EQ(refused.exit_code, 0) << refused.output;
  EXPECT_EQ(refused.doc["failed"], 1);
  EXPECT_THAT(refused.output, HasSubstr("refused: request 1: input_tokens 900 > the largest context-encoding bucket"));
  EXPECT_EQ(refused.doc["completed"], 1);
}

}  // namespace
