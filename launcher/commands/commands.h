// The subcommands of `nkisim`, in one table (as Ninja registers its tools): name, parent group,
// the function that adds the command's options and callback, and the one-line summary --help
// shows. main.cc builds the command line by walking it in order.
#pragma once

#include <span>
#include <string>

namespace CLI {
class App;
}

namespace nkisim::launcher {

struct Command {
  const char* name;
  const char* parent;  // "" for a top-level command, else the name of an earlier group row
  // Adds the options of the command to `cmd` (already created with name and summary); its
  // callback stores the exit code in *exit_code. nullptr: a group of commands (one required).
  void (*add)(CLI::App* cmd, int* exit_code);
  const char* summary;
};

// Every command, groups before their members, in the order --help lists them.
std::span<const Command> Commands();

// Walks the command words of argv down the groups of `app` ("kernel", "example"): "" when each
// names a command of its group, else "'softmax' is not a command of 'nkisim kernel'; its commands
// are qkv, oproj, attention, mlp", or that a group needs one (also before a flag). --help and
// --version are left to CLI11, which answers a missing command with "A subcommand is required"
// and names neither the word nor the valid ones.
std::string CommandWordProblem(CLI::App& app, int argc, char** argv);

}  // namespace nkisim::launcher
