// Sweep files (launcher/sweep/sweep_config.h): the axes expand into the cartesian product with the
// plans innermost, a shape's plans of one world size become one job, every point's scenario is the
// base with its values; and every problem of a sweep, of a point or of a job is refused at once,
// before any point runs, naming the field, the value, the rule and the points concerned.
#include "launcher/sweep/sweep_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "runtime/error.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kSource = NKISIM_SOURCE_DIR;

// The small 8-rank layer of the e2e tests, without plans or axes.
const char* kBase =
    "base { model { hidden: 1024 n_q_heads: 8 n_kv_heads: 2 d_head: 64 intermediate: 1024 } batch: 4 kv_length: 128 "
    "seed: 3 }\n";

// kBase with another seed and more fields inside its block (a config gives `base` once).
std::string BaseWith(const std::string& inside, int seed = 3) {
  return "base { model { hidden: 1024 n_q_heads: 8 n_kv_heads: 2 d_head: 64 intermediate: 1024 } batch: 4 "
         "kv_length: 128 seed: " + std::to_string(seed) + " " + inside + " }\n";
}

std::string BadConfigMessage(const std::string& text) {
  return testing::ErrorMessageOf(ErrorCode::kBadConfig, [&] { ResolveSweep(text, "s.textproto"); });
}

TEST(SweepConfigTest, TheSmallExampleExpandsIntoPointsShapesAndJobs) {
  const ResolvedSweep s = LoadSweep(kSource + "/configs/sweeps/small_example.textproto");
  EXPECT_EQ(s.title, "small example, 8 ranks");
  EXPECT_EQ(s.output, "small_example");  // the file's stem: no output field
  EXPECT_STREQ(s.length_axis(), "kv_length");
  ASSERT_EQ(s.points.size(), 8u);
  ASSERT_EQ(s.shapes.size(), 4u);
  ASSERT_EQ(s.jobs.size(), 4u);  // both plans have 8 ranks: one job per shape
  std::vector<std::string> labels;
  for (const SweepShape& shape : s.shapes) labels.push_back(shape.label);
  EXPECT_THAT(labels, ElementsAre("B=4 L=128", "B=4 L=256", "B=8 L=128", "B=8 L=256"));
  // Plans innermost: points 0 and 1 are the two plans of shape 0.
  EXPECT_EQ(s.points[0].plan, "tp8");
  EXPECT_EQ(s.points[1].plan, "tp4xdp2");
  EXPECT_EQ(s.points[1].attention_dp, 2);
  EXPECT_EQ(s.points[1].world_size, 8);
  EXPECT_EQ(s.points[3].key, "plan=tp4xdp2 batch=4 kv_length=256 lnc=2 algorithm=auto profile=trn2");
  EXPECT_EQ(s.points[6].batch, 8u);
  EXPECT_EQ(s.points[6].length, 256u);
  EXPECT_EQ(s.points[6].scenario.batch(), 8u);
  EXPECT_EQ(s.points[7].scenario.kv_length(), 256u);
  ASSERT_EQ(s.points[7].scenario.plans_size(), 1);
  EXPECT_EQ(s.points[7].scenario.plans(0).attention_dp(), 2u);
  for (const SweepJob& job : s.jobs) {
    EXPECT_THAT(job.points, ElementsAre(2 * job.index, 2 * job.index + 1));
    EXPECT_EQ(job.world_size, 8);
  }
  const proto::Scenario job = JobScenario(s, s.jobs[2].points);
  ASSERT_EQ(job.plans_size(), 2);
  EXPECT_EQ(job.batch(), 8u);
  EXPECT_EQ(job.kv_length(), 128u);
  // The job's scenario is what `nkisim run` will take: it resolves with both plans.
  EXPECT_EQ(ResolveScenario(ScenarioText(job), "job").plans.size(), 2u);
}

TEST(SweepConfigTest, TheShippedDecodeSweepIsValidEveryPoint) {
  const ResolvedSweep s = LoadSweep(kSource + "/configs/sweeps/decode_plans.textproto");
  ASSERT_EQ(s.points.size(), 36u);
  ASSERT_EQ(s.jobs.size(), 9u);
  std::set<std::string> plans;
  for (const SweepPoint& p : s.points) {
    plans.insert(p.plan);
    EXPECT_EQ(p.world_size, 64) << p.key;
    EXPECT_EQ(p.tp, 64) << p.key;
  }
  EXPECT_EQ(plans, (std::set<std::string>{"tp64", "tp32xdp2", "tp16xdp4", "tp8xdp8"}));
  for (const SweepJob& job : s.jobs) EXPECT_EQ(job.points.size(), 4u);
  EXPECT_EQ(s.shapes.back().label, "B=128 L=32768");
}

TEST(SweepConfigTest, LncAlgorithmAndProfileAxesWriteThePointScenario) {
  const std::string profile = (std::filesystem::temp_directory_path() / "nkisim_sweep_profile.textproto").string();
  std::ofstream(profile) << "collective_step_latency_ns: 900\n";
  const ResolvedSweep s = ResolveSweep(
      BaseWith("topology { lnc: 2 }") + "plans { tp: 8 } lnc: [1, 2]\n"
                           "algorithm: [\"ring\", \"mesh\"]\nhardware_profile: [\"" + profile + "\"]\n",
      "s.textproto");
  ASSERT_EQ(s.points.size(), 4u);
  const SweepPoint& p = s.points[0];
  EXPECT_EQ(p.plan, "tp8_lnc1");  // the default name says the LNC
  EXPECT_EQ(p.lnc, 1);
  EXPECT_EQ(p.scenario.plans(0).lnc(), 1u);
  EXPECT_EQ(p.scenario.topology().lnc(), 0u);  // the axis decides, not the base topology
  ASSERT_EQ(p.scenario.topology().replica_groups_size(), 1);
  EXPECT_EQ(p.scenario.topology().replica_groups(0).name(), "tp");
  EXPECT_EQ(p.scenario.topology().replica_groups(0).algorithm(), "ring");
  EXPECT_EQ(p.scenario.hardware_profile(), profile);
  EXPECT_EQ(p.key, "plan=tp8_lnc1 batch=4 kv_length=128 lnc=1 algorithm=ring profile=" + profile);
  EXPECT_EQ(s.shapes[0].label, "B=4 L=128 lnc=1 ring");  // axes of more than one value
  EXPECT_EQ(s.points[3].algorithm, "mesh");
  EXPECT_EQ(s.points[3].lnc, 2);
  EXPECT_EQ(s.points[3].plan, "tp8");
}

TEST(SweepConfigTest, PlansOfOtherWorldSizesRunInJobsOfTheirOwn) {
  const ResolvedSweep s = ResolveSweep(std::string(kBase) + "plans { tp: 8 } plans { tp: 4 } "
                                                            "plans { tp: 8 attention_dp: 2 } batch: [4, 8]\n",
                                       "s.textproto");
  ASSERT_EQ(s.points.size(), 6u);
  ASSERT_EQ(s.jobs.size(), 4u);
  EXPECT_THAT(s.jobs[0].points, ElementsAre(0, 2));
  EXPECT_EQ(s.jobs[0].world_size, 8);
  EXPECT_THAT(s.jobs[1].points, ElementsAre(1));
  EXPECT_EQ(s.jobs[1].world_size, 4);
  EXPECT_EQ(s.jobs[3].shape, 1);
}

TEST(SweepConfigTest, FingerprintsFollowWhatTheResultDependsOn) {
  const std::string axes = "plans { tp: 8 } plans { tp: 8 attention_dp: 2 } batch: [4, 8]\n";
  const ResolvedSweep a = ResolveSweep(std::string(kBase) + axes, "a.textproto");
  const ResolvedSweep again = ResolveSweep(std::string(kBase) + axes, "b.textproto");
  const ResolvedSweep seed = ResolveSweep(BaseWith("", 4) + axes, "a.textproto");
  std::set<std::string> distinct;
  for (size_t i = 0; i < a.points.size(); ++i) {
    EXPECT_EQ(a.points[i].fingerprint.size(), 16u);
    EXPECT_EQ(a.points[i].fingerprint, again.points[i].fingerprint);
    EXPECT_NE(a.points[i].fingerprint, seed.points[i].fingerprint);
    distinct.insert(a.points[i].fingerprint);
  }
  EXPECT_EQ(distinct.size(), a.points.size());
}

TEST(SweepConfigTest, BaseFileAndAnEmptyAxisTakeTheBaseValues) {
  const std::string base = (std::filesystem::temp_directory_path() / "nkisim_sweep_base.textproto").string();
  std::ofstream(base) << "model { hidden: 1024 n_q_heads: 8 n_kv_heads: 2 d_head: 64 intermediate: 1024 }\nbatch: 8\n"
                         "kv_length: 96\nplans { tp: 8 } plans { tp: 8 attention_dp: 4 }\n";
  const ResolvedSweep s = ResolveSweep("base_file: \"" + base + "\"\nkv_length: [64, 128]\n", "s.textproto");
  ASSERT_EQ(s.points.size(), 4u);  // the base's 2 plans x 2 lengths x its one batch
  EXPECT_EQ(s.points[0].batch, 8u);
  EXPECT_EQ(s.points[1].plan, "tp2xdp4");
  EXPECT_EQ(s.points[3].length, 128u);
}

// Each bad sweep: the problem's message, and the point it names when it is a point's.
TEST(SweepConfigTest, BadSweepsAreRefusedWithFieldValueRuleAndPoint) {
  const struct {
    std::string text;
    std::string message;
    std::string where;  // "" when the problem is the sweep's
  } cases[] = {
      {std::string(kBase), "plans: none given; give the plans axis", ""},
      {"plans { tp: 8 }", "base: none given", ""},
      {std::string(kBase) + "plans { tp: 8 tpp: 2 }", "has no field named \"tpp\"", "s.textproto:2:"},
      {std::string(kBase) + "plans { tp: 8 attention_dp: 4 } batch: [4, 6]",
       "plan 'tp2xdp4': attention_dp: 4 must divide batch (6): each of the G ranks attends B / G rows",
       "at point plan=tp2xdp4 batch=6 kv_length=128"},
      {std::string(kBase) + "plans { tp: 8 } hardware_profile: [\"/nonexistent/p.textproto\"]",
       "hardware_profile: '/nonexistent/p.textproto': /nonexistent/p.textproto: cannot open", ""},
      {std::string(kBase) + "plans { tp: 8 } batch: [4, 8, 4]", "batch: 4 is given twice; each value of an axis once", ""},
      {std::string(kBase) + "plans { tp: 8 } seq_len: [128]",
       "seq_len: [128]: the base's workload is decode; its length axis is kv_length", ""},
      {std::string(kBase) + "plans { tp: 8 } lnc: [3]", "lnc: 3 must be 1 or 2", ""},
      {std::string(kBase) + "plans { tp: 8 } plans { tp: 8 name: \"tp8\" }",
       "plans: name 'tp8' is given to plans[0] and plans[1]", ""},
      {std::string(kBase) + "plans { tp: 8 } algorithm: [\"warp\"]", "algorithm: 'warp' is not one of auto",
       "at point plan=tp8"},
      {std::string(kBase) + "plans { tp: 8 } algorithm: [\"hierarchical\"]",
       "algorithm: 'hierarchical' cannot run all_reduce on the tp groups of plan 'tp8' (group [0..7]): the "
       "group lies inside one instance",
       "at point plan=tp8 batch=4 kv_length=128 lnc=2 algorithm=hierarchical"},
      {std::string(kBase) + "plans { tp: 8 } algorithm: [\"pairwise\"]",
       "algorithm: 'pairwise' does not implement all_reduce", "at point"},
      {std::string(kBase) + "plans { tp: 3 } batch: [4, 8]", "plan 'tp3': tp: 3 must divide model.n_q_heads (8)",
       "at every point (2)"},
      {"base { model { hidden: 8192 n_q_heads: 64 n_kv_heads: 8 d_head: 128 intermediate: 1024 } kv_length: 1 }\n"
       "plans { tp: 8 } batch: [8, 128] kv_length: [1024, 262144]",
       "plan 'tp8': needs about", "at point plan=tp8 batch=128 kv_length=262144"},
      {"base { workload: \"moe\" model { hidden: 256 } moe { experts: 8 top_k: 2 intermediate: 64 tokens: 8 } }\n"
       "plans { moe_ep: 4 moe_tp: 2 }",
       "base.workload: 'moe': the sweep runs decode and prefill layers", ""},
  };
  for (const auto& c : cases) {
    const std::string message = BadConfigMessage(c.text);
    EXPECT_THAT(message, HasSubstr(c.message)) << c.text;
    if (!c.where.empty()) {
      EXPECT_THAT(message, HasSubstr(c.where)) << c.text;
    }
    if (c.text.find("tpp") == std::string::npos) {  // a parse error is the file's, not a list
      EXPECT_THAT(message, HasSubstr("(no point was run)")) << c.text;
    }
  }
}

TEST(SweepConfigTest, EveryProblemIsListedOnceWithItsPoints) {
  // The sweep's own problems come first, all of them, before any point is expanded.
  const std::string sweep = BadConfigMessage(
      std::string(kBase) + "plans { tp: 8 attention_dp: 4 } batch: [6, 6] lnc: [1, 4]");
  EXPECT_THAT(sweep, HasSubstr("s.textproto: 2 problems (no point was run):"));
  EXPECT_THAT(sweep, HasSubstr("batch: 6 is given twice"));
  EXPECT_THAT(sweep, HasSubstr("lnc: 4 must be 1 or 2"));
  EXPECT_THAT(sweep, Not(HasSubstr("attention_dp")));
  // Then every point's: a problem several points share is listed once, with its points.
  const std::string points = BadConfigMessage(
      std::string(kBase) + "plans { tp: 8 attention_dp: 4 } plans { tp: 3 } batch: [6, 10]");
  EXPECT_THAT(points, HasSubstr("attention_dp: 4 must divide batch (6)"));
  EXPECT_THAT(points, HasSubstr("attention_dp: 4 must divide batch (10)"));
  const std::string tp3 = "plan 'tp3': tp: 3 must divide model.n_q_heads (8)";
  ASSERT_THAT(points, HasSubstr(tp3));
  EXPECT_EQ(points.find(tp3), points.rfind(tp3));
  EXPECT_THAT(points, HasSubstr("at 2 points: plan=tp3 batch=6 kv_length=128"));
}

}  // namespace
}  // namespace nkisim::launcher
