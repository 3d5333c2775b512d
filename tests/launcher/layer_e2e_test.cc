// The whole decoder layer end to end (`nkisim run`, `nkisim validate`): the MLP phases and both
// TP all-reduces in the report, N layers chained with identical layers timed identically, the
// prefill layer with and without sequence parallelism, the HBM footprint, and bad layer configs
// refused before any rank starts (exit 14, the field, the value and the rule).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/testing/files.h"
#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;
using nkisim::testing::ReadFile;

std::string TempPath(const std::string& name) { return nkisim::testing::TempPath("nkisim_layer_", name); }

struct Job {
  int exit_code = -1;
  std::string output;
  nlohmann::json report;
};

Job RunJob(const std::string& name, const std::string& config_text, const std::string& flags = "") {
  const std::string config = TempPath(name + ".textproto");
  std::ofstream(config) << config_text;
  const std::string report = TempPath(name + ".report.json");
  std::filesystem::remove(report);
  Job job;
  const nkisim::testing::CommandResult r = nkisim::testing::RunCommand(
      std::string(NKISIM_BINARY) + " run " + config + " --report " + report + " --trace '' " + flags,
      170);
  job.exit_code = r.exit_code;
  job.output = r.output;
  if (std::filesystem::exists(report)) job.report = nlohmann::json::parse(ReadFile(report));
  return job;
}

const char* kLayer =
    "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 64 intermediate: 1024 }\n"
    "batch: 8 kv_length: 48 seed: 11\n";

std::map<std::string, const nlohmann::json*> Phases(const nlohmann::json& scenario) {
  std::map<std::string, const nlohmann::json*> out;
  for (const auto& p : scenario["phases"]) out[p["phase"].get<std::string>()] = &p;
  return out;
}

double SimNs(const nlohmann::json& phase) { return phase["simNs"].get<double>(); }

// One layer, two plans: every phase of the layer runs and passes, both all-reduces name their
// algorithm and that they are issued in the graph.
TEST(LayerE2eTest, DecodeLayerRunsTheMlpAndBothAllReducesInTheGraph) {
  const Job job = RunJob("decode1", std::string(kLayer) + "plans { tp: 8 } plans { tp: 8 attention_dp: 4 }\n");
  ASSERT_EQ(job.exit_code, 0) << job.output;
  for (const auto& s : job.report["scenarios"]) {
    const auto phases = Phases(s);
    for (const char* name : {"qkv", "attention", "o_proj", "all_reduce", "mlp", "mlp_all_reduce", "residual"}) {
      ASSERT_TRUE(phases.contains(name)) << name << "\n" << job.output;
      EXPECT_TRUE((*phases.at(name))["pass"].get<bool>()) << name;
    }
    for (const char* name : {"all_reduce", "mlp_all_reduce"}) {
      EXPECT_THAT((*phases.at(name))["algorithm"].get<std::string>(), HasSubstr("all_reduce:mesh@in_graph"));
    }
  }
  EXPECT_THAT(job.output, HasSubstr("HBM per logical core: weights"));
  EXPECT_THAT(job.output, HasSubstr("AGREE"));
}

// Three layers: layers 2 and 3 have their own phases, pass, and take exactly the same simulated
// time phase by phase (the same shapes on the same clocks). Layer 1 matches them in every phase
// but its QKV, which may be longer: from layer 2 on, the QKV's first weight loads can issue on
// queues the previous layer's residual leaves free, never later than in layer 1. The step is
// the layers' sum; the output differs from one layer's.
TEST(LayerE2eTest, LayersChainAndIdenticalLayersTakeIdenticalTimes) {
  const Job one = RunJob("one_layer", std::string(kLayer) + "plans { tp: 8 }\n");
  const Job three = RunJob("three_layers", std::string(kLayer) + "layers: 3\nplans { tp: 8 }\n");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_EQ(three.exit_code, 0) << three.output;
  const auto phases = Phases(three.report["scenarios"][0]);
  double layer1 = 0, layer2 = 0, layer3 = 0;
  for (const char* name : {"qkv", "attention", "o_proj", "all_reduce", "mlp", "mlp_all_reduce", "residual"}) {
    const std::string n = name;
    ASSERT_TRUE(phases.contains(n + ".L1") && phases.contains(n + ".L2") && phases.contains(n + ".L3"))
        << name << "\n" << three.output;
    const double t1 = SimNs(*phases.at(n + ".L1")), t2 = SimNs(*phases.at(n + ".L2")),
                 t3 = SimNs(*phases.at(n + ".L3"));
    EXPECT_NEAR(t2, t3, 1e-9 * t2) << name;
    if (n == "qkv") {
      EXPECT_LE(t2, t1 + 1e-9 * t2) << name;
    } else {
      EXPECT_NEAR(t1, t2, 1e-9 * t2) << name;
    }
    for (const char* l : {".L1", ".L2", ".L3"}) EXPECT_TRUE((*phases.at(n + l))["pass"].get<bool>()) << n << l;
    layer1 += t1;
    layer2 += t2;
    layer3 += t3;
  }
  EXPECT_NEAR(layer2, layer3, 1e-9 * layer2);
  const double step1 = one.report["scenarios"][0]["stepSimNs"].get<double>();
  const double step3 = three.report["scenarios"][0]["stepSimNs"].get<double>();
  EXPECT_NEAR(step1, layer1, 1e-6 * step1);  // layer 1 of three is the one-layer job's layer
  EXPECT_NEAR(step3, layer1 + layer2 + layer3, 1e-6 * step3);
  const double sum1 = one.report["scenarios"][0]["layerOutputAbsSum"].get<double>();
  const double sum3 = three.report["scenarios"][0]["layerOutputAbsSum"].get<double>();
  EXPECT_GT(sum1, 0);
  EXPECT_GT(std::abs(sum3 - sum1), 1e-6 * sum1);
  EXPECT_THAT(three.output, HasSubstr("x 3 layers"));
}

// The checks hold every phase to the golden of the whole chain, carried from the original inputs:
// a wrong hand-off into layer 2 on one rank (its input's row 0 negated: CORRUPT_INPUT) fails that
// layer's QKV and everything after it, which references applied to each phase's own simulated
// inputs would all pass, while layer 1 passes throughout. Decode and prefill.
TEST(LayerE2eTest, AWrongHandOffBetweenLayersFailsTheChainsGolden) {
  const std::string fault = "fault { kind: CORRUPT_INPUT rank: 3 phase: \"qkv.L2\" }\n";
  const std::string prefill =
      "workload: \"prefill\"\nmodel { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 128 "
      "intermediate: 1024 }\nbatch: 1 seq_len: 256 seed: 12\n";
  for (const auto& [name, config] :
       {std::pair<std::string, std::string>{"corrupt_decode", std::string(kLayer) + "layers: 2\nplans { tp: 8 }\n" + fault},
        {"corrupt_prefill", prefill + "layers: 2\nplans { tp: 4 }\n" + fault}}) {
    const Job job = RunJob(name, config);
    EXPECT_NE(job.exit_code, 0) << name << "\n" << job.output;
    EXPECT_THAT(job.output, HasSubstr("result: FAIL")) << name;
    ASSERT_TRUE(job.report.contains("scenarios")) << name << "\n" << job.output;
    const auto phases = Phases(job.report["scenarios"][0]);
    for (const auto& [phase, p] : phases) {
      const bool layer2 = phase.find(".L2") != std::string::npos;
      EXPECT_EQ((*p)["pass"].get<bool>(), !layer2) << name << " " << phase;
    }
    ASSERT_TRUE(phases.contains("qkv.L2")) << name;
    // The reference on the phase's own (corrupted) input passes; the chain's golden does not.
    EXPECT_EQ(std::stoll((*phases.at("qkv.L2"))["failures"].get<std::string>()), 0) << name;
    EXPECT_GT(std::stoll((*phases.at("qkv.L2"))["chainFailures"].get<std::string>()), 0) << name;
    EXPECT_GT((*phases.at("qkv.L2"))["chainWorstRatio"].get<double>(), 5.0) << name;
  }
}

// Twelve layers pass both checks; the drift from the chain's golden grows with depth (the residual
// stream's bf16 roundings add up) and stays well inside the chain tolerance.
TEST(LayerE2eTest, TwelveChainedLayersPassTheChainsGolden) {
  const Job job = RunJob("twelve_layers",
                         "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 64 rms_eps: 1e-6 "
                         "intermediate: 2048 }\nbatch: 8 kv_length: 64 seed: 7\nlayers: 12\nplans { tp: 8 }\n");
  ASSERT_EQ(job.exit_code, 0) << job.output;
  const auto phases = Phases(job.report["scenarios"][0]);
  ASSERT_TRUE(phases.contains("residual.L12"));
  for (const auto& [phase, p] : phases) EXPECT_TRUE((*p)["pass"].get<bool>()) << phase;
  const double drift1 = (*phases.at("residual.L1"))["chainWorstRatio"].get<double>();
  const double drift12 = (*phases.at("residual.L12"))["chainWorstRatio"].get<double>();
  EXPECT_GT(drift1, 0);
  EXPECT_GT(drift12, 2 * drift1);
  EXPECT_LT(drift12, 0.5);
}

// attention_only keeps the attention block alone.
TEST(LayerE2eTest, AttentionOnlyRunsNoMlp) {
  const Job job = RunJob("attn_only",
                         "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 64 }\n"
                         "attention_only: true batch: 8 kv_length: 48 plans { tp: 8 }\n");
  ASSERT_EQ(job.exit_code, 0) << job.output;
  const auto phases = Phases(job.report["scenarios"][0]);
  EXPECT_TRUE(phases.contains("all_reduce"));
  EXPECT_FALSE(phases.contains("mlp"));
  EXPECT_FALSE(phases.contains("residual"));
}

// The prefill layer, with the TP reductions as all-reduces or (sequence parallel) as
// reduce-scatters with the rows gathered back; both compute the same layer.
TEST(LayerE2eTest, PrefillLayerWithAndWithoutSequenceParallel) {
  const std::string model =
      "workload: \"prefill\"\nmodel { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 128 "
      "intermediate: 1024 }\nbatch: 1 seq_len: 256 seed: 12\nplans { tp: 4 }\n";
  const Job plain = RunJob("prefill", model);
  const Job sp = RunJob("prefill_sp", model + "sequence_parallel: true\n");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(sp.exit_code, 0) << sp.output;
  const auto p = Phases(plain.report["scenarios"][0]), q = Phases(sp.report["scenarios"][0]);
  for (const char* name : {"mlp", "mlp_all_reduce", "residual"}) EXPECT_TRUE(p.contains(name)) << name;
  for (const char* name : {"reduce_scatter", "all_gather", "mlp", "mlp_reduce_scatter", "mlp_all_gather", "residual"}) {
    EXPECT_TRUE(q.contains(name)) << name << "\n" << sp.output;
  }
  const double a = plain.report["scenarios"][0]["layerOutputAbsSum"].get<double>();
  const double b = sp.report["scenarios"][0]["layerOutputAbsSum"].get<double>();
  EXPECT_NEAR(a, b, 2e-2 * a);
}

// Bad layer configs: each refused by `validate` and by `run` before any rank starts, exit 14,
// with its own message.
TEST(LayerE2eTest, BadLayerConfigsAreRefusedWithTheirRule) {
  const std::string base = "batch: 8 kv_length: 48\n";
  const std::string m = "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 64 ";
  const struct {
    const char* name;
    std::string text;
    const char* message;
  } cases[] = {
      {"i_not_divisible", m + "intermediate: 1001 }\nplans { tp: 8 }\n" + base,
       "tp: 8 must divide model.intermediate (1001)"},
      {"i_missing", m + "}\nplans { tp: 8 }\n" + base, "model.intermediate: 0 must be in [1, 1048576]"},
      {"i_huge", m + "intermediate: 4194304 }\nplans { tp: 8 }\n" + base,
       "model.intermediate: 4194304 must be in [1, 1048576]"},
      {"activation", m + "intermediate: 1024 activation: \"swish\" }\nplans { tp: 8 }\n" + base,
       "model.activation: 'swish' is not one of silu, gelu, relu"},
      {"norm", m + "intermediate: 1024 norm: \"batch\" }\nplans { tp: 8 }\n" + base,
       "model.norm: 'batch' is not one of rms, layer"},
      {"attention_only_with_mlp", m + "intermediate: 1024 }\nattention_only: true\nplans { tp: 8 }\n" + base,
       "attention_only runs no MLP"},
      {"layers_huge", m + "intermediate: 1024 }\nlayers: 5000\nplans { tp: 8 }\n" + base,
       "layers: 5000 must be in [1, 1024]"},
      {"hbm", "model { hidden: 8192 n_q_heads: 64 n_kv_heads: 8 d_head: 128 intermediate: 28672 }\n"
              "layers: 80\nplans { tp: 8 }\nbatch: 32 kv_length: 8192\n",
       "does not fit HBM"},
      {"host_memory", "model { hidden: 8192 n_q_heads: 64 n_kv_heads: 8 d_head: 128 intermediate: 28672 }\n"
                      "layers: 24\nplans { tp: 8 }\nbatch: 8 kv_length: 1024\n",
       "this machine simulates at most 4 GiB per rank"},
      {"sp_attention_only_layers",
       "workload: \"prefill\"\nmodel { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 128 }\n"
       "attention_only: true sequence_parallel: true layers: 2\nplans { tp: 4 }\nbatch: 1 seq_len: 256\n",
       "attention_only with sequence_parallel leaves each rank its rows only"},
      {"tolerance_phase", m + "intermediate: 1024 }\nplans { tp: 8 }\ntolerances { key: \"mlp_out\" value { atol: 1 } }\n" + base,
       "tolerances: 'mlp_out' is not a phase"},
  };
  int refused = 0;
  for (const auto& c : cases) {
    const std::string path = TempPath(std::string(c.name) + ".textproto");
    std::ofstream(path) << c.text;
    for (const std::string args : {" validate " + path, " run " + path + " --trace ''"}) {
      const nkisim::testing::CommandResult r =
          nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + args, 60);
      EXPECT_EQ(r.exit_code, 14) << c.name << args << ": " << r.output;
      EXPECT_THAT(r.output, HasSubstr(c.message)) << c.name << args;
      EXPECT_THAT(r.output, ::testing::Not(HasSubstr("connected"))) << c.name;  // no rank started
    }
    ++refused;
  }
  EXPECT_GE(refused, 10);
}

}  // namespace
