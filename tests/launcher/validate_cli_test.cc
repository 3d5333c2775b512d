// `nkisim validate` as a user runs it: every bad configuration ends promptly with a nonzero exit
// and a message naming the field and the rule; the shipped examples validate.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/launcher/bad_plans.h"
#include "tests/testing/run_command.h"

namespace {

using ::testing::HasSubstr;

using nkisim::testing::CommandResult;

// Runs the nkisim binary with `args` under a 10 s timeout; stdout and stderr together.
CommandResult RunNkisim(const std::string& args) {
  return nkisim::testing::RunCommand(std::string(NKISIM_BINARY) + " " + args, 10);
}

const std::string kSource = NKISIM_SOURCE_DIR;

TEST(ValidateCliTest, BadConfigurationsExitWithBadConfigAndTheMessage) {
  std::ifstream manifest(kSource + "/tests/collectives/bad_configs/expected_errors.txt");
  int cases = 0;
  for (std::string line; std::getline(manifest, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t bar = line.find(" | ");
    const std::string file = line.substr(0, bar), fragment = line.substr(bar + 3);
    const CommandResult r = RunNkisim("validate " + kSource + "/tests/collectives/bad_configs/" + file);
    EXPECT_EQ(r.exit_code, 14) << file << ":\n" << r.output;  // 10 + kBadConfig
    EXPECT_THAT(r.output, HasSubstr(fragment)) << file;
    EXPECT_THAT(r.output, HasSubstr("nkisim: bad config:")) << file;
    ++cases;
  }
  EXPECT_GE(cases, 15);
}

TEST(ValidateCliTest, MissingFileAndMissingArgument) {
  const CommandResult missing = RunNkisim("validate /nonexistent/topology.textproto");
  EXPECT_EQ(missing.exit_code, 14);
  EXPECT_THAT(missing.output, HasSubstr("cannot open scenario or topology file"));
  EXPECT_EQ(RunNkisim("validate").exit_code, 2);  // usage error
}

TEST(ValidateCliTest, ShippedExamplesValidate) {
  for (const char* file : {"tp64_tp8dp8.textproto", "reference_batch_shard.textproto",
                           "strided_dp.json"}) {
    const CommandResult r = RunNkisim("validate " + kSource + "/configs/topologies/" + file);
    EXPECT_EQ(r.exit_code, 0) << file << ":\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(": valid"));
  }
  const CommandResult tp64 = RunNkisim("validate " + kSource + "/configs/topologies/tp64_tp8dp8.textproto");
  EXPECT_THAT(tp64.output, HasSubstr("replica group set 'gqa': 8 groups of 8 ranks"));
  EXPECT_THAT(tp64.output, HasSubstr("iota_workers: [0, 4, 8, 12, 16, 20, 24, 28, 0, 4"));
}

// Each bad plan is refused by `nkisim validate` and by `nkisim run` (before mpirun starts) with
// exit 14 and its message.
TEST(ValidateCliTest, BadPlansAreRefusedByValidateAndRun) {
  int index = 0;
  for (const nkisim::testing::BadPlan& c : nkisim::testing::BadPlans()) {
    const std::string path = "/tmp/nkisim_bad_plan_" + std::to_string(index++) + ".textproto";
    std::ofstream(path) << c.text;
    for (const char* command : {"validate ", "run "}) {
      const CommandResult r = RunNkisim(command + path);
      EXPECT_EQ(r.exit_code, 14) << command << c.what << ":\n" << r.output;
      EXPECT_THAT(r.output, HasSubstr(c.message)) << command << c.what;
    }
  }
}

TEST(ValidateCliTest, ScenarioFilesPrintPlansGroupsAndTheHeadMap) {
  const CommandResult r = RunNkisim("validate " + kSource + "/configs/tp64_tp8dp8.textproto");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("valid scenario"));
  EXPECT_THAT(r.output, HasSubstr("plan 'tp8xdp8': tp 64, attention_dp 8"));
  EXPECT_THAT(r.output, HasSubstr("rank 9: Q 9 / KV 1 / KV 1 x rows 4..7"));
  EXPECT_THAT(r.output, HasSubstr("replica group set 'attention_dp': 8 groups of 8 ranks"));
}

TEST(ValidateCliTest, AFileThatIsNeitherSaysWhyForBoth) {
  const std::string path = "/tmp/nkisim_neither.textproto";
  std::ofstream(path) << "world_size: 8\nmodel { hidden: 512 }\n";
  const CommandResult r = RunNkisim("validate " + path);
  EXPECT_EQ(r.exit_code, 14) << r.output;
  EXPECT_THAT(r.output, HasSubstr("is neither a scenario nor a topology file"));
}

}  // namespace

