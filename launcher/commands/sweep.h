// `nkisim sweep SWEEP_FILE`: runs a grid of points (a base scenario and axes of values,
// proto/sweep.proto) as `nkisim run` jobs, one at a time, and writes the table (CSV and JSON), the
// verdict per shape and the plots (docs/sweep.md).
#pragma once

namespace CLI {
class App;
}

namespace nkisim::launcher {

// Adds the options of `nkisim sweep` to `cmd`; the callback stores its exit code in *exit_code:
// 0 when every point ran ok, 1 when some failed (each recorded with its error), 128 + signal when
// interrupted (the results so far written; --resume continues).
void AddSweepCommand(CLI::App* cmd, int* exit_code);

}  // namespace nkisim::launcher
