#include "model/footprint.h"
#include "model/moe_config.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

std::string Bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return StrPrintf("%.2f GiB", b / (1024.0 * 1024 * 1024));
  return StrPrintf("%.2f MiB", b / (1024.0 * 1024));
}

// KV heads whose caches a rank holds: its own (G = 1), or those of its attention-DP group's Q
// heads (G > 1; at most one more than G x its heads cover, when they straddle a KV head).
double CachedKvHeads(const ResolvedPlan& p) {
  if (p.attention_dp == 1) return p.kv_per_rank;
  return std::ceil(static_cast<double>(p.attention_dp) * p.heads_per_rank / p.q_per_kv) + 1;
}

}  // namespace

HbmFootprint PlanHbmFootprint(const proto::Scenario& s, DType dtype, Workload workload,
                              const ResolvedPlan& p, const HardwareProfile& profile) {
  if (workload == Workload::kMoe) return MoeHbmFootprint(s, dtype, p, profile);
  const double elem = static_cast<double>(SizeOf(dtype));
  const proto::ModelShape& m = s.model();
  const double h = m.hidden(), d = m.d_head(), hpr = p.heads_per_rank, kvr = p.kv_per_rank;
  const bool mlp = !s.attention_only();
  const double i_rank = mlp && p.tp > 0 ? static_cast<double>(m.intermediate()) / p.tp : 0;
  HbmFootprint f;
  f.layers = static_cast<int>(std::max(1u, s.layers()));
  const double weights = h * (hpr + 2 * kvr) * d + hpr * d * h + 3 * h * i_rank + h * (mlp ? 2 : 1) +
                         (m.qkv_bias() ? (hpr + 2 * kvr) * d : 0);
  const double qkv_out = (hpr + 2 * kvr) * d;  // per token
  double kv = 0, act = 0, scratch = 0;
  if (workload == Workload::kDecode) {
    const double b = s.batch(), tokens = static_cast<double>(s.kv_length()) + s.steps();
    kv = 2 * CachedKvHeads(p) * b / p.attention_dp * tokens * d;
    // x, the o_proj partial and sum, and with the MLP its fused sum, partial, sum and the output.
    act = b * h * (mlp ? 7 : 3) + b * qkv_out + b * p.attention_dp * hpr * d;
    if (p.attention_dp > 1) scratch = 2 * p.attention_dp * (hpr + 2 * kvr) * b * d;
  } else {
    const double bs = static_cast<double>(s.batch()) * s.seq_len();
    kv = 2 * kvr * bs * d;
    act = bs * h * (mlp ? 7 : 3) + bs * qkv_out * 2 + bs * 2 * d + (mlp ? bs * i_rank : 0);
  }
  f.weights_per_layer = static_cast<int64_t>(weights * elem);
  f.kv_cache_per_layer = static_cast<int64_t>(kv * elem);
  f.activations = static_cast<int64_t>(act * elem);
  f.scratch = static_cast<int64_t>(scratch * elem);
  const uint32_t lnc = std::max(1, p.lnc);
  const uint64_t per_chip = std::max(1u, profile.physical_cores_per_chip() / lnc);
  f.capacity = static_cast<int64_t>(profile.hbm_bytes_per_chip() / per_chip);
  return f;
}

std::string FormatHbmFootprint(const HbmFootprint& f) {
  return StrCat("weights ", Bytes(f.weights_per_layer), " + KV cache ", Bytes(f.kv_cache_per_layer),
                " per layer x ", f.layers, " layer", f.layers == 1 ? "" : "s", ", activations ",
                Bytes(f.activations), ", scratch ", Bytes(f.scratch), ": ", Bytes(f.total()), " of ",
                Bytes(f.capacity), " HBM per logical core (",
                StrPrintf("%.1f%%", f.capacity > 0 ? 100.0 * f.total() / f.capacity : 0.0), ")");
}

}  // namespace nkisim::launcher
