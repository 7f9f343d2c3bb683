// ModelConfig: the architecture keys of a checkpoint (HF config.json or GGUF metadata).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loader/architecture.h"
#include "loader/moe_config.h"
#include "loader/quantization_config.h"

namespace minivllm {

struct RopeScaling {
  std::string type;  // "" (none), "llama3", "longrope", "yarn", "linear" or "freq_factors"
  double factor = 1.0;  // llama3, yarn, linear: how much longer a context the scaling serves
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
  // longrope (Phi-3-mini-128k, Phi-4-mini): each rotary frequency divided by its factor (rope_dim() / 2
  // of them), the long ones when the engine's context exceeds original_max_position_embeddings
  // (model/rope.h), and cos and sin scaled by attention_factor in both regimes.
  std::vector<double> short_factor;
  std::vector<double> long_factor;
  double attention_factor = 1.0;
  // yarn (Qwen's long-context recipe, DeepSeek, gpt-oss): frequencies that turn fewer than beta_slow
  // times over original_max_position_embeddings are divided by factor, those turning more than
  // beta_fast times are kept, and the dims between ramp linearly from one to the other (the ramp's
  // ends rounded outward unless truncate is false); cos and sin scaled by attention_factor
  // (transformers' _compute_yarn_parameters, vLLM's YaRN rotary embedding).
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
  // "freq_factors": each frequency divided by its factor at every context length (GGUF's
  // rope_freqs.weight: llama.cpp's converter stores Llama 3's scaling so, rope_dim() / 2 of them).
  std::vector<double> freq_factors;
};

struct ModelConfig {
  const ArchitectureSpec* arch = nullptr;  // the registry's row (loader/architecture.h)
  std::string arch_name;                   // as in the file, e.g. "Qwen3ForCausalLM" or GGUF's "qwen3"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;  // from config, else hidden_size / num_heads
  // The leading dims of each head that the rope rotates (partial_rotary_factor; GGUF's
  // rope.dimension_count); the rest pass through. 0: all of head_dim.
  int64_t rotary_dim = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  int64_t max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  // Resolved from the row's traits and the file's keys.
  bool attention_bias = false;  // q/k/v bias (Qwen2)
  bool o_proj_bias = false;     // and o_proj's (gpt-oss)
  bool qk_norm = false;         // Qwen3's q_norm / k_norm
  // Per layer: 0 for full attention, else its sliding window (a variant the engine refuses today,
  // so every entry is 0; sized num_layers by the loaders).
  std::vector<int64_t> layer_sliding_window;
  // Per layer: true for a "sliding_attention" layer, which takes rope_theta_sliding (Gemma 3: its
  // local layers rotate at base 10,000, the global ones at 1,000,000). Empty: every layer is global.
  std::vector<bool> layer_sliding;
  // > 0: the sliding layers rotate at this base, without rope_scaling (Gemma 3, OLMo 3); 0: as the others.
  double rope_theta_sliding = 0;
  // Per layer: true for a layer whose q and k are not rotated (SmolLM3's NoPE layers,
  // ArchitectureTraits::no_rope_layers). Empty: every layer rotates.
  std::vector<bool> layer_no_rope;
  // NormForm::kRmsOnePlusWeight with the 1 already added to the stored weights (llama.cpp's
  // Gemma 3 GGUF): the model uses them as they are rather than adding it again.
  bool norm_weights_include_one = false;
  // Mixture of experts (rows with ArchitectureTraits::moe): which layers are sparse, the experts'
  // count, top-k and width. num_experts 0: every layer's MLP is dense.
  MoeConfig moe;
  double attention_scale = 0;     // q k^T scale; 0: 1 / sqrt(head_dim) (Gemma 3: query_pre_attn_scalar^-1/2)
  // Gemma 2's soft-capping (ArchitectureTraits::logit_softcapping): x -> cap * tanh(x / cap) on each
  // scaled attention score and on each final logit; 0: none.
  double attn_logit_softcapping = 0;
  double final_logit_softcapping = 0;
  // Granite's scalars (ArchitectureTraits::granite_multipliers; 1: none): the embeddings times
  // embedding_multiplier, each sublayer's output times residual_multiplier before its residual add,
  // the final logits divided by logits_scaling. (Its attention_multiplier is attention_scale.)
  double embedding_multiplier = 1.0;
  double residual_multiplier = 1.0;
  double logits_scaling = 1.0;
  std::string torch_dtype = "bfloat16";
  // config.json's quantization_config (none for GGUF, whose block types are each tensor's dtype).
  WeightQuantization quantization;
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;  // config.json and generation_config.json, deduplicated
  std::string source;                  // the file it came from ("<dir>/config.json", a .gguf path), for messages

  // Throws an Error naming the key when a value is missing or out of range.
  void validate() const;
  // Throws unless num_layers is in [1, kMaxLayers]: the loaders check it before sizing per-layer
  // tables from a file's count, so a corrupt count is an error rather than an allocation of terabytes.
  void check_num_layers() const;
  static constexpr int64_t kMaxLayers = 1024;  // the deepest published models have about 130
  const ArchitectureTraits& traits() const;  // the row's; throws when no row is set
  int64_t rope_dim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  // The longest context the model serves, which caps max_model_length: max_position_embeddings, or
  // the longer one a scaled rope extends it to, as vLLM derives it (yarn: factor times
  // original_max_position_embeddings; linear: factor times max_position_embeddings). Qwen's recipe
  // adds yarn with factor 4 over 32,768 to a config whose max_position_embeddings stays 40,960.
  int64_t max_context_length() const;
};

// yarn's default attention factor (the cos / sin scale) for `factor`: 0.1 ln(factor) + 1, or, with
// mscale and mscale_all_dim both non-zero (DeepSeek; GGUF's yarn_log_multiplier is mscale_all_dim
// with mscale 1), the ratio of that with mscale to that with mscale_all_dim; 1 when factor <= 1.
// transformers' _compute_yarn_parameters and llama.cpp's yarn set-up agree on it.
double yarn_attention_factor(double factor, double mscale = 0, double mscale_all_dim = 0);

// num_layers flags, every n-th layer's set (layers n - 1, 2n - 1, ...): SmolLM3's NoPE layers by their
// interval, as transformers' SmolLM3Config and llama.cpp's smollm3 (n = 4) lay them out.
std::vector<bool> every_nth_layer(int64_t num_layers, int64_t n);

// Reads <dir>/config.json (and generation_config.json when present for eos ids). hf_overrides: a
// JSON object's text merged into config.json first (RFC 7386 merge patch), or "".
ModelConfig load_hf_model_config(const std::string& dir, const std::string& hf_overrides = "");

}  // namespace minivllm
