// `nkisim example matmul`: the same matmul written the naive way and the careful way for the DMA
// engines (kernels/examples/tiled_matmul.h against blocked_matmul.h), run side by side on the
// same inputs: each one's simulated time, its DMA transfers and descriptors, the busiest engine's
// time, the ratio of the two beside the ratio the DMA curve implies from the transfers' shapes
// alone, a check of both against the fp64 golden, and a trace of each (the engines' rows show the
// naive kernel's small descriptors).
#pragma once

#include <cstdint>
#include <string>

#include "launcher/commands/common_options.h"

namespace CLI {
class App;
}

namespace nkisim::launcher {

struct MatmulExampleOptions {
  int64_t m = 512;
  int64_t k = 2048;
  int64_t n = 4096;
  std::string dtype = "bf16";
  // --lnc, --seed, --profile, --trace; as registered: lnc 1, seed 1, trn2, trace
  // nkisim-matmul.trace.json (written as nkisim-matmul.tiled.trace.json and .blocked.).
  CommonOptions common;
};

void AddMatmulExampleCommand(CLI::App* cmd, int* exit_code);

// Returns 0 when both kernels match the golden, 1 when either does not. Throws nkisim::Error on
// bad options (the kernels' validation errors included).
int RunMatmulExample(const MatmulExampleOptions& options);

}  // namespace nkisim::launcher
