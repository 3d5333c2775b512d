// `nkisim sweep` as a user runs it, refusing: a bad sweep file, a point that does not validate, a
// profile that cannot be read, an algorithm the groups cannot run or a missing gnuplot ends with
// exit 14 and a message naming the field, the value and the rule, before any point runs: no
// output file, no point directory, no log.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/testing/files.h"
#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;

using nkisim::testing::CommandResult;

const std::string kSource = NKISIM_SOURCE_DIR;

const char* kBase =
    "base { model { hidden: 1024 n_q_heads: 8 n_kv_heads: 2 d_head: 64 intermediate: 1024 } batch: 4 kv_length: 128 }\n";

struct Refusal {
  CommandResult result;
  std::string out;  // the output prefix the sweep was given
};

// Writes the sweep, runs `nkisim sweep` on it with --out in a fresh directory.
Refusal Sweep(const std::string& name, const std::string& text, const std::string& flags = "") {
  const std::string dir = nkisim::testing::TempPath("nkisim_sweep_cli_", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/sweep.textproto";
  std::ofstream(file) << text;
  const std::string out = dir + "/out";
  return {nkisim::testing::RunCommand(
              std::string(NKISIM_BINARY) + " sweep " + file + " --out " + out + " --functional " + flags, 20),
          out};
}

// Nothing was run or written: no table, no results, no points directory.
void ExpectNothingRan(const Refusal& r) {
  for (const char* suffix : {".csv", ".json", ".verdict.txt", ".points", ".pareto.png", ".plots.gp"}) {
    EXPECT_FALSE(std::filesystem::exists(r.out + suffix)) << r.out << suffix;
  }
}

TEST(SweepCliTest, BadSweepsAreRefusedBeforeAnyPointRuns) {
  const struct {
    const char* name;
    std::string text;
    std::string message;
  } cases[] = {
      {"no_plans", kBase, "plans: none given; give the plans axis"},
      {"unknown_field", std::string(kBase) + "plans { tp: 8 tpp: 2 }",
       "sweep.textproto:2:18: Message type \"nkisim.proto.Plan\" has no field named \"tpp\""},
      {"bad_point", std::string(kBase) + "plans { tp: 8 } plans { tp: 8 attention_dp: 4 } batch: [8, 6]",
       "plan 'tp2xdp4': attention_dp: 4 must divide batch (6): each of the G ranks attends B / G rows\n"
       "    at point plan=tp2xdp4 batch=6 kv_length=128 lnc=2 algorithm=auto profile=trn2"},
      {"bad_profile", std::string(kBase) + "plans { tp: 8 } hardware_profile: [\"/nonexistent/p.textproto\"]",
       "hardware_profile: '/nonexistent/p.textproto': /nonexistent/p.textproto: cannot open"},
      {"algorithm", std::string(kBase) + "plans { tp: 8 } algorithm: [\"mesh\", \"hierarchical\"]",
       "algorithm: 'hierarchical' cannot run all_reduce on the tp groups of plan 'tp8'"},
      {"empty", "", "base: none given"},
  };
  for (const auto& c : cases) {
    const Refusal r = Sweep(c.name, c.text);
    EXPECT_EQ(r.result.exit_code, 14) << c.name << ":\n" << r.result.output;  // 10 + kBadConfig
    EXPECT_THAT(r.result.output, HasSubstr("nkisim: bad config: ")) << c.name;
    EXPECT_THAT(r.result.output, HasSubstr(c.message)) << c.name;
    EXPECT_THAT(r.result.output, ::testing::Not(HasSubstr("job 1/"))) << c.name;  // no progress line
    ExpectNothingRan(r);
  }
}

TEST(SweepCliTest, MissingGnuplotIsRefusedBeforeAnyPointRuns) {
  const std::string text = std::string(kBase) + "plans { tp: 8 } plans { tp: 8 attention_dp: 2 }";
  const Refusal r = Sweep("gnuplot", text, "--gnuplot /nonexistent/gnuplot");
  EXPECT_EQ(r.result.exit_code, 14) << r.result.output;
  EXPECT_THAT(r.result.output, HasSubstr("gnuplot: '/nonexistent/gnuplot' not found on PATH; the plots need "
                                         "it: install the Debian package gnuplot-nox"));
  ExpectNothingRan(r);
}

TEST(SweepCliTest, UnwritableOutputAndUsage) {
  const std::string file = nkisim::testing::TempPath("nkisim_sweep_cli_", "ok.textproto");
  std::ofstream(file) << kBase << "plans { tp: 8 }";
  const CommandResult r = nkisim::testing::RunCommand(
      std::string(NKISIM_BINARY) + " sweep " + file + " --functional --out /nonexistent/dir/out", 20);
  EXPECT_EQ(r.exit_code, 11) << r.output;  // CheckWritable: invalid argument
  EXPECT_THAT(r.output, HasSubstr("--out '/nonexistent/dir/out.csv'"));
  EXPECT_EQ(nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + " sweep", 20).exit_code, 2);
  const CommandResult missing =
      nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + " sweep /nonexistent/sweep.textproto", 20);
  EXPECT_EQ(missing.exit_code, 14);
  EXPECT_THAT(missing.output, HasSubstr("/nonexistent/sweep.textproto: cannot open sweep file"));
}

TEST(SweepCliTest, ShippedSweepsPassTheChecks) {
  // --gnuplot to a missing program: everything else checked, then refused, so no point runs.
  for (const char* sweep : {"decode_plans.textproto", "small_example.textproto"}) {
    const CommandResult r = nkisim::testing::RunCommand(
        std::string(NKISIM_BINARY) + " sweep " + kSource + "/configs/sweeps/" + sweep +
            " --out /tmp/nkisim_sweep_cli_shipped --gnuplot /nonexistent/gnuplot",
        20);
    EXPECT_EQ(r.exit_code, 14) << sweep << r.output;
    EXPECT_THAT(r.output, HasSubstr("gnuplot-nox")) << sweep;
    EXPECT_THAT(r.output, ::testing::Not(HasSubstr("problem"))) << sweep;
  }
  // The predict sweep names its models relative to the source tree, as a user runs it there.
  const CommandResult p = nkisim::testing::RunCommand(
      "env -C " + kSource + " " + std::string(NKISIM_BINARY) +
          " sweep configs/sweeps/predict_example.textproto --out /tmp/nkisim_sweep_cli_shipped_predict "
          "--gnuplot /nonexistent/gnuplot",
      60);
  EXPECT_EQ(p.exit_code, 14) << p.output;
  EXPECT_THAT(p.output, HasSubstr("gnuplot-nox"));
  EXPECT_THAT(p.output, ::testing::Not(HasSubstr("problem")));
}

}  // namespace
