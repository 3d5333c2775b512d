// `nkisim demo`: the single-core demo, a tiled matmul on one simulated logical core that prints
// its cost summary, checks the result against the fp64 golden and writes a Chrome trace.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace nkisim::launcher {

struct DemoOptions {
  int64_t m = 256;
  int64_t k = 1024;
  int64_t n = 2048;
  int lnc = 2;
  std::string dtype = "bf16";
  uint64_t seed = 1;
  std::string profile_path;  // empty: built-in trn2
  std::string trace_path = "nkisim-demo.trace.json";
};

// Registers the subcommand; the callback stores its exit code in *exit_code.
void AddDemoCommand(CLI::App& app, int* exit_code);

// Runs the demo; returns 0 when the result matches the golden, 1 when it does not.
// Throws nkisim::Error on bad options.
int RunDemo(const DemoOptions& options);

}  // namespace nkisim::launcher
