#include "launcher/run_command.h"

#include <memory>

#include <CLI/CLI.hpp>

#include "launcher/mpirun.h"

namespace nkisim::launcher {

void AddRunCommand(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run a scenario on many ranks under mpirun: live progress, checks, report, trace");
  cmd->add_option("config", o->config, "scenario file (text proto or JSON)")->required();
  cmd->add_option("--report", o->report_json, "JSON report output")->capture_default_str();
  cmd->add_option("--trace", o->trace, "Chrome/Perfetto trace of all ranks ('': none)")->capture_default_str();
  cmd->add_option("--mpirun", o->mpirun, "mpirun program")->capture_default_str();
  cmd->add_flag("--as-rank", o->as_rank, "run as one rank of the job (set by the launcher)")
      ->group("");
  cmd->add_option("--control", o->control, "the launcher's control plane host:port")->group("");
  cmd->callback([o, exit_code] {
    *exit_code = o->as_rank || RunningUnderMpirun() ? RunRank(*o) : RunLauncher(*o);
  });
}

}  // namespace nkisim::launcher
