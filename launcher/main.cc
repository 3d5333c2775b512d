// nkisim: simulator of Trainium-class NeuronCores and the collectives between them.
// Exit codes: 0 success, 1 a result failed its golden check, 2 usage error, 10 + ErrorCode for
// typed errors (see runtime/error.h).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <string>

#include <CLI/CLI.hpp>

#include "launcher/commands/commands.h"
#include "runtime/error.h"

namespace {

// OpenBLAS (Debian's 0.3.21) does not recognise some newer x86 CPUs and falls back to its generic
// Prescott kernels, about 2.5x slower for the tile matmuls and the fp64 goldens. It reads
// OPENBLAS_CORETYPE when the library loads, so unless the user chose a core type, the process
// starts again with the one this CPU supports (ranks started by mpirun inherit it).
void UseFastOpenBlasKernels(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const char* type = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                     : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                       : nullptr;
  if (type == nullptr) return;
  setenv("OPENBLAS_CORETYPE", type, 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then go on with the library's choice
}

}  // namespace

int main(int argc, char** argv) {
  UseFastOpenBlasKernels(argv);
  CLI::App app{"nkisim: simulated Trainium-class NeuronCores, kernels and collectives"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "nkisim 0.1.0");
  int exit_code = 0;
  // The command table (launcher/commands/commands.cc), groups before their members.
  std::map<std::string, CLI::App*> groups = {{"", &app}};
  for (const nkisim::launcher::Command& c : nkisim::launcher::Commands()) {
    CLI::App* cmd = groups.at(c.parent)->add_subcommand(c.name, c.summary);
    if (c.add != nullptr) {
      c.add(cmd, &exit_code);
    } else {
      cmd->require_subcommand(1);
      groups[c.name] = cmd;
    }
  }
  // CLI11 answers an unknown command with "A subcommand is required", which does not name it.
  if (argc >= 2 && argv[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      known = known || sub->get_name() == argv[1];
      names += (names.empty() ? "" : ", ") + sub->get_name();
    }
    if (!known) {
      std::fprintf(stderr, "nkisim: '%s' is not a command; the commands are %s (--help)\n",
                   argv[1], names.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const nkisim::Error& e) {
    std::fprintf(stderr, "nkisim: %s: %s\n", nkisim::ErrorCodeName(e.code()), e.what());
    return nkisim::ExitCodeFor(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nkisim: internal error: %s\n", e.what());
    return nkisim::ExitCodeFor(nkisim::ErrorCode::kInternal);
  }
  return exit_code;
}
