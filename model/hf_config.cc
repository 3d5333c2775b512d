#include "model/hf_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <string_view>
#include <vector>

#include "runtime/config_file.h"
#include "runtime/error.h"

namespace nkisim::launcher {
namespace {

using nlohmann::json;
using Problems = std::vector<std::string>;

// The family table: one row per architecture. A row with a router is a mixture of experts: its
// expert MLP's I is read from `expert_inter_key`, every decoder layer an MoE block.
struct Architecture {
  const char* name;
  const char* model_type;  // the config's model_type when it has one
  bool qk_norm;
  const char* router = nullptr;           // the router family; nullptr: dense
  const char* expert_inter_key = nullptr;  // the key holding one expert's I
  bool sliding = false;                    // sliding_window may be set
  bool bias = false;                       // attention_bias may be true
  const char* shared_inter_key = nullptr;  // the key holding the shared expert's I; nullptr: none
  const char* text_config = nullptr;       // the text model's keys are in this object (multimodal)
  bool tied = false;                       // tie_word_embeddings when the config does not say
  bool qkv_bias = false;                   // q, k, v biased whatever the config says (Qwen2's code)
};

constexpr Architecture kArchitectures[] = {
    {"LlamaForCausalLM", "llama", false},
    {"MistralForCausalLM", "mistral", false, nullptr, nullptr, true},
    // Qwen2: q, k and v projections with a bias (its code's, no config key), priced.
    {"Qwen2ForCausalLM", "qwen2", false, nullptr, nullptr, false, false, nullptr, nullptr, false, true},
    // Gemma (1): head_dim 256 (priced as two heads of 128, model/predict.cc), a GeGLU MLP (the MLP
    // kernel's gelu), tied embeddings by default; the sqrt(H) embedding scale and the norms'
    // (1 + w) weights change values, not cost.
    {"GemmaForCausalLM", "gemma", false, nullptr, nullptr, false, false, nullptr, nullptr, true},
    {"Qwen3ForCausalLM", "qwen3", true},
    {"Qwen3MoeForCausalLM", "qwen3_moe", true, "qwen3", "moe_intermediate_size"},
    {"MixtralForCausalLM", "mixtral", false, "mixtral", "intermediate_size", true},
    // Alternating sliding / full attention (layer_types), attention sinks (a per-head logit in
    // the softmax: not priced), QKV and o_proj biases (not priced), head_dim 64, H 2880.
    {"GptOssForCausalLM", "gpt_oss", false, "gpt_oss", "intermediate_size", true, true},
    // The text model of Llama 4 (text_config): sigmoid top-1 routing plus a shared expert of the
    // experts' I; every layer an MoE block (interleave_moe_layer_step 1: Scout) or every step-th
    // one, the others dense MLPs of intermediate_size_mlp (step 2: Maverick); chunked attention
    // on the RoPE layers (no_rope_layers 1) priced as a window of attention_chunk_size.
    {"Llama4ForConditionalGeneration", "llama4", true, "llama4", "intermediate_size", true, false,
     "intermediate_size", "text_config"},
};

// Bounds on sizes no real model reaches, so an absurd config is refused instead of priced.
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxExperts = 1024;
constexpr double kMaxRopeFactor = 256;

std::string Shown(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// A positive integer field into *out.
template <typename T>
void PositiveInt(const json& v, const char* key, T* out, Problems& p) {
  if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > (int64_t{1} << 31)) {
    p.push_back(StrCat(key, ": ", Shown(v), ": must be a positive integer <= 2^31"));
    return;
  }
  *out = static_cast<T>(v.get<int64_t>());
}

void Hidden(const json& v, HfModel& m, Problems& p) { PositiveInt(v, "hidden_size", &m.hidden, p); }
void Intermediate(const json& v, HfModel& m, Problems& p) {
  PositiveInt(v, "intermediate_size", &m.intermediate, p);
}
void Layers(const json& v, HfModel& m, Problems& p) {
  PositiveInt(v, "num_hidden_layers", &m.layers, p);
  if (m.layers > kMaxLayers) {
    p.push_back(StrCat("num_hidden_layers: ", m.layers, ": must be <= ", kMaxLayers, " (no model has more)"));
    m.layers = 0;
  }
}
// num_experts (Qwen3-MoE) and num_local_experts (Mixtral) name the same count: both given, they
// must agree (CheckShapes).
void Experts(const json& v, const char* key, HfModel& m, Problems& p) {
  int e = 0;
  PositiveInt(v, key, &e, p);
  if (e > kMaxExperts) {
    p.push_back(StrCat(key, ": ", e, ": must be <= ", kMaxExperts));
    return;
  }
  if (e > 0 && m.experts > 0 && e != m.experts) {
    p.push_back(StrCat(key, ": ", e, ": disagrees with the other expert count given (", m.experts,
                       "); num_experts and num_local_experts must be equal when both are given"));
  }
  if (e > 0 && m.experts == 0) m.experts = e;
}
void NumExperts(const json& v, HfModel& m, Problems& p) { Experts(v, "num_experts", m, p); }
void NumLocalExperts(const json& v, HfModel& m, Problems& p) { Experts(v, "num_local_experts", m, p); }
void TopK(const json& v, HfModel& m, Problems& p) { PositiveInt(v, "num_experts_per_tok", &m.top_k, p); }
void MoeIntermediate(const json& v, HfModel& m, Problems& p) {
  PositiveInt(v, "moe_intermediate_size", &m.expert_inter, p);
}
void NormTopk(const json& v, HfModel&, Problems& p) {
  if (!v.is_boolean() || !v.get<bool>()) {
    p.push_back(StrCat("norm_topk_prob: ", Shown(v), ": must be true (the qwen3 router renormalises "
                       "its top-k weights)"));
  }
}
void SparseStep(const json& v, HfModel&, Problems& p) {
  if (!v.is_number_integer() || v.get<int64_t>() != 1) {
    p.push_back(StrCat("decoder_sparse_step: ", Shown(v), ": must be 1 (every layer an MoE block; "
                       "interleaved dense layers are not modeled for this architecture)"));
  }
}
void MlpOnlyLayers(const json& v, HfModel&, Problems& p) {
  if (!v.is_array() || !v.empty()) {
    p.push_back(StrCat("mlp_only_layers: ", Shown(v), ": must be [] (every layer an MoE block)"));
  }
}
// rope_scaling changes values, not cost; its factor is bounded so an absurd one is refused.
void RopeScaling(const json& v, HfModel&, Problems& p) {
  if (v.is_null()) return;
  if (!v.is_object()) {
    p.push_back(StrCat("rope_scaling: ", Shown(v), ": must be null or an object"));
    return;
  }
  if (v.contains("factor") &&
      (!v.at("factor").is_number() || !(v.at("factor").get<double>() > 0) ||
       v.at("factor").get<double>() > kMaxRopeFactor)) {
    p.push_back(StrCat("rope_scaling.factor: ", Shown(v.at("factor")), ": must be a number in (0, ",
                       kMaxRopeFactor, "]"));
  }
}
void QHeads(const json& v, HfModel& m, Problems& p) { PositiveInt(v, "num_attention_heads", &m.n_q_heads, p); }
void KvHeads(const json& v, HfModel& m, Problems& p) {
  PositiveInt(v, "num_key_value_heads", &m.n_kv_heads, p);
}
void HeadDim(const json& v, HfModel& m, Problems& p) {
  if (!v.is_null()) PositiveInt(v, "head_dim", &m.head_dim, p);
}
void Vocab(const json& v, HfModel& m, Problems& p) { PositiveInt(v, "vocab_size", &m.vocab, p); }
void MaxPositions(const json& v, HfModel& m, Problems& p) {
  PositiveInt(v, "max_position_embeddings", &m.max_positions, p);
}
void Eps(const json& v, HfModel& m, Problems& p) {
  if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() < 1)) {
    p.push_back(StrCat("rms_norm_eps: ", Shown(v), ": must be a number in (0, 1)"));
    return;
  }
  m.rms_eps = v.get<double>();
}
void Tie(const json& v, HfModel& m, Problems& p) {
  if (!v.is_boolean()) {
    p.push_back(StrCat("tie_word_embeddings: ", Shown(v), ": must be true or false"));
    return;
  }
  m.tie_word_embeddings = v.get<bool>();
}
// Gemma's name for its MLP activation: the tanh approximation of gelu (the MLP kernel's gelu) or
// null (then hidden_act's).
void HiddenActivation(const json& v, HfModel& m, Problems& p) {
  if (v.is_null()) return;
  if (v != "gelu_pytorch_tanh" && v != "gelu") {
    p.push_back(StrCat("hidden_activation: ", Shown(v), ": must be \"gelu_pytorch_tanh\", \"gelu\" or null (Gemma's "
                       "GeGLU; the MLP kernel's gelu)"));
    return;
  }
  m.activation = "gelu";
}
void Activation(const json& v, HfModel& m, Problems& p) {
  const std::string s = v.is_string() ? v.get<std::string>() : "";
  if (s != "silu" && s != "gelu" && s != "relu") {
    p.push_back(StrCat("hidden_act: ", Shown(v), ": must be \"silu\", \"gelu\" or \"relu\" (the MLP "
                       "kernel's activations)"));
    return;
  }
  m.activation = s;
}
void TorchDtype(const json& v, HfModel& m, Problems& p) {
  const std::string s = v.is_string() ? v.get<std::string>() : "";
  if (s != "bfloat16" && s != "float16") {
    p.push_back(StrCat("torch_dtype: ", Shown(v), ": must be \"bfloat16\" or \"float16\" (2-byte "
                       "weights, simulated as bf16)"));
    return;
  }
  m.dtype = "bf16";
}
// attention_bias, mlp_bias: nkisim's kernels have no bias terms.
void NoBias(const json& v, const char* key, Problems& p) {
  if (!v.is_boolean() || v.get<bool>()) {
    p.push_back(StrCat(key, ": ", Shown(v), ": must be false (the kernels add no bias)"));
  }
}
void AttentionBias(const json& v, HfModel& m, Problems& p) {
  if (v.is_boolean() && v.get<bool>()) {
    m.attention_bias = true;  // allowed or refused by the architecture's row (CheckFamily)
    return;
  }
  NoBias(v, "attention_bias", p);
}
void MlpBias(const json& v, HfModel&, Problems& p) { NoBias(v, "mlp_bias", p); }
// The window, for the architectures whose row allows one (CheckFamily); null: none.
void SlidingWindow(const json& v, HfModel& m, Problems& p) {
  if (!v.is_null()) PositiveInt(v, "sliding_window", &m.sliding_window, p);
}
// gpt-oss: which layers slide ("sliding_attention") and which attend everything ("full_attention").
void LayerTypes(const json& v, HfModel& m, Problems& p) {
  if (!v.is_array()) {
    p.push_back(StrCat("layer_types: ", Shown(v), ": must be a list of \"sliding_attention\" / \"full_attention\""));
    return;
  }
  m.sliding_layers = 0;
  for (const json& t : v) {
    if (t == "sliding_attention") {
      ++m.sliding_layers;
    } else if (t != "full_attention") {
      p.push_back(StrCat("layer_types: ", Shown(t), ": must be \"sliding_attention\" or \"full_attention\""));
      return;
    }
  }
  m.sliding_layers = -1 - m.sliding_layers;  // marks "given" (CheckFamily decodes it)
}
void ExpertsPerToken(const json& v, HfModel& m, Problems& p) {
  int k = 0;  // agreement with num_experts_per_tok: CheckMoe
  PositiveInt(v, "experts_per_token", &k, p);
  if (k > 0 && m.top_k == 0) m.top_k = k;
}
// Llama 4: which layers use RoPE (1: chunked attention) and which are NoPE (0: global attention).
void NoRopeLayers(const json& v, HfModel& m, Problems& p) {
  if (!v.is_array()) {
    p.push_back(StrCat("no_rope_layers: ", Shown(v), ": must be a list of 0 / 1, one per layer"));
    return;
  }
  int chunked = 0;
  for (const json& t : v) {
    if (!t.is_number_integer() || (t.get<int64_t>() != 0 && t.get<int64_t>() != 1)) {
      p.push_back(StrCat("no_rope_layers: ", Shown(t), ": must be 0 or 1"));
      return;
    }
    chunked += static_cast<int>(t.get<int64_t>());
  }
  m.sliding_layers = -1 - chunked;  // "given", as layer_types
}
void ChunkSize(const json& v, HfModel& m, Problems& p) { PositiveInt(v, "attention_chunk_size", &m.sliding_window, p); }
void InterleaveStep(const json& v, HfModel& m, Problems& p) {
  // <= num_hidden_layers is checked with the layers known (CheckInterleave).
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxLayers) {
    p.push_back(StrCat("interleave_moe_layer_step: ", Shown(v), ": must be an integer in [1, ", kMaxLayers,
                       "] (layer i is an MoE block when (i + 1) % step == 0; 1: every layer)"));
    m.moe_step = 0;
    return;
  }
  m.moe_step = static_cast<int>(v.get<int64_t>());
}
void DenseIntermediate(const json& v, HfModel& m, Problems& p) {
  PositiveInt(v, "intermediate_size_mlp", &m.dense_inter, p);
}
void QkNorm(const json& v, HfModel& m, Problems& p) {
  if (!v.is_boolean()) {
    p.push_back(StrCat("use_qk_norm: ", Shown(v), ": must be true or false"));
    return;
  }
  m.qk_norm = v.get<bool>();
}
void Quantization(const json& v, HfModel&, Problems& p) {
  p.push_back(StrCat("quantization_config: ", Shown(v), ": not modeled (predict prices 2-byte weights); "
                     "drop it to price the model in bf16"));
}
void UseSlidingWindow(const json& v, HfModel&, Problems& p) {
  if (!v.is_boolean() || v.get<bool>()) {
    p.push_back(StrCat("use_sliding_window: ", Shown(v), ": must be false (sliding-window "
                       "attention is not modeled)"));
  }
}
void Metadata(const json&, HfModel&, Problems&) {}

struct Key {
  const char* name;
  void (*read)(const json& v, HfModel& m, Problems& p);
  const char* use;
};

// "architectures" and "model_type" are checked together (CheckArchitecture).
constexpr Key kKeys[] = {
    {"hidden_size", Hidden, "H (a multiple of 128)"},
    {"intermediate_size", Intermediate, "I of the MLP (tp divides it)"},
    {"num_hidden_layers", Layers, "decoder layers: one simulated, times this"},
    {"num_attention_heads", QHeads, "Q heads (tp divides it)"},
    {"num_key_value_heads", KvHeads, "KV heads (divide the Q heads; default: Q heads)"},
    {"head_dim", HeadDim, "d (<= 128, or 256 priced as two heads of 128; 128 for prefill; default H / Q heads)"},
    {"vocab_size", Vocab, "the embedding and the vocab-parallel LM head"},
    {"rms_norm_eps", Eps, "the norms' epsilon"},
    {"tie_word_embeddings", Tie, "one copy of the embedding / LM head when true"},
    {"hidden_act", Activation, "the MLP's activation (silu, gelu, relu)"},
    {"hidden_activation", HiddenActivation, "Gemma: gelu_pytorch_tanh (the MLP kernel's gelu) or null"},
    {"torch_dtype", TorchDtype, "bfloat16 or float16: 2-byte weights and KV cache"},
    {"max_position_embeddings", MaxPositions, "input + output tokens must not exceed it"},
    {"attention_bias", AttentionBias, "must be false (true for gpt-oss: biases not priced)"},
    {"mlp_bias", MlpBias, "must be false"},
    {"sliding_window", SlidingWindow, "the window (architectures with sliding windows) or null"},
    {"use_sliding_window", UseSlidingWindow, "must be false"},
    {"attention_dropout", Metadata, "training only: ignored"},
    {"initializer_range", Metadata, "training only: ignored"},
    {"pretraining_tp", Metadata, "training only: ignored"},
    {"use_cache", Metadata, "ignored (the KV cache is always modeled)"},
    {"bos_token_id", Metadata, "tokenizer: ignored"},
    {"eos_token_id", Metadata, "tokenizer: ignored"},
    {"pad_token_id", Metadata, "tokenizer: ignored"},
    {"rope_theta", Metadata, "RoPE's base: changes values, not cost: ignored"},
    {"layer_types", LayerTypes, "gpt-oss: which layers use the sliding window (the others attend all)"},
    {"experts_per_token", ExpertsPerToken, "gpt-oss: equal to num_experts_per_tok"},
    {"swiglu_limit", Metadata, "gpt-oss: clamps the experts' activations: values, not cost: ignored"},
    {"initial_context_length", Metadata, "gpt-oss: RoPE (YaRN) pre-training length: ignored"},
    {"quantization_config", Quantization, "refused: predict prices 2-byte weights"},
    {"no_rope_layers", NoRopeLayers, "Llama 4: 1 = a RoPE layer with chunked attention, 0 = global attention"},
    {"attention_chunk_size", ChunkSize, "Llama 4: the chunk of the RoPE layers' attention (priced as a window)"},
    {"interleave_moe_layer_step", InterleaveStep,
     "Llama 4: layer i is an MoE block when (i + 1) % step == 0, else dense (Scout 1, Maverick 2); in [1, layers]"},
    {"intermediate_size_mlp", DenseIntermediate, "Llama 4: the dense layers' MLP I (required when a layer is dense)"},
    {"moe_layers", Metadata, "Llama 4: the MoE layers' indices: must be those interleave_moe_layer_step implies"},
    {"use_qk_norm", QkNorm, "Llama 4: per-head norm of q and k (no cost modeled)"},
    {"attn_temperature_tuning", Metadata, "Llama 4: attention scaling values: ignored"},
    {"floor_scale", Metadata, "Llama 4: attention scaling values: ignored"},
    {"attn_scale", Metadata, "Llama 4: attention scaling values: ignored"},
    {"router_jitter_noise", Metadata, "training only: ignored"},
    {"for_llm_compressor", Metadata, "ignored"},
    {"rope_scaling", RopeScaling, "RoPE's scaling: changes values, not cost (factor <= 256)"},
    {"num_experts", NumExperts, "MoE: the experts E (moe_ep divides it)"},
    {"num_local_experts", NumLocalExperts, "MoE: the experts E (Mixtral's name; equal to num_experts if both)"},
    {"num_experts_per_tok", TopK, "MoE: top-k experts a token (<= E)"},
    {"moe_intermediate_size", MoeIntermediate, "MoE (Qwen3-MoE): one expert's I (moe_tp divides it)"},
    {"norm_topk_prob", NormTopk, "MoE (Qwen3-MoE): must be true"},
    {"decoder_sparse_step", SparseStep, "MoE (Qwen3-MoE): must be 1"},
    {"mlp_only_layers", MlpOnlyLayers, "MoE (Qwen3-MoE): must be []"},
    {"output_router_logits", Metadata, "training only: ignored"},
    {"router_aux_loss_coef", Metadata, "training only: ignored"},
    {"max_window_layers", Metadata, "Qwen: only with use_sliding_window (false): ignored"},
    {"transformers_version", Metadata, "ignored"},
    {"_name_or_path", Metadata, "ignored"},
};

const Architecture* CheckArchitecture(const json& config, Problems& p) {
  const json* a = config.contains("architectures") ? &config.at("architectures") : nullptr;
  if (a == nullptr || !a->is_array() || a->size() != 1 || !(*a)[0].is_string()) {
    p.push_back(StrCat("architectures: ", a ? Shown(*a) : "missing",
                       ": must be a list of one name"));
    return nullptr;
  }
  const std::string name = (*a)[0].get<std::string>();
  for (const Architecture& arch : kArchitectures) {
    if (name != arch.name) continue;
    if (config.contains("model_type") && config.at("model_type") != arch.model_type) {
      p.push_back(StrCat("model_type: ", Shown(config.at("model_type")), ": must be \"",
                         arch.model_type, "\" for ", name));
    }
    return &arch;
  }
  std::string known;
  for (const Architecture& arch : kArchitectures) known += StrCat(known.empty() ? "" : ", ", arch.name);
  p.push_back(StrCat("architectures: \"", name, "\": not supported (supported: ", known, ")"));
  return nullptr;
}

const Key* FindKey(std::string_view name) {
  for (const Key& k : kKeys) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

// The shape rules once every key was read.
void CheckShapes(const json& config, HfModel& m, Problems& p) {
  for (const char* required : {"hidden_size", "intermediate_size", "num_hidden_layers",
                               "num_attention_heads", "vocab_size"}) {
    if (!config.contains(required)) p.push_back(StrCat(required, ": missing: required"));
  }
  if (m.n_kv_heads == 0 && !config.contains("num_key_value_heads")) m.n_kv_heads = m.n_q_heads;
  if (m.head_dim == 0 && m.n_q_heads > 0 && m.hidden % m.n_q_heads == 0) m.head_dim = m.hidden / m.n_q_heads;
  if (m.hidden > 131072) {
    p.push_back(StrCat("hidden_size: ", m.hidden, ": must be <= 131072 (no model is wider)"));
    m.hidden = 0;
  }
  if (m.n_q_heads > 0 && m.n_kv_heads > 0 && m.n_q_heads % m.n_kv_heads != 0) {
    p.push_back(StrCat("num_key_value_heads: ", m.n_kv_heads, ": must divide num_attention_heads (",
                       m.n_q_heads, ")"));
  }
  // A head of 256 is priced as two heads of 128 (model/predict.cc: LayerScenario); any other d
  // above the 128 partitions is not modeled.
  if (m.head_dim > 128 && m.head_dim != 256) {
    p.push_back(StrCat("head_dim: ", m.head_dim, ": must be <= 128 (one head on the partitions) or 256 (priced as two "
                       "heads of 128)"));
  }
}

// What the architecture's row allows: a sliding window (on every layer, or on those layer_types
// names), biases.
void CheckFamily(const Architecture& arch, HfModel& m, Problems& p) {
  const bool types_given = m.sliding_layers < 0;
  const int sliding_named = types_given ? -1 - m.sliding_layers : 0;
  m.sliding_layers = 0;
  if (m.attention_bias && !arch.bias) {
    p.push_back(StrCat("attention_bias: true: must be false for ", arch.name, " (the kernels add no bias)"));
  }
  m.qkv_bias = arch.qkv_bias || (m.attention_bias && arch.bias);
  if (m.sliding_window > 0 && !arch.sliding) {
    p.push_back(StrCat("sliding_window: ", m.sliding_window, ": must be null for ", arch.name,
                       " (sliding-window attention is modeled for Mistral, Mixtral and gpt-oss only)"));
    return;
  }
  if (m.sliding_window == 0) {
    if (sliding_named > 0) p.push_back("layer_types: names sliding_attention layers but sliding_window is null");
    return;
  }
  m.sliding_layers = types_given ? sliding_named : m.layers;
}

// An MoE row: the expert count, top-k and the expert's I are required; top-k <= E.
void CheckMoe(const json& config, const Architecture& arch, HfModel& m, Problems& p) {
  m.moe = true;
  m.router = arch.router;
  if (config.contains(arch.expert_inter_key)) {
    const json& v = config.at(arch.expert_inter_key);
    if (v.is_number_integer() && v.get<int64_t>() > 0 && v.get<int64_t>() <= (int64_t{1} << 31)) {
      m.expert_inter = static_cast<int>(v.get<int64_t>());
    }
  }
  if (arch.shared_inter_key != nullptr && config.contains(arch.shared_inter_key) &&
      config.at(arch.shared_inter_key).is_number_integer()) {
    m.shared_inter = static_cast<int>(std::clamp<int64_t>(config.at(arch.shared_inter_key).get<int64_t>(), 0, 1 << 30));
  }
  if (!config.contains("num_experts") && !config.contains("num_local_experts")) {
    p.push_back(StrCat("num_experts / num_local_experts: missing: required for ", arch.name));
  }
  if (!config.contains("num_experts_per_tok")) {
    p.push_back(StrCat("num_experts_per_tok: missing: required for ", arch.name));
  }
  if (!config.contains(arch.expert_inter_key)) {
    p.push_back(StrCat(arch.expert_inter_key, ": missing: required for ", arch.name, " (one expert's I)"));
  }
  if (config.contains("experts_per_token") && config.contains("num_experts_per_tok") &&
      config.at("experts_per_token") != config.at("num_experts_per_tok")) {
    p.push_back(StrCat("experts_per_token: ", Shown(config.at("experts_per_token")),
                       ": disagrees with num_experts_per_tok (", Shown(config.at("num_experts_per_tok")),
                       "); both name the experts a token takes"));
  }
  if (m.top_k > 0 && m.experts > 0 && m.top_k > m.experts) {
    p.push_back(StrCat("num_experts_per_tok: ", m.top_k, ": must be <= the experts (", m.experts, ")"));
  }
}

// Which layers are MoE blocks: (i + 1) % interleave_moe_layer_step == 0 (the HF default of
// moe_layers); a moe_layers list, when given, must name exactly those. The dense ones need their
// MLP's I (intermediate_size_mlp).
void CheckInterleave(const json& config, HfModel& m, Problems& p) {
  if (m.layers <= 0 || m.moe_step <= 0) return;  // already reported
  if (m.moe_step > m.layers) {
    p.push_back(StrCat("interleave_moe_layer_step: ", m.moe_step, ": must be <= num_hidden_layers (", m.layers,
                       "): else no layer is an MoE block"));
    return;
  }
  std::vector<int64_t> implied;
  for (int64_t i = m.moe_step - 1; i < m.layers; i += m.moe_step) implied.push_back(i);
  m.moe_layers = static_cast<int>(implied.size());
  if (config.contains("moe_layers")) {
    const json& v = config.at("moe_layers");
    bool same = v.is_array() && v.size() == implied.size();
    for (size_t i = 0; same && i < implied.size(); ++i) same = v[i].is_number_integer() && v[i].get<int64_t>() == implied[i];
    if (!same) {
      p.push_back(StrCat("moe_layers: ", Shown(v), ": must list the layers interleave_moe_layer_step (", m.moe_step,
                         ") makes MoE blocks: ", Shown(json(implied))));
    }
  }
  if (m.dense_layers() > 0 && m.dense_inter == 0 && !config.contains("intermediate_size_mlp")) {
    p.push_back(StrCat("intermediate_size_mlp: missing: required when interleave_moe_layer_step (", m.moe_step,
                       ") leaves ", m.dense_layers(), " dense layers (their MLP's I)"));
  }
  if (m.dense_layers() == 0) m.dense_inter = 0;  // no dense layer: its I prices nothing
}

}  // namespace

// The text as JSON, refusing what json::parse lets through: a key given twice in one object (the
// last would win silently) and nesting deeper than any config.json has (kMaxDepth).
json ParseStrict(const std::string& text, const std::string& source) {
  constexpr int kMaxDepth = 32;
  struct Object {
    std::string path;
    std::set<std::string> keys;
  };
  std::vector<Object> open;  // the objects being parsed, outermost first
  std::string last_key;
  std::string problem;
  const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (!problem.empty()) return false;
    if (depth > kMaxDepth) {
      problem = StrCat("nested deeper than ", kMaxDepth, " levels (no config.json field is)");
    } else if (event == json::parse_event_t::object_start) {
      open.push_back({open.empty() ? "" : open.back().path + last_key + ".", {}});
    } else if (event == json::parse_event_t::object_end && !open.empty()) {
      open.pop_back();
    } else if (event == json::parse_event_t::key && !open.empty()) {
      last_key = parsed.get<std::string>();
      if (!open.back().keys.insert(last_key).second) {
        problem = StrCat(open.back().path, last_key, ": given twice (each key at most once)");
      }
    }
    return true;
  };
  json config;
  try {
    config = json::parse(text, check);
  } catch (const json::parse_error& e) {
    Raise(ErrorCode::kBadConfig, StrCat(source, ": not a JSON config.json: ", e.what()));
  }
  if (!problem.empty()) Raise(ErrorCode::kBadConfig, StrCat(source, ": ", problem));
  return config;
}

HfModel ParseHfConfig(const std::string& text, const std::string& source) {
  const json outer = ParseStrict(text, source);
  if (!outer.is_object()) {
    Raise(ErrorCode::kBadConfig, StrCat(source, ": a config.json is a JSON object, not ", Shown(outer)));
  }
  HfModel m;
  m.source = source;
  Problems p;
  const Architecture* arch = CheckArchitecture(outer, p);
  if (arch != nullptr) {
    m.architecture = arch->name;
    m.qk_norm = arch->qk_norm;
    m.tie_word_embeddings = arch->tied;  // the config's tie_word_embeddings, when given, wins
  }
  // A multimodal row: the text model's keys are in its text_config; the outer object's others
  // are the wrapper's (the vision encoder is not modeled: predict prices the text model).
  json config = outer;
  if (arch != nullptr && arch->text_config != nullptr) {
    if (!outer.contains(arch->text_config) || !outer.at(arch->text_config).is_object()) {
      p.push_back(StrCat(arch->text_config, ": missing: required for ", arch->name, " (the text model)"));
    } else {
      config = outer.at(arch->text_config);
      for (const auto& [key, value] : outer.items()) {
        static const std::set<std::string> kWrapper = {
            "architectures", "model_type", "text_config", "vision_config", "boi_token_index", "eoi_token_index",
            "image_token_index", "tie_word_embeddings", "torch_dtype", "transformers_version"};
        if (kWrapper.count(key) == 0) {
          p.push_back(StrCat(key, ": ", Shown(value), ": unknown key beside ", arch->text_config,
                             " (the wrapper holds architectures, model_type, text_config, vision_config, the "
                             "image token indices, tie_word_embeddings, torch_dtype, transformers_version)"));
        } else if (key == "tie_word_embeddings" || key == "torch_dtype") {
          FindKey(key)->read(value, m, p);
        }
      }
    }
  }
  for (const auto& [key, value] : config.items()) {
    if (key == "architectures" || key == "model_type") continue;
    if (const Key* k = FindKey(key)) {
      k->read(value, m, p);
    } else {
      p.push_back(StrCat(key, ": ", Shown(value), ": unknown key (not one a public config of these "
                         "architectures has; docs/predict.md lists the accepted keys)"));
    }
  }
  CheckShapes(config, m, p);
  if (config.contains("layer_types") && config.at("layer_types").is_array() && m.layers > 0 &&
      config.at("layer_types").size() != static_cast<size_t>(m.layers)) {
    p.push_back(StrCat("layer_types: ", config.at("layer_types").size(), " entries: must be one per layer (",
                       m.layers, ")"));
  }
  // Qwen2 / Qwen3 carry a window that use_sliding_window: false switches off.
  if (config.contains("use_sliding_window") && config.at("use_sliding_window") == false) m.sliding_window = 0;
  if (arch != nullptr) CheckFamily(*arch, m, p);
  // Interleaving is Llama 4's key; elsewhere a step other than 1 would be silently ignored.
  if (m.moe_step > 1 && arch != nullptr && std::string_view(arch->model_type) != "llama4") {
    p.push_back(StrCat("interleave_moe_layer_step: ", m.moe_step, ": must be 1 for ", arch->name,
                       " (interleaved dense / MoE layers are modeled for Llama 4)"));
    m.moe_step = 1;
  }
  if (arch != nullptr && arch->router != nullptr) {
    CheckMoe(config, *arch, m, p);
    CheckInterleave(config, m, p);
  } else {
    for (const char* key : {"num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size"}) {
      if (config.contains(key)) {
        p.push_back(StrCat(key, ": ", Shown(config.at(key)), ": a mixture-of-experts key in a dense architecture (",
                           m.architecture, ")"));
      }
    }
  }
  if (!p.empty()) {
    std::string message = StrCat(source, ": ", p.size(), p.size() == 1 ? " problem:" : " problems:");
    for (const std::string& s : p) message += StrCat("\n  ", s);
    Raise(ErrorCode::kBadConfig, message);
  }
  return m;
}

HfModel LoadHfConfig(const std::string& path) {
  return ParseHfConfig(ReadConfigFile(path, "model config.json"), path);
}

std::string FormatAcceptedKeys() {
  std::string out = "architectures: ";
  for (const Architecture& a : kArchitectures) out += StrCat(a.name, " (", a.model_type, ") ");
  out += "\nmodel_type: must match the architecture\n";
  for (const Key& k : kKeys) out += StrCat(k.name, ": ", k.use, "\n");
  return out;
}

}  // namespace nkisim::launcher
