// `nkisim kernel attention` as a user runs it: both variants check against their goldens and
// report the roofline; bad shapes exit 11 naming the operand and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;
using nkisim::testing::CommandResult;

// The stream floor line of an HBM-bound run: its floor and HBM times (ns, as printed) and the
// floor over the HBM bound.
void ExpectStreamFloor(const std::string& output, const std::string& floor_ns,
                       const std::string& hbm_ns, const std::string& ratio) {
  EXPECT_THAT(output, HasSubstr("HBM-bound"));
  EXPECT_THAT(output, HasSubstr("stream floor: " + floor_ns + " ns = HBM " + hbm_ns +
                                " ns + about 2 x 1300 ns"));
  EXPECT_THAT(output, HasSubstr("= " + ratio + "x the HBM bound; simulated = "));
}

CommandResult Attention(const std::string& args) {
  return nkisim::testing::RunCommand(
      std::string(NKISIM_BINARY) + " kernel attention --out-dir /tmp/nkisim-attention-cli " +
          "--trace /tmp/nkisim-attention-cli.trace.json " + args,
      120);
}

TEST(KernelAttentionCliTest, DecodeChecksAndReportsTheRoofline) {
  const CommandResult r = Attention("--variant tkg --b 4 --g 4 --t 1024 --d 64 --lnc 2 --check");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("check vs fp64 golden (atol 1e-05, rtol 0.02): PASS"));
  EXPECT_THAT(r.output, HasSubstr("x the bound"));
  // 4 rows x (K + V of 1024 x 64 bf16) + q and out: 1,052,672 B over 2 cores = 1452.0 ns of HBM;
  // the floor adds 2 x 1300 ns of DMA latency less the store's semaphore (27.6 ns): 4024.3 ns.
  ExpectStreamFloor(r.output, "4024.3", "1452.0", "2.77");
}

// The decode job's form: this step's K / V rows as k_new / v_new. The golden reads caches with
// those rows at T - 1, built on the host before the run; the command checks the kernel's append.
TEST(KernelAttentionCliTest, DecodeWithAppendChecksTheOutputAndTheAppend) {
  const CommandResult r =
      Attention("--variant tkg --b 4 --g 8 --t 1025 --d 128 --lnc 2 --append --check");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("this step's K / V rows [B, d] as k_new / v_new"));
  EXPECT_THAT(r.output,
              HasSubstr("append: k_new and v_new are at position T - 1 of the caches, bit for bit"));
  EXPECT_THAT(r.output, HasSubstr("check vs fp64 golden (atol 1e-05, rtol 0.02): PASS"));
}

TEST(KernelAttentionCliTest, PrefillChecksAndReportsTheRoofline) {
  const CommandResult r = Attention("--variant cte --s 300 --nq 32 --nkv 8 --d 128 --lnc 2 --check");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(": PASS"));
  EXPECT_THAT(r.output, HasSubstr("x the bound"));
}

TEST(KernelAttentionCliTest, BadShapesExitElevenNamingTheRule) {
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"--variant tkg --d 256", "d = 256 must be <= 128"},
      {"--variant tkg --t 0", "--t 0 must be in [1, 16777216]"},
      {"--variant cte --nq 30 --nkv 8 --s 128", "n_q = 30 must be divisible by n_kv = 8"},
      {"--variant cte --s 0", "--s 0 must be in [1, 16777216]"},
      {"--variant tkg --g 200 --t 16", "G"},
      {"--variant cte --s 128 --append", "--append applies to --variant tkg only"},
  };
  for (const auto& c : cases) {
    const CommandResult r = Attention(c.args);
    EXPECT_EQ(r.exit_code, 11) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
  }
}

}  // namespace

namespace {

// Every kernel command refuses sizes, NaNs and paths before allocating: exit 11 (13 for a case
// larger than the host), a message naming the flag, the value and the rule, in well under a second.
TEST(KernelCliTest, BadFlagsOfEveryKernelCommandAreRefusedBeforeAnyWork) {
  const struct {
    const char* args;
    int code;
    const char* message;
  } cases[] = {
      {"kernel oproj --variant tkg --s 0", 11, "--s 0 must be in [1, 16777216]"},
      {"kernel oproj --variant tkg --n 0", 11, "--n 0 must be in [1, 16777216]"},
      {"kernel oproj --b 0", 11, "--b 0 must be in [1, 16777216]"},
      {"kernel oproj --h 9999999", 13, "GiB of host memory"},
      {"kernel qkv --h -128", 11, "--h -128 must be in"},
      {"kernel qkv --b -1", 11, "--b -1 must be in"},
      {"kernel qkv --s 1000000000", 11, "--s 1000000000 must be in"},
      {"kernel qkv --in-dir /nonexistent", 11, "--in-dir /nonexistent: not a directory"},
      {"kernel qkv --eps nan", 11, "--eps nan must be finite and >= 0"},
      {"kernel qkv --eps -1", 11, "--eps -1 must be finite and >= 0"},
      {"kernel qkv --hidden-actual -5", 11, "--hidden-actual -5 must be >= 0"},
      {"kernel attention --b -3", 11, "--b -3 must be in"},
      {"kernel attention --b 0", 11, "--b 0 must be in [1, 16777216]"},  // not the default
      {"kernel attention --timing-only --check", 11, "--check and --timing-only exclude each other"},
      {"kernel oproj --timing-only --check", 11, "--check and --timing-only exclude each other"},
      {"run " NKISIM_SOURCE_DIR "/configs/small_8ranks.textproto --mpirun-ranks", 11,
       "--mpirun-ranks applies to --timing-only"},
  };
  for (const auto& c : cases) {
    const CommandResult r =
        nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + " " + c.args, 10);
    EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
  }
}

// The simulated ns of a kernel command's roofline line ("simulated N ns = R.RRx the bound"); -1
// when the output has none.
double SimulatedNs(const std::string& output) {
  static const std::regex sim_re("simulated ([0-9.]+) ns = ([0-9.]+)x the bound");
  std::smatch s;
  return std::regex_search(output, s, sim_re) ? std::stod(s[1]) : -1.0;
}

// A kernel command in timing-only mode, with no trace (the floors need no values).
CommandResult TimingOnly(const std::string& args) {
  return nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + " " + args +
                                         " --timing-only --trace '' --out-dir /tmp/nkisim-floor-cli",
                                     60);
}

// Every HBM-bound kernel command prints the stream floor under its roofline; a PE-bound one
// does not (its floor would lie below its bound).
TEST(KernelCliTest, HbmBoundKernelsPrintTheStreamFloor) {
  const struct {
    const char* args;
    bool floor;
  } cases[] = {
      {"kernel qkv --b 4 --h 8192 --nq 8 --nkv 1 --lnc 2", true},
      {"kernel oproj --variant tkg --b 32 --n 8 --d 128 --h 8192 --lnc 2", true},
      {"kernel attention --variant cte --s 1024 --nq 8 --nkv 8 --d 128 --lnc 1", false},
  };
  for (const auto& c : cases) {
    const CommandResult r = TimingOnly(c.args);
    ASSERT_EQ(r.exit_code, 0) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.floor ? "HBM-bound" : "PE-bound")) << c.args;
    if (c.floor) {
      EXPECT_THAT(r.output, HasSubstr(" + about 2 x 1300 ns (the first load's and the store's "
                                      "fixed DMA latency, which no stream hides)"))
          << c.args;
      EXPECT_THAT(r.output, ::testing::Not(HasSubstr("engine floor"))) << c.args;
    } else {
      EXPECT_THAT(r.output, ::testing::Not(HasSubstr("stream floor"))) << c.args;
    }
  }
  // The default job's TP8DP8 attention: 2.9 us of HBM, a 5.5 us floor (1.88x the bound).
  const CommandResult r =
      TimingOnly("kernel attention --variant tkg --b 4 --g 8 --t 1025 --d 128 --lnc 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ExpectStreamFloor(r.output, "5490.4", "2918.0", "1.88");
}

// A PE-bound kernel names its busiest compute engine and that engine's instruction time, which
// the simulated time can never beat (each engine runs one instruction at a time).
TEST(KernelCliTest, PeBoundKernelsPrintTheEngineFloor) {
  const CommandResult r =
      TimingOnly("kernel attention --variant cte --s 1024 --nq 8 --nkv 8 --d 128 --lnc 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  const std::regex floor_re(
      "engine floor: (PE|Vector|Scalar|GpSimd) ([0-9.]+) ns of instructions on core ([01]) \\(the "
      "busiest compute engine\\) = ([0-9.]+)x the PE bound; simulated = ([0-9.]+)x the floor");
  ASSERT_TRUE(std::regex_search(r.output, m, floor_re)) << r.output;
  const double work_ns = std::stod(m[2]), sim_ns = SimulatedNs(r.output);
  ASSERT_GT(sim_ns, 0) << r.output;
  EXPECT_GT(work_ns, 0);
  EXPECT_LE(work_ns, sim_ns + 0.1);
  EXPECT_GE(std::stod(m[5]), 1.0);
  EXPECT_NEAR(std::stod(m[5]), sim_ns / work_ns, 0.006);
  // The prefill's P transposes and score row maxima make Vector the busiest engine.
  EXPECT_EQ(m[1], "Vector") << r.output;
}

// The target a kernel is held to is its bound, or the higher floor where one is above it: an
// HBM-bound kernel whose busiest engine has more instruction time than its stream floor (fp8 ROW
// weights keep x_hat bf16, so each 128 x 128 block costs more PE time than its HBM bytes) prints
// that engine floor too and is held to it; one whose stream floor is the higher is held to that.
TEST(KernelCliTest, TargetIsTheHigherFloor) {
  const std::regex target_re("target: the (engine floor|stream floor|HBM bound|PE bound), ([0-9.]+) ns; "
                             "simulated = ([0-9.]+)x the target");
  const struct {
    const char* args;
    const char* target;
  } cases[] = {
      // ROW's dequantizing evictions set an engine floor above the stream under the old
      // compute costs; under the ISA rows (Vector max(64, N) cycles) the stream is the higher.
      {"kernel mlp --variant tkg --b 32 --h 8192 --i 3584 --quant row", "stream floor"},
      {"kernel mlp --variant tkg --b 32 --h 8192 --i 3584 --quant static", "stream floor"},
      {"kernel attention --variant cte --s 1024 --nq 8 --nkv 8 --d 128 --lnc 2", "engine floor"},
  };
  for (const auto& c : cases) {
    const CommandResult r = TimingOnly(c.args);
    ASSERT_EQ(r.exit_code, 0) << c.args << "\n" << r.output;
    std::smatch t;
    ASSERT_TRUE(std::regex_search(r.output, t, target_re)) << r.output;
    const double target_ns = std::stod(t[2]), sim_ns = SimulatedNs(r.output);
    ASSERT_GT(sim_ns, 0) << r.output;
    EXPECT_EQ(t[1], c.target) << c.args;
    EXPECT_LE(target_ns, sim_ns + 0.1) << c.args;  // no schedule beats its floors
    EXPECT_NEAR(std::stod(t[3]), sim_ns / target_ns, 0.006) << c.args;
    if (std::string(c.target) == "engine floor") {
      EXPECT_THAT(r.output, HasSubstr("engine floor: ")) << c.args;
    }
  }
}

}  // namespace
