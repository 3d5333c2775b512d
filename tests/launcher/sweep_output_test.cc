// The outputs of a sweep (launcher/sweep/sweep_output.h, plots.h) from results made up here: the
// CSV has a column per phase and a row per point (failed and pending ones too), the JSON reads
// back as what --resume needs, the verdict names the fastest plan of each shape with the others'
// ratios and memory, and gnuplot draws both plots at the sizes the header promises.
#include "launcher/sweep/sweep_output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "launcher/sweep/plots.h"
#include "runtime/error.h"
#include "tests/testing/error_helpers.h"
#include "tests/testing/files.h"

namespace nkisim::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kSource = NKISIM_SOURCE_DIR;

// One CSV record per line (no line breaks inside fields, as SweepCsv writes them).
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> row(1);
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        row.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        row.emplace_back();
      } else {
        row.back() += c;
      }
    }
    rows.push_back(row);
  }
  return rows;
}

// A result as a report would give it: tp8-like plans run 4 phases, attention-DP plans 6.
PointResult Made(const SweepPoint& p, double step_us, double kv_mib) {
  PointResult r;
  r.key = p.key;
  r.fingerprint = p.fingerprint;
  r.mode = "functional";
  r.ok = true;
  r.log = "/tmp/log";
  r.has_times = true;
  r.phase_us = {{"qkv", 8}};
  if (p.attention_dp > 1) r.phase_us.emplace_back("batch_shard", 8.5);
  r.phase_us.emplace_back("attention", 4);
  if (p.attention_dp > 1) r.phase_us.emplace_back("unshard", 7.5);
  r.phase_us.emplace_back("o_proj", 3);
  double sum = 0;
  for (const auto& [phase, us] : r.phase_us) sum += us;
  r.phase_us.emplace_back("all_reduce", step_us - sum);
  r.phase_algorithm["all_reduce"] = "all_reduce:mesh";
  if (p.attention_dp > 1) r.phase_algorithm["batch_shard"] = "all_gather:mesh";
  r.step_us = step_us;
  r.kv_cache_mib = kv_mib;
  r.weights_mib = 0.5;
  r.host_s = 0.25;
  r.job_wall_s = 1.5;
  return r;
}

struct Fixture {
  ResolvedSweep sweep = LoadSweep(kSource + "/configs/sweeps/small_example.textproto");
  SweepResults results;
  Fixture() {
    results.resize(sweep.points.size());
    for (const SweepPoint& p : sweep.points) {
      // tp4xdp2 (odd points) is faster in shape 0 only; its KV cache is half of tp8's.
      const double step = p.attention_dp > 1 ? (p.shape == 0 ? 200.0 : 330.0) : 300.0 + p.shape;
      results[p.index] = Made(p, step, 0.125 * (1 + p.shape) / (p.attention_dp > 1 ? 2 : 1));
    }
    results[5]->ok = false;
    results[5]->error = "exit 17: rank 1 in phase batch_shard: \"injected\", fault";
    results[7].reset();  // not run yet
  }
};

TEST(SweepOutputTest, ResultPhasesMergesThePlansPhasesInReportOrder) {
  const Fixture f;
  EXPECT_THAT(ResultPhases(f.results),
              ElementsAre("qkv", "batch_shard", "attention", "unshard", "o_proj", "all_reduce"));
  SweepResults steps(1);
  steps[0].emplace();
  steps[0]->phase_us = {{"qkv[1]", 1}, {"attention[1]", 1}, {"qkv[2]", 1}, {"attention[2]", 1}};
  EXPECT_THAT(ResultPhases(steps), ElementsAre("qkv[1]", "attention[1]", "qkv[2]", "attention[2]"));
}

TEST(SweepOutputTest, CsvHasAColumnPerPhaseAndARowPerPoint) {
  const Fixture f;
  const auto rows = ParseCsv(SweepCsv(f.sweep, f.results));
  ASSERT_EQ(rows.size(), 9u);
  EXPECT_THAT(rows[0],
              ElementsAre("point", "plan", "tp", "attention_dp", "lnc", "instances", "replicas", "workload",
                          "batch", "kv_length", "algorithm", "profile", "qkv_us", "batch_shard_us",
                          "attention_us", "unshard_us", "o_proj_us", "all_reduce_us", "step_us",
                          "tokens_per_s", "kv_cache_mib_per_rank", "weights_mib_per_rank",
                          "batch_shard_algorithm", "all_reduce_algorithm", "status", "error", "mode",
                          "host_s", "job_wall_s", "log"));
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < rows[0].size(); ++i) col[rows[0][i]] = i;
  for (size_t r = 1; r < rows.size(); ++r) ASSERT_EQ(rows[r].size(), rows[0].size()) << r;
  const auto& tp8 = rows[1];  // point 0: tp8, B 4, L 128
  EXPECT_EQ(tp8[col["point"]], f.sweep.points[0].key);
  EXPECT_EQ(tp8[col["plan"]], "tp8");
  EXPECT_EQ(tp8[col["batch_shard_us"]], "");  // a G = 1 plan has no batch shard
  EXPECT_EQ(tp8[col["step_us"]], "300.000");
  EXPECT_EQ(tp8[col["tokens_per_s"]], "13333.3");  // 4 rows x 1e6 / 300 us
  EXPECT_EQ(tp8[col["all_reduce_us"]], "285.000");
  EXPECT_EQ(tp8[col["all_reduce_algorithm"]], "all_reduce:mesh");
  EXPECT_EQ(tp8[col["status"]], "ok");
  const auto& dp = rows[2];
  EXPECT_EQ(dp[col["plan"]], "tp4xdp2");
  EXPECT_EQ(dp[col["attention_dp"]], "2");
  EXPECT_EQ(dp[col["batch_shard_us"]], "8.500");
  EXPECT_EQ(dp[col["kv_cache_mib_per_rank"]], "0.062");
  const auto& failed = rows[6];
  EXPECT_EQ(failed[col["status"]], "failed");
  EXPECT_EQ(failed[col["error"]], f.results[5]->error);  // quotes and commas survive
  const auto& pending = rows[8];
  EXPECT_EQ(pending[col["status"]], "pending");
  EXPECT_EQ(pending[col["step_us"]], "");
  EXPECT_EQ(pending[col["batch"]], "8");
}

TEST(SweepOutputTest, TokensPerSecondCountsPromptTokensForPrefill) {
  const ResolvedSweep prefill = ResolveSweep(
      "base { workload: \"prefill\" model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 128 intermediate: 1024 } batch: 2 }\n"
      "plans { tp: 4 replicas: 2 } seq_len: [128, 256]\n",
      "p.textproto");
  ASSERT_EQ(prefill.points.size(), 2u);
  EXPECT_STREQ(prefill.length_axis(), "seq_len");
  EXPECT_EQ(prefill.shapes[1].label, "B=2 S=256");
  PointResult r;
  r.has_times = true;
  r.step_us = 1000;
  // B 2 x replicas 2 x S 256 tokens in 1 ms.
  EXPECT_DOUBLE_EQ(TokensPerSecond(prefill, prefill.points[1], r), 2 * 2 * 256 * 1e3);
  EXPECT_THAT(ParseCsv(SweepCsv(prefill, SweepResults(2)))[0], ::testing::Contains("seq_len"));
}

TEST(SweepOutputTest, JsonReadsBackForResume) {
  const Fixture f;
  const std::string path = testing::TempPath("nkisim_sweep_output_", "resume.json");
  std::ofstream(path) << SweepJson(f.sweep, f.results);
  const std::map<std::string, PointResult> read = ReadSweepJson(path);
  ASSERT_EQ(read.size(), 7u);  // the pending point is not a result
  const PointResult& r = read.at(f.sweep.points[1].key);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.fingerprint, f.sweep.points[1].fingerprint);
  EXPECT_EQ(r.mode, "functional");
  EXPECT_DOUBLE_EQ(r.step_us, 200);
  ASSERT_EQ(r.phase_us.size(), 6u);
  EXPECT_EQ(r.phase_us[1].first, "batch_shard");  // in report order, not sorted
  EXPECT_EQ(r.phase_algorithm.at("batch_shard"), "all_gather:mesh");
  EXPECT_FALSE(read.at(f.sweep.points[5].key).ok);
  EXPECT_EQ(read.at(f.sweep.points[5].key).error, f.results[5]->error);
  EXPECT_FALSE(read.contains(f.sweep.points[7].key));

  std::ofstream(path) << "{\"points\": [{\"status\": 3}]}";
  EXPECT_THAT(testing::ErrorMessageOf(ErrorCode::kBadConfig, [&] { ReadSweepJson(path); }),
              HasSubstr(path + ": not the JSON of a sweep's results"));
}

TEST(SweepOutputTest, VerdictNamesTheFastestPlanRatiosMemoryAndFailures) {
  const Fixture f;
  const std::string v = SweepVerdict(f.sweep, f.results);
  EXPECT_THAT(v, HasSubstr("8 points, 6 ok, 1 failed, 1 not run"));
  EXPECT_THAT(v, HasSubstr("B=4 L=128: tp4xdp2 is fastest, 200.000 us (20000.0 tok/s), 0.06 MiB KV/rank; "
                           "tp8 1.50x, 0.12 MiB\n"));
  EXPECT_THAT(v, HasSubstr("B=4 L=256: tp8 is fastest, 301.000 us (13289.0 tok/s), 0.25 MiB KV/rank; "
                           "tp4xdp2 1.10x, 0.12 MiB (least KV/rank: tp4xdp2, 2.0x less at 1.10x the time)"));
  EXPECT_THAT(v, HasSubstr("B=8 L=128: tp8 (the only plan with a result), 302.000 us (26490.1 tok/s), "
                           "0.38 MiB KV/rank; tp4xdp2 FAILED (exit 17: rank 1 in phase batch_shard"));
  EXPECT_THAT(v, HasSubstr("B=8 L=256: tp8 (the only plan with a result)"));
  EXPECT_THAT(v, HasSubstr("fastest plan: tp8 in 3 of 4 shapes (B=4 L=256, B=8 L=128, B=8 L=256); "
                           "tp4xdp2 in 1 of 4 shapes (B=4 L=128)"));
}

// The PNG's signature and IHDR size, big-endian at bytes 16 and 20.
std::pair<int, int> PngSize(const std::string& path) {
  const std::string png = testing::ReadFile(path);
  EXPECT_GE(png.size(), 24u) << path;
  if (png.size() < 24) return {0, 0};
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << path;
  EXPECT_EQ(png.substr(12, 4), "IHDR") << path;
  const auto be = [&](size_t at) {
    return (static_cast<unsigned char>(png[at]) << 24) | (static_cast<unsigned char>(png[at + 1]) << 16) |
           (static_cast<unsigned char>(png[at + 2]) << 8) | static_cast<unsigned char>(png[at + 3]);
  };
  return {be(16), be(20)};
}

TEST(SweepOutputTest, GnuplotDrawsBothPlotsAsPngAndSvg) {
  const Fixture f;
  const std::string dir = testing::TempPath("nkisim_sweep_plots", "");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<std::string> images = WritePlots(f.sweep, f.results, dir + "/small");
  ASSERT_EQ(images.size(), 4u);
  EXPECT_EQ(PngSize(dir + "/small.pareto.png"), std::make_pair(kParetoWidth, kParetoHeight));
  EXPECT_EQ(PngSize(dir + "/small.phases.png"), std::make_pair(PhasesPlotWidth(6, 4), kPhasesHeight));
  const std::string svg = testing::ReadFile(dir + "/small.pareto.svg");
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("width=\"1200\" height=\"800\""));
  EXPECT_THAT(svg, HasSubstr(">tp8<"));
  EXPECT_THAT(svg, HasSubstr(">tp4xdp2<"));
  const std::string bars = testing::ReadFile(dir + "/small.phases.svg");
  for (const char* phase : {"qkv", "batch_shard", "attention", "unshard", "o_proj", "all_reduce"}) {
    EXPECT_THAT(bars, HasSubstr(StrCat(">", phase, "<"))) << phase;
  }
  EXPECT_THAT(bars, HasSubstr(">B=8 L=256<"));
  // The data: only the 6 points that ran ok are drawn; the front of shape 0 runs from tp4xdp2
  // (least KV, fastest) alone.
  const std::string data = testing::ReadFile(dir + "/small.phases.dat");
  EXPECT_EQ(std::count(data.begin(), data.end(), '\n'), 1 + 6);
  EXPECT_THAT(testing::ReadFile(dir + "/small.front.dat"), HasSubstr("# B=4 L=128\n0.0625 200\n\n"));
  EXPECT_THAT(testing::ReadFile(dir + "/small.plots.gp"), HasSubstr("set logscale"));

  EXPECT_EQ(PhasesPlotWidth(8, 4), 1200);
  EXPECT_EQ(PhasesPlotWidth(36, 9), 300 + 36 * 45);
  EXPECT_EQ(PhasesPlotWidth(1000, 10), 4800);
}

TEST(SweepOutputTest, AMissingGnuplotNamesThePackage) {
  EXPECT_THAT(testing::ErrorMessageOf(ErrorCode::kBadConfig, [] { CheckGnuplot("/nonexistent/gnuplot"); }),
              HasSubstr("install the Debian package gnuplot-nox"));
  EXPECT_NO_THROW(CheckGnuplot());
}

}  // namespace
}  // namespace nkisim::launcher
