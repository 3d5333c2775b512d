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
#include "runtime/host_blas.h"

namespace {

// OpenBLAS reads two settings only when the library loads, so the process starts again with them
// in its environment (ranks started by mpirun inherit it), each only where the user has not set it:
// * OPENBLAS_CORETYPE: Debian's 0.3.21 does not recognise some newer x86 CPUs and falls back to
//   its generic Prescott kernels, about 2.5x slower for the tile matmuls and the fp64 goldens;
// * OPENBLAS_NUM_THREADS=1: every BLAS call here is single-threaded (runtime/nisa/matmul.cc,
//   kernels/reference/blas.cc), yet the library starts a pool of one thread per core at load,
//   whose threads spin in sched_yield waiting for work: on a 2-core VM a QKV kernel run took
//   0.51 s of CPU with the pool, 0.33 s without. (An MPI job's ranks gained nothing measurable:
//   the pools spin out a wall-clock timeout while the ranks wait in MPI_Init.)
void ConfigureOpenBlas(char** argv) {
  bool changed = false;
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) {
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    changed = true;
  }
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    const char* type = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                       : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                         : nullptr;
    if (type != nullptr) {
      setenv("OPENBLAS_CORETYPE", type, 1);
      changed = true;
    }
  }
  if (!changed) return;
  // By its real path, so the process keeps its name (comm, as ps and perf show it) rather than
  // "exe". execv returns only on failure: then go on with the library as loaded.
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return;
  path[n] = '\0';
  execv(path, argv);
}

}  // namespace

int main(int argc, char** argv) {
  ConfigureOpenBlas(argv);
  CLI::App app{"nkisim: simulated Trainium-class NeuronCores, kernels and collectives"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "nkisim 0.1.0 (host BLAS: " + nkisim::HostBlasDescription() + ")");
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
  // CLI11 answers an unknown or missing command with "A subcommand is required", which names
  // neither it nor the valid ones; so for the top level and every group, say which.
  if (const std::string usage = nkisim::launcher::CommandWordProblem(app, argc, argv);
      !usage.empty()) {
    std::fprintf(stderr, "nkisim: %s (--help)\n", usage.c_str());
    return 2;
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
