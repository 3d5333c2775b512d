// `nkisim run CONFIG`: the main job. Started by a user, it is the launcher of the job; started by
// mpirun (or with --as-rank), it is one rank of that job (launcher/job/run_job.h).
#pragma once

namespace CLI {
class App;
}

namespace nkisim::launcher {

// Adds the options of `nkisim run` to `cmd`; the callback stores its exit code in *exit_code.
void AddRunCommand(CLI::App* cmd, int* exit_code);

}  // namespace nkisim::launcher
