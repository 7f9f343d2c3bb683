// The architecture registry: one row per model architecture the engine runs. A row holds the names
// the architecture goes by (the HF `architectures[0]` string, GGUF's `general.architecture`), the
// names of its weights in both formats, by role, and the traits the transformer is written from
// (activation, norm form, rope layout, q/k norms, biases). The loaders pick the row; the model asks
// for weights by role and reads the traits. Adding a Llama-like architecture is one new row here
// plus its tests (docs/DESIGN.md, "Adding a model").
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/activation.h"

namespace minivllm {

// What a weight is for, whatever the checkpoint calls it. Per-layer roles name a module: the
// tensor is the module's name + ".weight" (or ".bias").
enum class WeightRole : int {
  kEmbedTokens,      // [V, H]
  kFinalNorm,        // [H]
  kLmHead,           // [V, H]; absent when the embeddings are tied
  kAttnInputNorm,    // [H], before attention
  kQProj,            // [nq hd, H]
  kKProj,            // [nkv hd, H]
  kVProj,            // [nkv hd, H]
  kQNorm,            // [hd], per head (Qwen3); [nq hd] with qk_norm_full_width (OLMo 2)
  kKNorm,            // [hd]; [nkv hd] with qk_norm_full_width
  kOProj,            // [H, nq hd]
  kFfnInputNorm,     // [H], before the MLP (HF Llama's "post_attention_layernorm")
  kGateProj,         // [I, H]
  kUpProj,           // [I, H]
  kDownProj,         // [H, I]
  kAttnOutputNorm,   // [H], on the attention's output before the residual add (Gemma's sandwich norms)
  kFfnOutputNorm,    // [H], on the MLP's output before the residual add
  // Mixture of experts (a sparse layer's MLP; ModelConfig::moe). Expert roles' HF names hold "{E}"
  // where the expert index goes; their GGUF names, none (one 3-D tensor holds the layer's experts).
  kMoeRouter,        // [E, H], the router's logits ("mlp.gate" in HF's Qwen3-MoE)
  kExpertGateProj,   // [I_moe, H], one per expert
  kExpertUpProj,     // [I_moe, H]
  kExpertDownProj,   // [H, I_moe]
  // A shared expert beside the routed ones (Qwen2-MoE): a gated MLP every token goes through, its
  // output scaled by sigmoid(x . g) where the row names kSharedExpertGate ([1, H]; GGUF [H]).
  kSharedExpertGateProj,  // [I_shared, H]
  kSharedExpertUpProj,    // [I_shared, H]
  kSharedExpertDownProj,  // [H, I_shared]
  kSharedExpertGate,      // [1, H]
  // The router's score bias for the choice of experts (MoeConfig::biased_routing): the module holding
  // e_score_correction_bias, [E] (GLM-4.5's mlp.gate) or [1, E] (ERNIE 4.5's mlp.moe_statics).
  kMoeScoreBias,
  // The attention's sink logits (gpt-oss): the module holding `sinks`, [nq], one a q head.
  kAttnSinks,
  kCount
};
inline constexpr int kNumWeightRoles = static_cast<int>(WeightRole::kCount);
// Roles below kAttnInputNorm are model-wide; the rest exist once per layer.
inline bool is_layer_role(WeightRole r) { return r >= WeightRole::kAttnInputNorm; }
// One weight per expert in HF checkpoints; GGUF stacks a layer's experts in one 3-D tensor.
inline bool is_expert_role(WeightRole r) {
  return r == WeightRole::kExpertGateProj || r == WeightRole::kExpertUpProj || r == WeightRole::kExpertDownProj;
}
const char* weight_role_name(WeightRole r);

enum class WeightFormat { kHuggingFace, kGguf };

// How the norm weight scales: x_hat * w (Llama, Qwen) or x_hat * (1 + w) (Gemma's RMSNorm).
enum class NormForm { kRms, kRmsOnePlusWeight };

// Module names by role; per-layer names hold "{L}" where the layer index goes. nullptr: the
// architecture has no such weight.
using WeightNameTable = std::array<const char*, kNumWeightRoles>;

// The forms of config.json's mixture-of-experts keys. kQwen3: moe_intermediate_size wide experts,
// norm_topk_prob, decoder_sparse_step and mlp_only_layers. kMixtral: every layer sparse, each expert
// intermediate_size wide, the top-k weights always renormalised (transformers' MixtralSparseMoeBlock).
// kOlmoe: every layer sparse, each expert intermediate_size wide, norm_topk_prob read (default false).
// kQwen2: kQwen3's keys and a shared expert, shared_expert_intermediate_size wide, behind a sigmoid gate.
// kGlm4Moe: GLM-4.5's (DeepSeek-V3's) keys: n_routed_experts, n_shared_experts ungated shared experts of
// moe_intermediate_size each, first_k_dense_replace dense layers, and sigmoid routing with a score bias,
// n_group / topk_group and routed_scaling_factor.
// kErnie45: ERNIE 4.5's: moe_num_experts, moe_k, moe_num_shared_experts, moe_layer_start_index /
// end_index / interval, softmax scores and a score bias for the choice.
enum class MoeKeys { kQwen3, kMixtral, kOlmoe, kQwen2, kGlm4Moe, kErnie45 };

struct ArchitectureTraits {
  Activation activation = Activation::kSilu;
  NormForm norm = NormForm::kRms;
  bool qk_norm = false;         // q_norm / k_norm per head before the rope (Qwen3)
  // config.json's use_qk_norm switches those per-head q/k norms on (GLM-4.5: on in GLM-4.5, off in -Air).
  bool qk_norm_key = false;
  // The q and k norms span every head of q and of k at once (kQNorm [nq hd], kKNorm [nkv hd]: OLMo 2),
  // not one head; with tensor parallelism their sums of squares are all-reduced over the ranks.
  bool qk_norm_full_width = false;
  bool qkv_bias = false;        // q/k/v biases always present (Qwen2: its config has no key for them)
  // config.json's sliding_window applies only with use_sliding_window: true, from layer
  // max_window_layers on (Qwen2, Qwen3); otherwise whenever it is set (Mistral).
  bool use_sliding_window_key = false;
  // config.json's sliding_window applies to every layer whenever it is set (Mistral). Rows with
  // neither flag take it from layer_types (Gemma 3) or have no sliding layers (Llama).
  bool sliding_window_all_layers = false;
  // llama.cpp's converter permutes the q/k rows of these architectures into its interleaved rope
  // layout (GGUF); the GGUF loader permutes them back to HF's half-split layout.
  bool gguf_rope_permuted = false;
  // The embedding's rows scaled by sqrt(hidden_size) on the way into the residual stream (Gemma).
  bool embed_scale_sqrt_hidden = false;
  // Sandwich norms: each sublayer's output normed (kAttnOutputNorm, kFfnOutputNorm) before its
  // residual add (Gemma 2 and 3).
  bool post_norms = false;
  // false: no norm before a sublayer (OLMo 2); the sublayer reads the residual stream as it is, and
  // only its output is normed (post_norms). The row's tables name no kAttnInputNorm / kFfnInputNorm.
  bool input_norms = true;
  // Which layers slide when the model sets a sliding window but names no layer kinds. 0: every
  // layer (GGUF: llama.cpp's "llama" files from Mistral; HF: sliding_window_all_layers decides);
  // n: every n-th layer global, the others sliding, the family's default in both transformers and
  // llama.cpp (Gemma 3: 6; Gemma 2: 2, whose published configs have no layer_types).
  int swa_pattern = 0;
  // The sliding layers rotate at rope_theta without the rope scaling, which binds the full-attention
  // layers alone (OLMo 3: transformers' Olmo3Config puts rope_scaling on full_attention only, and
  // llama.cpp's olmo2 rotates its sliding layers unscaled): ModelConfig::rope_theta_sliding.
  bool sliding_rope_unscaled = false;
  // tie_word_embeddings when config.json leaves it out (transformers' default for the family:
  // false for Llama's, true for Gemma 3's, whose published configs omit it).
  bool tied_by_default = false;
  // Reads config.json's mixture-of-experts keys (loader/moe_config.h): its sparse layers' MLP is a
  // router and experts (Qwen3-MoE), the other layers' the dense MLP.
  bool moe = false;
  // Which form those keys take (loader/moe_config.h): Qwen3-MoE's, Mixtral's or OLMoE's.
  MoeKeys moe_keys = MoeKeys::kQwen3;
  // Reads attn_logit_softcapping and final_logit_softcapping (Gemma 2): each attention score and
  // each final logit x becomes cap * tanh(x / cap). Other rows refuse the keys.
  bool logit_softcapping = false;
  // Reads Granite's four scalars (embedding_multiplier, residual_multiplier, attention_multiplier,
  // logits_scaling; GGUF: embedding_scale, residual_scale, attention.scale, logit_scale). Other rows
  // refuse the keys.
  bool granite_multipliers = false;
  // Some layers rotate no q/k (SmolLM3's NoPE layers, ModelConfig::layer_no_rope): config.json's
  // no_rope_layers (1 a layer that rotates, 0 one that does not) or else every
  // no_rope_layer_interval-th layer (default 4), as transformers' SmolLM3Config; a GGUF's every 4th,
  // as llama.cpp's smollm3 (which stores no key for it).
  bool no_rope_layers = false;
  // With a sliding window set, the full-attention layers rotate nothing (EXAONE 4's global layers:
  // ModelConfig::layer_no_rope); with none, every layer rotates.
  bool nope_full_layers_with_window = false;
  // config.json's attention_bias switches q/k/v biases only (GLM-4: its o_proj has none), where
  // Llama's would add an o_proj bias too (refused).
  bool attention_bias_is_qkv = false;
  // The Hugging Face checkpoint's q/k rows rotate adjacent pairs (GLM-4); the loader moves them to
  // the half-split layout every kernel takes (loader/rope_rows.h). Its GGUF is read as
  // gguf_rope_permuted: llama.cpp stores those rows as they are.
  bool hf_rope_interleaved = false;
  // The share of each head that rotates when config.json names no partial_rotary_factor
  // (transformers' default for the family: GLM-4's 0.5).
  double default_partial_rotary = 1.0;
  // gpt-oss: config.json's attention_bias switches q/k/v and o_proj biases; each layer's attention
  // has sink logits (kAttnSinks); its router and experts have biases (the router's "bias" beside its
  // weight, each expert's gate/up/down ".bias"), its experts stored stacked input-major with gate and
  // up interleaved (loader/gpt_oss_experts.h).
  bool attention_bias_with_o = false;
  bool attention_sinks = false;
  bool gpt_oss_experts = false;
  // yarn's ramp ends are not rounded (transformers' truncate: false, gpt-oss's) where the file names none:
  // its GGUF carries no key for it (llama.cpp always rounds; the model's own rope does not).
  bool yarn_untruncated = false;
  // A GGUF without rope.freq_base_swa: the sliding layers rotate as the full ones (llama.cpp's gpt-oss),
  // not at the 10,000 llama.cpp gives a layer pattern's sliding layers otherwise (Gemma's).
  bool gguf_sliding_rope_as_full = false;
};

// A checkpoint tensor holding several roles' weights stacked along its rows (Phi-3's qkv_proj:
// q, k and v; gate_up_proj: gate and up), in this order. The loader splits it (fused_weights.h):
// the model sees each role under its own name in the row's table, as for any other family. A
// GGUF's fused tensor is read under the HF module's name first (gguf_weights.h), then split alike.
struct FusedWeight {
  const char* module;       // "model.layers.{L}.self_attn.qkv_proj"
  const char* gguf_module;  // "blk.{L}.attn_qkv"; nullptr when GGUF files store the parts apart
  std::array<WeightRole, 3> parts;
  int num_parts;
};
inline constexpr int kMaxFusedWeights = 2;
using FusedWeightTable = std::array<FusedWeight, kMaxFusedWeights>;  // unused entries: module nullptr

struct ArchitectureSpec {
  const char* hf_name;    // "Qwen3ForCausalLM"
  const char* gguf_name;  // "qwen3"; nullptr when llama.cpp files it under another row's name
  ArchitectureTraits traits;
  const WeightNameTable* hf_names;
  const WeightNameTable* gguf_names;
  const FusedWeightTable* hf_fused = nullptr;  // checkpoints whose tensors fuse roles (Phi-3)
  // A GGUF of this general.architecture that has experts (its expert_count > 0) is this row:
  // llama.cpp writes Mixtral as "llama" with experts. nullptr: none.
  const char* gguf_name_with_experts = nullptr;
};

// Whether the row's GGUF files store `gguf_module` (e.g. "blk.{L}.attn_qkv") as a fused tensor.
bool gguf_fuses(const ArchitectureSpec& arch, std::string_view gguf_module);

// The row for an HF architecture string or a GGUF general.architecture; throws an Error that
// names `name`, `where` (the file) and the supported names when there is none.
const ArchitectureSpec& find_hf_architecture(std::string_view name, const std::string& where);
// `has_experts`: the file's <name>.expert_count is > 0, which picks a row's gguf_name_with_experts.
const ArchitectureSpec& find_gguf_architecture(std::string_view name, const std::string& where,
                                               bool has_experts = false);

// The module name of `role` in `format` for layer `layer` (ignored for a model-wide role) and
// `expert` (an expert role's; ignored otherwise), e.g. "model.layers.3.self_attn.q_proj"; "" when
// the architecture has no such weight.
std::string module_name(const ArchitectureSpec& arch, WeightFormat format, WeightRole role, int64_t layer,
                        int64_t expert = -1);
// Its tensor: module_name + "." + kind ("weight" or "bias"); "" as module_name.
std::string weight_name(const ArchitectureSpec& arch, WeightFormat format, WeightRole role, int64_t layer,
                        std::string_view kind = "weight");
// An expert's HF weight: "model.layers.{L}.mlp.experts.{E}.gate_proj.weight".
std::string expert_weight_name(const ArchitectureSpec& arch, WeightRole role, int64_t layer, int64_t expert);

}  // namespace minivllm
