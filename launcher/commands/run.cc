#include "launcher/commands/run.h"

#include <memory>

#include <CLI/CLI.hpp>

#include "launcher/commands/common_options.h"
#include "launcher/job/mpirun.h"
#include "launcher/job/run_job.h"
#include "runtime/error.h"

namespace nkisim::launcher {

void AddRunCommand(CLI::App* cmd, int* exit_code) {
  auto o = std::make_shared<RunOptions>();
  auto common = std::make_shared<CommonOptions>();  // --trace
  cmd->add_option("config", o->config, "scenario file (text proto or JSON)")->required();
  cmd->add_option("--report", o->report_json, "JSON report output")->capture_default_str();
  CommonOptions defaults;
  defaults.trace_path = o->trace;
  const CommonOptionHandles handles =
      AddCommonOptions(cmd, common.get(), kTraceFlag | kTimingOnlyFlag, defaults);
  handles.trace->description("Chrome/Perfetto trace of all ranks ('': none)");
  handles.timing_only->description(
      "advance the clocks only: compute, move and check no values (same simulated times); "
      "the report says nothing was checked");
  cmd->add_option("--mpirun", o->mpirun, "mpirun program")->capture_default_str();
  cmd->add_flag("--mpirun-ranks", o->mpirun_ranks,
                "with --timing-only: run the ranks as MPI processes under mpirun (default: threads "
                "of this process, no mpirun; a scenario with a hostfile or a KILL or STALL "
                "fault always uses mpirun)");
  cmd->add_flag("--as-rank", o->as_rank, "run as one rank of the job (set by the launcher)")
      ->group("");
  cmd->add_option("--control", o->control, "the launcher's control plane host:port")->group("");
  cmd->callback([o, common, exit_code] {
    o->trace = common->trace_path;
    o->timing_only = common->timing_only;
    if (o->mpirun_ranks && !o->timing_only) {
      Raise(ErrorCode::kInvalidArgument,
            "run: --mpirun-ranks applies to --timing-only (a functional job's ranks always run "
            "under mpirun)");
    }
    *exit_code = o->as_rank || RunningUnderMpirun() ? RunRank(*o) : RunLauncher(*o);
  });
}

}  // namespace nkisim::launcher
