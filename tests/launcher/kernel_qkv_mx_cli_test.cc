// `nkisim kernel qkv --quant mx` as a user runs it: the decode and prefill MX cases on the trn3
// profile pass --check against the golden, print the MX roofline, and round-trip their packed
// weights through .npy (uint32 containers); each MX rule is refused with its exit code (11: the
// rule, 12: a profile without the MX path) and a message naming the value and the rule.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <string>

#include "tests/testing/run_command.h"

namespace nkisim {
namespace {

using ::nkisim::testing::CommandResult;
using ::testing::HasSubstr;

const std::string kTrn3 = std::string(NKISIM_SOURCE_DIR) + "/configs/hardware/trn3.textproto";

CommandResult Qkv(const std::string& args) {
  const std::string out = ::testing::TempDir() + "/qkv_mx_cli_" + std::to_string(getpid());
  return nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + " kernel qkv --trace '' " +
                                         "--out-dir " + out + " " + args,
                                     120);
}

TEST(KernelQkvMxCli, DecodeAndPrefillPassTheCheckOnTrn3) {
  for (const std::string& args :
       {std::string("--quant mx --h 2048 --b 4 --h-transposed --check"),
        std::string("--quant mx --h 2048 --b 4 --h-transposed --weight-layout mx_interleaved "
                    "--norm layer --norm-bias --fused-add --check"),
        std::string("--quant mx --b 1 --s 256 --h 2048 --norm none --bias --check"),
        std::string("--quant mx --b 1 --s 256 --h 2048 --weight-layout mx_interleaved --check")}) {
    const CommandResult r = Qkv("--profile " + kTrn3 + " " + args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr("check qkv_out vs golden (atol 5e-02, rtol 1e-02): PASS"))
        << args;
    EXPECT_THAT(r.output, HasSubstr("TFLOP/s MX x 2")) << args;
    EXPECT_THAT(r.output, HasSubstr("quant MX (MX_")) << args;
  }
}

// The packed weights and scales written with --write-inputs read back with --in-dir give the
// same output.
TEST(KernelQkvMxCli, PackedInputsRoundTripThroughNpy) {
  const std::string dir = ::testing::TempDir() + "/qkv_mx_inputs_" + std::to_string(getpid());
  const std::string base = "--profile " + kTrn3 + " --quant mx --h 1024 --b 2 --h-transposed ";
  CommandResult r = nkisim::testing::RunCommand(
      std::string(NKISIM_BINARY) + " kernel qkv --trace '' " + base + "--seed 5 --out-dir " +
          dir + " --write-inputs",
      120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + " kernel qkv --trace '' " + base +
                                      "--seed 9 --in-dir " + dir + " --out-dir " + dir +
                                      "/again --check",
                                  120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("input fused_qkv_weights: " + dir + "/fused_qkv_weights.npy"));
  EXPECT_THAT(r.output, HasSubstr("input qkv_w_scale: " + dir + "/qkv_w_scale.npy"));
  const CommandResult cmp = nkisim::testing::RunCommand(
      "cmp " + dir + "/qkv_out.npy " + dir + "/again/qkv_out.npy", 30);
  EXPECT_EQ(cmp.exit_code, 0) << "the same inputs must give the same output: " << cmp.output;
}

TEST(KernelQkvMxCli, RulesAreRefusedWithTheirExitCodes) {
  struct Case {
    std::string args;
    int exit_code;
    std::string message;
  };
  const Case cases[] = {
      {"--quant mx --h 2048 --h-transposed", 12,
       "qkv: quantization_type = MX: hardware profile 'trn2' has no MX path"},
      {"--profile " + kTrn3 + " --quant static_mx --h 2048", 12,
       "STATIC_MX and ROW_MX are output-projection modes"},
      {"--profile " + kTrn3 + " --quant mx --h 2048", 11,
       "(is_h_dim_4h_transposed = true)"},
      {"--profile " + kTrn3 + " --quant mx --h 1536 --h-transposed", 11,
       "H / (4 LNC) = 192 rows of x4 elements"},
      {"--profile " + kTrn3 + " --quant mx --b 1 --s 256 --h 640", 11,
       "qkv: H = 640: MX needs H % 512 == 0"},
      {"--profile " + kTrn3 + " --quant mx --b 1 --s 254 --h 2048", 11,
       "qkv: S = 254: the CTE variant's MX path"},
      {"--profile " + kTrn3 + " --quant mx --b 1 --s 256 --h 2048 --h-transposed", 11,
       "takes a swizzled input only without a norm or fused residual add"},
      {"--profile " + kTrn3 + " --quant none --b 1 --s 256 --h 2048 --h-transposed", 11,
       "a swizzled input is for MX only"},
      {"--quant none --h 2048 --weight-layout mx_interleaved", 11,
       "--weight-layout mx_interleaved with --quant none: the MX layouts pack x4 weights for "
       "--quant mx only"},
  };
  for (const Case& c : cases) {
    const CommandResult r = Qkv(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
  }
}

}  // namespace
}  // namespace nkisim
