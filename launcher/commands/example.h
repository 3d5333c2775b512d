// `nkisim example softmax`: the example kernel written in the nl language (a row softmax,
// kernels/examples/row_softmax.h) on one simulated logical core, on seeded random inputs: prints
// the cost summary and the roofline, checks the result against the plain fp64 golden and writes
// the Chrome trace.
#pragma once

#include <cstdint>
#include <string>

#include "launcher/commands/common_options.h"

namespace CLI {
class App;
}

namespace nkisim::launcher {

struct SoftmaxExampleOptions {
  int64_t rows = 128;
  int64_t cols = 2048;
  std::string dtype = "bf16";  // of x and y: fp32, bf16 or fp16
  // --lnc, --seed, --profile, --trace; as registered: lnc 1, seed 1, trn2,
  // trace nkisim-softmax.trace.json.
  CommonOptions common;
};

// Adds the options of `nkisim example softmax` to `cmd`; the callback stores its exit code in
// *exit_code.
void AddSoftmaxExampleCommand(CLI::App* cmd, int* exit_code);

// Runs the example; returns 0 when the result matches the golden, 1 when it does not.
// Throws nkisim::Error on bad options (the kernel's validation errors included).
int RunSoftmaxExample(const SoftmaxExampleOptions& options);

}  // namespace nkisim::launcher
