// nkisim: simulator of Trainium-class NeuronCores and the collectives between them.
// Exit codes: 0 success, 1 a result failed its golden check, 2 usage error, 10 + ErrorCode for
// typed errors (see runtime/error.h).
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "launcher/calibrate_command.h"
#include "launcher/collective_command.h"
#include "launcher/demo_command.h"
#include "launcher/kernel_attention_command.h"
#include "launcher/kernel_qkv_command.h"
#include "launcher/example_command.h"
#include "launcher/kernel_oproj_command.h"
#include "launcher/run_command.h"
#include "launcher/validate_command.h"
#include "runtime/error.h"

int main(int argc, char** argv) {
  CLI::App app{"nkisim: simulated Trainium-class NeuronCores, kernels and collectives"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "nkisim 0.1.0");
  int exit_code = 0;
  nkisim::launcher::AddDemoCommand(app, &exit_code);
  nkisim::launcher::AddExampleCommand(app, &exit_code);
  nkisim::launcher::AddValidateCommand(app, &exit_code);
  nkisim::launcher::AddRunCommand(app, &exit_code);
  nkisim::launcher::AddCollectiveCommand(app, &exit_code);
  nkisim::launcher::AddCalibrateCommand(app, &exit_code);
  CLI::App* kernel = app.add_subcommand(
      "kernel", "Run one kernel case on one logical core: outputs, cost summary, trace, golden check");
  kernel->require_subcommand(1);
  nkisim::launcher::AddKernelQkvCommand(*kernel, &exit_code);
  nkisim::launcher::AddKernelOprojCommand(*kernel, &exit_code);
  nkisim::launcher::AddKernelAttentionCommand(*kernel, &exit_code);
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
