// `nkisim kernel mlp`: runs the MLP kernel (TKG or CTE, --variant) on one simulated logical core,
// on seeded random inputs (kernels/mlp/mlp_case.h) or .npy files; writes out.npy (and
// fused_hidden.npy), prints the cost summary and the roofline, writes the trace and, with --check,
// compares against the fp64 golden with the MLP tolerance.
#pragma once

#include <cstdint>
#include <string>

#include "launcher/commands/common_options.h"

namespace CLI {
class App;
}

namespace nkisim::launcher {

struct MlpOptions {
  std::string variant = "auto";  // auto | tkg | cte
  int64_t b = 4, s = 1, h = 4096, i = 896;
  std::string dtype = "bf16";         // hidden, residual, gamma, float weights, biases, output
  std::string activation = "silu";    // silu | gelu | relu
  std::string quantization = "none";  // none | static | row (tkg)
  std::string norm = "rms";           // none | rms | layer
  bool residual = false;              // fused residual add
  bool store_fused_hidden = false;
  bool bias = false;  // gate, up and down biases
  // .npy inputs; empty: seeded random values.
  std::string hidden_path, residual_path, gamma_path, gate_w_path, up_w_path, down_w_path;
  std::string out_dir = "mlp-out";
  CommonOptions common;  // --lnc 2, --seed 1, --profile trn2, --trace nkisim-mlp.trace.json
  bool check = false;
  bool list_variants = false;
};

// Adds the options of `nkisim kernel mlp` to `cmd`; the callback stores its exit code in
// *exit_code.
void AddKernelMlpCommand(CLI::App* cmd, int* exit_code);

// Runs one case; returns 0, or 1 when --check finds an element outside the tolerance.
// Throws nkisim::Error on bad options or inputs (the kernel's validation errors included).
int RunKernelMlp(const MlpOptions& options);

}  // namespace nkisim::launcher
