// Sharding plans end to end (`nkisim run`): several Q heads per rank, replicated and divided KV
// heads, attention DP G in {1, 2, 4, 8}, LNC 1 and 2 in one job, two instances, multi-step decode,
// prefill with an all_reduce or a reduce_scatter. Every phase of every plan is checked on every
// rank by the job itself; these tests also check the report: each plan passes and the layer
// outputs of all plans agree (the plan changes cost, not results).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/testing/files.h"

#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;

using nkisim::testing::ReadFile;

std::string TempPath(const std::string& name) { return nkisim::testing::TempPath("nkisim_plans_", name); }

struct Job {
  int exit_code = -1;
  std::string output;
  nlohmann::json report;
  nlohmann::json trace;
};

// Runs `nkisim run` on `config_text`; parses the report and, when asked, the trace.
Job RunJob(const std::string& name, const std::string& config_text, bool with_trace = false,
        int timeout_s = 170) {
  const std::string config = TempPath(name + ".textproto");
  std::ofstream(config) << config_text;
  const std::string report = TempPath(name + ".report.json"), trace = TempPath(name + ".trace.json");
  std::filesystem::remove(report);
  Job job;
  const nkisim::testing::CommandResult r = nkisim::testing::RunCommand(
      std::string(NKISIM_BINARY) + " run " + config + " --report " + report +
          (with_trace ? " --trace " + trace : ""),
      timeout_s);
  job.exit_code = r.exit_code;
  job.output = r.output;
  if (std::filesystem::exists(report)) job.report = nlohmann::json::parse(ReadFile(report));
  if (with_trace && std::filesystem::exists(trace)) job.trace = nlohmann::json::parse(ReadFile(trace));
  return job;
}

// Every plan passed, and every plan's layer output agrees with the first plan's.
void ExpectAllPlansPassAndAgree(const Job& job, size_t plans) {
  ASSERT_EQ(job.exit_code, 0) << job.output;
  ASSERT_TRUE(job.report.is_object()) << job.output;
  EXPECT_TRUE(job.report["pass"].get<bool>());
  ASSERT_EQ(job.report["scenarios"].size(), plans) << job.output;
  for (const auto& s : job.report["scenarios"]) EXPECT_TRUE(s["pass"].get<bool>()) << s["name"];
  ASSERT_EQ(job.report["agreement"].size(), plans - 1) << job.output;
  for (const auto& a : job.report["agreement"]) {
    EXPECT_TRUE(a["pass"].get<bool>()) << a;
    EXPECT_GT(std::stoll(a["compared"].get<std::string>()), 100) << a;
  }
}

const char* kModel32x8 = "model { hidden: 512 n_q_heads: 32 n_kv_heads: 8 d_head: 64 intermediate: 1024 }\n";

// 16 ranks, 2 Q heads per rank, each KV head on 2 ranks; G = 1, 2, 4, 8; two steps.
TEST(PlansE2eTest, AttentionDpOneTwoFourEightWithSeveralHeadsPerRankAndReplicatedKv) {
  const Job job = RunJob("g1248", std::string(kModel32x8) +
                                   "batch: 8 kv_length: 40 steps: 2 seed: 3\n"
                                   "plans { tp: 16 } plans { tp: 16 attention_dp: 2 }\n"
                                   "plans { tp: 16 attention_dp: 4 } plans { tp: 16 attention_dp: 8 }\n");
  ExpectAllPlansPassAndAgree(job, 4);
  EXPECT_THAT(job.output, HasSubstr("tp2xdp8 (tp 16, attention_dp 8"));
  EXPECT_THAT(job.output, HasSubstr("batch_shard[2]"));  // step 2 has its own checked phases
  // G = 8 spans 4 KV heads per group: the rank attends them for B / G = 1 row.
  const auto& s = job.report["scenarios"];
  EXPECT_LT(std::stod(s[3]["kvCacheBytesPerRank"].get<std::string>()),
            std::stod(s[0]["kvCacheBytesPerRank"].get<std::string>()));
}

// 4 ranks, 4 Q heads and 2 KV heads per rank (divided), LNC 1 and 2 plans in one job, 4 steps.
TEST(PlansE2eTest, DividedKvHeadsLncOneAndTwoFourSteps) {
  const Job job = RunJob("lnc12", "model { hidden: 512 n_q_heads: 16 n_kv_heads: 8 d_head: 64 intermediate: 1024 }\n"
                               "batch: 8 kv_length: 30 steps: 4 seed: 4\n"
                               "plans { tp: 4 lnc: 1 } plans { tp: 4 attention_dp: 2 lnc: 1 }\n"
                               "plans { tp: 4 attention_dp: 4 lnc: 2 }\n");
  ExpectAllPlansPassAndAgree(job, 3);
  const auto& s = job.report["scenarios"];
  EXPECT_EQ(s[0]["lnc"], 1);
  EXPECT_EQ(s[2]["lnc"], 2);
  EXPECT_EQ(s[0]["steps"], 4);
  int steps_seen = 0;
  for (const auto& p : s[0]["phases"]) steps_seen += p["phase"].get<std::string>().rfind("all_reduce[", 0) == 0;
  EXPECT_EQ(steps_seen, 4);
  // The cache grows a token a step: step 4 attends more tokens than step 1, so it is not faster.
  std::map<std::string, double> sim;
  for (const auto& p : s[0]["phases"]) sim[p["phase"]] = p["simNs"].get<double>();
  EXPECT_GE(sim["attention[4]"], sim["attention[1]"]);
}

// Two instances of a small machine (2 chips of 4 ranks each per instance at LNC 2): the TP
// all_reduce crosses instances; a data-parallel plan keeps each TP group inside one.
TEST(PlansE2eTest, TwoInstancesAndDataParallelReplicas) {
  const std::string profile = TempPath("two_instances.profile.textproto");
  std::ofstream(profile) << "chips_per_instance: 2 torus_x: 2 torus_y: 1\n";
  const Job job = RunJob("instances", std::string(kModel32x8) + "hardware_profile: \"" + profile +
                                       "\"\nbatch: 8 kv_length: 24 seed: 5\n"
                                       "plans { tp: 16 instances: 2 }\n"
                                       "plans { tp: 8 replicas: 2 instances: 2 }\n");
  ExpectAllPlansPassAndAgree(job, 2);
  const auto& s = job.report["scenarios"];
  EXPECT_EQ(s[0]["instances"], 2);
  std::string across, inside;
  for (const auto& p : s[0]["phases"]) if (p["phase"] == "all_reduce") across = p["algorithm"];
  for (const auto& p : s[1]["phases"]) if (p["phase"] == "all_reduce") inside = p["algorithm"];
  EXPECT_THAT(across, HasSubstr("hierarchical"));
  EXPECT_THAT(inside, ::testing::Not(HasSubstr("hierarchical")));
}

// Prefill: QKV CTE with RoPE -> causal attention -> o_proj CTE -> all_reduce, on three plans.
// The trace shows the o_proj moving nothing between the two cores and the QKV splitting S.
TEST(PlansE2eTest, PrefillPlansAgreeAndTheTimelineShowsTheLncSplits) {
  const Job job = RunJob("prefill", "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 128 intermediate: 1024 }\n"
                                 "workload: \"prefill\" batch: 1 seq_len: 256 seed: 6\n"
                                 "plans { tp: 8 } plans { tp: 8 lnc: 1 } plans { tp: 4 replicas: 2 }\n",
                      /*with_trace=*/true);
  ExpectAllPlansPassAndAgree(job, 3);
  EXPECT_THAT(job.output, HasSubstr("prefill:"));
  // The o_proj check streams row blocks: still every element of [B, S, H] compared, for real.
  int oproj_phases = 0;
  for (const auto& s : job.report["scenarios"]) {
    for (const auto& p : s["phases"]) {
      if (p["phase"] != "o_proj") continue;
      ++oproj_phases;
      EXPECT_EQ(std::stoll(p["elements"].get<std::string>()), 8 * 1 * 256 * 512) << p;  // 8 ranks
      EXPECT_GT(p["maxAbsError"].get<double>(), 0) << p;
    }
  }
  EXPECT_GT(oproj_phases, 0) << job.output;
  // Rank 0 of plan tp8 is trace process 0: its phase spans, then its engines' events.
  std::map<std::string, std::pair<double, double>> phase;
  std::map<int, std::string> thread;
  for (const auto& e : job.trace["traceEvents"]) {
    if (e["pid"] != 0) continue;
    if (e["ph"] == "M" && e["name"] == "thread_name") thread[e["tid"]] = e["args"]["name"];
    if (e["ph"] == "X" && e["cat"] == "Phase") {
      phase[e["name"]] = {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()};
    }
  }
  ASSERT_TRUE(phase.contains("o_proj") && phase.contains("qkv")) << job.output;
  int link_in_oproj = 0, core1_dma_in_qkv = 0, core0_dma_in_qkv = 0;
  for (const auto& e : job.trace["traceEvents"]) {
    if (e["pid"] != 0 || e["ph"] != "X" || e["cat"] == "Phase") continue;
    const double start = e["ts"].get<double>();
    const std::string& name = thread[e["tid"]];
    const auto within = [&](const char* p) { return start >= phase[p].first && start < phase[p].second; };
    if (within("o_proj") && name.find("Link") != std::string::npos &&
        e["args"].value("bytes", 0) > 0) {
      ++link_in_oproj;
    }
    if (within("qkv") && name.find("DMA") != std::string::npos) {
      (name.rfind("core 1", 0) == 0 ? core1_dma_in_qkv : core0_dma_in_qkv)++;
    }
  }
  EXPECT_EQ(link_in_oproj, 0);
  EXPECT_GT(core0_dma_in_qkv, 0);
  EXPECT_GT(core1_dma_in_qkv, 0);  // core 1 loads its own half of S
}

// The streamed o_proj check fails a kernel that misses its tolerance: a zero tolerance (a bf16
// kernel never equals the fp64 golden) fails the phase on every rank, and the job.
TEST(PlansE2eTest, PrefillOprojCheckFailsOutsideItsTolerance) {
  const Job job = RunJob("oproj_tol0", "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 128 intermediate: 1024 }\n"
                                       "workload: \"prefill\" batch: 2 seq_len: 200 seed: 6\n"
                                       "tolerances { key: \"o_proj\" value { atol: 0 rtol: 0 } }\n"
                                       "plans { tp: 8 }\n");
  EXPECT_NE(job.exit_code, 0) << job.output;
  ASSERT_TRUE(job.report.is_object()) << job.output;
  EXPECT_FALSE(job.report["pass"].get<bool>());
  int failing = 0;
  for (const auto& s : job.report["scenarios"]) {
    for (const auto& p : s["phases"]) {
      if (p["phase"] != "o_proj") continue;
      EXPECT_EQ(std::stoll(p["elements"].get<std::string>()), 8 * 2 * 200 * 512) << p;  // 8 ranks
      failing += std::stoll(p.value("failures", std::string("0"))) > 0;
    }
  }
  EXPECT_GT(failing, 0) << job.output;
}

TEST(PlansE2eTest, SequenceParallelPrefillReduceScatters) {
  const Job job = RunJob("seqpar", "model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 128 intermediate: 1024 }\n"
                                "workload: \"prefill\" batch: 2 seq_len: 128 sequence_parallel: true "
                                "seed: 7\nplans { tp: 8 } plans { tp: 4 replicas: 2 }\n");
  ExpectAllPlansPassAndAgree(job, 2);
  EXPECT_THAT(job.output, HasSubstr("reduce_scatter"));
  EXPECT_THAT(job.output, ::testing::Not(HasSubstr("all_reduce ")));
}

}  // namespace
