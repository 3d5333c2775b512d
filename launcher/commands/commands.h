// The subcommands of `nkisim`, in one table (as Ninja registers its tools): name, parent group,
// the function that adds the command's options and callback, and the one-line summary --help
// shows. main.cc builds the command line by walking it in order.
#pragma once

#include <span>

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

}  // namespace nkisim::launcher
