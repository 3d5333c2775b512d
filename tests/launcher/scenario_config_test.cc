// Scenario files: every control-plane, tolerance, model, workload and plan field is checked before
// any rank starts, each problem named with its field, value and rule (Error(kBadConfig), exit 14);
// good plans resolve to the groups and the rank -> heads maps the plan describes.
#include "model/scenario_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "runtime/error.h"
#include "tests/launcher/bad_plans.h"
#include "tests/testing/files.h"

namespace nkisim::launcher {
namespace {

using ::testing::HasSubstr;

std::string ReadConfig(const std::string& name) {
  std::ifstream in(std::string(NKISIM_SOURCE_DIR) + "/configs/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string SmallConfig() { return ReadConfig("small_8ranks.textproto"); }

TEST(ScenarioConfigTest, EveryShippedConfigResolves) {
  int configs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(NKISIM_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".textproto") continue;
    EXPECT_NO_THROW(LoadScenario(entry.path().string())) << entry.path();
    ++configs;
  }
  EXPECT_GE(configs, 3);
}

TEST(ScenarioConfigTest, BadFieldsAreRefusedWithFieldValueAndRule) {
  const struct {
    const char* extra;
    const char* message;
  } cases[] = {
      {"control { heartbeat_s: -1 }", "control.heartbeat_s: -1 must be in [0.01, 60]"},
      {"control { stall_timeout_s: nan }", "control.stall_timeout_s: nan must be in"},
      {"control { stall_timeout_s: inf }", "control.stall_timeout_s: inf must be in"},
      {"control { startup_timeout_s: -5 }", "control.startup_timeout_s: -5 must be in"},
      {"control { heartbeat_s: 30 stall_timeout_s: 20 }", "heartbeat_s: 30 must be below stall_timeout_s (20)"},
      {"control { port: 70000 }", "control.port: 70000 must be in [0, 65535]"},
      {"tolerances { key: \"atention\" value { atol: 1 } }", "tolerances: 'atention' is not a phase"},
      {"tolerances { key: \"qkv\" value { atol: -1 } }", "tolerances['qkv']: atol -1 and rtol 0 must be in [0, 1e6]"},
      {"tolerances { key: \"qkv\" value { rtol: nan } }", "must be in [0, 1e6]"},
      {"tolerances { key: \"qkv\" value { atol: 1e300 } }", "atol 1e+300 and rtol 0 must be in [0, 1e6]"},
      {"model { hidden: 262144 }", "model.hidden: 262144 must be a positive multiple of 128, at most 131072"},
      {"model { rms_eps: -1 }", "model.rms_eps: -1 must be in [0, 1]"},
      {"topology { replica_groups { name: \"tp\" contiguous { group_size: 8 } algorithm: \"tree\" } }",
       "algorithm: 'tree' is not one of auto"},
      {"scenarios: \"attention_decode\"", "scenarios: 'attention_decode': the scenario list is replaced by plans"},
  };
  for (const auto& c : cases) {
    try {
      ResolveScenario(testing::OverrideConfig(SmallConfig(), std::string(c.extra) + "\n"), "bad");
      ADD_FAILURE() << c.extra << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig) << c.extra;
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos)
          << c.extra << "\n" << e.what();
    }
  }
}

TEST(ScenarioConfigTest, BadPlansAreRefusedEachWithItsOwnMessage) {
  const std::vector<testing::BadPlan> cases = testing::BadPlans();
  EXPECT_GE(cases.size(), 15u);
  std::set<std::string> messages;
  for (const testing::BadPlan& c : cases) {
    try {
      ResolveScenario(c.text, "bad");
      ADD_FAILURE() << c.what << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig) << c.what;
      EXPECT_THAT(e.what(), HasSubstr(c.message)) << c.what;
      messages.insert(e.what());
    }
  }
  EXPECT_EQ(messages.size(), cases.size());  // no two cases share a message
}

TEST(ScenarioConfigTest, SeveralHeadsPerRankAndReplicatedKvHeadsMapAsThePlanSays) {
  // 64 Q heads, 8 KV heads. TP 16: 4 Q heads per rank, 2 ranks per KV head (replicated).
  const ResolvedScenario r = ResolveScenario(
      "model { hidden: 1024 n_q_heads: 64 n_kv_heads: 8 d_head: 64 intermediate: 1024 } batch: 8 kv_length: 16 "
      "plans { tp: 16 attention_dp: 4 replicas: 2 }",
      "plan");
  const ResolvedPlan& p = r.plans.at(0);
  EXPECT_EQ(p.name, "tp4xdp4r2");
  EXPECT_EQ(p.world_size(), 32);
  EXPECT_EQ(p.heads_per_rank, 4);
  EXPECT_EQ(p.kv_per_rank, 1);
  EXPECT_EQ(p.kv_replication, 2);
  EXPECT_EQ(p.first_q_head(5), 20);
  EXPECT_EQ(p.first_kv_head(5), 2);
  EXPECT_EQ(p.first_q_head(16 + 5), 20);  // replica 1 repeats the map
  EXPECT_EQ(p.replica(21), 1);
  // Ranks 4..7 form one attention-DP group: Q heads 16..31 use KV heads 2 and 3.
  EXPECT_EQ(p.group_kv_heads(6), (std::vector<int>{2, 3}));
  const collectives::GroupSet& tp = p.topology.group_set("tp");
  ASSERT_EQ(tp.groups.size(), 2u);
  EXPECT_EQ(tp.groups[1].front(), 16);
  const collectives::GroupSet& dp = p.topology.group_set("attention_dp");
  ASSERT_EQ(dp.groups.size(), 8u);
  EXPECT_EQ(dp.groups[1], (collectives::Group{4, 5, 6, 7}));
  EXPECT_EQ(p.topology.iota_workers[6], 4);  // position 2 of G = 4, B / G = 2 rows
  // TP 4: KV heads divided, 2 per rank.
  const ResolvedScenario d = ResolveScenario(
      "model { hidden: 1024 n_q_heads: 64 n_kv_heads: 8 d_head: 64 intermediate: 1024 } batch: 8 kv_length: 16 "
      "plans { tp: 4 }",
      "plan");
  EXPECT_EQ(d.plans[0].heads_per_rank, 16);
  EXPECT_EQ(d.plans[0].kv_per_rank, 2);
  EXPECT_EQ(d.plans[0].first_kv_head(3), 6);
  EXPECT_THAT(FormatScenario(d), HasSubstr("rank 3: Q 48..63 / KV 6..7"));
}

TEST(ScenarioConfigTest, InstancesComeFromTheProfile) {
  const ResolvedScenario r = ResolveScenario(
      "model { hidden: 1024 n_q_heads: 128 n_kv_heads: 8 d_head: 64 intermediate: 1024 } batch: 8 kv_length: 16 "
      "plans { tp: 128 instances: 2 } plans { name: \"lnc1\" tp: 128 lnc: 1 }",
      "plan");
  EXPECT_EQ(r.plans[0].instances, 2);  // 64 ranks per instance at LNC 2
  EXPECT_EQ(r.plans[1].instances, 1);  // 128 at LNC 1
  EXPECT_EQ(r.plans[0].topology.chip_of_rank[127], 31);
}

// Workload moe (moe_config.h): the plan's groups ("tp" blocks of moe_tp, "ep" strided by moe_tp),
// its derived tp / replicas / lnc / name, and every bad field named with its value and rule.
TEST(ScenarioConfigTest, MoePlansResolveToTpBlocksAndStridedEpGroups) {
  const ResolvedScenario r = LoadScenario(std::string(NKISIM_SOURCE_DIR) + "/configs/moe_ep8_tp2_16ranks.textproto");
  ASSERT_EQ(r.workload, Workload::kMoe);
  ASSERT_EQ(r.plans.size(), 1u);
  const ResolvedPlan& p = r.plans[0];
  EXPECT_EQ(p.moe_ep, 8);
  EXPECT_EQ(p.moe_tp, 2);
  EXPECT_EQ(p.world_size(), 16);
  EXPECT_EQ(p.lnc, 1);
  std::map<std::string, std::vector<collectives::Group>> sets;
  for (const collectives::GroupSet& set : p.topology.group_sets) sets[set.name] = set.groups;
  ASSERT_EQ(sets["tp"].size(), 8u);
  EXPECT_EQ(sets["tp"][3], (collectives::Group{6, 7}));
  ASSERT_EQ(sets["ep"].size(), 2u);
  EXPECT_EQ(sets["ep"][1], (collectives::Group{1, 3, 5, 7, 9, 11, 13, 15}));
  EXPECT_THAT(FormatScenario(r), HasSubstr("EP 7 (ranks 14..15): experts 28..31, I / 2 = 64 columns per rank"));
  const ResolvedScenario named = ResolveScenario(
      "workload: \"moe\" plans { moe_ep: 4 moe_tp: 1 } model { hidden: 128 } "
      "moe { experts: 8 top_k: 2 intermediate: 64 tokens: 8 }", "named");
  EXPECT_EQ(named.plans[0].name, "ep4xtp1");
  EXPECT_EQ(named.spec.moe().skew(), "zipf");  // the default: skewed routing
  EXPECT_EQ(named.spec.moe().zipf_s(), 1.2);
}

TEST(ScenarioConfigTest, BadMoeFieldsAreRefusedWithFieldValueAndRule) {
  const std::string base = "workload: \"moe\"\nplans { name: \"p\" moe_ep: 8 moe_tp: 2 }\nmodel { hidden: 256 }\n"
                           "moe { experts: 32 top_k: 4 intermediate: 128 tokens: 64 }\n";
  const struct {
    const char* extra;
    const char* message;
  } cases[] = {
      {"topology { world_size: 12 }", "moe_ep x moe_tp = 8 x 2 = 16 ranks, but topology.world_size is 12"},
      {"plans { name: \"p\" moe_ep: 5 moe_tp: 2 }", "moe_ep: 5 must divide moe.experts (32)"},
      {"plans { name: \"p\" moe_ep: 8 moe_tp: 3 }", "moe_tp: 3 must divide moe.intermediate (128)"},
      {"plans { name: \"p\" moe_ep: 0 moe_tp: 2 }", "moe_ep: 0, moe_tp: 2: both must be >= 1"},
      {"plans { name: \"p\" moe_ep: 8 moe_tp: 2 lnc: 2 }", "lnc: 2: the MoE kernels run at lnc 1"},
      {"plans { name: \"p\" moe_ep: 8 moe_tp: 2 tp: 4 }", "tp: 4, replicas: 8 contradict moe_tp 2 and moe_ep 8"},
      {"moe { experts: 32 top_k: 40 intermediate: 128 tokens: 64 }", "moe.top_k: 40 must be in [1, moe.experts (32)]"},
      {"moe { experts: 32 top_k: 0 intermediate: 128 tokens: 64 }", "moe.top_k: 0 must be in [1, moe.experts (32)]"},
      {"moe { experts: 32 top_k: 2 intermediate: 128 tokens: 64 router: \"llama4\" }",
       "moe.top_k: 2: the llama4 router (sigmoid top-1) needs 1"},
      {"moe { experts: 32 top_k: 4 intermediate: 128 tokens: 64 router: \"deepseek\" }",
       "moe.router: 'deepseek' is not one of qwen3, mixtral, gpt_oss, llama4"},
      {"moe { experts: 32 top_k: 4 intermediate: 128 tokens: 0 }", "moe.tokens: 0 must be in [1, 4096]"},
      {"moe { experts: 32 top_k: 4 intermediate: 128 tokens: 64 zipf_s: -1 }", "moe.zipf_s: -1 must be in [0, 10]"},
      {"batch: 8", "batch: 8: the moe workload runs no attention or dense MLP"},
      {"model { hidden: 256 n_q_heads: 8 }", "model.n_q_heads: 8: the moe workload runs no attention"},
      {"fault { kind: CORRUPT_INPUT rank: 1 phase: \"router\" }", "fault.kind: CORRUPT_INPUT"},
      {"fault { kind: THROW rank: 1 phase: \"qkv\" }", "fault.phase: 'qkv' is not a phase of the moe workload"},
      {"tolerances { key: \"experts\" value { atol: -1 } }", "tolerances['experts']: atol -1"},
  };
  for (const auto& c : cases) {
    try {
      ResolveScenario(testing::OverrideConfig(base, std::string(c.extra) + "\n"), "bad");
      ADD_FAILURE() << c.extra << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig) << c.extra;
      EXPECT_THAT(e.what(), HasSubstr(c.message)) << c.extra;
    }
  }
  EXPECT_NO_THROW(ResolveScenario(base, "good"));
  // The MoE fields on a decoder-layer workload are refused, not ignored.
  for (const auto& [extra, message] :
       {std::pair{"moe { experts: 8 top_k: 2 }", "moe: set, but workload is 'decode'"},
        {"plans { name: \"tp8\" tp: 8 moe_ep: 4 }", "plan 'tp8': moe_ep 4 / moe_tp 0: expert parallelism"}}) {
    try {
      ResolveScenario(testing::OverrideConfig(SmallConfig(), std::string(extra) + "\n"), "bad");
      ADD_FAILURE() << extra << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(message)) << extra;
    }
  }
}

}  // namespace
}  // namespace nkisim::launcher
