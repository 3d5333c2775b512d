// `nkisim example softmax`: the example kernel written in the nl language (a row softmax,
// kernels/examples/row_softmax.h) on one simulated logical core, on seeded random inputs: prints
// the cost summary and the roofline, checks the result against the plain fp64 golden and writes
// the Chrome trace.
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace nkisim::launcher {

struct SoftmaxExampleOptions {
  int64_t rows = 128;
  int64_t cols = 2048;
  std::string dtype = "bf16";  // of x and y: fp32, bf16 or fp16
  int lnc = 1;
  uint64_t seed = 1;
  std::string profile_path;  // empty: built-in trn2
  std::string trace_path = "nkisim-softmax.trace.json";
};

// Registers the `example` group with its `softmax` command; the callback stores its exit code in
// *exit_code.
void AddExampleCommand(CLI::App& app, int* exit_code);

// Runs the example; returns 0 when the result matches the golden, 1 when it does not.
// Throws nkisim::Error on bad options (the kernel's validation errors included).
int RunSoftmaxExample(const SoftmaxExampleOptions& options);

}  // namespace nkisim::launcher
