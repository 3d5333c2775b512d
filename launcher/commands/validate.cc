#include "launcher/commands/validate.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "collectives/topology.h"
#include "launcher/commands/common_options.h"
#include "model/scenario_config.h"
#include "runtime/config_file.h"
#include "runtime/error.h"
#include "proto/scenario.pb.h"
#include "runtime/hardware_profile.h"

namespace nkisim::launcher {

void AddValidateCommand(CLI::App* cmd, int* exit_code) {
  struct Options {
    std::string path;
    CommonOptions common;  // --profile
  };
  auto options = std::make_shared<Options>();
  cmd->add_option("file", options->path, "scenario or topology file")->required();
  AddCommonOptions(cmd, &options->common, kProfileFlag, {})
      .profile->description("hardware profile for the placement rules; default: built-in trn2");
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
      if (!options->common.profile_path.empty()) {
        Raise(ErrorCode::kBadConfig, StrCat("--profile: a scenario file names its profile in ",
                                            "hardware_profile; drop --profile"));
      }
      const ResolvedScenario sc = ResolveScenario(text, options->path);
      std::printf("%s: valid scenario\n%s", options->path.c_str(), FormatScenario(sc).c_str());
      *exit_code = 0;
      return;
    }
    proto::Topology parsed;
    try {
      parsed = collectives::ParseTopology(text, options->path);
    } catch (const Error& e) {
      Raise(ErrorCode::kBadConfig,
            StrCat(options->path, " is neither a scenario nor a topology file:\n  as a scenario: ",
                   scenario_error, "\n  as a topology: ", e.what()));
    }
    const HardwareProfile profile = LoadProfile(options->common);
    const collectives::ResolvedTopology topology =
        collectives::ResolveTopology(parsed, profile, options->path);
    std::printf("%s: valid\n%s", options->path.c_str(),
                collectives::FormatTopology(topology).c_str());
    *exit_code = 0;
  });
}

}  // namespace nkisim::launcher
