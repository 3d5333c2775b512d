// BuildReport (model/run_report.h) on synthetic rank results of two plans: what it takes
// from the slowest rank, what it sums, and the plans' agreement check.
#include "model/run_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace nkisim::launcher {
namespace {

using ::testing::HasSubstr;

// Two plans of a 2-rank decode job; the all_reduce tolerance (which the agreement check uses)
// atol 1e-3, rtol 1e-2.
ResolvedScenario TwoPlans() {
  ResolvedScenario sc;
  sc.source = "synthetic.textproto";
  sc.workload = Workload::kDecode;
  sc.spec.set_workload("decode");
  sc.spec.set_steps(1);
  proto::Tolerance tol;
  tol.set_atol(1e-3);
  tol.set_rtol(1e-2);
  (*sc.spec.mutable_tolerances())["all_reduce"] = tol;
  ResolvedPlan tp;
  tp.name = "tp2";
  tp.tp = 2;
  tp.lnc = 2;
  ResolvedPlan dp;
  dp.name = "dp2";
  dp.tp = 1;
  dp.replicas = 2;
  dp.lnc = 1;
  sc.plans = {tp, dp};
  return sc;
}

proto::PhaseResult Phase(const std::string& plan, const std::string& phase, double sim_ns,
                         double host_ms, int64_t bytes, int64_t elements, int64_t failures) {
  proto::PhaseResult p;
  p.set_scenario(plan);
  p.set_phase(phase);
  p.set_sim_ns(sim_ns);
  p.set_host_ms(host_ms);
  p.set_bytes_moved(bytes);
  p.set_elements(elements);
  p.set_failures(failures);
  p.set_max_abs_error(sim_ns / 1e6);  // distinct per rank, so the max is checkable
  p.set_fresh_bytes(static_cast<int64_t>(host_ms) << 20);  // host_ms MiB: the max is checkable
  return p;
}

void AddSamples(proto::RankResult& r, const std::string& plan, std::vector<int64_t> index,
                std::vector<float> values) {
  proto::LayerSample& s = *r.add_layer_samples();
  s.set_scenario(plan);
  s.set_replica(0);
  s.set_step(0);
  for (int64_t i : index) s.add_index(i);
  for (float v : values) s.add_value(v);
}

// Rank 0 and rank 1 of both plans; the layer samples of "dp2" are those of "tp2" plus `shift`
// on the element of largest magnitude (|4|, so the agreement bound is 1e-3 + 1e-2 * 4 = 0.041).
std::map<int, proto::RankResult> Results(float shift, int64_t failures_on_rank1 = 0) {
  std::map<int, proto::RankResult> results;
  proto::RankResult& r0 = results[0];
  *r0.add_phases() = Phase("tp2", "qkv", 100, 7, 1000, 10, 0);
  *r0.add_phases() = Phase("tp2", "all_reduce", 50, 1, 300, 10, 0);
  *r0.add_phases() = Phase("dp2", "qkv", 80, 2, 500, 20, 0);
  (*r0.mutable_step_sim_ns())["tp2"] = 150;
  (*r0.mutable_step_sim_ns())["dp2"] = 80;
  (*r0.mutable_kv_cache_bytes())["tp2"] = 1 << 20;
  r0.set_peak_rss_mib(90);
  AddSamples(r0, "tp2", {0, 1}, {1.0f, -2.0f});
  AddSamples(r0, "dp2", {0, 1}, {1.0f, -2.0f});
  proto::RankResult& r1 = results[1];
  *r1.add_phases() = Phase("tp2", "qkv", 250, 3, 2000, 10, failures_on_rank1);
  *r1.add_phases() = Phase("tp2", "all_reduce", 40, 2, 300, 10, 0);
  *r1.add_phases() = Phase("dp2", "qkv", 60, 4, 700, 20, 0);
  (*r1.mutable_step_sim_ns())["tp2"] = 290;
  (*r1.mutable_step_sim_ns())["dp2"] = 60;
  (*r1.mutable_kv_cache_bytes())["tp2"] = 2 << 20;
  r1.set_peak_rss_mib(120);
  AddSamples(r1, "tp2", {2}, {4.0f});
  AddSamples(r1, "dp2", {2}, {4.0f + shift});
  return results;
}

TEST(BuildReport, SlowestRankTimesAndSummedBytes) {
  const proto::RunReport report = BuildReport(TwoPlans(), Results(0), 12.5);
  EXPECT_EQ(report.world_size(), 2u);
  EXPECT_EQ(report.wall_s(), 12.5);
  EXPECT_EQ(report.peak_rss_mib(), 120);
  EXPECT_EQ(report.peak_rss_summed_mib(), 90 + 120);  // each rank once, not once per plan
  // Ranks as threads of one process: their RSS and faults are the process's, so neither is given.
  const proto::RunReport threads = BuildReport(TwoPlans(), Results(0), 12.5, true, true);
  EXPECT_TRUE(threads.in_process());
  EXPECT_EQ(threads.peak_rss_summed_mib(), 0);
  EXPECT_EQ(threads.scenarios(0).phases(0).fresh_bytes(), 0);
  EXPECT_THAT(FormatReport(threads), ::testing::ContainsRegex("qkv +0\\.250 +7\\.0 +- "));
  ASSERT_EQ(report.scenarios_size(), 2);
  const proto::ScenarioSummary& tp = report.scenarios(0);
  EXPECT_EQ(tp.name(), "tp2");
  EXPECT_EQ(tp.tp(), 2u);
  ASSERT_EQ(tp.phases_size(), 2);
  const proto::PhaseSummary& qkv = tp.phases(0);
  EXPECT_EQ(qkv.phase(), "qkv");
  EXPECT_EQ(qkv.sim_ns(), 250);  // the slowest rank
  EXPECT_EQ(qkv.host_ms(), 7);   // the slowest rank, per measure
  EXPECT_EQ(qkv.fresh_bytes(), 7 << 20);  // the largest rank's
  EXPECT_EQ(qkv.bytes_moved(), 3000);  // summed
  EXPECT_EQ(qkv.elements(), 20);
  EXPECT_DOUBLE_EQ(qkv.max_abs_error(), 250 / 1e6);
  EXPECT_EQ(tp.phases(1).phase(), "all_reduce");
  EXPECT_EQ(tp.phases(1).sim_ns(), 50);
  EXPECT_EQ(tp.step_sim_ns(), 290);
  EXPECT_EQ(tp.total_sim_ns(), 290);
  EXPECT_EQ(tp.kv_cache_bytes_per_rank(), 2 << 20);
  const proto::ScenarioSummary& dp = report.scenarios(1);
  EXPECT_EQ(dp.name(), "dp2");
  ASSERT_EQ(dp.phases_size(), 1);
  EXPECT_EQ(dp.phases(0).sim_ns(), 80);
  EXPECT_EQ(dp.phases(0).bytes_moved(), 1200);
  EXPECT_EQ(dp.step_sim_ns(), 80);
  EXPECT_TRUE(report.pass());
}

TEST(BuildReport, FailuresOnAnyRankFailThePhasePlanAndRun) {
  const proto::RunReport report = BuildReport(TwoPlans(), Results(0, /*failures_on_rank1=*/3), 1);
  EXPECT_EQ(report.scenarios(0).phases(0).failures(), 3);
  EXPECT_FALSE(report.scenarios(0).phases(0).pass());
  EXPECT_TRUE(report.scenarios(0).phases(1).pass());
  EXPECT_FALSE(report.scenarios(0).pass());
  EXPECT_TRUE(report.scenarios(1).pass());
  EXPECT_FALSE(report.pass());
  EXPECT_THAT(FormatReport(report), HasSubstr("result: FAIL"));
}

TEST(BuildReport, PlansAgreeOnEqualSamples) {
  const proto::RunReport report = BuildReport(TwoPlans(), Results(0), 1);
  ASSERT_EQ(report.agreement_size(), 1);
  const proto::PlanAgreement& a = report.agreement(0);
  EXPECT_EQ(a.plan(), "dp2");
  EXPECT_EQ(a.reference(), "tp2");
  EXPECT_EQ(a.compared(), 3);
  EXPECT_EQ(a.max_abs_diff(), 0);
  EXPECT_NEAR(a.bound(), 1e-3 + 1e-2 * 4, 1e-12);
  EXPECT_TRUE(a.pass());
  EXPECT_TRUE(report.pass());
  EXPECT_THAT(FormatReport(report), HasSubstr("AGREE"));
  // 90 + 120 MiB.
  EXPECT_THAT(FormatReport(report), HasSubstr("peak RSS 120 MiB per rank (largest), 0.21 GiB summed"));
  // The qkv row: 250 ns = 0.250 us, host 7 ms, 7 MiB fresh.
  EXPECT_THAT(FormatReport(report), ::testing::ContainsRegex("qkv +0\\.250 +7\\.0 +7\\.0 "));
  EXPECT_THAT(FormatReport(report), HasSubstr("fresh (MiB)"));
}

TEST(BuildReport, PlansAgreeWithinAtolPlusRtolTimesMaxReference) {
  const proto::RunReport report = BuildReport(TwoPlans(), Results(0.04f), 1);  // bound 0.041
  EXPECT_TRUE(report.agreement(0).pass());
  EXPECT_TRUE(report.pass());
}

TEST(BuildReport, PlansDifferBeyondAtolPlusRtolTimesMaxReference) {
  const proto::RunReport report = BuildReport(TwoPlans(), Results(0.05f), 1);  // bound 0.041
  const proto::PlanAgreement& a = report.agreement(0);
  EXPECT_NEAR(a.max_abs_diff(), 0.05, 1e-6);
  EXPECT_FALSE(a.pass());
  EXPECT_FALSE(report.pass());  // every phase passed; the disagreement alone fails the run
  EXPECT_TRUE(report.scenarios(0).pass());
  EXPECT_TRUE(report.scenarios(1).pass());
  EXPECT_THAT(FormatReport(report), HasSubstr("layer output dp2 vs tp2"));
  EXPECT_THAT(FormatReport(report), HasSubstr("DIFFER"));
}

TEST(BuildReport, OnePlanHasNoAgreementCheck) {
  ResolvedScenario sc = TwoPlans();
  sc.plans.pop_back();
  EXPECT_EQ(BuildReport(sc, Results(1.0f), 1).agreement_size(), 0);
}

}  // namespace
}  // namespace nkisim::launcher
