// `nkisim kernel attention`: runs the decode (TKG) or the causal prefill (CTE) attention kernel on
// one simulated logical core, on .npy inputs or seeded random ones; writes out.npy, prints the
// cost summary and the roofline ("= N.NNx the bound"), writes the trace and, with --check,
// compares with the fp64 golden at the reference tolerance (bf16 atol 1e-5 rtol 2e-2; fp32
// atol 1e-5 rtol 1e-4).
#pragma once

#include <cstdint>
#include <string>

#include "launcher/commands/common_options.h"

namespace CLI {
class App;
}

namespace nkisim::launcher {

struct AttentionOptions {
  std::string variant = "tkg";  // tkg (decode) | cte (causal prefill)
  // tkg: B batch rows, G query heads per KV head, T cached tokens; cte: B, S, n_q, n_kv.
  int64_t b = 0, g = 8, t = 4096, d = 128;  // b not given (b_given false): 4 for tkg, 1 for cte
  bool b_given = false;
  int64_t s = 2048, nq = 32, nkv = 8;
  std::string dtype = "bf16";
  // .npy inputs; empty: seeded random values. tkg: q [G, B, d], k [B, d, T], v [B, T, d];
  // cte: q [n_q, B, S, d], k and v [n_kv, B, S, d].
  std::string q_path, k_path, v_path;
  std::string out_dir = "attention-out";
  // --lnc, --seed, --profile, --trace; as registered: lnc 2, seed 1, trn2,
  // trace nkisim-attention.trace.json.
  CommonOptions common;
  bool check = false;
  // tkg: this step's K and V rows ([B, d], seeded) go to the kernel as k_new / v_new, as in the
  // decode job: the kernel reads tokens [0, T - 1) from the caches and the last from SBUF, then
  // appends the rows at T - 1 (checked bit for bit when values are computed).
  bool append = false;
};

// Registers `attention` under the `kernel` group; the callback stores its exit code in *exit_code.
// Adds the options of `nkisim kernel attention` to `cmd`; the callback stores its exit code in
// *exit_code.
void AddKernelAttentionCommand(CLI::App* cmd, int* exit_code);

// Runs one case; returns 0, or 1 when --check finds an element outside the tolerance. Throws
// nkisim::Error on bad options or inputs (the kernels' validation errors: exit 11).
int RunKernelAttention(const AttentionOptions& options);

}  // namespace nkisim::launcher
