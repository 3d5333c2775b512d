// A model for `nkisim predict`, read from a Hugging Face config.json (nlohmann-json). One row per
// architecture (kArchitectures in hf_config.cc) and one row per key a public config of those
// architectures carries (kKeys): a key is either a shape nkisim prices (hidden_size, ...), a
// key that bounds the request (max_position_embeddings), or metadata that does not change the
// cost (bos_token_id, rope_theta, ...); any other key is refused by name. Every problem of a file
// is reported at once, each naming the field, the value and the rule (Error(kBadConfig), exit 14).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

namespace nkisim::launcher {

struct HfModel {
  std::string source;         // the file
  std::string architecture;   // "LlamaForCausalLM", ...
  int hidden = 0;             // hidden_size
  int intermediate = 0;       // intermediate_size
  int layers = 0;             // num_hidden_layers
  int n_q_heads = 0;          // num_attention_heads
  int n_kv_heads = 0;         // num_key_value_heads (default: num_attention_heads)
  int head_dim = 0;           // head_dim (default: hidden_size / num_attention_heads)
  int64_t vocab = 0;          // vocab_size
  double rms_eps = 1e-6;      // rms_norm_eps
  bool tie_word_embeddings = false;
  std::string activation = "silu";  // hidden_act
  std::string dtype = "bf16";       // torch_dtype bfloat16 / float16: 2 bytes, simulated as bf16
  int64_t max_positions = 0;        // max_position_embeddings; 0: not given (no limit checked)
  bool qk_norm = false;             // Qwen3: per-head RMSNorm of q and k (no cost modeled)
  // Mixture of experts (an architecture row with a router family): every decoder layer's MLP is
  // an MoE block of `experts` experts, top_k a token, each an MLP of expert_inter (model/moe_block.h).
  bool moe = false;
  std::string router;        // the router family ("qwen3", "mixtral"): kernels/reference/moe_ref.h
  int experts = 0;           // num_experts / num_local_experts
  int top_k = 0;             // num_experts_per_tok
  int expert_inter = 0;      // moe_intermediate_size (Qwen3-MoE) or intermediate_size (Mixtral)
  int shared_inter = 0;      // a shared expert's I; 0: none
  // Interleaved dense / MoE layers (Llama 4 Maverick's interleave_moe_layer_step 2): the layers
  // (i + 1) % moe_step == 0 are MoE blocks (moe_layers of them; the config's moe_layers list, when
  // given, must name exactly those), the others dense MLPs of dense_inter (intermediate_size_mlp).
  int moe_step = 1;          // interleave_moe_layer_step
  int moe_layers = 0;        // layers with an MoE block (all `layers` unless interleaved)
  int dense_inter = 0;       // intermediate_size_mlp; 0 when not given
  int dense_layers() const { return moe ? layers - moe_layers : layers; }
  // Sliding-window attention (architectures whose row allows it): `sliding_layers` of the layers
  // attend only the last `sliding_window` tokens (all of them unless layer_types says which).
  int sliding_window = 0;    // 0: none
  int sliding_layers = 0;
  bool attention_bias = false;  // QKV / o_proj biases (rows that allow them)
  // The q, k, v projections add a bias: priced by the QKV kernel (Qwen2 always, without a config
  // key; gpt-oss with attention_bias, whose o_proj bias is not priced).
  bool qkv_bias = false;
  // H as the attention kernels take it at LNC `lnc`: hidden rounded up to whole 128-partition
  // tiles, as many as the LNC's cores split evenly (gpt-oss: 2880 -> 2944 at LNC 1, 3072 at
  // LNC 2); the MoE kernels take H as it is.
  int padded_hidden(int lnc) const {
    const int tile = 128 * std::max(1, lnc);
    return (hidden + tile - 1) / tile * tile;
  }
};

// Throws Error(kBadConfig) listing every problem ("<source>: 2 problems:\n  hidden_size: -1:
// must be a positive integer ...").
HfModel ParseHfConfig(const std::string& text, const std::string& source);
HfModel LoadHfConfig(const std::string& path);

// The keys accepted, one line each with what nkisim does with it (docs/predict.md shows it).
std::string FormatAcceptedKeys();

}  // namespace nkisim::launcher
