// The text and JSON output of `nkisim predict` (model/predict.h).
#include <nlohmann/json.hpp>

#include "model/predict.h"
#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

constexpr double kGiB = 1073741824.0;

// A steady layer's phases, each also times the L layers (the first layer's QKV is slightly
// longer: the stack's total is in the TTFT / TPOT line).
std::string PhaseLine(const std::vector<PhaseTime>& phases, int layers) {
  std::string out;
  double total = 0;  // us over the L layers
  for (const PhaseTime& p : phases) {
    const int n = p.layers > 0 ? p.layers : layers;
    out += StrPrintf("    %-20s %12.3f us  x %d layers = %10.3f ms\n", p.phase.c_str(), p.us, n, p.us * n / 1000.0);
    total += p.us * n;
  }
  // An interleaved model's rows run in some of the layers: the layer line is their mean.
  out += StrPrintf("    %-20s %12.3f us  x %d layers = %10.3f ms\n", "layer", total / std::max(1, layers), layers,
                   total / 1000.0);
  return out;
}

std::string Verdict(const PlanPrediction& p) {
  if (p.fits) {
    return StrPrintf("fits (%.1f%%, %.2f GiB free)", 100.0 * p.hbm_bytes / p.hbm_capacity,
                     (p.hbm_capacity - p.hbm_bytes) / kGiB);
  }
  return StrPrintf("DOES NOT FIT: over by %.2f GiB (%.1f%% of capacity)",
                   (p.hbm_bytes - p.hbm_capacity) / kGiB, 100.0 * p.hbm_bytes / p.hbm_capacity);
}

// An MoE model: the plan's expert split, each step's busiest EP rank against the mean, and the
// experts' resident weights.
std::string MoeLines(const PredictRequest& r, const PlanPrediction& p) {
  if (!r.model.moe) return "";
  const MoePlan m = MoePlanOf(p.plan);
  auto rows = [](const MoeBlockCost& c) {
    int64_t sum = 0;
    for (int64_t n : c.rank_rows) sum += n;
    const double mean = c.rank_rows.empty() ? 0.0 : double(sum) / c.rank_rows.size();
    const int64_t busiest = c.rank_rows.empty() ? 0 : c.rank_rows[c.busiest];
    return StrPrintf("busiest EP rank %d: %lld expert rows (mean %.1f)", c.busiest, static_cast<long long>(busiest),
                     mean);
  };
  std::string skew = "uniform";
  if (r.skew.kind == kernels::moe::RouterSkew::Kind::kZipf) skew = StrPrintf("zipf:%g", r.skew.zipf_s);
  if (r.skew.kind == kernels::moe::RouterSkew::Kind::kCounts) {
    skew = StrCat(r.skew_text.substr(r.skew_text.find(' ') + 1), " (scaled to each step's tokens)");
  }
  return StrPrintf("  MoE: %d experts, top %d, expert I %d; moe_ep %d x moe_tp %d (%d experts and I %d a rank); "
                   "router skew %s\n"
                   "    decode step: %s; prefill chunk: %s\n"
                   "    experts' weights %.2f GiB a layer per rank (all %d of the rank's experts resident)\n",
                   r.model.experts, r.model.top_k, r.model.expert_inter, m.ep, m.moe_tp, r.model.experts / m.ep,
                   r.model.expert_inter / m.moe_tp, skew.c_str(), rows(p.moe_decode).c_str(), rows(p.moe_prefill).c_str(),
                   p.moe_bytes_per_layer / kGiB, r.model.experts / m.ep) +
         (r.model.dense_layers() > 0
              ? StrPrintf("    interleaved (interleave_moe_layer_step %d): %d MoE layers, %d dense layers of MLP I %d "
                          "(I %d a rank)\n",
                          r.model.moe_step, r.model.moe_layers, r.model.dense_layers(), r.model.dense_inter,
                          r.model.dense_inter / std::max(1, p.plan.tp))
              : "");
}

std::string FormatPlan(const PredictRequest& r, const PlanPrediction& p) {
  const int L = r.model.layers;
  std::string out = StrPrintf("\nplan %s (tp %d, attention_dp %d, lnc %d%s)%s\n", p.plan.name.c_str(), p.plan.tp,
                              p.plan.attention_dp, p.plan.lnc,
                              p.plan.replicas > 1 ? StrPrintf(", %d replicas", p.plan.replicas).c_str() : "",
                              p.fits ? "" : "  [DOES NOT FIT HBM]");
  const std::string hbm = StrCat("  HBM per logical core: ", FormatHbmFootprint(p.layers_hbm),
                                 StrPrintf("; + embedding / LM head share %.2f GiB = %.2f of %.2f GiB: ",
                                           p.embedding_bytes / kGiB, p.hbm_bytes / kGiB, p.hbm_capacity / kGiB),
                                 Verdict(p), "\n");
  const std::string max_batch =
      p.max_batch < 0 ? "" : StrPrintf("  max batch that fits HBM at %d tokens: %d%s\n", r.input_tokens + r.output_tokens,
                                       p.max_batch, p.max_batch == 128 ? " (the decode kernels' limit)" : "");
  const std::string max_context =
      p.max_input < 0 ? "" : StrPrintf("  longest context that fits HBM at batch %d: %d tokens (%d in + %d out)\n",
                                       r.batch, p.max_input + r.output_tokens, p.max_input, r.output_tokens);
  if (!p.simulated) return out + StrCat("  times: not simulated: ", p.error, "\n") + hbm + max_batch + max_context;
  out += StrPrintf("  TTFT %.2f ms: prefill of %d layers %.3f ms + LM head %.3f ms\n", p.ttft_ms, L,
                   p.prefill_stack_ns / 1e6, p.lm_head_prefill_ns / 1e6);
  if (p.prefill_tokens != r.input_tokens) {
    out += StrPrintf("    (the prompt's %d tokens padded to the context-encoding bucket of %d: every padded row "
                     "is computed, as the compiled graph does)\n",
                     r.input_tokens, p.prefill_tokens);
  }
  if (p.prefill_chunks > 1) {
    out += StrPrintf("    (in %d chunks of %d tokens, --max-prefill-chunk %d and the attention CTE's limit; "
                     "each chunk's attention over the earlier chunks' keys estimated, not simulated)\n",
                     p.prefill_chunks, p.prefill_chunk_tokens, r.max_prefill_chunk);
  }
  out += StrPrintf("  TPOT %.3f ms: device %.3f ms (%d layers %.3f ms, mean over KV %d..%d%s, + LM head "
                   "%.3f ms) + host %.3f ms/step (profile host_ms_per_step)\n",
                   p.tpot_ms, p.device_tpot_ms, L, p.decode_stack_mean_ns / 1e6, r.input_tokens,
                   r.input_tokens + r.output_tokens - 1,
                   r.token_generation_buckets.empty() ? "" : " each step at its token-generation bucket",
                   p.lm_head_decode_ns / 1e6, p.host_ms_per_step);
  out += StrPrintf("  %.1f tokens/s per request, %.1f per instance (batch %d%s)\n", p.tokens_per_s,
                   p.tokens_per_s_instance, r.batch,
                   p.plan.replicas > 1 ? StrPrintf(" in each of %d replicas", p.plan.replicas).c_str() : "");
  out += "  decode layers sampled at KV:";
  for (const auto& [kv, ns] : p.samples) out += StrPrintf(" %d: %.3f ms;", kv, ns / 1e6);
  out += StrPrintf("\n  decode step at KV %d, per phase (one layer, simulated):\n", p.decode_phases_kv);
  out += PhaseLine(p.decode_phases, L);
  out += "  prefill per phase (one layer, simulated):\n" + PhaseLine(p.prefill_phases, L);
  return out + MoeLines(r, p) + hbm + max_batch + max_context;
}

}  // namespace

std::string FormatPredictions(const PredictRequest& r, const std::vector<PlanPrediction>& preds) {
  const HfModel& m = r.model;
  std::string out = StrPrintf(
      "nkisim predict %s: %s, H %d, I %d, %d layers, %d Q / %d KV heads, d %d%s, vocab %lld; batch %d, "
      "%d tokens in, %d out; profile %s\n",
      m.source.c_str(), m.architecture.c_str(), m.hidden, m.intermediate, m.layers, m.n_q_heads, m.n_kv_heads,
      m.head_dim, m.qkv_bias ? ", q/k/v bias" : "", static_cast<long long>(m.vocab), r.batch, r.input_tokens, r.output_tokens,
      r.profile_path.empty() ? "trn2 (built-in)" : r.profile_path.c_str());
  for (const PlanPrediction& p : preds) out += FormatPlan(r, p);
  out += StrPrintf("\n%-16s %12s %12s %12s %12s %12s  %s\n", "plan", "TTFT (ms)", "TPOT (ms)", "tok/s/req",
                   "tok/s/inst", "HBM (GiB)", "verdict");
  for (const PlanPrediction& p : preds) {
    if (!p.simulated) {
      out += StrPrintf("%-16s %12s %12s %12s %12s %12.2f  %s\n", p.plan.name.c_str(), "-", "-", "-", "-",
                       p.hbm_bytes / kGiB, "does not fit (not simulated)");
      continue;
    }
    out += StrPrintf("%-16s %12.2f %12.3f %12.1f %12.1f %12.2f  %s\n", p.plan.name.c_str(), p.ttft_ms, p.tpot_ms,
                     p.tokens_per_s, p.tokens_per_s_instance, p.hbm_bytes / kGiB, p.fits ? "fits" : "does not fit");
  }
  return out;
}

namespace {

nlohmann::json MoeJson(const PlanPrediction& p) {
  if (p.moe_decode.phases.empty()) return nullptr;
  const MoePlan m = MoePlanOf(p.plan);
  auto block = [](const MoeBlockCost& c) {
    return nlohmann::json{{"rank_rows", c.rank_rows}, {"busiest_rank", c.busiest},
                          {"busiest_expert_rows", c.busiest_expert_rows}, {"total_ns", c.total_ns()}};
  };
  nlohmann::json out = {{"moe_ep", m.ep}, {"moe_tp", m.moe_tp}, {"weights_bytes_per_layer", p.moe_bytes_per_layer},
                        {"decode", block(p.moe_decode)}, {"prefill", block(p.moe_prefill)}};
  if (!p.dense_decode.phases.empty()) {  // interleaved: a dense layer's MLP, and each row's layer count
    out["dense_mlp_decode_ns"] = p.dense_decode.total_ns();
    out["dense_mlp_prefill_ns"] = p.dense_prefill.total_ns();
    nlohmann::json layers;
    for (const PhaseTime& t : p.decode_phases) {
      if (t.layers > 0) layers[t.phase] = t.layers;  // rows absent here run in every layer
    }
    out["phase_layers"] = layers;
  }
  return out;
}

nlohmann::json PlanJson(const PlanPrediction& p) {
  nlohmann::json decode, prefill, samples = nlohmann::json::array();
  for (const auto& [kv, ns] : p.samples) samples.push_back({{"kv_length", kv}, {"layers_ns", ns}});
  for (const PhaseTime& t : p.decode_phases) decode[t.phase] = t.us;
  for (const PhaseTime& t : p.prefill_phases) prefill[t.phase] = t.us;
  if (!p.simulated) {
    return {{"name", p.plan.name}, {"simulated", false}, {"error", p.error},
            {"ttft_ms", nullptr}, {"tpot_ms", nullptr}, {"device_tpot_ms", nullptr},
            {"host_ms_per_step", nullptr}, {"tokens_per_s", nullptr},
            {"hbm_bytes_per_rank", p.hbm_bytes}, {"hbm_capacity_bytes_per_rank", p.hbm_capacity},
            {"fits", p.fits}, {"max_batch", p.max_batch}, {"max_input_tokens", p.max_input}};
  }
  return {{"name", p.plan.name},
          {"simulated", true},
          {"tp", p.plan.tp},
          {"attention_dp", p.plan.attention_dp},
          {"lnc", p.plan.lnc},
          {"replicas", p.plan.replicas},
          {"ttft_ms", p.ttft_ms},
          {"tpot_ms", p.tpot_ms},
          {"device_tpot_ms", p.device_tpot_ms},
          {"host_ms_per_step", p.host_ms_per_step},
          {"tokens_per_s", p.tokens_per_s},
          {"tokens_per_s_per_instance", p.tokens_per_s_instance},
          {"hbm_bytes_per_rank", p.hbm_bytes},
          {"hbm_capacity_bytes_per_rank", p.hbm_capacity},
          {"fits", p.fits},
          {"max_batch", p.max_batch},
          {"max_input_tokens", p.max_input},
          {"lm_head_decode_ms", p.lm_head_decode_ns / 1e6},
          {"lm_head_prefill_ms", p.lm_head_prefill_ns / 1e6},
          {"prefill_layers_ns", p.prefill_stack_ns},
          {"prefill_tokens", p.prefill_tokens},
          {"prefill_chunks", p.prefill_chunks},
          {"prefill_chunk_tokens", p.prefill_chunk_tokens},
          {"decode_layers_mean_ns", p.decode_stack_mean_ns},
          {"decode_samples", samples},
          {"embedding_bytes_per_rank", p.embedding_bytes},
          {"hbm_layers_bytes_per_rank", p.layers_hbm.total()},
          {"decode_layer_phases_us", decode},
          {"decode_phases_kv_length", p.decode_phases_kv},
          {"prefill_layer_phases_us", prefill},
          {"moe", MoeJson(p)}};
}

}  // namespace

std::string PlanPredictionJson(const PlanPrediction& p) { return PlanJson(p).dump(); }

std::string PredictionsJson(const PredictRequest& r, const std::vector<PlanPrediction>& preds) {
  nlohmann::json plans = nlohmann::json::array();
  for (const PlanPrediction& p : preds) plans.push_back(PlanJson(p));
  const nlohmann::json doc = {{"model", r.model.source},
                              {"architecture", r.model.architecture},
                              {"layers", r.model.layers},
                              {"batch", r.batch},
                              {"input_tokens", r.input_tokens},
                              {"output_tokens", r.output_tokens},
                              {"plans", plans}};
  return doc.dump(2) + "\n";
}

}  // namespace nkisim::launcher
