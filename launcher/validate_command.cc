#include "launcher/validate_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "collectives/topology.h"
#include "runtime/hardware_profile.h"

namespace nkisim::launcher {

void AddValidateCommand(CLI::App& app, int* exit_code) {
  struct Options {
    std::string path;
    std::string profile_path;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Check a topology file (text proto or JSON) and print its resolved groups");
  cmd->add_option("file", options->path, "topology file")->required();
  cmd->add_option("--profile", options->profile_path,
                  "hardware profile for the placement rules; default: built-in trn2");
  cmd->callback([options, exit_code] {
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
