// `nkisim kernel mlp` as a user runs it: the roofline report, the timing-only mode, and refused
// shapes exiting 11 (invalid argument) with the operand and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/testing/run_command.h"

namespace {

using nkisim::testing::CommandResult;
using ::testing::HasSubstr;

CommandResult Mlp(const std::string& args) {
  return nkisim::testing::RunCommand(std::string(NKISIM_BINARY) +
                                         " kernel mlp --out-dir /tmp/nkisim-mlp-cli "
                                         "--trace /tmp/nkisim-mlp-cli.trace.json " +
                                         args,
                                     120);
}

TEST(MlpCliTest, DecodeReportsTheRooflineAndStreamFloor) {
  const CommandResult r = Mlp("--variant tkg --b 8 --h 4096 --i 896 --timing-only");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("variant tkg"));
  EXPECT_THAT(r.output, HasSubstr("HBM-bound"));
  EXPECT_THAT(r.output, HasSubstr("x the bound"));
  EXPECT_THAT(r.output, HasSubstr("stream floor: "));
}

TEST(MlpCliTest, PrefillReportsTheEngineFloor) {
  const CommandResult r = Mlp("--variant cte --s 2048 --h 4096 --i 896 --timing-only");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("PE-bound"));
  EXPECT_THAT(r.output, HasSubstr("engine floor: "));
}

TEST(MlpCliTest, BadShapesExitElevenNamingOperandAndRule) {
  const struct {
    const char* args;
    const char* message;
  } cases[] = {
      {"--h 200", "nkisim: invalid argument: mlp: H = 200: must be a multiple of 128"},
      {"--variant tkg --b 200", "mlp: B * S = 200: the TKG variant (requested instead of cte)"},
      {"--variant cte --s 256 --quant static",
       "mlp: quantization = STATIC: fp8 weights run in the TKG variant only"},
      {"--h 384", "mlp: H = 384: the TKG variant shards H / 128 = 3 subtiles over LNC = 2"},
      {"--store-fused-hidden", "mlp: store_fused_hidden = true: needs residual"},
  };
  for (const auto& c : cases) {
    const CommandResult r = Mlp(c.args);
    EXPECT_EQ(r.exit_code, 11) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
  }
}

TEST(MlpCliTest, ListsTheVariants) {
  const CommandResult r = Mlp("--list-variants");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("tkg "));
  EXPECT_THAT(r.output, HasSubstr("cte "));
}

}  // namespace
