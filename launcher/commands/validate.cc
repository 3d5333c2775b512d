#include "launcher/validate_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "collectives/topology.h"
#include "launcher/scenarios/scenario_config.h"
#include "runtime/config_file.h"
#include "runtime/error.h"
#include "proto/scenario.pb.h"
#include "runtime/hardware_profile.h"

namespace nkisim::launcher {

void AddValidateCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string path;
    std::string profile_path;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Check a scenario file (plans: groups, rank -> heads map, memory) or a topology file (text "
      "proto or JSON) and print what it resolves to");
  cmd->add_option("file", options->path, "scenario or topology file")->required();
  cmd->add_option("--profile", options->profile_path,
                  "hardware profile for the placement rules; default: built-in trn2");
  cmd->callback([options, exit_code] {
    // A scenario file has a model; a topology file a world_size at its top level. Decide by which
    // schema parses, and when neither does, say why for both.
    const std::string text = ReadConfigFile(options->path, "scenario or topology file");
    std::string scenario_error;
    try {
      proto::Scenario probe;
      ParseConfigText(text, options->path, &probe);
    } catch (const Error& e) {
      scenario_error = e.what();
    }
    if (scenario_error.empty()) {
      if (!options->profile_path.empty()) {
        Raise(ErrorCode::kBadConfig, StrCat("--profile: a scenario file names its profile in ",
                                            "hardware_profile; drop --profile"));
      }
      const ResolvedScenario sc = ResolveScenario(text, options->path);
      std::printf("%s: valid scenario\n%s", options->path.c_str(), FormatScenario(sc).c_str());
      *exit_code = 0;
      return;
    }
    try {
      proto::Topology probe;
      ParseConfigText(text, options->path, &probe);
    } catch (const Error& e) {
      Raise(ErrorCode::kBadConfig,
            StrCat(options->path, " is neither a scenario nor a topology file:\n  as a scenario: ",
                   scenario_error, "\n  as a topology: ", e.what()));
    }
    const HardwareProfile profile =
        options->profile_path.empty() ? Trn2Profile() : LoadHardwareProfile(options->profile_path);
    const collectives::ResolvedTopology topology = collectives::ResolveTopology(
        collectives::LoadTopology(options->path), profile, options->path);
    std::printf("%s: valid\n%s", options->path.c_str(),
                collectives::FormatTopology(topology).c_str());
    *exit_code = 0;
  });
}

}  // namespace nkisim::launcher
