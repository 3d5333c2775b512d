// `nkisim kernel oproj --quant mx|static_mx|row_mx` as a user runs it: each MX mode of the CTE
// kernel on the trn3 profile checks against its golden and prints the roofline at the MX rate;
// each refusal exits with its typed error (11 invalid argument, 12 not supported) and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;
using nkisim::testing::CommandResult;

const std::string kTrn3 = std::string(NKISIM_SOURCE_DIR) + "/configs/hardware/trn3.textproto";

CommandResult Oproj(const std::string& args) {
  return nkisim::testing::RunCommand(std::string(NKISIM_BINARY) +
                                         " kernel oproj --out-dir /tmp/nkisim-oproj-mx-cli "
                                         "--trace /tmp/nkisim-oproj-mx-cli.trace.json " +
                                         args,
                                     120);
}

TEST(OprojMxCliTest, EachMxModeChecksAgainstItsGoldenOnTrn3) {
  const struct {
    const char* quant;
    const char* tolerance;
  } modes[] = {{"mx", "rtol 0.05"}, {"static_mx", "rtol 0.036"}, {"row_mx", "rtol 0.05"}};
  for (const auto& m : modes) {
    const CommandResult r =
        Oproj(std::string("--variant cte --b 1 --s 256 --n 5 --d 128 --h 1024 --quant ") + m.quant +
              " --profile " + kTrn3 + " --check");
    ASSERT_EQ(r.exit_code, 0) << m.quant << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(std::string("check vs fp64 golden (atol 1e-05, ") +
                                    m.tolerance + ", the reference suite's): PASS"))
        << m.quant;
    EXPECT_THAT(r.output, HasSubstr("TFLOP/s MX x 2")) << m.quant;
    EXPECT_THAT(r.output, HasSubstr("x the bound")) << m.quant;
    EXPECT_THAT(r.output, HasSubstr("out [1, 256, 1024] bf16")) << m.quant;
  }
}

TEST(OprojMxCliTest, MxOnAProfileWithoutTheMxPathExitsTwelveNamingIt) {
  for (const char* quant : {"mx", "static_mx", "row_mx"}) {
    const CommandResult r =
        Oproj(std::string("--variant cte --s 128 --n 8 --d 128 --h 1024 --quant ") + quant);
    EXPECT_EQ(r.exit_code, 12) << quant << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr("nkisim: not supported: output_projection_cte: "
                                    "quantization_type = "));
    EXPECT_THAT(r.output, HasSubstr("hardware profile 'trn2' has no MX path (pe_mx_speedup = 0)"));
  }
}

TEST(OprojMxCliTest, BrokenRulesExitElevenNamingTheRule) {
  const struct {
    std::string args;
    const char* message;
  } cases[] = {
      {"--variant cte --s 128 --n 1 --d 64 --h 1024 --quant mx --profile " + kTrn3,
       "output_projection_cte: N * D = 64: must be >= 128 for quantization_type MX"},
      {"--variant cte --s 128 --n 3 --d 64 --h 1024 --quant static_mx --profile " + kTrn3,
       "N * D = 192: must be a multiple of 128 for quantization_type STATIC_MX"},
      {"--variant cte --s 128 --n 1 --d 100 --h 1024 --quant row_mx --profile " + kTrn3,
       "N * D = 100: must be >= 128 for quantization_type ROW_MX"},
      {"--variant cte --s 128 --n 4 --d 128 --h 1024 --quant mx --dtype fp32 --profile " + kTrn3,
       "attention dtype fp32: quantization_type MX needs bf16 or fp16 attention"},
      {"--variant cte --s 128 --n 4 --d 128 --h 1025 --quant mx --profile " + kTrn3,
       "H = 1025: must be divisible by LNC = 2"},
      {"--variant tkg --b 4 --quant mx --profile " + kTrn3,
       "output_projection_tkg: quantization_type = MX: the TKG kernel has no MX path"},
      {"--variant tkg --b 4 --quant row_mx",
       "output_projection_tkg: quantization_type = ROW_MX: the TKG kernel has no MX path"},
      {"--variant cte --s 128 --n 4 --d 128 --h 1024 --quant mx --weight-scale x.npy --profile " +
           kTrn3,
       "--weight-scale with --quant mx: the E8M0 weight scales come from packing"},
  };
  for (const auto& c : cases) {
    const CommandResult r = Oproj(c.args);
    EXPECT_EQ(r.exit_code, 11) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr("nkisim: invalid argument: ")) << c.args;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
  }
}

}  // namespace
