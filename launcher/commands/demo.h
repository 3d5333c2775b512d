// `nkisim demo`: the single-core demo, a tiled matmul on one simulated logical core that prints
// its cost summary, checks the result against the fp64 golden and writes a Chrome trace.
#pragma once

#include <cstdint>
#include <string>

#include "launcher/commands/common_options.h"

namespace CLI {
class App;
}

namespace nkisim::launcher {

struct DemoOptions {
  int64_t m = 256;
  int64_t k = 1024;
  int64_t n = 2048;
  std::string dtype = "bf16";
  // --lnc, --seed, --profile, --trace; as registered: lnc 2, seed 1, trn2,
  // trace nkisim-demo.trace.json.
  CommonOptions common;
};

// Adds the options of `nkisim demo` to `cmd`; the callback stores its exit code in *exit_code.
void AddDemoCommand(CLI::App* cmd, int* exit_code);

// Runs the demo; returns 0 when the result matches the golden, 1 when it does not.
// Throws nkisim::Error on bad options.
int RunDemo(const DemoOptions& options);

}  // namespace nkisim::launcher
