// --timing-only end to end: kernels, collectives and `nkisim run` give the same simulated times as
// the functional mode, event for event on the trace (the cost model may not look at data), while
// computing and checking nothing, and saying so. `nkisim run --timing-only` runs its ranks as
// threads of one process by default and as MPI processes with --mpirun-ranks: all three traces of
// one job must be identical.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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

std::string TempPath(const std::string& name) {
  return nkisim::testing::TempPath("nkisim_timing_only_", name);
}

const std::string kBinary = NKISIM_BINARY;

// The trace's events in file order (both modes write them in the same order).
nlohmann::json Events(const std::string& path) {
  const nlohmann::json trace = nlohmann::json::parse(ReadFile(path));
  return trace.is_object() ? trace.at("traceEvents") : trace;
}

// Event by event: the same instruction, engine, start, duration, bytes and operands.
void ExpectSameEvents(const nlohmann::json& functional, const nlohmann::json& timed,
                      const std::string& what) {
  ASSERT_GT(functional.size(), 10u) << what;
  ASSERT_EQ(functional.size(), timed.size()) << what;
  for (size_t i = 0; i < functional.size(); ++i) {
    ASSERT_EQ(functional[i], timed[i]) << what << ": event " << i << " differs";
  }
}

struct KernelCase {
  const char* name;
  const char* args;
};

// A grid over the four kernels and both of their variants, LNC 1 and 2, and the qkv MX paths.
const KernelCase kKernels[] = {
    {"qkv_tkg", "kernel qkv --b 4 --s 1 --h 1024 --nq 4 --nkv 1 --d 128"},
    {"qkv_tkg_lnc1", "kernel qkv --b 4 --s 1 --h 1024 --nq 4 --nkv 1 --d 128 --lnc 1"},
    {"qkv_cte_rope", "kernel qkv --b 1 --s 256 --h 512 --nq 2 --nkv 1 --d 128 --rope"},
    {"qkv_layernorm_bias", "kernel qkv --b 2 --s 128 --h 512 --nq 2 --nkv 1 --d 64 --norm layer "
                           "--bias --norm-bias --fused-add"},
    {"oproj_tkg", "kernel oproj --variant tkg --b 4 --n 2 --d 128 --s 1 --h 1024"},
    {"oproj_cte", "kernel oproj --variant cte --b 1 --n 2 --d 128 --s 256 --h 1024"},
    {"attention_tkg", "kernel attention --variant tkg --b 4 --g 8 --t 1025 --d 128"},
    {"attention_tkg_lnc1", "kernel attention --variant tkg --b 2 --g 4 --t 600 --d 128 --lnc 1"},
    {"attention_cte", "kernel attention --variant cte --b 1 --nq 2 --nkv 1 --s 384 --d 128"},
    {"mlp_tkg_static", "kernel mlp --variant tkg --b 24 --h 1024 --i 448 --quant static --bias"},
    {"mlp_cte_lnc1", "kernel mlp --variant cte --b 1 --s 200 --h 512 --i 320 --lnc 1 --residual "
                     "--store-fused-hidden --norm layer"},
    {"qkv_tkg_mx", "kernel qkv --b 4 --s 1 --h 2048 --nq 2 --nkv 1 --d 128 --quant mx "
                   "--h-transposed --profile " NKISIM_SOURCE_DIR "/configs/hardware/trn3.textproto"},
    {"oproj_cte_mx", "kernel oproj --variant cte --b 1 --n 2 --d 128 --s 256 --h 1024 --quant mx "
                     "--profile " NKISIM_SOURCE_DIR "/configs/hardware/trn3.textproto"},
    {"qkv_cte_mx", "kernel qkv --b 1 --s 256 --h 1024 --nq 2 --nkv 1 --d 128 --quant mx --norm "
                   "layer --profile " NKISIM_SOURCE_DIR "/configs/hardware/trn3.textproto"},
};

class KernelTimingOnly : public ::testing::TestWithParam<KernelCase> {};

TEST_P(KernelTimingOnly, SameTraceAsFunctional) {
  const KernelCase& c = GetParam();
  const std::string functional = TempPath(std::string(c.name) + ".functional.json");
  const std::string timed = TempPath(std::string(c.name) + ".timed.json");
  const std::string out_dir = TempPath(std::string(c.name) + "_out");
  const CommandResult f = nkisim::testing::RunCommand(
      kBinary + " " + c.args + " --trace " + functional + " --out-dir " + out_dir, 120);
  ASSERT_EQ(f.exit_code, 0) << f.output;
  std::filesystem::remove_all(out_dir);
  const CommandResult t = nkisim::testing::RunCommand(
      kBinary + " " + c.args + " --timing-only --trace " + timed + " --out-dir " + out_dir, 120);
  ASSERT_EQ(t.exit_code, 0) << t.output;
  EXPECT_THAT(t.output, HasSubstr("mode: timing-only"));
  EXPECT_THAT(t.output, HasSubstr("not written (timing-only"));
  EXPECT_FALSE(std::filesystem::exists(out_dir + "/out.npy"));
  EXPECT_FALSE(std::filesystem::exists(out_dir + "/qkv_out.npy"));
  ExpectSameEvents(Events(functional), Events(timed), c.name);
}

INSTANTIATE_TEST_SUITE_P(Grid, KernelTimingOnly, ::testing::ValuesIn(kKernels),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(KernelTimingOnly, RefusesCheck) {
  const CommandResult r = nkisim::testing::RunCommand(
      kBinary + " kernel attention --variant tkg --timing-only --check --trace ''", 60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--check and --timing-only exclude each other"));
}

// The simulated time of every size and the algorithm chosen: the same in both modes.
struct Row {
  double sim_us;
  std::string algorithm;
  bool operator==(const Row&) const = default;
};

std::vector<Row> CollectiveRows(const std::string& op, const std::string& extra,
                                const std::string& json, std::string* output) {
  const CommandResult r = nkisim::testing::RunCommand(
      std::string(NKISIM_MPIEXEC) + " --allow-run-as-root --oversubscribe -n 4 " + kBinary +
          " collective " + op + " -b 1K -e 1M -f 8 -n 2 -w 1 --json " + json + " " + extra,
      120);
  *output = r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<Row> rows;
  if (!std::filesystem::exists(json)) return rows;
  const nlohmann::json table = nlohmann::json::parse(ReadFile(json));
  for (const auto& row : table["rows"]) {
    rows.push_back({row["sim_us"].get<double>(), row["algorithm"].get<std::string>()});
  }
  return rows;
}

TEST(CollectiveTimingOnly, SameSimulatedTimesAsFunctional) {
  for (const char* op : {"all_gather", "all_reduce", "reduce_scatter", "all_to_all"}) {
    std::string f_out, t_out;
    const std::vector<Row> f =
        CollectiveRows(op, "", TempPath(std::string(op) + ".functional.json"), &f_out);
    const std::vector<Row> t =
        CollectiveRows(op, "--timing-only", TempPath(std::string(op) + ".timed.json"), &t_out);
    ASSERT_EQ(f.size(), 4u) << f_out;
    EXPECT_EQ(f, t) << op << "\n" << f_out << "\n" << t_out;
    EXPECT_THAT(f_out, HasSubstr("# PASS: 0 wrong"));
    EXPECT_THAT(t_out, HasSubstr("timing-only: simulated times only, no element checked"));
  }
}

TEST(CollectiveTimingOnly, RefusesBaseline) {
  std::string out;
  const CommandResult r = nkisim::testing::RunCommand(
      std::string(NKISIM_MPIEXEC) + " --allow-run-as-root --oversubscribe -n 2 " + kBinary +
          " collective all_gather -b 1K -e 1K --timing-only --baseline -d fp32",
      60);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--baseline and --timing-only exclude each other"));
}

// Functional --baseline: every size gets the raw MPI call's time and the ratio of the two, in
// the table and the JSON, and nkisim's own result is still checked (PASS). -n 40 runs 9 blocks.
TEST(CollectiveBaseline, ReportsTheRawMpiTimeAndRatioOfEverySize) {
  const std::string json = nkisim::testing::TempPath("nkisim_baseline_", "ag.json");
  std::filesystem::remove(json);
  const CommandResult r = nkisim::testing::RunCommand(
      std::string(NKISIM_MPIEXEC) + " --allow-run-as-root --oversubscribe -n 2 " + kBinary +
          " collective all_gather -b 1K -e 16K -f 4 -n 40 -w 2 --baseline -d fp32 --json " + json,
      120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("mpi(us)  ratio"));
  EXPECT_THAT(r.output, HasSubstr("# PASS: 0 wrong element(s) in all"));
  const nlohmann::json j = nlohmann::json::parse(ReadFile(json));
  ASSERT_EQ(j["rows"].size(), 3u) << j.dump();
  for (const nlohmann::json& row : j["rows"]) {
    EXPECT_GT(row["mpi_us"].get<double>(), 0) << row.dump();
    EXPECT_GT(row["host_us"].get<double>(), 0) << row.dump();
    // The ratio is the median of the blocks' ratios, not host_us / mpi_us, but both are positive
    // and finite; an absurd value would mean a block timed nothing.
    EXPECT_GT(row["mpi_ratio"].get<double>(), 0.05) << row.dump();
    EXPECT_LT(row["mpi_ratio"].get<double>(), 20) << row.dump();
    EXPECT_EQ(row["wrong"].get<int64_t>(), 0) << row.dump();
  }
  std::filesystem::remove(json);
}

// Without -n, --baseline times 525 calls per size (in alternating blocks) instead of the
// plain sweep's 20, and says so in the header; an explicit -n still wins.
TEST(CollectiveBaseline, DefaultsToFiveHundredTwentyFiveCalls) {
  const std::string run = std::string(NKISIM_MPIEXEC) + " --allow-run-as-root --oversubscribe -n 2 " +
                          kBinary + " collective all_gather -b 1K -e 1K -w 1 -d fp32";
  const CommandResult baseline = nkisim::testing::RunCommand(run + " --baseline", 120);
  ASSERT_EQ(baseline.exit_code, 0) << baseline.output;
  EXPECT_THAT(baseline.output, HasSubstr("fp32, 525 iterations after 1 warm-up"));
  const CommandResult plain = nkisim::testing::RunCommand(run, 120);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_THAT(plain.output, HasSubstr("fp32, 20 iterations after 1 warm-up"));
  const CommandResult explicit_n = nkisim::testing::RunCommand(run + " --baseline -n 30", 120);
  ASSERT_EQ(explicit_n.exit_code, 0) << explicit_n.output;
  EXPECT_THAT(explicit_n.output, HasSubstr("fp32, 30 iterations after 1 warm-up"));
}

// A --baseline block lasts about 5 ms: a 1 KiB call (tens of microseconds) runs in the longest
// blocks -n allows (-n 35: 7 blocks of 5), a 64 MiB call (128 MiB gathered on each rank, many
// milliseconds) in single-call blocks, 35 of them; the JSON says which.
TEST(CollectiveBaseline, BlocksLastAboutFiveMilliseconds) {
  const std::string json = nkisim::testing::TempPath("nkisim_baseline_blocks_", "ag.json");
  std::filesystem::remove(json);
  const CommandResult r = nkisim::testing::RunCommand(
      std::string(NKISIM_MPIEXEC) + " --allow-run-as-root --oversubscribe -n 2 " + kBinary +
          " collective all_gather -b 1K -e 64M -f 65536 -n 35 -w 1 --baseline -d fp32 --json " +
          json,
      120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(ReadFile(json));
  ASSERT_EQ(j["rows"].size(), 2u) << j.dump();
  EXPECT_EQ(j["rows"][0]["baseline_blocks"], 7) << j.dump();
  EXPECT_EQ(j["rows"][0]["baseline_calls_per_block"], 5) << j.dump();
  EXPECT_EQ(j["rows"][1]["baseline_blocks"], 35) << j.dump();
  EXPECT_EQ(j["rows"][1]["baseline_calls_per_block"], 1) << j.dump();
  std::filesystem::remove(json);
}

constexpr const char* kSmallJob = R"(workload: "decode"
plans { name: "tp2xdp4" tp: 8 attention_dp: 4 }
plans { name: "tp8" tp: 8 }
plans { name: "tp4r2" tp: 4 replicas: 2 lnc: 1 }
model { hidden: 512 n_q_heads: 8 n_kv_heads: 2 d_head: 64 rms_eps: 1e-6 intermediate: 1024 }
batch: 8
kv_length: 64
steps: 2
seed: 7
control { stall_timeout_s: 60 }
)";

struct RunOutput {
  CommandResult result;
  nlohmann::json report;
  nlohmann::json events;
};

RunOutput RunJob(const std::string& name, const std::string& config, const std::string& flags) {
  const std::string report = TempPath(name + ".report.json"), trace = TempPath(name + ".trace.json");
  std::filesystem::remove(report);
  std::filesystem::remove(trace);
  RunOutput out;
  out.result = nkisim::testing::RunCommand(
      kBinary + " run " + config + " --report " + report + " --trace " + trace + " " + flags, 170);
  if (std::filesystem::exists(report)) out.report = nlohmann::json::parse(ReadFile(report));
  if (std::filesystem::exists(trace)) out.events = Events(trace);
  return out;
}

TEST(RunTimingOnly, SameTraceInAllThreeWays) {
  const std::string config = TempPath("small.textproto");
  std::ofstream(config) << kSmallJob;
  const RunOutput f = RunJob("functional", config, "");
  const RunOutput threads = RunJob("threads", config, "--timing-only");
  const RunOutput processes = RunJob("processes", config, "--timing-only --mpirun-ranks");
  ASSERT_EQ(f.result.exit_code, 0) << f.result.output;
  ASSERT_EQ(threads.result.exit_code, 0) << threads.result.output;
  ASSERT_EQ(processes.result.exit_code, 0) << processes.result.output;
  ExpectSameEvents(f.events, threads.events, "functional vs timing-only (threads)");
  ExpectSameEvents(f.events, processes.events, "functional vs timing-only (mpirun)");

  // The reports: the same simulated phase times; the timing-only ones check nothing, say so and
  // compare no plan outputs.
  EXPECT_THAT(threads.result.output, HasSubstr("ranks as threads of this process"));
  EXPECT_THAT(processes.result.output, HasSubstr("ranks as MPI processes"));
  EXPECT_FALSE(f.report.value("timingOnly", false));
  EXPECT_EQ(f.report["agreement"].size(), 2u);
  for (const RunOutput* t : {&threads, &processes}) {
    EXPECT_TRUE(t->report.value("timingOnly", false));
    EXPECT_TRUE(t->report["agreement"].empty());
    EXPECT_THAT(t->result.output, HasSubstr("not checked"));
    EXPECT_THAT(t->result.output, Not(HasSubstr("PASS (")));
    EXPECT_THAT(t->result.output, HasSubstr("result: DONE (timing-only: nothing checked)"));
    ASSERT_EQ(t->report["scenarios"].size(), 3u);
    for (size_t s = 0; s < 3; ++s) {
      const auto& fs = f.report["scenarios"][s];
      const auto& ts = t->report["scenarios"][s];
      EXPECT_EQ(fs["stepSimNs"], ts["stepSimNs"]) << fs["name"];
      EXPECT_EQ(fs["kvCacheBytesPerRank"], ts["kvCacheBytesPerRank"]) << fs["name"];
      ASSERT_EQ(fs["phases"].size(), ts["phases"].size());
      for (size_t p = 0; p < fs["phases"].size(); ++p) {
        EXPECT_EQ(fs["phases"][p]["simNs"], ts["phases"][p]["simNs"]) << fs["phases"][p]["phase"];
        EXPECT_EQ(fs["phases"][p]["algorithm"], ts["phases"][p]["algorithm"]);
        EXPECT_GT(std::stoll(fs["phases"][p]["elements"].get<std::string>()), 0);
        EXPECT_EQ(ts["phases"][p]["elements"], "0");  // nothing checked
      }
    }
  }
  EXPECT_TRUE(threads.report.value("inProcess", false));
  EXPECT_FALSE(processes.report.value("inProcess", false));
}

// A rank that fails in the in-process job ends the whole job with its error, naming rank and
// phase; the other threads, waiting on it in the phase's collective, are woken instead of hanging.
TEST(RunTimingOnly, FailingRankEndsTheInProcessJob) {
  const std::string config = TempPath("fault.textproto");
  std::ofstream(config) << kSmallJob << "fault { kind: THROW rank: 3 phase: \"all_reduce\" }\n";
  const std::string report = TempPath("fault.report.json");
  std::ofstream(report) << "{}";  // an earlier run's output, which must not survive the failure
  const CommandResult r = nkisim::testing::RunCommand(
      kBinary + " run " + config + " --timing-only --trace '' --report " + report, 60);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("ranks as threads of this process"));
  EXPECT_THAT(r.output, HasSubstr("FAILED"));
  EXPECT_THAT(r.output, HasSubstr("rank 3 in phase tp2xdp4/all_reduce"));
  EXPECT_THAT(r.output, HasSubstr("injected fault"));
  EXPECT_FALSE(std::filesystem::exists(report));
}

}  // namespace
