// nkisim calibrate's library half: reading nccom-test logs (and refusing malformed rows with
// file:line), recovering known parameters from rows the model itself generated, and lowering the
// error on the shipped published figures.
#include "collectives/calibration.h"
#include "collectives/algorithms.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "collectives/collective_cost.h"
#include "collectives/link_model.h"
#include "runtime/hardware_profile.h"
#include "tests/testing/error_helpers.h"

namespace nkisim::collectives {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::ErrorMessageOf;

const std::string kSource = NKISIM_SOURCE_DIR;

TEST(NccomTestLogTest, ReadsRunsRowsAndTheAlgorithmColumn) {
  const std::string text =
      "some banner text the tool printed\n"
      "$ nccom-test -r 8 --minbytes 1kb --maxbytes 64kb --stepfactor 64 allg\n"
      "     size(B)    count(elems)    type    time(us)    algbw(GB/s)    busbw(GB/s)\n"
      "        1024            1024   uint8        10.0           0.10           0.09\n"
      "       65536           65536   uint8        11.3           5.80           5.07\n"
      "Avg bus bandwidth:      2.58GB/s\n"
      "\n"
      "NEURON_RT_ROOT_COMM_ID=10.0.0.1:4444 /opt/bin/nccom-test --nworkers=16 allr --show-algorithm\r\n"
      "     size(B)    count(elems)    type    time(us)    algbw(GB/s)    busbw(GB/s)  algorithm\r\n"
      "     2097152         2097152   uint8         686           3.06           5.73    RDH\r\n"
      "    33554432        33554432   uint8        2750          12.20          22.88  KangaRing\r\n"
      "# ranks: 64 op: reduce_scatter nodes: 2\n"
      "     4096  1024  fp32  120  0.03  0.03  ring\n";
  const NccomTestLog log = ParseNccomTestLog(text, "a.log");
  ASSERT_EQ(log.rows.size(), 5u);
  EXPECT_TRUE(log.notes.empty());
  const CalibrationRow& first = log.rows[0];
  EXPECT_EQ(first.file, "a.log");
  EXPECT_EQ(first.line, 4);
  EXPECT_EQ(first.op, CollectiveOp::kAllGather);
  EXPECT_EQ(first.ranks, 8);
  EXPECT_EQ(first.nodes, 1);
  EXPECT_EQ(first.size_bytes, 1024);
  EXPECT_EQ(first.measured_us, 10.0);
  EXPECT_EQ(first.log_algorithm, "");
  EXPECT_EQ(log.rows[1].measured_us, 11.3);
  EXPECT_EQ(log.rows[2].op, CollectiveOp::kAllReduce);
  EXPECT_EQ(log.rows[2].ranks, 16);
  EXPECT_EQ(log.rows[2].line, 10);
  EXPECT_EQ(log.rows[2].log_algorithm, "rdh");
  EXPECT_EQ(log.rows[3].log_algorithm, "kangaring");
  EXPECT_EQ(log.rows[4].op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(log.rows[4].ranks, 64);
  EXPECT_EQ(log.rows[4].nodes, 2);
  EXPECT_EQ(log.rows[4].log_algorithm, "ring");
}

TEST(NccomTestLogTest, RunsOfOpsTheModelLacksAreSkippedWithANote) {
  const NccomTestLog log = ParseNccomTestLog(
      "nccom-test -r 2 sendrecv\n"
      "  size(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s)\n"
      "  1024 256 fp32 20 0.05 0.05\n"
      "  2048 512 fp32 21 0.10 0.10\n"
      "nccom-test -r 2 allr\n"
      "  1024 256 fp32 30 0.03 0.03\n",
      "s.log");
  ASSERT_EQ(log.rows.size(), 1u);
  EXPECT_EQ(log.rows[0].line, 6);
  ASSERT_EQ(log.notes.size(), 1u);
  EXPECT_THAT(log.notes[0], StartsWith("s.log:1: sendrecv run skipped (2 rows)"));
}

TEST(NccomTestLogTest, MalformedLinesAreRefusedWithFileAndLine) {
  const std::string run = "nccom-test -r 8 allg\nsize(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s)\n";
  struct Case {
    std::string text;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {run + "1024 1024 uint8 10.0 0.10\n", "bad.log:3: a result row has 6 columns"},
      {run + "1024 1024 uint8 10.0 0.10 0.09 mesh extra\n", "this one has 8"},
      {run + "1024 1024 uint8 ten 0.10 0.09\n", "bad.log:3: time(us) 'ten' (column 4) is not a number"},
      {run + "1024 1024 uint8 10us 0.10 0.09\n", "bad.log:3: time(us) '10us'"},
      {run + "1024 1024 uint8 nan 0.10 0.09\n", "bad.log:3: time(us) 'nan' (column 4) is not a finite number"},
      {run + "1024 1024 uint8 inf 0.10 0.09\n", "is not a finite number"},
      {run + "-1024 1024 uint8 10.0 0.10 0.09\n", "bad.log:3: size(B) -1024 must be in (0, 2^40]"},
      {run + "0 0 uint8 10.0 0.10 0.09\n", "bad.log:3: size(B) 0 must be in (0, 2^40]"},
      {run + "1024 1024 uint8 0 0.10 0.09\n", "bad.log:3: time(us) 0 must be > 0"},
      {run + "1024 1024 uint8 -3 0.10 0.09\n", "bad.log:3: time(us) -3 must be > 0"},
      {run + "1024 1024 8 10.0 0.10 0.09\n", "bad.log:3: type '8' (column 3) is a number"},
      {run + "1024 1024 uint8 10.0 0.10 0.09 tree\n", "bad.log:3: algorithm 'tree' (column 7) is not one of"},
      {run + "1024 1024 uint8 10.0 x 0.09\n", "bad.log:3: algbw(GB/s) 'x'"},
      {run + "33554432    Failure running neuron-bench - log file /tmp/x.log\n", "bad.log:3:"},
      {"# nothing yet\n1024 1024 uint8 10.0 0.10 0.09\n", "bad.log:2: a result row before any nccom-test command"},
      {"nccom-test allg\n", "bad.log:1: nccom-test command without -r N"},
      {"nccom-test -r 8\n", "bad.log:1: nccom-test command names no operation"},
      {"nccom-test -r 1 allg\n", "bad.log:1: rank count '1' must be an integer >= 2"},
      {"nccom-test -r eight allg\n", "bad.log:1: rank count 'eight'"},
      {"nccom-test -r 655554 allr\n", "bad.log:1: rank count 655554 must be at most 1024"},
      {"# ranks: 1025 op: allg\n", "bad.log:1: rank count 1025 must be at most 1024"},
      {"nccom-test -r 8 -N 3 allg\n", "bad.log:1: 8 ranks do not split evenly over 3 nodes"},
      {"nccom-test -r 8 allg allr\n", "bad.log:1: the command names two operations"},
      {"# ranks: 8 op: broadcast\n", "bad.log:1: operation 'broadcast' is not one of"},
      // A row its algorithm cannot have produced: the same class (exit 14) as an unknown name.
      {run + "1024 1024 uint8 10.0 0.10 0.09 Pairwise\n",
       "bad.log:3: algorithm 'Pairwise' (column 7) does not implement all_gather"},
      {run + "1024 1024 uint8 10.0 0.10 0.09 mesh_1step\n", "does not implement all_gather"},
      {run + "1e13 1024 uint8 10.0 0.10 0.09\n", "bad.log:3: size(B) 1e13 must be in (0, 2^40]"},
      {run + "1024 1024 uint8 1e13 0.10 0.09\n", "bad.log:3: time(us) 1e13 must be <= 1e12"},
  };
  for (const Case& c : cases) {
    const std::string message =
        ErrorMessageOf(ErrorCode::kBadConfig, [&] { ParseNccomTestLog(c.text, "bad.log"); });
    EXPECT_THAT(message, HasSubstr(c.fragment)) << c.text;
  }
}

TEST(NccomTestLogTest, MissingFileAndPerRankSizes) {
  EXPECT_THAT(ErrorMessageOf(ErrorCode::kBadConfig,
                             [] { LoadNccomTestLogs({"/nonexistent/x.log"}); }),
              HasSubstr("/nonexistent/x.log: cannot open nccom-test log"));
  EXPECT_EQ(PerRankBufferBytes(CollectiveOp::kAllGather, 524288, 32), 16384);
  EXPECT_EQ(PerRankBufferBytes(CollectiveOp::kAllReduce, 524288, 32), 524288);
  EXPECT_EQ(PerRankBufferBytes(CollectiveOp::kReduceScatter, 524288, 32), 524288);
}

TEST(NccomTestLogTest, ShippedTrn1LogPlacesTwoInstances) {
  const NccomTestLog log =
      LoadNccomTestLogs({kSource + "/configs/calibration/trn1-2instances.log"});
  ASSERT_EQ(log.rows.size(), 3u);
  EXPECT_EQ(log.rows[0].ranks, 64);
  EXPECT_EQ(log.rows[0].nodes, 2);
  const GroupPlacement g = CalibrationPlacement(64, 2, 1, Trn2Profile());
  ASSERT_EQ(g.size(), 64);
  EXPECT_EQ(g.instance(0), 0);
  EXPECT_EQ(g.instance(31), 0);
  EXPECT_EQ(g.instance(32), 1);
  EXPECT_EQ(g.chip[8], 1);   // 8 ranks per chip at lnc 1
  EXPECT_EQ(g.chip[32], 16);
}

// Rows the model itself gives under `truth`, for `op` forced to `algorithm`.
std::vector<CalibrationRow> SyntheticRows(CollectiveOp op, const std::string& algorithm,
                                          const std::vector<int>& ranks,
                                          const std::vector<double>& sizes,
                                          const HardwareProfile& truth) {
  std::vector<CalibrationRow> rows;
  for (int n : ranks) {
    for (double size : sizes) {
      CalibrationRow row;
      row.file = "synthetic";
      row.line = static_cast<int>(rows.size()) + 1;
      row.op = op;
      row.ranks = n;
      row.size_bytes = size;
      row.log_algorithm = algorithm;
      row.measured_us = ModelMicroseconds(row, 2, truth, algorithm);
      rows.push_back(row);
    }
  }
  return rows;
}

proto::CollectiveTuning Tuning(const std::string& op, const std::string& algorithm,
                               double step_latency_ns, double link_gbps, double fixed_ns) {
  proto::CollectiveTuning t;
  t.set_op(op);
  t.set_algorithm(algorithm);
  t.set_step_latency_ns(step_latency_ns);
  t.set_link_gbps(link_gbps);
  t.set_fixed_ns(fixed_ns);
  return t;
}

TEST(CalibrateTest, RecoversTheParametersThatGeneratedTheRows) {
  // DMA out of the way so the chip-to-chip transfers are link-bound both at the start and at the
  // truth; ring over 8, 16 and 32 ranks gives 7, 15 and 31 steps, so latency and fixed separate.
  HardwareProfile base = Trn2Profile();
  base.set_dma_engine_raw_gbps(5000);  // engines of 5000 GB/s, no descriptor cost
  base.set_dma_engine_gbps(5000);
  base.set_hbm_gbps_per_core(5000);
  HardwareProfile truth = base;
  *truth.add_collective_tuning() = Tuning("all_gather", "ring", 2300, 91, 17000);
  *truth.add_collective_tuning() = Tuning("all_reduce", "ring", 800, 140, 250000);
  const std::vector<double> sizes = {4096, 262144, 4194304, 67108864};
  std::vector<CalibrationRow> rows =
      SyntheticRows(CollectiveOp::kAllGather, "ring", {8, 16, 32}, sizes, truth);
  const std::vector<CalibrationRow> reduce =
      SyntheticRows(CollectiveOp::kAllReduce, "ring", {8, 16}, sizes, truth);
  rows.insert(rows.end(), reduce.begin(), reduce.end());

  CalibrationOptions options;
  options.logs = {"synthetic.log"};
  const CalibrationResult r = Calibrate(rows, base, options);
  ASSERT_EQ(r.fits.size(), 2u);
  const CalibrationFit& ag = r.fits[0];
  EXPECT_EQ(ag.op, CollectiveOp::kAllGather);
  EXPECT_EQ(ag.algorithm, "ring");
  EXPECT_EQ(ag.rows, 12);
  EXPECT_TRUE(ag.step_latency_ns.fitted && ag.link_gbps.fitted && ag.fixed_ns.fitted);
  EXPECT_NEAR(ag.step_latency_ns.after, 2300, 23);
  EXPECT_NEAR(ag.link_gbps.after, 91, 0.91);
  EXPECT_NEAR(ag.fixed_ns.after, 17000, 170);
  EXPECT_EQ(ag.step_latency_ns.before, 1500);  // the trn2 figures it started from
  EXPECT_EQ(ag.link_gbps.before, 256);
  EXPECT_TRUE(ag.converged);
  const CalibrationFit& ar = r.fits[1];
  EXPECT_EQ(ar.op, CollectiveOp::kAllReduce);
  EXPECT_NEAR(ar.step_latency_ns.after, 800, 8);
  EXPECT_NEAR(ar.link_gbps.after, 140, 1.4);
  EXPECT_NEAR(ar.fixed_ns.after, 250000, 2500);
  EXPECT_GT(r.geomean_before, 0.1);
  EXPECT_LT(r.geomean_after, 1e-3);
  for (const CalibrationRow& row : r.rows) {
    EXPECT_NEAR(row.after_us, row.measured_us, 1e-3 * row.measured_us) << row.line;
  }
  // The calibrated profile carries one entry per fit, named after the logs.
  int entries = 0;
  for (const proto::CollectiveTuning& t : r.profile.collective_tuning()) {
    if (t.source() == "nkisim calibrate synthetic.log") ++entries;
  }
  EXPECT_EQ(entries, 2);
  const CollectiveParams p = ResolveParams(r.profile, CollectiveOp::kAllGather, "ring");
  EXPECT_EQ(p.link_gbps, ag.link_gbps.after);
}

TEST(CalibrateTest, FewRowsFitFewerParametersAndSaySo) {
  HardwareProfile truth = Trn2Profile();
  *truth.add_collective_tuning() = Tuning("all_gather", "ring", 1500, 256, 9000);
  const std::vector<CalibrationRow> one =
      SyntheticRows(CollectiveOp::kAllGather, "ring", {8}, {4096}, truth);
  const CalibrationResult r = Calibrate(one, Trn2Profile(), {});
  ASSERT_EQ(r.fits.size(), 1u);
  EXPECT_TRUE(r.fits[0].fixed_ns.fitted);
  EXPECT_FALSE(r.fits[0].step_latency_ns.fitted);
  EXPECT_FALSE(r.fits[0].link_gbps.fitted);
  EXPECT_NEAR(r.fits[0].fixed_ns.after, 9000, 1e-6 * 9000);
  EXPECT_THAT(r.fits[0].notes, ::testing::Contains(HasSubstr("1 row fit at most 1 parameter")));

  // An entry the base already has for the pair is replaced, not added to; its figures are where
  // the fit starts.
  HardwareProfile tuned = Trn2Profile();
  *tuned.add_collective_tuning() = Tuning("all_gather", "ring", 1500, 256, 123);
  const CalibrationResult again = Calibrate(one, tuned, {});
  EXPECT_EQ(again.fits[0].fixed_ns.before, 123);
  EXPECT_NEAR(again.fits[0].fixed_ns.after, 9000, 1e-6 * 9000);
  int pair_entries = 0;
  for (const proto::CollectiveTuning& t : again.profile.collective_tuning()) {
    pair_entries += t.op() == "all_gather" && t.algorithm() == "ring";
  }
  EXPECT_EQ(pair_entries, 1);

  EXPECT_THAT(ErrorMessageOf(ErrorCode::kInvalidArgument,
                             [] {
                               CalibrationOptions o;
                               o.logs = {"a.log", "b.log"};
                               Calibrate({}, Trn2Profile(), o);
                             }),
              HasSubstr("calibrate: no rows to fit in a.log b.log"));
}

TEST(CalibrateTest, ShippedPublishedLogIsFittedBetter) {
  const std::string path = kSource + "/configs/calibration/nccom-test-published.log";
  const NccomTestLog log = LoadNccomTestLogs({path});
  ASSERT_EQ(log.rows.size(), 11u);
  CalibrationOptions options;
  options.logs = {path};
  const CalibrationResult r = Calibrate(log.rows, Trn2Profile(), options);
  EXPECT_LT(r.geomean_after, r.geomean_before);
  EXPECT_LT(r.geomean_after, 0.25);
  // The default trn2 profile is within 20% (ASTRA-sim's geomean |error|) of the published rows,
  // and calibration lowers it further.
  EXPECT_LE(r.abs_geomean_before, 0.20);
  EXPECT_LT(r.abs_geomean_after, r.abs_geomean_before);
  // Auto picks what the published --show-algorithm table names, row by row.
  int named = 0;
  for (const CalibrationRow& row : log.rows) {
    if (row.log_algorithm.empty()) continue;
    const double per_rank = PerRankBufferBytes(row.op, row.size_bytes, row.ranks);
    const CollectivePlan plan = PlanCollective(row.op, DefaultPlacement(row.ranks, 2, Trn2Profile()),
                                               per_rank, Trn2Profile(), "auto", Launch::kHost);
    EXPECT_EQ(plan.algorithm, row.log_algorithm) << row.size_bytes << " B on " << row.ranks << " ranks";
    ++named;
  }
  EXPECT_EQ(named, 6);
  EXPECT_EQ(r.profile.name(), "trn2-calibrated");
  for (const CalibrationFit& fit : r.fits) {
    EXPECT_GT(fit.link_gbps.after, 0) << fit.algorithm;
    EXPECT_GE(fit.fixed_ns.after, 0) << fit.algorithm;
    EXPECT_GE(fit.step_latency_ns.after, 0) << fit.algorithm;
  }
  // The algorithm column decides the fit groups: mesh, rdh and kangaring all_reduce.
  std::vector<std::string> groups;
  for (const CalibrationFit& fit : r.fits) groups.push_back(StrCat(OpName(fit.op), "/", fit.algorithm));
  EXPECT_THAT(groups, ::testing::IsSupersetOf({"all_reduce/mesh", "all_reduce/rdh",
                                                "all_reduce/kangaring"}));
}

TEST(CalibrateTest, ProfileTextLoadsBackAsTheSameProfile) {
  HardwareProfile p = Trn2Profile();
  p.set_collective_fixed_ns(0);  // a zero the trn2 defaults would otherwise put back
  p.set_name("calibrated");
  *p.add_collective_tuning() = Tuning("all_gather", "mesh", 1234.5, 77.25, 0);
  const std::string text = FormatProfileText(p, "written by a test\nsecond line");
  EXPECT_THAT(text, StartsWith("# written by a test\n# second line\n"));
  const HardwareProfile back = ParseHardwareProfile(text, "back.textproto");
  EXPECT_EQ(back.collective_fixed_ns(), 0);
  EXPECT_EQ(back.name(), "calibrated");
  EXPECT_EQ(back.collective_tuning_size(), p.collective_tuning_size());  // trn2's not doubled
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kAllReduce}) {
    for (const char* algorithm : {"mesh", "ring", "rdh"}) {
      const CollectiveParams a = ResolveParams(p, op, algorithm), b = ResolveParams(back, op, algorithm);
      EXPECT_EQ(a.step_latency_ns, b.step_latency_ns);
      EXPECT_EQ(a.link_gbps, b.link_gbps);
      EXPECT_EQ(a.fixed_ns, b.fixed_ns);
    }
  }
}

TEST(CalibrateTest, GeomeanError) {
  EXPECT_EQ(GeomeanError({}, {}), 0);
  EXPECT_NEAR(GeomeanError({2, 5}, {1, 10}), 1.0, 1e-12);  // |ln 2| and |ln 0.5|
  EXPECT_NEAR(GeomeanError({110}, {100}), 0.1, 1e-12);
}

}  // namespace
}  // namespace nkisim::collectives

namespace nkisim::collectives {
namespace {

// The profile check keeps its own list of algorithm names (runtime cannot depend on collectives):
// every row of the algorithm table must be accepted in a collective_tuning entry, and no other
// name, so the two lists cannot drift apart.
// The profile's table of what each tuned algorithm implements (runtime/hardware_profile.cc) is
// the algorithm table's `serves`, op by op: a row is accepted exactly when it can apply.
TEST(ProfileTuningAlgorithms, MatchTheAlgorithmTable) {
  ASSERT_EQ(TuningAlgorithmNames(), AlgorithmNames());
  for (const AlgorithmRow& row : AlgorithmTable()) {
    for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                            CollectiveOp::kAllReduce, CollectiveOp::kAllToAll}) {
      const std::string text = StrCat("collective_tuning { op: \"", OpName(op), "\" algorithm: \"",
                                      row.name, "\" fixed_ns: 1 }");
      if (row.serves(op)) {
        EXPECT_NO_THROW(ParseHardwareProfile(text, "p")) << text;
      } else {
        EXPECT_THAT(ErrorMessageOf(ErrorCode::kBadConfig, [&] { ParseHardwareProfile(text, "p"); }),
                    HasSubstr("so the row could never apply"))
            << text;
      }
    }
    EXPECT_NO_THROW(ParseHardwareProfile(
        StrCat("collective_tuning { algorithm: \"", row.name, "\" fixed_ns: 1 }"), "p"));
  }
  try {
    ParseHardwareProfile("collective_tuning { algorithm: \"ringg\" fixed_ns: 1 }", "p");
    ADD_FAILURE() << "an unknown algorithm name was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kBadConfig);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("].algorithm: 'ringg' is not one of"));
  }
}

}  // namespace
}  // namespace nkisim::collectives
