// `nkisim calibrate LOG... --out PROFILE [--profile BASE] [--lnc 2]`: fits the collective cost
// model to nccom-test logs (collectives/calibration.h). Prints every row (measured, model before
// and after, errors), the fitted parameters per (op, algorithm) and the geomean error before and
// after; writes BASE (default: the built-in trn2) with a collective_tuning entry per fitted
// (op, algorithm) to PROFILE, atomically (temp file + rename), in text format. A malformed log
// exits 14 with "file:line: ...".
#pragma once

namespace CLI {
class App;
}

namespace nkisim::launcher {

// Adds the options of `nkisim calibrate` to `cmd`; the callback stores its exit code in *exit_code.
void AddCalibrateCommand(CLI::App* cmd, int* exit_code);

}  // namespace nkisim::launcher
