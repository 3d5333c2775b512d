// Scenario files: every control-plane, tolerance and list field is checked before any rank starts,
// each problem named with its field, value and rule (Error(kBadConfig), exit 14).
#include "launcher/scenario_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

std::string SmallConfig() {
  std::ifstream in(std::string(NKISIM_SOURCE_DIR) + "/configs/small_8ranks.textproto");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ScenarioConfigTest, TheShippedSmallConfigResolves) {
  EXPECT_NO_THROW(ResolveScenario(SmallConfig(), "small"));
}

TEST(ScenarioConfigTest, BadFieldsAreRefusedWithFieldValueAndRule) {
  const struct {
    const char* extra;
    const char* message;
  } cases[] = {
      {"control { heartbeat_s: -1 }", "control.heartbeat_s: -1 must be in [0.01, 60]"},
      {"control { stall_timeout_s: nan }", "control.stall_timeout_s: nan must be in"},
      {"control { stall_timeout_s: inf }", "control.stall_timeout_s: inf must be in"},
      {"control { startup_timeout_s: -5 }", "control.startup_timeout_s: -5 must be in"},
      {"control { heartbeat_s: 30 }", "heartbeat_s: 30 must be below stall_timeout_s (20)"},
      {"control { port: 70000 }", "control.port: 70000 must be in [0, 65535]"},
      {"tolerances { key: \"atention\" value { atol: 1 } }", "tolerances: 'atention' is not a phase"},
      {"tolerances { key: \"qkv\" value { atol: -1 } }", "tolerances['qkv']: atol -1 and rtol 0 must be finite and >= 0"},
      {"tolerances { key: \"qkv\" value { rtol: nan } }", "must be finite and >= 0"},
      {"scenarios: \"attention_decode\"", "'attention_decode' is listed twice (entries 0 and 2)"},
      {"model { rms_eps: -1 }", "model.rms_eps: -1 must be in [0, 1]"},
      {"topology { replica_groups { name: \"tp\" contiguous { group_size: 8 } algorithm: \"tree\" } }",
       "algorithm: 'tree' is not one of auto"},
  };
  for (const auto& c : cases) {
    try {
      ResolveScenario(SmallConfig() + c.extra + "\n", "bad");
      ADD_FAILURE() << c.extra << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kBadConfig) << c.extra;
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos)
          << c.extra << "\n" << e.what();
    }
  }
}

}  // namespace
}  // namespace nkisim::launcher
