// The registry's rows. Weight names follow transformers' modeling files (HF) and llama.cpp's
// tensor names (GGUF, llama-arch.cpp); the traits follow each family's modeling file.
#include "loader/architecture.h"

#include "common/check.h"

namespace minivllm {
namespace {

using R = WeightRole;

constexpr WeightNameTable make_table(std::initializer_list<std::pair<R, const char*>> rows) {
  WeightNameTable t{};
  for (const auto& [role, name] : rows) t[static_cast<size_t>(role)] = name;
  return t;
}

// transformers' LlamaModel layout, shared by Llama, Mistral, Qwen2 and Qwen3.
constexpr WeightNameTable kLlamaHfNames = make_table({
    {R::kEmbedTokens, "model.embed_tokens"},
    {R::kFinalNorm, "model.norm"},
    {R::kLmHead, "lm_head"},
    {R::kAttnInputNorm, "model.layers.{L}.input_layernorm"},
    {R::kQProj, "model.layers.{L}.self_attn.q_proj"},
    {R::kKProj, "model.layers.{L}.self_attn.k_proj"},
    {R::kVProj, "model.layers.{L}.self_attn.v_proj"},
    {R::kQNorm, "model.layers.{L}.self_attn.q_norm"},
    {R::kKNorm, "model.layers.{L}.self_attn.k_norm"},
    {R::kOProj, "model.layers.{L}.self_attn.o_proj"},
    {R::kFfnInputNorm, "model.layers.{L}.post_attention_layernorm"},
    {R::kGateProj, "model.layers.{L}.mlp.gate_proj"},
    {R::kUpProj, "model.layers.{L}.mlp.up_proj"},
    {R::kDownProj, "model.layers.{L}.mlp.down_proj"},
});

// llama.cpp's names for the same modules.
constexpr WeightNameTable kLlamaGgufNames = make_table({
    {R::kEmbedTokens, "token_embd"},
    {R::kFinalNorm, "output_norm"},
    {R::kLmHead, "output"},
    {R::kAttnInputNorm, "blk.{L}.attn_norm"},
    {R::kQProj, "blk.{L}.attn_q"},
    {R::kKProj, "blk.{L}.attn_k"},
    {R::kVProj, "blk.{L}.attn_v"},
    {R::kQNorm, "blk.{L}.attn_q_norm"},
    {R::kKNorm, "blk.{L}.attn_k_norm"},
    {R::kOProj, "blk.{L}.attn_output"},
    {R::kFfnInputNorm, "blk.{L}.ffn_norm"},
    {R::kGateProj, "blk.{L}.ffn_gate"},
    {R::kUpProj, "blk.{L}.ffn_up"},
    {R::kDownProj, "blk.{L}.ffn_down"},
});

// transformers' Qwen3MoeModel: Qwen3's attention; a sparse layer's MLP is a router ("mlp.gate")
// and experts, each a gated MLP of its own. transformers 5 holds the experts fused in memory
// ([E, 2I, H] gate_up_proj) but saves them per expert, as the published checkpoints are.
constexpr WeightNameTable kQwen3MoeHfNames = [] {
  WeightNameTable t = kLlamaHfNames;
  t[static_cast<size_t>(R::kMoeRouter)] = "model.layers.{L}.mlp.gate";
  t[static_cast<size_t>(R::kExpertGateProj)] = "model.layers.{L}.mlp.experts.{E}.gate_proj";
  t[static_cast<size_t>(R::kExpertUpProj)] = "model.layers.{L}.mlp.experts.{E}.up_proj";
  t[static_cast<size_t>(R::kExpertDownProj)] = "model.layers.{L}.mlp.experts.{E}.down_proj";
  return t;
}();

// llama.cpp's "qwen3moe" (and its "llama" files of Mixtral): each layer's experts as one 3-D tensor per role ([E, I, H] for gate and up,
// [E, H, I] for down in HF's order), which the GGUF source serves as the per-expert weights
// above; the router is ffn_gate_inp. Its layers are all sparse (no dense MLP).
constexpr WeightNameTable kQwen3MoeGgufNames = [] {
  WeightNameTable t = kLlamaGgufNames;
  t[static_cast<size_t>(R::kMoeRouter)] = "blk.{L}.ffn_gate_inp";
  t[static_cast<size_t>(R::kExpertGateProj)] = "blk.{L}.ffn_gate_exps";
  t[static_cast<size_t>(R::kExpertUpProj)] = "blk.{L}.ffn_up_exps";
  t[static_cast<size_t>(R::kExpertDownProj)] = "blk.{L}.ffn_down_exps";
  return t;
}();

// transformers' Qwen2MoeModel (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's attention, Qwen3-MoE's
// router and experts, and a shared expert every token goes through (mlp.shared_expert) scaled by a
// sigmoid gate (mlp.shared_expert_gate, one row). llama.cpp's qwen2moe names them *_shexp.
constexpr WeightNameTable kQwen2MoeHfNames = [] {
  WeightNameTable t = kQwen3MoeHfNames;
  t[static_cast<size_t>(R::kSharedExpertGateProj)] = "model.layers.{L}.mlp.shared_expert.gate_proj";
  t[static_cast<size_t>(R::kSharedExpertUpProj)] = "model.layers.{L}.mlp.shared_expert.up_proj";
  t[static_cast<size_t>(R::kSharedExpertDownProj)] = "model.layers.{L}.mlp.shared_expert.down_proj";
  t[static_cast<size_t>(R::kSharedExpertGate)] = "model.layers.{L}.mlp.shared_expert_gate";
  return t;
}();
constexpr WeightNameTable kQwen2MoeGgufNames = [] {
  WeightNameTable t = kQwen3MoeGgufNames;
  t[static_cast<size_t>(R::kSharedExpertGateProj)] = "blk.{L}.ffn_gate_shexp";
  t[static_cast<size_t>(R::kSharedExpertUpProj)] = "blk.{L}.ffn_up_shexp";
  t[static_cast<size_t>(R::kSharedExpertDownProj)] = "blk.{L}.ffn_down_shexp";
  t[static_cast<size_t>(R::kSharedExpertGate)] = "blk.{L}.ffn_gate_inp_shexp";
  return t;
}();

// transformers' Glm4MoeModel (GLM-4.5, GLM-4.5-Air, GLM-4.6): Qwen3-MoE's router and experts, each sparse
// layer's ungated shared experts as one MLP (mlp.shared_experts), the router's score bias as
// mlp.gate.e_score_correction_bias (read by FusedMoE beside mlp.gate.weight).
constexpr WeightNameTable kGlm4MoeHfNames = [] {
  WeightNameTable t = kQwen3MoeHfNames;
  t[static_cast<size_t>(R::kSharedExpertGateProj)] = "model.layers.{L}.mlp.shared_experts.gate_proj";
  t[static_cast<size_t>(R::kSharedExpertUpProj)] = "model.layers.{L}.mlp.shared_experts.up_proj";
  t[static_cast<size_t>(R::kSharedExpertDownProj)] = "model.layers.{L}.mlp.shared_experts.down_proj";
  t[static_cast<size_t>(R::kMoeScoreBias)] = "model.layers.{L}.mlp.gate";
  return t;
}();

// transformers' Ernie4_5_MoeModel (ERNIE-4.5-21B-A3B, 300B-A47B): GLM-4.5's expert names, its score
// bias in mlp.moe_statics ([1, E]).
constexpr WeightNameTable kErnie45MoeHfNames = [] {
  WeightNameTable t = kGlm4MoeHfNames;
  t[static_cast<size_t>(R::kMoeScoreBias)] = "model.layers.{L}.mlp.moe_statics";
  return t;
}();

// llama.cpp's ernie4_5-moe and glm4moe: qwen3moe's experts, qwen2moe's *_shexp (no gate), the score bias
// as exp_probs_b.bias; glm4moe names the MLP's input norm post_attention_norm (as seed_oss).
constexpr WeightNameTable kErnie45MoeGgufNames = [] {
  WeightNameTable t = kQwen2MoeGgufNames;
  t[static_cast<size_t>(R::kSharedExpertGate)] = nullptr;
  t[static_cast<size_t>(R::kMoeScoreBias)] = "blk.{L}.exp_probs_b";
  return t;
}();
constexpr WeightNameTable kGlm4MoeGgufNames = [] {
  WeightNameTable t = kErnie45MoeGgufNames;
  t[static_cast<size_t>(R::kFfnInputNorm)] = "blk.{L}.post_attention_norm";
  return t;
}();

// Mixtral (Mixtral-8x7B, 8x22B): Mistral's attention; every layer's MLP is a router
// ("block_sparse_moe.gate") and experts of w1 (gate), w3 (up) and w2 (down), as the published
// checkpoints name them.
constexpr WeightNameTable kMixtralHfNames = [] {
  WeightNameTable t = kLlamaHfNames;
  t[static_cast<size_t>(R::kMoeRouter)] = "model.layers.{L}.block_sparse_moe.gate";
  t[static_cast<size_t>(R::kExpertGateProj)] = "model.layers.{L}.block_sparse_moe.experts.{E}.w1";
  t[static_cast<size_t>(R::kExpertUpProj)] = "model.layers.{L}.block_sparse_moe.experts.{E}.w3";
  t[static_cast<size_t>(R::kExpertDownProj)] = "model.layers.{L}.block_sparse_moe.experts.{E}.w2";
  return t;
}();

// IBM's GraniteMoE (granite-3.x-1b-a400m, 3b-a800m): Granite's layers with Mixtral's routing (its top-k
// logits softmaxed: the renormalised top-k of a softmax); the published checkpoints stack each layer's
// experts (block_sparse_moe.input_linear [E, 2I, H], gate then up; output_linear [E, H, I]), which the
// safetensors reader serves per expert under the names below. llama.cpp's granitemoe files hold them
// as qwen3moe's 3-D tensors.
constexpr WeightNameTable kGraniteMoeHfNames = [] {
  WeightNameTable t = kLlamaHfNames;
  t[static_cast<size_t>(R::kMoeRouter)] = "model.layers.{L}.block_sparse_moe.router.layer";
  t[static_cast<size_t>(R::kExpertGateProj)] = "model.layers.{L}.block_sparse_moe.experts.{E}.gate_proj";
  t[static_cast<size_t>(R::kExpertUpProj)] = "model.layers.{L}.block_sparse_moe.experts.{E}.up_proj";
  t[static_cast<size_t>(R::kExpertDownProj)] = "model.layers.{L}.block_sparse_moe.experts.{E}.down_proj";
  return t;
}();

constexpr ArchitectureTraits kLlamaTraits{.gguf_rope_permuted = true};
constexpr ArchitectureTraits kMistralTraits{.sliding_window_all_layers = true, .gguf_rope_permuted = true};

// transformers' Gemma3TextModel: Llama's modules plus a norm after each sublayer; its
// "post_attention_layernorm" is that output norm, the MLP's input norm "pre_feedforward_layernorm".
constexpr WeightNameTable kGemma3HfNames = [] {
  WeightNameTable t = kLlamaHfNames;
  t[static_cast<size_t>(R::kFfnInputNorm)] = "model.layers.{L}.pre_feedforward_layernorm";
  t[static_cast<size_t>(R::kAttnOutputNorm)] = "model.layers.{L}.post_attention_layernorm";
  t[static_cast<size_t>(R::kFfnOutputNorm)] = "model.layers.{L}.post_feedforward_layernorm";
  return t;
}();
constexpr WeightNameTable kGemma3GgufNames = [] {
  WeightNameTable t = kLlamaGgufNames;
  t[static_cast<size_t>(R::kAttnOutputNorm)] = "blk.{L}.post_attention_norm";
  t[static_cast<size_t>(R::kFfnOutputNorm)] = "blk.{L}.post_ffw_norm";
  return t;
}();
constexpr ArchitectureTraits kGemma3Traits{.activation = Activation::kGeluTanh,
                                           .norm = NormForm::kRmsOnePlusWeight,
                                           .qk_norm = true,
                                           .embed_scale_sqrt_hidden = true,
                                           .post_norms = true,
                                           .swa_pattern = 6,
                                           .tied_by_default = true};

// transformers' Gemma2Model: Gemma 3's modules and norms without the q/k norms, one rope base, and
// its scores and final logits soft-capped.
constexpr ArchitectureTraits kGemma2Traits{.activation = Activation::kGeluTanh,
                                           .norm = NormForm::kRmsOnePlusWeight,
                                           .embed_scale_sqrt_hidden = true,
                                           .post_norms = true,
                                           .swa_pattern = 2,
                                           .tied_by_default = true,
                                           .logit_softcapping = true};

// transformers' Phi3Model: Llama's modules, with q/k/v and gate/up each stored as one fused
// tensor (split by role on load; the row's names are the parts'). llama.cpp's "phi3" files fuse
// them the same way (attn_qkv; ffn_up holds gate then up), so its table names no q/k/v, gate or
// up of its own.
constexpr FusedWeightTable kPhi3Fused = {{
    {"model.layers.{L}.self_attn.qkv_proj", "blk.{L}.attn_qkv", {R::kQProj, R::kKProj, R::kVProj}, 3},
    {"model.layers.{L}.mlp.gate_up_proj", "blk.{L}.ffn_up", {R::kGateProj, R::kUpProj, R::kCount}, 2},
}};
constexpr WeightNameTable kPhi3GgufNames = [] {
  WeightNameTable t = kLlamaGgufNames;
  for (R fused : {R::kQProj, R::kKProj, R::kVProj, R::kGateProj, R::kUpProj}) t[static_cast<size_t>(fused)] = nullptr;
  return t;
}();

// transformers' Glm4Model (GLM-4-9B-0414, GLM-4-32B-0414): Llama's modules and a norm after each
// sublayer (post_self_attn_layernorm, post_mlp_layernorm; its post_attention_layernorm is the MLP's
// input norm, as Llama's), gate and up fused in one gate_up_proj (gate first, as Phi-3's; llama.cpp
// keeps it fused as ffn_up), q/k/v biases, half of each head rotating in adjacent pairs.
constexpr WeightNameTable kGlm4HfNames = [] {
  WeightNameTable t = kLlamaHfNames;
  t[static_cast<size_t>(R::kAttnOutputNorm)] = "model.layers.{L}.post_self_attn_layernorm";
  t[static_cast<size_t>(R::kFfnOutputNorm)] = "model.layers.{L}.post_mlp_layernorm";
  return t;
}();
constexpr WeightNameTable kGlm4GgufNames = [] {
  WeightNameTable t = kGemma3GgufNames;  // post_attention_norm, ffn_norm, post_ffw_norm
  for (R fused : {R::kGateProj, R::kUpProj}) t[static_cast<size_t>(fused)] = nullptr;
  return t;
}();
constexpr FusedWeightTable kGlm4Fused = {{
    {"model.layers.{L}.mlp.gate_up_proj", "blk.{L}.ffn_up", {R::kGateProj, R::kUpProj, R::kCount}, 2},
}};
constexpr ArchitectureTraits kGlm4Traits{.gguf_rope_permuted = true,
                                         .post_norms = true,
                                         .attention_bias_is_qkv = true,
                                         .hf_rope_interleaved = true,
                                         .default_partial_rotary = 0.5};

// transformers' GlmModel: GLM-4's layers without the sublayer output norms. llama.cpp's chatglm stores
// its rows as glm4 does (q/k as HF keeps them, gate_up_proj fused as ffn_up).
constexpr ArchitectureTraits kGlmTraits{.gguf_rope_permuted = true, .attention_bias_is_qkv = true,
                                        .hf_rope_interleaved = true, .default_partial_rotary = 0.5};
constexpr WeightNameTable kGlmGgufNames = [] {
  WeightNameTable t = kLlamaGgufNames;
  for (R fused : {R::kGateProj, R::kUpProj}) t[static_cast<size_t>(fused)] = nullptr;
  return t;
}();

// llama.cpp's seed_oss names the MLP's input norm post_attention_norm (HF's post_attention_layernorm).
constexpr WeightNameTable kSeedOssGgufNames = [] {
  WeightNameTable t = kLlamaGgufNames;
  t[static_cast<size_t>(R::kFfnInputNorm)] = "blk.{L}.post_attention_norm";
  return t;
}();

// transformers' Olmo2Model (OLMo-2-0425-1B, OLMo-2-1124-7B/13B, OLMo-2-0325-32B): Llama's modules with
// no norm before a sublayer, a norm on each sublayer's output (post_attention_layernorm,
// post_feedforward_layernorm), and q/k norms over all heads of q and of k at once. llama.cpp's olmo2
// names them post_attention_norm / post_ffw_norm and keeps HF's half-split q/k rows (rope "neox").
constexpr WeightNameTable kOlmo2HfNames = [] {
  WeightNameTable t = kLlamaHfNames;
  t[static_cast<size_t>(R::kAttnInputNorm)] = nullptr;
  t[static_cast<size_t>(R::kFfnInputNorm)] = nullptr;
  t[static_cast<size_t>(R::kAttnOutputNorm)] = "model.layers.{L}.post_attention_layernorm";
  t[static_cast<size_t>(R::kFfnOutputNorm)] = "model.layers.{L}.post_feedforward_layernorm";
  return t;
}();
constexpr WeightNameTable kOlmo2GgufNames = [] {
  WeightNameTable t = kGemma3GgufNames;  // post_attention_norm, post_ffw_norm
  t[static_cast<size_t>(R::kAttnInputNorm)] = nullptr;
  t[static_cast<size_t>(R::kFfnInputNorm)] = nullptr;
  return t;
}();
constexpr ArchitectureTraits kOlmo2Traits{.qk_norm = true,
                                          .qk_norm_full_width = true,
                                          .post_norms = true,
                                          .input_norms = false,
                                          .sliding_rope_unscaled = true};
// OLMo 3 (Olmo-3-7B, 32B): OLMo 2's layers, three of every four sliding (layer_types; transformers'
// default when a config names a window but no layer kinds), the rope scaling on the full layers only.
constexpr ArchitectureTraits kOlmo3Traits{.qk_norm = true,
                                          .qk_norm_full_width = true,
                                          .post_norms = true,
                                          .input_norms = false,
                                          .swa_pattern = 4,
                                          .sliding_rope_unscaled = true};

// LG's EXAONE 4.0 (EXAONE-4.0-1.2B, 32B): OLMo 2's norms around each sublayer (none before), per-head q/k
// norms as Qwen3's, and with a sliding window its full layers rotating nothing. llama.cpp's exaone4 names
// the norms as olmo2 does and stores Llama 3's rope scaling as rope_freqs.
constexpr ArchitectureTraits kExaone4Traits{.qk_norm = true,
                                            .post_norms = true,
                                            .input_norms = false,
                                            .nope_full_layers_with_window = true};

// transformers' GptOssModel (gpt-oss-20b, gpt-oss-120b): Llama's attention with q/k/v/o biases and sink
// logits, every layer's MLP a router (mlp.router, with a bias) and biased experts stacked in the checkpoint
// (served per expert by loader/gpt_oss_experts.h), Mixtral's routing (the softmax over the top-k logits
// is the top-k of the softmax renormalised), gpt-oss's clamped SwiGLU.
constexpr WeightNameTable kGptOssHfNames = [] {
  WeightNameTable t = kQwen3MoeHfNames;
  t[static_cast<size_t>(R::kMoeRouter)] = "model.layers.{L}.mlp.router";
  t[static_cast<size_t>(R::kAttnSinks)] = "model.layers.{L}.self_attn";
  return t;
}();
// llama.cpp's gpt-oss: the experts' gate and up split apart (ffn_gate_exps, ffn_up_exps) with their biases
// as [E, I] tensors, the MLP's input norm as post_attention_norm, the sinks as attn_sinks; every other
// layer sliding from layer 0 (its pattern 2), half-split rows (rope "neox").
constexpr WeightNameTable kGptOssGgufNames = [] {
  WeightNameTable t = kQwen3MoeGgufNames;
  t[static_cast<size_t>(R::kFfnInputNorm)] = "blk.{L}.post_attention_norm";
  t[static_cast<size_t>(R::kAttnSinks)] = "blk.{L}.attn_sinks";
  return t;
}();
constexpr ArchitectureTraits kGptOssTraits{.activation = Activation::kSwigluOai,
                                           .swa_pattern = 2,
                                           .moe = true,
                                           .moe_keys = MoeKeys::kMixtral,
                                           .attention_bias_with_o = true,
                                           .attention_sinks = true,
                                           .gpt_oss_experts = true,
                                           .yarn_untruncated = true,
                                           .gguf_sliding_rope_as_full = true};

// One row per architecture. A Llama-like family is a row with its own names and traits.
const ArchitectureSpec kArchitectures[] = {
    {"Qwen3ForCausalLM", "qwen3", {.qk_norm = true, .use_sliding_window_key = true}, &kLlamaHfNames,
     &kLlamaGgufNames, nullptr},
    // Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B); its GGUF holds the experts as 3-D tensors.
    {"Qwen3MoeForCausalLM", "qwen3moe", {.qk_norm = true, .use_sliding_window_key = true, .moe = true},
     &kQwen3MoeHfNames, &kQwen3MoeGgufNames, nullptr},
    {"Qwen2ForCausalLM", "qwen2", {.qkv_bias = true, .use_sliding_window_key = true}, &kLlamaHfNames,
     &kLlamaGgufNames, nullptr},
    // Qwen2-MoE (Qwen1.5-MoE-A2.7B, Qwen2-57B-A14B): Qwen2's q/k/v biases, Qwen3-MoE's routing, a
    // gated shared expert in every sparse layer.
    {"Qwen2MoeForCausalLM", "qwen2moe",
     {.qkv_bias = true, .use_sliding_window_key = true, .moe = true, .moe_keys = MoeKeys::kQwen2},
     &kQwen2MoeHfNames, &kQwen2MoeGgufNames, nullptr},
    {"LlamaForCausalLM", "llama", kLlamaTraits, &kLlamaHfNames, &kLlamaGgufNames, nullptr},
    // SmolLM3 (SmolLM3-3B): Llama's layers, every fourth one without rope (NoPE).
    {"SmolLM3ForCausalLM", "smollm3", {.use_sliding_window_key = true, .gguf_rope_permuted = true, .no_rope_layers = true},
     &kLlamaHfNames, &kLlamaGgufNames, nullptr},
    {"Glm4ForCausalLM", "glm4", kGlm4Traits, &kGlm4HfNames, &kGlm4GgufNames, &kGlm4Fused},
    // GLM-4's predecessor in transformers' own form (glm-4-9b-chat-hf, glm-edge), and llama.cpp's chatglm
    // files converted from it (those of THUDM's own layout fuse q/k/v as attn_qkv: refused by name).
    {"GlmForCausalLM", "chatglm", kGlmTraits, &kLlamaHfNames, &kGlmGgufNames, &kGlm4Fused},
    // Baidu's ERNIE 4.5 dense (ERNIE-4.5-0.3B-PT): Llama's modules, every head rotating in adjacent
    // pairs (moved at load, as GLM-4's; llama.cpp's ernie4_5 keeps the rows as HF stores them).
    {"Ernie4_5ForCausalLM", "ernie4_5",
     {.gguf_rope_permuted = true, .tied_by_default = true, .hf_rope_interleaved = true}, &kLlamaHfNames,
     &kLlamaGgufNames, nullptr},
    // ByteDance's Seed-OSS (Seed-OSS-36B): Llama's modules with q/k/v biases (attention_bias; its
    // o_proj bias is attention_out_bias, refused when set).
    {"SeedOssForCausalLM", "seed_oss", {.attention_bias_is_qkv = true}, &kLlamaHfNames, &kSeedOssGgufNames, nullptr},
    // IBM Granite 3 (granite-3.x-2b/8b): Llama's modules and rope layout, with four scalars
    // (ModelConfig::embedding_multiplier and the rest).
    {"GraniteForCausalLM", "granite", {.gguf_rope_permuted = true, .granite_multipliers = true}, &kLlamaHfNames,
     &kLlamaGgufNames, nullptr},
    {"GraniteMoeForCausalLM", "granitemoe",
     {.gguf_rope_permuted = true, .moe = true, .moe_keys = MoeKeys::kMixtral, .granite_multipliers = true},
     &kGraniteMoeHfNames, &kQwen3MoeGgufNames, nullptr},
    // GLM-4.5 / 4.6 (Glm4MoeForCausalLM): q/k/v biases, half of each head rotating (half-split, not
    // GLM-4's pairs), per-head q/k norms where use_qk_norm, DeepSeek-V3's routing. llama.cpp's glm4moe
    // files count their next-token-prediction layers in block_count (nextn_predict_layers; not run).
    {"Glm4MoeForCausalLM", "glm4moe",
     {.qk_norm_key = true, .moe = true, .moe_keys = MoeKeys::kGlm4Moe, .attention_bias_is_qkv = true,
      .default_partial_rotary = 0.5},
     &kGlm4MoeHfNames, &kGlm4MoeGgufNames, nullptr},
    // ERNIE 4.5 MoE (Ernie4_5_MoeForCausalLM): ERNIE 4.5's attention (pairs rotating), softmax routing with
    // a score bias for the choice, ungated shared experts.
    {"Ernie4_5_MoeForCausalLM", "ernie4_5-moe",
     {.gguf_rope_permuted = true, .tied_by_default = true, .moe = true, .moe_keys = MoeKeys::kErnie45,
      .hf_rope_interleaved = true},
     &kErnie45MoeHfNames, &kErnie45MoeGgufNames, nullptr},
    // llama.cpp converts Mistral-7B / Ministral as "llama" (its rope rows permuted the same way).
    {"MistralForCausalLM", nullptr, kMistralTraits, &kLlamaHfNames, &kLlamaGgufNames, nullptr},
    // Mixtral: llama.cpp writes it as a "llama" file with experts (3-D tensors, as qwen3moe's).
    {"MixtralForCausalLM", nullptr,
     {.sliding_window_all_layers = true, .gguf_rope_permuted = true, .moe = true, .moe_keys = MoeKeys::kMixtral},
     &kMixtralHfNames, &kQwen3MoeGgufNames, nullptr, "llama"},
    // AllenAI's OLMoE (OLMoE-1B-7B): Qwen3-MoE's modules with OLMo 2's q/k norms over all heads (its
    // input norms Llama's), 64 experts of intermediate_size, 8 a token, the weights renormalised only
    // with norm_topk_prob (llama.cpp's olmoe never).
    {"OlmoeForCausalLM", "olmoe", {.qk_norm = true, .qk_norm_full_width = true, .moe = true, .moe_keys = MoeKeys::kOlmoe},
     &kQwen3MoeHfNames, &kQwen3MoeGgufNames, nullptr},
    // Text-only Gemma 3 (gemma-3-1b-it; model_type gemma3_text). llama.cpp's converter stores its
    // norms with the 1 added (ModelConfig::norm_weights_include_one).
    {"Gemma3ForCausalLM", "gemma3", kGemma3Traits, &kGemma3HfNames, &kGemma3GgufNames, nullptr},
    // Gemma 2 (gemma-2-2b-it, 9b, 27b): Hugging Face checkpoints or llama.cpp's gemma2 GGUF, on the
    // CPU backend (the CUDA attention kernels implement no soft-capping yet: refused at load).
    {"Gemma2ForCausalLM", "gemma2", kGemma2Traits, &kGemma3HfNames, &kGemma3GgufNames, nullptr},
    // Phi-3 (Phi-3-mini, Phi-4-mini): Llama-like but for its fused tensors; sliding_window binds
    // every layer when set (transformers' Phi3Attention). Its rope may rotate part of each head
    // (partial_rotary_factor) and scale by longrope (ModelConfig, model/rope.h). llama.cpp's
    // converter keeps HF's half-split q/k rows (not permuted).
    // llama.cpp writes OLMo 2 and 3 alike as "olmo2" (a sliding window and its layer pattern as metadata).
    {"Olmo2ForCausalLM", "olmo2", kOlmo2Traits, &kOlmo2HfNames, &kOlmo2GgufNames, nullptr},
    {"Olmo3ForCausalLM", nullptr, kOlmo3Traits, &kOlmo2HfNames, &kOlmo2GgufNames, nullptr},
    {"Exaone4ForCausalLM", "exaone4", kExaone4Traits, &kOlmo2HfNames, &kOlmo2GgufNames, nullptr},
    // OpenAI's gpt-oss (gpt-oss-20b, 120b) in bf16 (its MXFP4 safetensors are refused by their
    // quantization_config), and llama.cpp's gpt-oss files (their MXFP4 experts read as stored).
    {"GptOssForCausalLM", "gpt-oss", kGptOssTraits, &kGptOssHfNames, &kGptOssGgufNames, nullptr},
    {"Phi3ForCausalLM", "phi3", {.sliding_window_all_layers = true}, &kLlamaHfNames, &kPhi3GgufNames, &kPhi3Fused},
};

template <typename Name>
std::string list_names(Name name) {
  std::string out;
  for (const ArchitectureSpec& a : kArchitectures) {
    if (name(a) == nullptr) continue;
    if (!out.empty()) out += ", ";
    out += name(a);
  }
  return out;
}

}  // namespace

const char* weight_role_name(WeightRole r) {
  static constexpr const char* kNames[] = {"embed_tokens", "final_norm",    "lm_head",   "attn_input_norm",
                                           "q_proj",       "k_proj",        "v_proj",    "q_norm",
                                           "k_norm",       "o_proj",        "ffn_input_norm", "gate_proj",
                                           "up_proj",      "down_proj",     "attn_output_norm", "ffn_output_norm",
                                           "moe_router",   "expert_gate_proj", "expert_up_proj", "expert_down_proj",
                                           "shared_expert_gate_proj", "shared_expert_up_proj",
                                           "shared_expert_down_proj", "shared_expert_gate", "moe_score_bias",
                                           "attn_sinks"};
  static_assert(std::size(kNames) == kNumWeightRoles);
  const int i = static_cast<int>(r);
  MINIVLLM_CHECK(i >= 0 && i < kNumWeightRoles) << "weight role " << i;
  return kNames[i];
}

const ArchitectureSpec& find_hf_architecture(std::string_view name, const std::string& where) {
  for (const ArchitectureSpec& a : kArchitectures) {
    if (name == a.hf_name) return a;
  }
  MINIVLLM_FAIL() << where << ": unsupported architecture " << name
                  << " (supported: " << list_names([](const ArchitectureSpec& a) { return a.hf_name; }) << ")";
}

const ArchitectureSpec& find_gguf_architecture(std::string_view name, const std::string& where, bool has_experts) {
  for (const ArchitectureSpec& a : kArchitectures) {
    if (has_experts && a.gguf_name_with_experts != nullptr && name == a.gguf_name_with_experts) return a;
  }
  for (const ArchitectureSpec& a : kArchitectures) {
    if (a.gguf_name != nullptr && name == a.gguf_name) return a;
  }
  MINIVLLM_FAIL() << where << ": unsupported general.architecture " << name << " ("
                  << list_names([](const ArchitectureSpec& a) { return a.gguf_name; }) << ")";
}

bool gguf_fuses(const ArchitectureSpec& arch, std::string_view gguf_module) {
  if (arch.hf_fused == nullptr) return false;
  for (const FusedWeight& f : *arch.hf_fused) {
    if (f.gguf_module != nullptr && gguf_module == f.gguf_module) return true;
  }
  return false;
}

std::string module_name(const ArchitectureSpec& arch, WeightFormat format, WeightRole role, int64_t layer,
                        int64_t expert) {
  const WeightNameTable& table = format == WeightFormat::kGguf ? *arch.gguf_names : *arch.hf_names;
  const char* pattern = table[static_cast<size_t>(role)];
  if (pattern == nullptr) return "";
  std::string name(pattern);
  if (const size_t at = name.find("{L}"); at != std::string::npos) {
    MINIVLLM_CHECK(layer >= 0) << "weight " << weight_role_name(role) << " of " << arch.hf_name << " needs a layer";
    name.replace(at, 3, std::to_string(layer));
  }
  if (const size_t at = name.find("{E}"); at != std::string::npos) {
    MINIVLLM_CHECK(expert >= 0) << "weight " << weight_role_name(role) << " of " << arch.hf_name << " needs an expert";
    name.replace(at, 3, std::to_string(expert));
  }
  return name;
}

std::string expert_weight_name(const ArchitectureSpec& arch, WeightRole role, int64_t layer, int64_t expert) {
  std::string name = module_name(arch, WeightFormat::kHuggingFace, role, layer, expert);
  return name.empty() ? name : name + ".weight";
}

std::string weight_name(const ArchitectureSpec& arch, WeightFormat format, WeightRole role, int64_t layer,
                        std::string_view kind) {
  std::string name = module_name(arch, format, role, layer);
  if (name.empty()) return name;
  name += '.';
  name += kind;
  return name;
}

}  // namespace minivllm
