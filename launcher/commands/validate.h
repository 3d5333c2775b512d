// `nkisim validate FILE`: parses and checks a topology file; prints the resolved replica groups,
// placement and iota_workers table, or every problem found (exit 14, bad config).
#pragma once

namespace CLI {
class App;
}

namespace nkisim::launcher {

// Adds the options of `nkisim validate` to `cmd`; the callback stores its exit code in *exit_code.
void AddValidateCommand(CLI::App* cmd, int* exit_code);

}  // namespace nkisim::launcher
