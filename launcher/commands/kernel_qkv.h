// `nkisim kernel qkv`: one fused-QKV case on one simulated logical core. Inputs come from
// <in-dir>/<name>.npy where such a file exists (names as the reference's parameters: input,
// fused_qkv_weights, bias, qkv_w_scale, qkv_in_scale, mlp_prev, attention_prev,
// gamma_norm_weights, layer_norm_bias, cos_cache, sin_cache) and are seeded random otherwise.
// Prints the chosen variant, each core's cost summary and the roofline; writes qkv_out.npy (and
// fused_hidden.npy) into the output directory and the Chrome trace; --check compares with the
// golden under the reference tolerance. The defaults are the decode case of docs/qkv.md.
#pragma once

#include <cstdint>
#include <string>

#include "launcher/commands/common_options.h"

namespace CLI {
class App;
}

namespace nkisim::launcher {

struct KernelQkvOptions {
  int64_t b = 4, s = 1, h = 8192;
  int64_t n_q = 8, n_kv = 1, d = 128;
  std::string dtype = "bf16";
  std::string norm = "rms";      // none | rms | layer | rms_skip_gamma
  std::string quant = "none";    // none | static | row | mx | static_mx | row_mx
  std::string layout = "bsd";    // bsd | nbsd | nbds
  std::string variant = "auto";  // auto | tkg | cte
  bool fused_add = false;
  bool bias = false;
  bool norm_bias = false;
  bool rope = false;
  double eps = 1e-6;
  int64_t hidden_actual = 0;  // 0: not given
  std::string weight_layout;  // MX: mx_contiguous (default) | mx_interleaved
  bool h_transposed = false;                     // MX: is_h_dim_4h_transposed
  std::string in_dir;  // empty: every input random
  std::string out_dir = "nkisim-qkv-out";
  bool write_inputs = false;  // also write the inputs used into out_dir
  // --lnc, --seed, --profile, --trace; as registered: lnc 2, seed 1, trn2,
  // trace nkisim-qkv.trace.json.
  CommonOptions common;
  bool check = false;
  bool list_variants = false;
};

// Registers `qkv` under the `kernel` subcommand group; the callback stores its exit code.
// Adds the options of `nkisim kernel qkv` to `cmd`; the callback stores its exit code in
// *exit_code.
void AddKernelQkvCommand(CLI::App* cmd, int* exit_code);

// Runs one case; returns 0, or 1 when --check finds the result outside the tolerance.
// Throws nkisim::Error on invalid options or parameters.
int RunKernelQkv(const KernelQkvOptions& options);

}  // namespace nkisim::launcher
