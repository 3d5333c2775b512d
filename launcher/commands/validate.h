// `nkisim validate FILE`: parses and checks a topology file; prints the resolved replica groups,
// placement and iota_workers table, or every problem found (exit 14, bad config).
#pragma once

namespace CLI {
class App;
}

namespace nkisim::launcher {

void AddValidateCommand(CLI::App& app, int* exit_code);

}  // namespace nkisim::launcher
