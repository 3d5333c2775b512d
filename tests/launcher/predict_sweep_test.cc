// Predict sweeps (launcher/sweep/predict_sweep.h): a sweep file with a model axis expands into
// predict requests of one plan each (model outermost, plan innermost); every bad axis value or
// field is refused before anything runs, naming the field, the value and the rule (exit 14); and
// the verdict picks, per shape, the plan of least request latency among those that fit HBM and
// meet the targets.
#include "launcher/sweep/predict_sweep.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "launcher/sweep/sweep_config.h"
#include "runtime/config_file.h"
#include "runtime/error.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kSource = NKISIM_SOURCE_DIR;
const std::string kLlama8b = kSource + "/configs/models/Llama-3.1-8B.config.json";
const std::string kQwen32b = kSource + "/configs/models/Qwen3-32B.config.json";

PredictSweep Resolve(const std::string& text) {
  proto::Sweep spec;
  ParseConfigText(text, "p.textproto", &spec);
  return ResolvePredictSweep(spec, "p.textproto");
}

std::string BadConfigMessage(const std::string& text) {
  return testing::ErrorMessageOf(ErrorCode::kBadConfig, [&] { Resolve(text); });
}

// One model, two plans, one value per other axis, the given extra fields.
std::string Sweep(const std::string& extra) {
  return "model: [\"" + kLlama8b + "\"]\nplans { tp: 8 } plans { tp: 16 }\nbatch: [1]\ninput_tokens: [256]\n"
         "output_tokens: [16]\n" + extra;
}

TEST(PredictSweepTest, TheShippedExampleExpandsModelOutermostAndPlansInnermost) {
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(kSource);  // its model paths are relative to the current directory
  proto::Sweep spec;
  const std::string path = "configs/sweeps/predict_example.textproto";
  ParseConfigText(ReadConfigFile(path, "sweep"), path, &spec);
  ASSERT_TRUE(IsPredictSweep(spec));
  const PredictSweep s = ResolvePredictSweep(spec, path);
  std::filesystem::current_path(cwd);
  ASSERT_EQ(s.points.size(), 36u);  // 2 models x 3 plans x 3 batches x 2 input lengths
  ASSERT_EQ(s.shapes.size(), 12u);
  EXPECT_EQ(s.shapes[0].label, "Llama-3.1-8B B=1 S=128 N=128");
  EXPECT_EQ(s.shapes[1].label, "Llama-3.1-8B B=1 S=512 N=128");
  EXPECT_EQ(s.shapes[6].label, "Qwen3-32B B=1 S=128 N=128");
  EXPECT_THAT(s.shapes[0].points, ElementsAre(0, 1, 2));
  EXPECT_EQ(s.points[2].key, "model=Llama-3.1-8B plan=tp16 batch=1 input_tokens=128 output_tokens=128 lnc=2 "
                             "profile=trn2");
  EXPECT_EQ(s.points[22].request.model.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(s.points[22].request.batch, 1);
  EXPECT_EQ(s.points[22].request.input_tokens, 512);
  EXPECT_EQ(s.points[22].request.plans.at(0).tp, 8);
  EXPECT_EQ(s.tpot_ms_max, 15);
  EXPECT_EQ(s.ttft_ms_max, 500);
}

TEST(PredictSweepTest, AnLncAxisRenamesThePlansAndAProfileAxisLabelsTheShapes) {
  const PredictSweep s = Resolve(Sweep("lnc: [1, 2]\nhardware_profile: [\"" + kSource +
                                       "/configs/hardware/trn2.textproto\"]\n"));
  ASSERT_EQ(s.points.size(), 4u);
  EXPECT_EQ(s.points[0].request.plans[0].name, "tp8_lnc1");
  EXPECT_EQ(s.points[0].request.plans[0].lnc, 1);
  EXPECT_EQ(s.points[2].request.plans[0].name, "tp8");
  EXPECT_EQ(s.shapes[0].label, "Llama-3.1-8B B=1 S=256 N=16 lnc=1");
  EXPECT_FALSE(s.points[0].request.profile_path.empty());
}

TEST(PredictSweepTest, BadAxisValuesAreRefusedWithFieldValueAndRule) {
  struct Case {
    std::string extra, fragment;
  } cases[] = {
      {"batch: [0]", "batch: 0: must be in [1, 16777216]"},
      {"input_tokens: [256]", "input_tokens: 256 is given twice; each value of an axis once"},
      {"lnc: [3]", "lnc: 3 must be 1 or 2"},
      {"tpot_ms_max: -1", "tpot_ms_max: -1: must be a finite number of ms > 0"},
      {"ttft_ms_max: inf", "ttft_ms_max: inf: must be a finite number of ms > 0"},
      {"kv_length: [128]", "kv_length: [128]: a sweep with a model axis predicts whole models"},
      {"seq_len: [128]", "seq_len: [128]: a sweep with a model axis"},
      {"algorithm: [\"ring\"]", "algorithm: 1 values: a sweep with a model axis"},
      {"base { batch: 1 }", "base: given: a sweep with a model axis predicts whole models from their config.json"},
      {"model: [\"/nonexistent/m.json\"]", "model: '/nonexistent/m.json': "},
      {"hardware_profile: [\"/nonexistent/hw.textproto\"]", "hardware_profile: '/nonexistent/hw.textproto': "},
      {"plans { tp: 16 replicas: 8 }", "plan 'tp16r8': replicas: 8 x tp 16 = 128 ranks: more than 1 instance holds "
                                        "(64 ranks each at LNC 2"},
      {"plans { tp: 3 }", "tp: 3 must divide"},
      {"plans { tp: 8 name: \"tp16\" }", "plans: two points have the key"},
      {"input_tokens: [131060]", "--input-tokens + --output-tokens: 131076: must be <= the model's "
                                 "max_position_embeddings (131072)"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(BadConfigMessage(Sweep(c.extra + "\n")), HasSubstr(c.fragment)) << c.extra;
  }
  EXPECT_THAT(BadConfigMessage("model: [\"" + kLlama8b + "\"]\nplans { tp: 8 }\nbatch: [1]\n"),
              HasSubstr("input_tokens: empty: a predict sweep needs at least one value"));
  EXPECT_THAT(BadConfigMessage("model: [\"" + kLlama8b + "\"]\nbatch: [1]\ninput_tokens: [8]\noutput_tokens: [8]\n"),
              HasSubstr("plans: none given"));
}

TEST(PredictSweepTest, PointProblemsNameThePointsTheyConcern) {
  const std::string m = BadConfigMessage(Sweep("plans { tp: 3 }\nbatch: [2]\n"));
  EXPECT_THAT(m, HasSubstr("(no point was run)"));
  EXPECT_THAT(m, HasSubstr("tp: 3 must divide model.n_q_heads (32)"));
  EXPECT_THAT(m, HasSubstr("at 2 points: model=Llama-3.1-8B plan=tp3 batch=1 input_tokens=256 output_tokens=16 lnc=2 "
                           "profile=trn2; model=Llama-3.1-8B plan=tp3 batch=2 input_tokens=256"));
}

TEST(PredictSweepTest, ALayerSweepRefusesThePredictFields) {
  const char* base = "base { model { hidden: 1024 n_q_heads: 8 n_kv_heads: 2 d_head: 64 } batch: 4 kv_length: 128 }\n"
                     "plans { tp: 8 }\n";
  const std::string m = testing::ErrorMessageOf(ErrorCode::kBadConfig, [&] {
    ResolveSweep(std::string(base) + "input_tokens: [64]\noutput_tokens: [8]\ntpot_ms_max: 3\n", "s.textproto");
  });
  EXPECT_THAT(m, HasSubstr("input_tokens: [64]: an axis of a predict sweep; give a model axis"));
  EXPECT_THAT(m, HasSubstr("output_tokens: [8]: an axis of a predict sweep"));
  EXPECT_THAT(m, HasSubstr("tpot_ms_max: 3: a target of a predict sweep"));
}

// Hand-computed: with N = 11 the latency is TTFT + 10 x TPOT.
//   a: fits, 100 + 50 = 150 ms;  b: fits, 50 + 80 = 130 ms;  c: does not fit, 10 + 10 = 20 ms;
//   d: fits, 120 + 40 = 160 ms;  e: not simulated.
std::vector<PlanOutcome> Outcomes() {
  return {{"a", true, true, 100, 5}, {"b", true, true, 50, 8}, {"c", true, false, 10, 1},
          {"d", true, true, 120, 4}, {"e", false, false, 0, 0}};
}

TEST(PredictSweepTest, TheVerdictPicksTheLeastLatencyAmongPlansThatFitAndMeetTheTargets) {
  EXPECT_DOUBLE_EQ(RequestLatencyMs(Outcomes()[0], 11), 150);
  // No targets: b has the least latency among those that fit (c does not fit).
  ShapeVerdict v = ChooseFastest(Outcomes(), 11, 0, 0);
  EXPECT_EQ(v.fastest, 1);
  EXPECT_THAT(v.reasons, ElementsAre("", "", "does not fit HBM", "", "not simulated"));
  // TPOT <= 6 ms: b misses it; a (150) beats d (160).
  v = ChooseFastest(Outcomes(), 11, 6, 0);
  EXPECT_EQ(v.fastest, 0);
  EXPECT_EQ(v.reasons[1], "TPOT 8.00 > 6.00 ms");
  // TPOT <= 4.5 ms: only d.
  EXPECT_EQ(ChooseFastest(Outcomes(), 11, 4.5, 0).fastest, 3);
  // And TTFT <= 110 ms: d misses that too; nothing qualifies.
  v = ChooseFastest(Outcomes(), 11, 4.5, 110);
  EXPECT_EQ(v.fastest, -1);
  EXPECT_EQ(v.reasons[3], "TTFT 120.0 > 110.0 ms");
  EXPECT_EQ(v.reasons[0], "TPOT 5.00 > 4.50 ms");
  // The latency weighs TPOT by N - 1: with N = 2, c aside, b (58) beats a (105) and d (124).
  EXPECT_EQ(ChooseFastest(Outcomes(), 2, 0, 0).fastest, 1);
  // With N = 100: d (516) beats a (595) and b (842).
  EXPECT_EQ(ChooseFastest(Outcomes(), 100, 0, 0).fastest, 3);
}

TEST(PredictSweepTest, TheVerdictLinesNameTheFastestAndWhyTheOthersMiss) {
  PredictSweep s = Resolve(Sweep("plans { tp: 32 }\ntpot_ms_max: 4\n"));
  ASSERT_EQ(s.points.size(), 3u);
  PredictSweepResults results(3);
  const double ttft[] = {200, 150, 140}, tpot[] = {5, 3, 2};
  const bool fits[] = {true, true, false};
  for (int i = 0; i < 3; ++i) {
    PredictPointResult r;
    r.ok = true;
    r.prediction.plan = s.points[i].request.plans[0];
    r.prediction.simulated = true;
    r.prediction.fits = fits[i];
    r.prediction.ttft_ms = ttft[i];
    r.prediction.tpot_ms = tpot[i];
    r.prediction.hbm_bytes = fits[i] ? 1 << 30 : 30LL << 30;
    r.prediction.hbm_capacity = 24LL << 30;
    results[i] = r;
  }
  const std::string v = PredictSweepVerdict(s, results);
  EXPECT_THAT(v, HasSubstr("Llama-3.1-8B B=1 S=256 N=16: fastest that fits and meets the targets: tp16: TTFT 150.0 ms, "
                           "TPOT 3.000 ms, latency 195.0 ms"));
  EXPECT_THAT(v, HasSubstr("tp8 TTFT 200.0 ms, TPOT 5.000 ms: TPOT 5.00 > 4.00 ms"));
  EXPECT_THAT(v, HasSubstr("tp32 TTFT 140.0 ms, TPOT 2.000 ms: does not fit HBM (over by 6.00 GiB)"));
  const std::string csv = PredictSweepCsv(s, results);
  EXPECT_THAT(csv, HasSubstr(",195.000,"));                  // tp16's latency
  EXPECT_THAT(csv, HasSubstr(",true,false,ok,"));             // tp8: fits, misses the target
}

}  // namespace
}  // namespace nkisim::launcher
