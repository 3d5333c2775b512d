// `nkisim collective OP -b MIN -e MAX -f FACTOR`: an nccl-tests-style sweep of one collective
// under mpirun. For each size: host time per call, algbw, busbw, simulated time, #wrong elements
// (summed over ranks; any wrong element makes the exit code 1) and, with --baseline, the raw MPI
// call on the same communicator and buffers with the ratio. Formulas: docs/collectives.md.
#pragma once

namespace CLI {
class App;
}

namespace nkisim::launcher {

// Adds the options of `nkisim collective` to `cmd`; the callback stores its exit code in
// *exit_code.
void AddCollectiveCommand(CLI::App* cmd, int* exit_code);

}  // namespace nkisim::launcher
