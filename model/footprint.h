// What one plan of a scenario holds in HBM per logical core (one rank), worked out from the shapes
// before any rank starts: `nkisim validate` prints it, `nkisim run` refuses a plan that does not
// fit (Error(kBadConfig), exit 14) and the run report repeats it.
//
// Per layer, a rank holds its slices of the weights (the fused QKV columns of its heads, the W_o
// rows of its Q heads, the MLP's gate / up columns and down rows of its I / tp, the two norm
// weights) and its KV cache (decode: the heads it attends for its rows, kv_length + steps tokens;
// prefill: its KV heads for the S tokens). The activations (one layer's hidden states, the QKV
// output, the attention output, the o_proj and MLP partials and sums) and the collectives'
// scratch (the batch-shard workspace, the unshard buffer) are live for one layer at a time and
// counted once. Capacity: the chip's HBM (profile hbm_bytes_per_chip) over its logical cores
// (physical_cores_per_chip / lnc). All sizes in bytes. Pure: no allocation, thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "model/scenario_config.h"

namespace nkisim::launcher {

struct HbmFootprint {
  int layers = 1;
  int64_t weights_per_layer = 0;
  int64_t kv_cache_per_layer = 0;
  int64_t activations = 0;  // one layer's live buffers
  int64_t scratch = 0;      // the collectives' workspaces
  int64_t capacity = 0;     // HBM per logical core

  int64_t total() const { return (weights_per_layer + kv_cache_per_layer) * layers + activations + scratch; }
  bool fits() const { return total() <= capacity; }
};

// REQUIRES: the plan resolved against `spec` (heads per rank, lnc, attention_dp set), dtype the
// scenario's element type, I divisible by tp when the MLP runs.
HbmFootprint PlanHbmFootprint(const proto::Scenario& spec, DType dtype, Workload workload,
                              const ResolvedPlan& plan, const HardwareProfile& profile);

// "weights 22.00 MiB + KV cache 16.02 MiB per layer x 2 layers, activations 3.00 MiB, scratch
// 0.50 MiB: 79.04 MiB of 24.00 GiB HBM per logical core (0.3%)".
std::string FormatHbmFootprint(const HbmFootprint& f);

}  // namespace nkisim::launcher
