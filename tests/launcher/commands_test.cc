// The command table (launcher/commands/commands.h) and the shared --profile/--seed/--lnc/--trace
// options (launcher/commands/common_options.h), without running any command.
#include "launcher/commands/commands.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "launcher/commands/common_options.h"

namespace nkisim::launcher {
namespace {

using ::testing::ElementsAre;

// The command line as main.cc builds it from the table.
struct CommandLine {
  CLI::App app{"nkisim"};
  int exit_code = 0;
  CommandLine() {
    std::map<std::string, CLI::App*> groups = {{"", &app}};
    for (const Command& c : Commands()) {
      CLI::App* cmd = groups.at(c.parent)->add_subcommand(c.name, c.summary);
      if (c.add != nullptr) {
        c.add(cmd, &exit_code);
      } else {
        groups[c.name] = cmd;
      }
    }
  }
  CLI::App* Find(const std::string& parent, const std::string& name) {
    CLI::App* group = parent.empty() ? &app : app.get_subcommand(parent);
    return group->get_subcommand(name);
  }
};

std::vector<std::string> Names(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app->get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

TEST(CommandTable, GroupsComeBeforeTheirMembersAndNamesAreUnique) {
  std::set<std::string> groups = {""};
  std::set<std::string> seen;
  for (const Command& c : Commands()) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(groups.contains(c.parent)) << "parent '" << c.parent << "' not an earlier group";
    EXPECT_TRUE(seen.insert(std::string(c.parent) + "/" + c.name).second) << "duplicate";
    EXPECT_GT(std::string(c.summary).size(), 10u);
    if (c.add == nullptr) groups.insert(c.name);
  }
}

TEST(CommandTable, BuildsTheCommandLine) {
  CommandLine cli;
  EXPECT_THAT(Names(&cli.app), ElementsAre("demo", "dma-curve", "example", "validate", "run", "sweep",
                                           "predict", "serve", "collective", "calibrate", "pack-weights", "python",
                                           "kernel"));
  EXPECT_THAT(Names(cli.app.get_subcommand("kernel")), ElementsAre("qkv", "oproj", "attention", "mlp", "moe"));
  EXPECT_THAT(Names(cli.app.get_subcommand("example")), ElementsAre("softmax", "matmul"));
}

// A group names the word it does not know and its commands, at every level (issue 34: `nkisim
// kernel softmax` said only "A subcommand is required").
TEST(CommandTable, UnknownOrMissingCommandOfAGroupIsNamed) {
  CommandLine cli;
  auto problem = [&](std::vector<std::string> words) {
    std::vector<char*> argv = {const_cast<char*>("nkisim")};
    for (std::string& w : words) argv.push_back(w.data());
    return CommandWordProblem(cli.app, static_cast<int>(argv.size()), argv.data());
  };
  EXPECT_EQ(problem({"kernel", "softmax"}),
            "'softmax' is not a command of 'nkisim kernel'; its commands are qkv, oproj, attention, mlp, moe");
  EXPECT_EQ(problem({"example", "gemm"}),
            "'gemm' is not a command of 'nkisim example'; its commands are softmax, matmul");
  EXPECT_EQ(problem({"kernel"}), "'nkisim kernel' needs a command: qkv, oproj, attention, mlp, moe");
  EXPECT_EQ(problem({"kernel", "--bogus"}),
            "'nkisim kernel' needs a command before '--bogus': qkv, oproj, attention, mlp, moe");
  EXPECT_THAT(problem({"frobnicate"}), ::testing::StartsWith("'frobnicate' is not a command; the commands are demo,"));
  EXPECT_THAT(problem({}), ::testing::StartsWith("'nkisim' needs a command: demo, dma-curve, example,"));
  // Known words, and what CLI11 answers itself, pass.
  EXPECT_EQ(problem({"kernel", "qkv", "--b", "1"}), "");
  EXPECT_EQ(problem({"example", "softmax"}), "");
  EXPECT_EQ(problem({"validate", "x.textproto"}), "");
  EXPECT_EQ(problem({"kernel", "--help"}), "");
  EXPECT_EQ(problem({"--version"}), "");
}

// Each command keeps its common flags and their defaults.
TEST(CommandTable, CommonFlagsAndDefaults) {
  CommandLine cli;
  struct Row {
    std::string parent, name, lnc, seed, trace;
    bool profile;
  };
  const std::vector<Row> rows = {
      {"", "demo", "2", "1", "nkisim-demo.trace.json", true},
      {"example", "softmax", "1", "1", "nkisim-softmax.trace.json", true},
      {"kernel", "qkv", "2", "1", "nkisim-qkv.trace.json", true},
      {"kernel", "oproj", "2", "1", "nkisim-oproj.trace.json", true},
      {"kernel", "attention", "2", "1", "nkisim-attention.trace.json", true},
      {"kernel", "mlp", "2", "1", "nkisim-mlp.trace.json", true},
      {"", "collective", "2", "1", "", true},  // --seed: batch_shard with --topology
      {"", "calibrate", "2", "", "", true},
      {"", "validate", "", "", "", true},
      {"", "run", "", "", "nkisim-run.trace.json", false},
      {"", "predict", "2", "", "", true},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.parent + " " + r.name);
    CLI::App* cmd = cli.Find(r.parent, r.name);
    ASSERT_NE(cmd, nullptr);
    const auto default_of = [&](const char* flag) -> std::string {
      const CLI::Option* o = cmd->get_option_no_throw(flag);
      return o == nullptr ? "" : o->get_default_str();
    };
    EXPECT_EQ(default_of("--lnc"), r.lnc);
    EXPECT_EQ(default_of("--seed"), r.seed);
    EXPECT_EQ(default_of("--trace"), r.trace);
    EXPECT_EQ(cmd->get_option_no_throw("--profile") != nullptr, r.profile);
  }
}

TEST(CommonOptions, RegistersOnlyTheFlagsAsked) {
  CLI::App app;
  CommonOptions o;
  const CommonOptionHandles h = AddCommonOptions(&app, &o, kSeedFlag | kTraceFlag,
                                                 {.profile_path = "", .seed = 7, .lnc = 2,
                                                  .trace_path = "t.json"});
  EXPECT_EQ(h.profile, nullptr);
  EXPECT_EQ(h.lnc, nullptr);
  ASSERT_NE(h.seed, nullptr);
  ASSERT_NE(h.trace, nullptr);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.trace_path, "t.json");
  EXPECT_EQ(h.seed->get_default_str(), "7");
  EXPECT_THROW(app.parse(std::vector<std::string>{"1", "--lnc"}), CLI::ExtrasError);
}

TEST(CommonOptions, ParsesAndChecks) {
  CLI::App app;
  CommonOptions o;
  AddCommonOptions(&app, &o, kProfileFlag | kSeedFlag | kLncFlag | kTraceFlag, {});
  EXPECT_EQ(o.lnc, 2);
  EXPECT_EQ(o.seed, 1u);
  EXPECT_EQ(o.trace_path, "");
  // CLI11 takes a reversed argv as a vector.
  app.parse(std::vector<std::string>{"", "--trace", "9", "--seed", "1", "--lnc", "p.textproto",
                                     "--profile"});
  EXPECT_EQ(o.profile_path, "p.textproto");
  EXPECT_EQ(o.lnc, 1);
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.trace_path, "");

  CLI::App bad;
  CommonOptions b;
  AddCommonOptions(&bad, &b, kLncFlag, {});
  EXPECT_THROW(bad.parse(std::vector<std::string>{"3", "--lnc"}), CLI::ValidationError);
}

TEST(CommonOptions, LoadProfileDefaultsToTrn2) {
  EXPECT_EQ(LoadProfile(CommonOptions{}).name(), Trn2Profile().name());
}

}  // namespace
}  // namespace nkisim::launcher
