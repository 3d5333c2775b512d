// `nkisim sweep` end to end, as a user runs it: the small 8-rank sweep runs every point (one
// `nkisim run` job per shape), writes a CSV with a row per point and a column per phase, the JSON,
// the verdict and both plots as valid PNG and SVG; --resume runs nothing that is recorded and only
// what is not; a job that fails is rerun point by point, so the failing points are recorded with
// their own errors and the others with their results; timing-only gives the functional times.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/testing/files.h"
#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using nkisim::testing::CommandResult;
using nkisim::testing::ReadFile;

const std::string kSource = NKISIM_SOURCE_DIR;

// A fresh directory for one test's outputs.
std::string FreshDir(const std::string& name) {
  const std::string dir = nkisim::testing::TempPath("nkisim_sweep_e2e_", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

CommandResult Sweep(const std::string& file, const std::string& flags, int timeout_s = 240) {
  return nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + " sweep " + file + " " + flags, timeout_s);
}

// The CSV as rows of named cells (no quoted commas in the cells these tests read).
struct Table {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
};
Table ReadCsv(const std::string& path) {
  Table t;
  std::istringstream in(ReadFile(path));
  std::string line;
  const auto split = [](const std::string& l) {
    std::vector<std::string> cells(1);
    bool quoted = false;
    for (char c : l) {
      if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        cells.emplace_back();
      } else {
        cells.back() += c;
      }
    }
    return cells;
  };
  if (!std::getline(in, line)) return t;
  t.header = split(line);
  while (std::getline(in, line)) {
    const std::vector<std::string> cells = split(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < cells.size() && i < t.header.size(); ++i) row[t.header[i]] = cells[i];
    EXPECT_EQ(cells.size(), t.header.size()) << line;
    t.rows.push_back(row);
  }
  return t;
}

// Width and height from a PNG's IHDR, after checking its signature.
std::pair<int, int> PngSize(const std::string& path) {
  const std::string png = ReadFile(path);
  if (png.size() < 24 || png.substr(0, 8) != std::string("\x89PNG\r\n\x1a\n", 8) || png.substr(12, 4) != "IHDR") {
    ADD_FAILURE() << path << " is not a PNG";
    return {0, 0};
  }
  const auto be = [&](size_t at) {
    return (static_cast<unsigned char>(png[at]) << 24) | (static_cast<unsigned char>(png[at + 1]) << 16) |
           (static_cast<unsigned char>(png[at + 2]) << 8) | static_cast<unsigned char>(png[at + 3]);
  };
  return {be(16), be(20)};
}

// An SVG that is balanced XML-ish text: starts with a declaration or <svg, ends with </svg>, has
// as many element openings as closings.
void ExpectSvg(const std::string& path, int width, int height, const std::vector<std::string>& texts) {
  const std::string svg = ReadFile(path);
  ASSERT_FALSE(svg.empty()) << path;
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("width=\"" + std::to_string(width) + "\" height=\"" + std::to_string(height) + "\""));
  EXPECT_NE(svg.rfind("</svg>"), std::string::npos);
  EXPECT_GT(svg.rfind("</svg>"), svg.size() - 16);
  for (const std::string& t : texts) EXPECT_THAT(svg, HasSubstr(">" + t + "<")) << path << ": " << t;
}

TEST(SweepE2eTest, SmallSweepWritesTableVerdictPlotsAndResumes) {
  const std::string dir = FreshDir("small");
  const std::string out = dir + "/small";
  const std::string sweep = kSource + "/configs/sweeps/small_example.textproto";
  const CommandResult r = Sweep(sweep, "--functional --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("8 points, 8 to run in 4 jobs (0 reused), functional"));
  EXPECT_THAT(r.output, HasSubstr("job 4/4 B=8 L=256 (2 plans, 8 ranks): ok"));
  EXPECT_THAT(r.output, HasSubstr("8/8 points, 0 failed"));

  // The table: a row per point, a column per phase; the attention-DP plan alone has the shards.
  const Table t = ReadCsv(out + ".csv");
  ASSERT_EQ(t.rows.size(), 8u) << ReadFile(out + ".csv");
  for (const char* column : {"point", "plan", "tp", "attention_dp", "batch", "kv_length", "qkv_us", "batch_shard_us",
                             "attention_us", "unshard_us", "o_proj_us", "all_reduce_us", "step_us", "tokens_per_s",
                             "kv_cache_mib_per_rank", "weights_mib_per_rank", "all_reduce_algorithm", "status",
                             "error", "mode"}) {
    EXPECT_THAT(t.header, ::testing::Contains(column));
  }
  std::map<std::string, std::map<std::string, double>> kv;  // shape -> plan -> KV MiB
  for (const auto& row : t.rows) {
    SCOPED_TRACE(row.at("point"));
    EXPECT_EQ(row.at("status"), "ok");
    EXPECT_EQ(row.at("mode"), "functional");
    EXPECT_EQ(row.at("error"), "");
    const double step = std::stod(row.at("step_us"));
    EXPECT_GT(step, 0);
    double phases = 0;
    for (const char* p : {"qkv_us", "batch_shard_us", "attention_us", "unshard_us", "o_proj_us",
                          "all_reduce_us", "mlp_us", "mlp_all_reduce_us", "residual_us"}) {
      if (!row.at(p).empty()) phases += std::stod(row.at(p));
    }
    EXPECT_NEAR(phases, step, 0.01);  // one step: the phases add up to it
    // step_us is printed to 1 ns: tokens / s from it agree to that rounding.
    EXPECT_NEAR(std::stod(row.at("tokens_per_s")), std::stod(row.at("batch")) * 1e6 / step,
                2e-5 * std::stod(row.at("tokens_per_s")));
    EXPECT_THAT(row.at("all_reduce_algorithm"), HasSubstr("all_reduce:"));
    const bool dp = row.at("plan") == "tp4xdp2";
    EXPECT_EQ(row.at("attention_dp"), dp ? "2" : "1");
    EXPECT_EQ(row.at("batch_shard_us").empty(), !dp);
    EXPECT_EQ(row.at("unshard_us").empty(), !dp);
    kv[row.at("batch") + " " + row.at("kv_length")][row.at("plan")] = std::stod(row.at("kv_cache_mib_per_rank"));
  }
  ASSERT_EQ(kv.size(), 4u);
  for (const auto& [shape, plans] : kv) {
    // G = 2 attends one KV head for B / 2 rows: half the cache of tp8's all B rows.
    EXPECT_NEAR(plans.at("tp4xdp2") * 2, plans.at("tp8"), 0.01) << shape;
  }
  // The cache grows with B x L: B 8, L 256 holds 4x B 4, L 128.
  EXPECT_NEAR(kv.at("8 256").at("tp8"), 4 * kv.at("4 128").at("tp8"), 0.01);

  const nlohmann::json json = nlohmann::json::parse(ReadFile(out + ".json"));
  ASSERT_EQ(json["points"].size(), 8u);
  EXPECT_EQ(json["workload"], "decode");
  for (const auto& p : json["points"]) {
    EXPECT_EQ(p["status"], "ok");
    EXPECT_EQ(p["fingerprint"].get<std::string>().size(), 16u);
    EXPECT_TRUE(p["phase_us"].contains("attention"));
  }

  const std::string verdict = ReadFile(out + ".verdict.txt");
  EXPECT_THAT(r.output, HasSubstr(verdict));  // printed too
  for (const char* shape : {"B=4 L=128: ", "B=4 L=256: ", "B=8 L=128: ", "B=8 L=256: "}) {
    EXPECT_THAT(verdict, HasSubstr(shape));
  }
  EXPECT_THAT(verdict, HasSubstr("is fastest"));
  EXPECT_THAT(verdict, HasSubstr("8 points, 8 ok, 0 failed"));
  EXPECT_THAT(verdict, HasSubstr("fastest plan: "));

  // The plots: valid PNG at the sizes of the script, SVG with every plan's series and phase.
  EXPECT_EQ(PngSize(out + ".pareto.png"), std::make_pair(1200, 800));
  EXPECT_EQ(PngSize(out + ".phases.png"), std::make_pair(1200, 800));
  ExpectSvg(out + ".pareto.svg", 1200, 800, {"tp8", "tp4xdp2", "Pareto front of a shape"});
  ExpectSvg(out + ".phases.svg", 1200, 800, {"tp8", "tp4xdp2", "qkv", "batch_shard", "all_reduce", "B=8 L=256"});

  // Every job's scenario, report and log under <out>.points/.
  for (const char* job : {"job000", "job001", "job002", "job003"}) {
    EXPECT_TRUE(std::filesystem::exists(out + ".points/" + job + ".textproto")) << job;
    EXPECT_THAT(ReadFile(out + ".points/" + job + ".log"), HasSubstr("result: PASS")) << job;
  }

  // --resume: every point is recorded, so nothing runs: no job's log comes back.
  const std::string csv = ReadFile(out + ".csv");
  const std::vector<std::string> logs = {"job000", "job001", "job002", "job003"};
  for (const std::string& job : logs) std::filesystem::remove(out + ".points/" + job + ".log");
  const CommandResult again = Sweep(sweep, "--functional --resume --out " + out);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("8 points, 0 to run in 0 jobs (8 reused)"));
  EXPECT_THAT(again.output, Not(HasSubstr("job 1/")));
  for (const std::string& job : logs) EXPECT_FALSE(std::filesystem::exists(out + ".points/" + job + ".log")) << job;
  EXPECT_EQ(ReadFile(out + ".csv"), csv);
  EXPECT_TRUE(std::filesystem::exists(out + ".pareto.png"));

  // A point recorded as failed runs again, alone in its job (job002: B 8, L 128); the others are
  // kept.
  nlohmann::json edited = json;
  edited["points"][5]["status"] = "failed";
  std::ofstream(out + ".json") << edited.dump(2);
  const CommandResult rerun = Sweep(sweep, "--functional --resume --out " + out);
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  EXPECT_THAT(rerun.output, HasSubstr("8 points, 1 to run in 1 job (7 reused)"));
  EXPECT_THAT(rerun.output, HasSubstr("job 1/1 B=8 L=128 (1 plan, 8 ranks): ok"));
  for (const std::string& job : logs) {
    EXPECT_EQ(std::filesystem::exists(out + ".points/" + job + ".log"), job == "job002") << job;
  }
  const std::string job002 = ReadFile(out + ".points/job002.textproto");
  EXPECT_EQ(job002.find("plans {"), job002.rfind("plans {"));  // one plan: tp4xdp2
  EXPECT_THAT(job002, HasSubstr("attention_dp: 2"));
  const Table resumed = ReadCsv(out + ".csv");
  EXPECT_EQ(resumed.rows.at(5).at("status"), "ok");
  EXPECT_EQ(resumed.rows.at(5).at("step_us"), t.rows.at(5).at("step_us"));  // deterministic
  EXPECT_EQ(resumed.rows.at(4).at("log"), t.rows.at(4).at("log"));          // kept, not rerun

  // A changed base makes the recorded points stale: they run again.
  const std::string changed = dir + "/changed.textproto";
  std::string text = ReadFile(sweep);
  ASSERT_NE(text.find("seed: 11"), std::string::npos) << sweep;
  std::ofstream(changed) << text.replace(text.find("seed: 11"), 8, "seed: 12");
  const CommandResult stale = Sweep(changed, "--functional --resume --no-plots --out " + out);
  ASSERT_EQ(stale.exit_code, 0) << stale.output;
  EXPECT_THAT(stale.output, HasSubstr("8 points, 8 to run in 4 jobs (0 reused)"));
}

// Rank 1 throws in batch_shard: every job (tp8 and tp4xdp2 side by side) fails; its points run
// one by one, so tp8 gets its result and tp4xdp2 its own error; the sweep goes on and exits 1.
TEST(SweepE2eTest, AFailingJobIsRerunPointByPointAndTheSweepGoesOn) {
  const std::string dir = FreshDir("failing");
  const std::string file = dir + "/failing.textproto";
  std::ofstream(file) << "base { model { hidden: 1024 n_q_heads: 8 n_kv_heads: 2 d_head: 64 intermediate: 1024 } kv_length: 128\n"
                         "  fault { kind: THROW rank: 1 phase: \"batch_shard\" } control { stall_timeout_s: 20 } }\n"
                         "plans { tp: 8 } plans { tp: 8 attention_dp: 2 } batch: [4, 8]\n";
  const std::string out = dir + "/failing";
  const CommandResult r = Sweep(file, "--functional --out " + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("running its points one by one"));
  EXPECT_THAT(r.output, HasSubstr("2 of 4 points failed"));
  EXPECT_THAT(r.output, HasSubstr("job 2/2 B=8 L=128 (2 plans, 8 ranks): 1 failed"));
  const Table t = ReadCsv(out + ".csv");
  ASSERT_EQ(t.rows.size(), 4u);
  for (const auto& row : t.rows) {
    SCOPED_TRACE(row.at("point"));
    if (row.at("plan") == "tp8") {
      EXPECT_EQ(row.at("status"), "ok");
      EXPECT_GT(std::stod(row.at("step_us")), 0);
      EXPECT_THAT(row.at("log"), HasSubstr(".tp8.log"));  // its own run
    } else {
      EXPECT_EQ(row.at("status"), "failed");
      EXPECT_THAT(row.at("error"), HasSubstr("exit 17: rank 1 in phase tp4xdp2/batch_shard"));
      EXPECT_THAT(row.at("error"), HasSubstr("injected fault"));
      EXPECT_EQ(row.at("step_us"), "");
    }
  }
  const std::string verdict = ReadFile(out + ".verdict.txt");
  EXPECT_THAT(verdict, HasSubstr("4 points, 2 ok, 2 failed"));
  EXPECT_THAT(verdict, HasSubstr("B=4 L=128: tp8 (the only plan with a result)"));
  EXPECT_THAT(verdict, HasSubstr("tp4xdp2 FAILED (exit 17: rank 1 in phase tp4xdp2/batch_shard"));
  // The plots draw the points that ran.
  ExpectSvg(out + ".pareto.svg", 1200, 800, {"tp8"});
  EXPECT_THAT(ReadFile(out + ".pareto.svg"), Not(HasSubstr(">tp4xdp2<")));
}

// --timing-only (the default) gives the simulated times of the functional mode, point by point.
TEST(SweepE2eTest, TimingOnlyGivesTheFunctionalTimes) {
  const std::string dir = FreshDir("timing");
  const std::string file = dir + "/one_shape.textproto";
  std::ofstream(file) << "base { model { hidden: 1024 n_q_heads: 8 n_kv_heads: 2 d_head: 64 intermediate: 1024 } batch: 8 "
                         "kv_length: 200 }\nplans { tp: 8 } plans { tp: 8 attention_dp: 2 }\n";
  const CommandResult functional = Sweep(file, "--functional --no-plots --out " + dir + "/functional");
  ASSERT_EQ(functional.exit_code, 0) << functional.output;
  const CommandResult timing = Sweep(file, "--no-plots --out " + dir + "/timing");
  ASSERT_EQ(timing.exit_code, 0) << timing.output;
  EXPECT_THAT(timing.output, HasSubstr("2 points, 2 to run in 1 job (0 reused), timing-only"));
  const Table f = ReadCsv(dir + "/functional.csv"), t = ReadCsv(dir + "/timing.csv");
  ASSERT_EQ(f.rows.size(), 2u);
  ASSERT_EQ(t.rows.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(t.rows[i].at("mode"), "timing-only");
    for (const char* column : {"step_us", "qkv_us", "attention_us", "all_reduce_us", "kv_cache_mib_per_rank"}) {
      EXPECT_EQ(t.rows[i].at(column), f.rows[i].at(column)) << column;
    }
  }
}

}  // namespace
