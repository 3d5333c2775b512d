// `nkisim kernel oproj`: runs output_projection_cte or output_projection_tkg (--variant) on one
// simulated logical core, on .npy inputs or on seeded random inputs drawn as the reference suites
// draw theirs; writes out.npy, prints the cost summary and the roofline, writes the trace and,
// with --check, compares against the golden with the reference tolerance.
#pragma once

#include <cstdint>
#include <string>

#include "launcher/commands/common_options.h"

namespace CLI {
class App;
}

namespace nkisim::launcher {

struct OprojOptions {
  std::string variant = "tkg";  // cte | tkg
  // Defaults: the decode case of docs/output-projection.md.
  int64_t b = 32, n = 8, d = 128, s = 1, h = 8192;
  std::string dtype = "bf16";         // attention, bias and float weights
  std::string quantization = "none";  // none | static | row (tkg) | mx | static_mx | row_mx
  bool no_bias = false;
  bool transpose_out = false;  // tkg only
  std::string output_dtype;    // cte only; empty: the attention dtype
  // .npy inputs; empty: seeded random values.
  std::string attention_path, weight_path, bias_path, input_scale_path, weight_scale_path;
  std::string out_dir = "oproj-out";
  // --lnc, --seed, --profile, --trace; as registered: lnc 2, seed 1, trn2,
  // trace nkisim-oproj.trace.json.
  CommonOptions common;
  bool check = false;
};

// Registers `oproj` under the `kernel` group; the callback stores its exit code in *exit_code.
// Adds the options of `nkisim kernel oproj` to `cmd`; the callback stores its exit code in
// *exit_code.
void AddKernelOprojCommand(CLI::App* cmd, int* exit_code);

// Runs one case; returns 0, or 1 when --check finds an element outside the tolerance.
// Throws nkisim::Error on bad options or inputs (the kernels' validation errors included).
int RunKernelOproj(const OprojOptions& options);

}  // namespace nkisim::launcher
