// `nkisim run` of the shipped MoE job (configs/moe_ep8_tp2_16ranks.textproto: 16 ranks, EP 8 x
// TP 2, Zipf-skewed routing, dropless) as a user runs it: every rank's phases pass against their
// references and the layer output against the whole-layer fp64 golden; the token rows per rank
// follow the skew and the busiest rank sets the step; uniform routing is faster; a check held to
// zero tolerance fails; a killed rank ends the job within 10 s naming it; bad plans exit 14
// naming the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/testing/files.h"
#include "tests/testing/run_command.h"
#include "tests/testing/time_scale.h"

namespace {

using ::testing::HasSubstr;
using nkisim::testing::ReadFile;
using nkisim::testing::Scaled;

const std::string kSource = NKISIM_SOURCE_DIR;
const std::string kConfig = kSource + "/configs/moe_ep8_tp2_16ranks.textproto";
constexpr int kRanks = 16, kEp = 8, kTokens = 64, kTopK = 4, kHidden = 256;

std::string TempPath(const std::string& name) { return nkisim::testing::TempPath("nkisim_moe_", name); }

struct RunResult {
  int exit_code;
  std::string output;
  double seconds;
};

RunResult RunNkisim(const std::string& name, const std::string& config_text) {
  const std::string config = TempPath(name + ".textproto");
  std::ofstream(config) << config_text;
  std::filesystem::remove(TempPath(name + ".report.json"));
  const auto start = std::chrono::steady_clock::now();
  const nkisim::testing::CommandResult r = nkisim::testing::RunCommand(
      std::string(NKISIM_BINARY) + " run " + config + " --report " + TempPath(name + ".report.json") +
          " --trace ''",
      120);
  return {r.exit_code, r.output,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

std::string Config(const std::string& extra = "") {
  return nkisim::testing::OverrideConfig(ReadFile(kConfig), extra);
}

std::vector<int64_t> RowsPerRank(const nlohmann::json& scenario) {
  std::vector<int64_t> rows;
  for (const auto& v : scenario["expertRowsPerRank"]) rows.push_back(std::stoll(v.get<std::string>()));
  return rows;
}

TEST(MoeRunE2eTest, ShippedJobPassesOnEveryRankAndZipfSlowsTheStep) {
  const RunResult r = RunNkisim("shipped", Config());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("ep8xtp2 (moe_ep 8 x moe_tp 2, lnc 1, 1 instance): PASS"));
  EXPECT_THAT(r.output, HasSubstr("token rows per rank"));
  EXPECT_THAT(r.output, HasSubstr("result: PASS"));
  const nlohmann::json report = nlohmann::json::parse(ReadFile(TempPath("shipped.report.json")));
  ASSERT_TRUE(report["pass"].get<bool>());
  const nlohmann::json& s = report["scenarios"][0];
  const std::vector<std::string> phases = {"router", "dispatch", "dispatch_all_to_all", "experts",
                                           "expert_all_reduce", "combine_all_to_all", "combine"};
  ASSERT_EQ(s["phases"].size(), phases.size());
  for (size_t i = 0; i < phases.size(); ++i) {
    const nlohmann::json& p = s["phases"][i];
    EXPECT_EQ(p["phase"], phases[i]);
    EXPECT_TRUE(p["pass"].get<bool>()) << phases[i];
    EXPECT_EQ(std::stoll(p["failures"].get<std::string>()), 0) << phases[i];
    EXPECT_EQ(std::stoll(p["chainFailures"].get<std::string>()), 0) << phases[i];
  }
  // Every rank's output rows were checked: 16 ranks x 64 tokens x H.
  EXPECT_EQ(std::stoll(s["phases"][6]["elements"].get<std::string>()), int64_t{kRanks} * kTokens * kHidden);
  // The token exchange over the EP groups: all_to_all_v, priced in the graph.
  EXPECT_THAT(s["phases"][2]["algorithm"].get<std::string>(), HasSubstr("all_to_all_v:"));
  EXPECT_THAT(s["phases"][4]["algorithm"].get<std::string>(), HasSubstr("all_reduce:"));
  // Rows per rank: both members of a TP pair get the same rows; each EP group gets every choice
  // of its 8 x 64 tokens (dropless); Zipf makes them uneven, the low experts' rank the busiest.
  const std::vector<int64_t> rows = RowsPerRank(s);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kRanks));
  int64_t even = 0, odd = 0;
  for (int r = 0; r < kRanks; r += 2) {
    EXPECT_EQ(rows[r], rows[r + 1]) << "rank " << r;
    even += rows[r];
    odd += rows[r + 1];
  }
  EXPECT_EQ(even, int64_t{kEp} * kTokens * kTopK);
  EXPECT_EQ(odd, int64_t{kEp} * kTokens * kTopK);
  const int64_t most = *std::max_element(rows.begin(), rows.end());
  EXPECT_EQ(most, rows[0]);
  EXPECT_GT(most, 2 * (even / kEp)) << "the Zipf skew should at least double the busiest rank's rows";
  // The step is the slowest rank's, and that is a rank of the busiest EP position.
  EXPECT_LT(s["slowestRank"].get<int>(), 2);

  // The same layer routed without the bias: the rows spread (about the mean, 256, each) and the
  // step shortens.
  const RunResult uniform = RunNkisim(
      "uniform", Config("moe { experts: 32 top_k: 4 intermediate: 128 router: \"qwen3\" skew: \"uniform\" tokens: 64 }"));
  ASSERT_EQ(uniform.exit_code, 0) << uniform.output;
  const nlohmann::json u = nlohmann::json::parse(ReadFile(TempPath("uniform.report.json")))["scenarios"][0];
  const std::vector<int64_t> ur = RowsPerRank(u);
  const int64_t u_most = *std::max_element(ur.begin(), ur.end());
  EXPECT_LT(u_most, most);
  EXPECT_LT(u_most, 2 * (int64_t{kTokens} * kTopK));
  EXPECT_LT(u["stepSimNs"].get<double>(), s["stepSimNs"].get<double>());
}

// As a user runs it by hand: `mpirun -n 16 nkisim run CONFIG` (rank 0 supervises): every rank
// passes and each EP group gets every choice of its tokens.
TEST(MoeRunE2eTest, PlainMpirunWith16RanksPasses) {
  const std::string root = ::geteuid() == 0 ? "--allow-run-as-root " : "";
  const std::string report = TempPath("plain.report.json");
  std::filesystem::remove(report);
  const nkisim::testing::CommandResult r = nkisim::testing::RunCommand(
      std::string(NKISIM_MPIEXEC) + " " + root + "--oversubscribe -n 16 " + NKISIM_BINARY + " run " + kConfig +
          " --report " + report + " --trace ''",
      120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("result: PASS"));
  const nlohmann::json report_json = nlohmann::json::parse(ReadFile(report));
  EXPECT_TRUE(report_json["pass"].get<bool>());
  const std::vector<int64_t> rows = RowsPerRank(report_json["scenarios"][0]);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(std::accumulate(rows.begin(), rows.end(), int64_t{0}), int64_t{2} * kEp * kTokens * kTopK);
}


// Two plans on the same 16 ranks: EP 16 (whole experts) routes 16 x 64 tokens, EP 8 x TP 2 the
// first 8 x 64 of them; their layer outputs agree on those shared tokens (bf16 rounding of the TP
// sum apart), and both pass.
TEST(MoeRunE2eTest, PlansOfDifferentEpAgreeOnTheTokensTheyShare) {
  const RunResult r = RunNkisim(
      "two_plans", Config("plans { name: \"ep8xtp2\" moe_ep: 8 moe_tp: 2 }\nplans { name: \"ep16\" moe_ep: 16 moe_tp: 1 }"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("ep16 (moe_ep 16 x moe_tp 1, lnc 1, 1 instance): PASS"));
  EXPECT_THAT(r.output, HasSubstr("layer output ep16 vs ep8xtp2"));
  const nlohmann::json report = nlohmann::json::parse(ReadFile(TempPath("two_plans.report.json")));
  ASSERT_EQ(report["agreement"].size(), 1u);
  const nlohmann::json& a = report["agreement"][0];
  EXPECT_TRUE(a["pass"].get<bool>());
  EXPECT_GE(std::stoll(a["compared"].get<std::string>()), 8 * kTokens * kHidden / 4);
  EXPECT_GT(a["maxAbsDiff"].get<double>(), 0.0);  // the TP split rounds differently: a real comparison
  // EP 16 holds twice the tokens: every EP group gets 16 x 64 x 4 choices.
  const std::vector<int64_t> rows = RowsPerRank(report["scenarios"][1]);
  EXPECT_EQ(std::accumulate(rows.begin(), rows.end(), int64_t{0}), int64_t{16} * kTokens * kTopK);
}

// The checks can fail: the combine held to zero tolerance (bf16 outputs against fp64) fails the job.
TEST(MoeRunE2eTest, ZeroToleranceOnTheCombineFails) {
  const RunResult r = RunNkisim("strict", Config("tolerances { key: \"combine\" value { atol: 0 rtol: 0 } }"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("result: FAIL"));
}

TEST(MoeRunE2eTest, KilledRankEndsTheJobWithin10sNamingIt) {
  const RunResult r = RunNkisim("kill", Config("fault { kind: KILL rank: 5 phase: \"dispatch_all_to_all\" }"));
  EXPECT_EQ(r.exit_code, 15) << r.output;  // communication error
  EXPECT_LT(r.seconds, Scaled(10)) << r.output;
  EXPECT_THAT(r.output, HasSubstr("rank 5 in phase ep8xtp2/dispatch_all_to_all"));
  EXPECT_THAT(r.output, HasSubstr("died"));
  EXPECT_FALSE(std::filesystem::exists(TempPath("kill.report.json")));
}

TEST(MoeRunE2eTest, BadPlansExit14NamingTheField) {
  const struct {
    const char* name;
    std::string extra;
    const char* message;
  } cases[] = {
      {"ep_times_tp", "topology { world_size: 8 }",
       "moe_ep x moe_tp = 8 x 2 = 16 ranks, but topology.world_size is 8"},
      {"ep_not_dividing", "plans { name: \"ep3\" moe_ep: 3 moe_tp: 2 }",
       "moe_ep: 3 must divide moe.experts (32)"},
      {"top_k", "moe { experts: 32 top_k: 33 intermediate: 128 tokens: 64 }",
       "moe.top_k: 33 must be in [1, moe.experts (32)]"},
      {"tp_not_dividing_i", "plans { name: \"tp3\" moe_ep: 8 moe_tp: 3 }",
       "moe_tp: 3 must divide moe.intermediate (128)"},
      {"plans_disagree", "plans { name: \"a\" moe_ep: 8 moe_tp: 2 }\nplans { name: \"b\" moe_ep: 4 moe_tp: 2 }",
       "plans: 'b' has moe_ep x moe_tp = 8 ranks but 'a' has 16"},
  };
  for (const auto& c : cases) {
    const RunResult r = RunNkisim(c.name, Config(c.extra));
    EXPECT_EQ(r.exit_code, 14) << c.name << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.name;
    EXPECT_LT(r.seconds, Scaled(5)) << c.name;
    EXPECT_FALSE(std::filesystem::exists(TempPath(std::string(c.name) + ".report.json"))) << c.name;
  }
}

}  // namespace
