// open_gguf: ModelConfig and VocabData from GGUF metadata, weights through gguf_weights.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "common/check.h"
#include "loader/fused_weights.h"
#include "loader/gguf.h"
#include "loader/gguf_dequant.h"
#include "loader/gguf_weights.h"

namespace minivllm {
namespace {

int64_t gguf_vocab_size(const GgufFile& f, const std::string& a) {
  if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens")) return static_cast<int64_t>(tokens->array_size());
  if (f.find(a + ".vocab_size")) return f.get_int(a + ".vocab_size");
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  MINIVLLM_CHECK(embd && embd->ne.size() == 2) << f.path() << ": no tokenizer.ggml.tokens and no token_embd.weight";
  return embd->ne[1];
}

// Tied when output.weight is absent, or when it is a byte-for-byte copy of token_embd.weight (as
// llama.cpp's llama2.c converter writes it, e.g. stories260K).
bool output_tied_to_embedding(const GgufFile& f) {
  const GgufTensorInfo* out = f.find_tensor("output.weight");
  if (!out) return true;
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  return embd && embd->type == out->type && embd->ne == out->ne && embd->nbytes == out->nbytes &&
         std::memcmp(f.tensor_data(*embd), f.tensor_data(*out), out->nbytes) == 0;
}

// GGUF writes "no token" as -1 or as 0xFFFFFFFF in a uint32; both become -1. Any other id must
// name a token of the vocabulary (when the file has one).
int64_t token_id(const GgufFile& f, const std::string& key, size_t n_tokens) {
  const int64_t id = f.get_int(key, -1);
  if (id < 0 || id == 0xFFFFFFFFll) return -1;
  MINIVLLM_CHECK(n_tokens == 0 || static_cast<uint64_t>(id) < n_tokens)
      << f.path() << ": GGUF key " << key << " = " << id << " is outside the vocabulary of " << n_tokens
      << " tokens (tokenizer.ggml.tokens)";
  return id;
}

// Metadata and tensors asking for what the engine does not implement.
void refuse_unsupported_features(const GgufFile& f, const std::string& a, const ModelConfig& c) {
  for (const char* key : {".final_logit_softcapping", ".attn_logit_softcapping"}) {
    const std::string softcap = a + key;
    if (!f.find(softcap) || c.traits().logit_softcapping) continue;
    const double cap = f.get_float(softcap, 0);
    MINIVLLM_CHECK(cap == 0) << f.path() << ": unsupported " << softcap << " = " << cap
                             << " (minivllm soft-caps Gemma 2's only)";
  }
  MINIVLLM_CHECK(!f.find_tensor("blk.0.attn_qkv.weight") || gguf_fuses(*c.arch, "blk.{L}.attn_qkv"))
      << f.path() << ": unsupported tensor 'blk.0.attn_qkv.weight' (q, k and v fused; minivllm reads them apart "
      << "for " << a << ": convert without --fuse-qkv)";
  const std::string experts = a + ".expert_count";
  if (!c.traits().moe && f.find(experts)) {
    const int64_t n = f.get_int(experts);
    MINIVLLM_CHECK_LE(n, 0) << f.path() << ": unsupported " << experts << " = " << n << " for " << a
                            << " (minivllm reads mixture-of-experts GGUF as qwen3moe, qwen2moe, granitemoe, olmoe, "
                            << "glm4moe, ernie4_5-moe, and llama with experts as Mixtral; other families from Hugging "
                            << "Face safetensors)";
  }
  // Biases the engine has no place for: o_proj's (but gpt-oss's) and the MLP's (q/k/v biases are read).
  for (const GgufTensorInfo& t : f.tensors()) {
    if (!t.name.starts_with("blk.")) continue;
    for (const char* part : {".attn_output.bias", ".ffn_gate.bias", ".ffn_up.bias", ".ffn_down.bias"}) {
      if (c.o_proj_bias && std::string_view(part) == ".attn_output.bias") continue;
      MINIVLLM_CHECK(!t.name.ends_with(part))
          << f.path() << ": unsupported tensor '" << t.name << "' (minivllm implements no "
          << (std::string(part) == ".attn_output.bias" ? "attention output" : "MLP") << " bias)";
    }
  }
}

// rope.scaling.type: yarn and linear as llama.cpp applies them (llama_context's yarn set-up, the
// ggml rope's ramp), which is transformers' yarn: factor, the pretrained length
// rope.scaling.original_context_length (else context_length), beta_fast / beta_slow 32 / 1 unless
// given, the ramp's ends rounded outward, cos and sin times 0.1 ln(factor) + 1 (or, with
// yarn_log_multiplier m, its ratio to 0.1 m ln(factor) + 1) times rope.scaling.attn_factor. longrope
// only beside its factor tensors (has_longrope_factors). Anything else is refused, naming it.
void read_scaling_type(const GgufFile& f, const std::string& a, bool has_longrope_factors, ModelConfig* c) {
  const std::string key = a + ".rope.scaling.type";
  const std::string type = f.find(key) ? f.get_string(key, "") : "";
  if (type.empty() || type == "none") return;
  if (type == "longrope") {
    MINIVLLM_CHECK(has_longrope_factors) << f.path() << ": " << key << " longrope without the tensors "
                                         << "rope_factors_long.weight / rope_factors_short.weight";
    return;
  }
  MINIVLLM_CHECK(type == "yarn" || type == "linear")
      << f.path() << ": unsupported " << key << " \"" << type << "\" (supported: none, linear, yarn, longrope)";
  MINIVLLM_CHECK(c->rope_scaling.type.empty())
      << f.path() << ": " << key << " " << type << " beside rope_freqs.weight (" << c->rope_scaling.type << ")";
  RopeScaling& s = c->rope_scaling;
  const std::string factor = a + ".rope.scaling.factor";
  if (!f.find(factor)) return;  // llama.cpp: no factor, no scaling
  s.factor = f.get_float(factor, 0.0);
  MINIVLLM_CHECK(s.factor > 0) << f.path() << ": " << key << " " << type << " needs " << factor << " > 0";
  s.type = type;
  if (type == "linear") return;
  s.original_max_position_embeddings =
      f.get_int(a + ".rope.scaling.original_context_length", c->max_position_embeddings);
  s.beta_fast = f.get_float(a + ".rope.scaling.yarn_beta_fast", 32.0);
  s.beta_slow = f.get_float(a + ".rope.scaling.yarn_beta_slow", 1.0);
  s.truncate = !c->traits().yarn_untruncated;
  const std::string ext = a + ".rope.scaling.yarn_ext_factor";
  MINIVLLM_CHECK(!f.find(ext) || f.get_float(ext, 1.0) == 1.0)
      << f.path() << ": unsupported " << ext << " = " << f.get_float(ext, 1.0)
      << " (minivllm blends yarn's ramp fully, as transformers does: 1)";
  s.attention_factor = yarn_attention_factor(s.factor, 1.0, f.get_float(a + ".rope.scaling.yarn_log_multiplier", 0.0)) *
                       f.get_float(a + ".rope.scaling.attn_factor", 1.0);
}

// The rope: its base, the dims it rotates (rope.dimension_count; in llama.cpp's interleaved rows,
// glm4's, the unpermute moves only those: loader/rope_rows.h), and per-frequency divisors: phi3's
// longrope, two tensors with the switch at rope.scaling.original_context_length and the cos/sin
// scale in rope.scaling.attn_factor, or one (rope_freqs.weight, Llama 3's scaling) that always
// applies, as llama.cpp reads them.
void read_rope(const GgufFile& f, const std::string& a, ModelConfig* c) {
  c->rope_theta = f.get_float(a + ".rope.freq_base", 10000.0);
  const std::string rope_dims = a + ".rope.dimension_count";
  if (f.find(rope_dims) && f.get_int(rope_dims) != c->head_dim) {
    const int64_t n_rot = f.get_int(rope_dims);
    MINIVLLM_CHECK(n_rot > 0 && n_rot < c->head_dim && n_rot % 2 == 0)
        << f.path() << ": " << rope_dims << " = " << n_rot << " must be even and at most head_dim " << c->head_dim;
    c->rotary_dim = n_rot;
  }
  auto read_factors = [&](const GgufTensorInfo& info, std::vector<double>* out) {
    const Tensor t = f.get_f32(info);
    out->assign(t.ptr<float>(), t.ptr<float>() + t.numel());
  };
  const GgufTensorInfo* long_factors = f.find_tensor("rope_factors_long.weight");
  const GgufTensorInfo* short_factors = f.find_tensor("rope_factors_short.weight");
  // llama.cpp's converter stores Llama 3's rope scaling as one divisor per frequency.
  if (const GgufTensorInfo* freqs = f.find_tensor("rope_freqs.weight")) {
    MINIVLLM_CHECK(!long_factors && !short_factors)
        << f.path() << ": rope_freqs.weight beside longrope's rope_factors_long / rope_factors_short";
    c->rope_scaling.type = "freq_factors";
    read_factors(*freqs, &c->rope_scaling.freq_factors);
  }
  read_scaling_type(f, a, long_factors != nullptr || short_factors != nullptr, c);
  if (!long_factors && !short_factors) return;
  MINIVLLM_CHECK(long_factors && short_factors)
      << f.path() << ": rope_factors_long.weight and rope_factors_short.weight come together (longrope)";
  RopeScaling& s = c->rope_scaling;
  s.type = "longrope";
  read_factors(*long_factors, &s.long_factor);
  read_factors(*short_factors, &s.short_factor);
  const std::string orig = a + ".rope.scaling.original_context_length";
  MINIVLLM_CHECK(f.find(orig)) << f.path() << ": longrope factors without " << orig;
  s.original_max_position_embeddings = f.get_int(orig);
  s.attention_factor = f.get_float(a + ".rope.scaling.attn_factor", 1.0);
}

// Which layers slide, as llama.cpp reads it: attention.sliding_window > 0 makes sliding layers;
// attention.sliding_window_pattern picks them (an array of bools, one a layer, or n: every n-th
// layer global), else the row's default (Gemma 3: 6; none: every layer, as the "llama" files from
// Mistral). Sliding layers rotate at rope.freq_base_swa (llama.cpp's default 10,000 for a
// pattern; gpt-oss's, as its full layers). The window is kept only where it binds (shorter than the context).
void read_sliding_windows(const GgufFile& f, const std::string& a, ModelConfig* c) {
  c->check_num_layers();
  const size_t n = static_cast<size_t>(c->num_layers);
  c->layer_sliding_window.assign(n, 0);
  const std::string window = a + ".attention.sliding_window";
  const int64_t w = f.find(window) ? f.get_int(window) : 0;
  if (w <= 0) return;
  const std::string pattern_key = a + ".attention.sliding_window_pattern";
  int64_t pattern = c->traits().swa_pattern;
  std::vector<bool> sliding(n, true);
  if (const GgufValue* p = f.find(pattern_key); p && p->type == GgufValueType::kArray) {
    MINIVLLM_CHECK(p->ints.size() == n) << f.path() << ": " << pattern_key << " must hold one bool per layer ("
                                        << n << "), got " << p->array_size() << " values";
    for (size_t i = 0; i < n; ++i) sliding[i] = p->ints[i] != 0;
    pattern = -1;
  } else if (p) {
    pattern = f.get_int(pattern_key);
    MINIVLLM_CHECK_GE(pattern, 0) << f.path() << ": " << pattern_key << " must be >= 0";
  }
  if (pattern > 0) {
    for (size_t i = 0; i < n; ++i) sliding[i] = static_cast<int64_t>(i) % pattern < pattern - 1;
  }
  const bool binds = w < c->max_position_embeddings;
  c->layer_sliding.assign(n, false);
  if (c->traits().nope_full_layers_with_window) c->layer_no_rope.assign(n, false);  // exaone4's global layers
  for (size_t i = 0; i < n; ++i) {
    c->layer_sliding[i] = sliding[i];
    if (sliding[i] && binds) c->layer_sliding_window[i] = w;
    if (!c->layer_no_rope.empty()) c->layer_no_rope[i] = !sliding[i];
  }
  const std::string swa_base = a + ".rope.freq_base_swa";
  if (f.find(swa_base)) {
    c->rope_theta_sliding = f.get_float(swa_base, 0);
  } else if (c->traits().sliding_rope_unscaled) {  // llama.cpp's olmo2: the full layers' base, unscaled
    c->rope_theta_sliding = c->rope_theta;
  } else if (c->traits().swa_pattern > 0 && !c->traits().gguf_sliding_rope_as_full) {
    c->rope_theta_sliding = 10000.0;
  }
}

// The experts of a "qwen3moe" file, as llama.cpp reads them: expert_count, expert_used_count and
// expert_feed_forward_length (else feed_forward_length / expert_used_count); the k routing weights
// always renormalised (its graph passes norm_w = true whatever the file says; olmoe and qwen2moe
// never), softmax routing; qwen2moe's shared expert expert_shared_feed_forward_length wide.
// Every layer is sparse (but glm4moe's and ernie4_5-moe's leading dense ones, and those
// interleave_moe_layer_step skips): a file with a dense MLP elsewhere (HF's mlp_only_layers) is refused
// rather than half read.
void read_moe(const GgufFile& f, const std::string& a, ModelConfig* c) {
  MoeConfig& m = c->moe;
  m.num_experts = f.get_int(a + ".expert_count");
  MINIVLLM_CHECK_GT(m.num_experts, 0) << f.path() << ": " << a << ".expert_count must be > 0";
  m.num_experts_per_tok = f.get_int(a + ".expert_used_count");
  MINIVLLM_CHECK_GT(m.num_experts_per_tok, 0) << f.path() << ": " << a << ".expert_used_count must be > 0";
  const std::string width = a + ".expert_feed_forward_length";
  // Mixtral's converter writes no expert width: its experts are feed_forward_length wide.
  const MoeKeys keys = c->traits().moe_keys;
  const int64_t fallback = keys != MoeKeys::kQwen3 ? c->intermediate_size : c->intermediate_size / m.num_experts_per_tok;
  m.moe_intermediate_size = f.find(width) ? f.get_int(width) : fallback;
  // Routing by a score bias (exp_probs_b): glm4moe's sigmoid scores, ernie4_5-moe's softmax ones, each with
  // a shared expert and leading dense layers (and glm4moe's next-token-prediction layers, not run, after
  // the model's).
  const bool biased = keys == MoeKeys::kGlm4Moe || keys == MoeKeys::kErnie45;
  // llama.cpp's olmoe and qwen2moe never renormalise the top-k weights, its ernie4_5-moe and softmax MoE
  // graphs always, its glm4moe as expert_weights_norm says.
  const bool renormalise = keys != MoeKeys::kOlmoe && keys != MoeKeys::kQwen2;
  const std::string norm = a + ".expert_weights_norm";
  if (keys == MoeKeys::kGlm4Moe) {
    m.norm_topk_prob = f.get_bool(norm, false);
  } else {
    m.norm_topk_prob = renormalise;
    MINIVLLM_CHECK(!f.find(norm) || f.get_bool(norm, true) == renormalise)
        << f.path() << ": unsupported " << norm << " = " << (renormalise ? "false" : "true") << " (llama.cpp's " << a
        << (renormalise ? " always renormalises" : " never renormalises")
        << " the top-k routing weights, and so does minivllm)";
  }
  const std::string gating = a + ".expert_gating_func";
  const int64_t expected_gating = keys == MoeKeys::kGlm4Moe ? 2 : 1;  // llama.cpp's SIGMOID, SOFTMAX
  MINIVLLM_CHECK(!f.find(gating) || f.get_int(gating) == expected_gating)
      << f.path() << ": unsupported " << gating << " = " << f.get_int(gating, 0) << " (minivllm routes " << a
      << (expected_gating == 2 ? " by sigmoid, 2)" : " by softmax, 1)");
  const std::string scale = a + ".expert_weights_scale";
  const double s = f.get_float(scale, 0);
  if (biased) {
    m.biased_routing = true;
    m.sigmoid_scores = keys == MoeKeys::kGlm4Moe;
    m.routed_scaling_factor = s == 0 ? 1.0 : s;
    m.num_groups = f.get_int(a + ".expert_group_count", 1);
    m.topk_groups = f.get_int(a + ".expert_group_used_count", 1);
    m.first_dense_layers = f.get_int(a + ".leading_dense_block_count", 0);
    m.decoder_sparse_step = f.get_int(a + ".interleave_moe_layer_step", 1);
    m.shared_expert_intermediate_size = f.get_int(
        a + ".expert_shared_feed_forward_length", m.moe_intermediate_size * f.get_int(a + ".expert_shared_count", 0));
    c->num_layers -= f.get_int(a + ".nextn_predict_layers", 0);
  } else {
    MINIVLLM_CHECK(s == 0 || s == 1) << f.path() << ": unsupported " << scale << " = " << s
                                     << " (minivllm scales no routing weights of " << a << ")";
    m.decoder_sparse_step = 1;
  }
  // qwen2moe's shared expert: feed_forward_length wide where the file names no width of its own.
  if (keys == MoeKeys::kQwen2) {
    m.shared_expert_intermediate_size = f.get_int(a + ".expert_shared_feed_forward_length", c->intermediate_size);
  }
  c->check_num_layers();
  for (int64_t l = 0; l < c->num_layers; ++l) {
    if (!m.is_sparse_layer(l)) continue;
    for (WeightRole dense : {WeightRole::kGateProj, WeightRole::kUpProj, WeightRole::kDownProj}) {
      const std::string name = weight_name(*c->arch, WeightFormat::kGguf, dense, l);
      MINIVLLM_CHECK(!f.find_tensor(name))
          << f.path() << ": unsupported tensor '" << name << "': layer " << l << " has a dense MLP, which " << a
          << " cannot express (its sparse layers have experts only; load such a model, e.g. with mlp_only_layers, "
          << "from safetensors)";
    }
  }
}

// Granite's four scalars, as llama.cpp's granite reads them: logit_scale required, the others
// absent or 0 for none (the attention then scales by head_dim^-1/2).
void read_granite_scales(const GgufFile& f, const std::string& a, ModelConfig* c) {
  const std::string logit = a + ".logit_scale";
  MINIVLLM_CHECK(f.find(logit)) << f.path() << ": missing GGUF metadata key " << logit;
  c->logits_scaling = f.get_float(logit, 0);
  const auto optional = [&](const std::string& key, double* out) {
    const double v = f.get_float(key, 0);
    if (v != 0) *out = v;
  };
  optional(a + ".embedding_scale", &c->embedding_multiplier);
  optional(a + ".residual_scale", &c->residual_multiplier);
  optional(a + ".attention.scale", &c->attention_scale);
}

// OpenAI's harmony vocabulary (gpt-oss): the metadata names one end (<|return|>), and the model
// also ends its turn with <|call|> (a tool call); <|end|> ends a message but not the reply. As
// llama.cpp does, by the tokens' text: both stops added, <|end|> (an eot by name) taken out.
void harmony_stop_tokens(const std::vector<std::string>& tokens, std::vector<int64_t>& eos) {
  const auto id_of = [&](std::string_view t) -> int64_t {
    const auto it = std::find(tokens.begin(), tokens.end(), t);
    return it == tokens.end() ? -1 : it - tokens.begin();
  };
  const int64_t ret = id_of("<|return|>"), call = id_of("<|call|>"), end = id_of("<|end|>");
  if (ret < 0 || call < 0) return;
  std::erase(eos, end);
  for (int64_t id : {ret, call}) {
    if (std::find(eos.begin(), eos.end(), id) == eos.end()) eos.push_back(id);
  }
}

ModelConfig gguf_config(const GgufFile& f, const VocabData& vocab) {
  ModelConfig c;
  c.source = f.path();
  const std::string a = f.get_string("general.architecture", "");
  MINIVLLM_CHECK(!a.empty()) << f.path() << ": missing GGUF metadata key general.architecture";
  c.arch = &find_gguf_architecture(a, f.path(), f.find(a + ".expert_count") && f.get_int(a + ".expert_count") > 0);
  c.arch_name = a;
  c.hidden_size = f.get_int(a + ".embedding_length");
  c.num_layers = f.get_int(a + ".block_count");
  c.intermediate_size = f.get_int(a + ".feed_forward_length");
  c.num_heads = f.get_int(a + ".attention.head_count");
  c.num_kv_heads = f.get_int(a + ".attention.head_count_kv", c.num_heads);
  MINIVLLM_CHECK_GT(c.num_heads, 0) << f.path() << ": " << a << ".attention.head_count must be > 0";
  c.head_dim = f.get_int(a + ".attention.key_length", c.hidden_size / c.num_heads);
  MINIVLLM_CHECK(f.find(a + ".attention.layer_norm_rms_epsilon"))
      << f.path() << ": missing GGUF metadata key " << a << ".attention.layer_norm_rms_epsilon";
  c.rms_norm_eps = f.get_float(a + ".attention.layer_norm_rms_epsilon", 0);
  c.max_position_embeddings = f.get_int(a + ".context_length", 2048);
  c.vocab_size = gguf_vocab_size(f, a);
  c.tie_word_embeddings = output_tied_to_embedding(f);
  // The file's tensors decide, as llama.cpp's loader does (a qwen2 file has q/k/v biases).
  auto has_layer0 = [&](WeightRole role, const char* kind) {
    return f.find_tensor(weight_name(*c.arch, WeightFormat::kGguf, role, 0, kind)) != nullptr;
  };
  c.attention_bias = has_layer0(WeightRole::kQProj, "bias");
  c.o_proj_bias = c.traits().attention_bias_with_o && has_layer0(WeightRole::kOProj, "bias");  // gpt-oss
  c.qk_norm = has_layer0(WeightRole::kQNorm, "weight");
  read_rope(f, a, &c);
  read_sliding_windows(f, a, &c);
  if (c.traits().moe) read_moe(f, a, &c);
  if (c.traits().logit_softcapping) {  // gemma2: both caps as metadata
    c.attn_logit_softcapping = f.get_float(a + ".attn_logit_softcapping", 0);
    c.final_logit_softcapping = f.get_float(a + ".final_logit_softcapping", 0);
  }
  if (c.traits().granite_multipliers) read_granite_scales(f, a, &c);
  // llama.cpp's smollm3: every 4th layer without rope, with no key in the file.
  if (c.traits().no_rope_layers) c.layer_no_rope = every_nth_layer(c.num_layers, 4);
  // llama.cpp stores Gemma's norms as 1 + w (its converter adds the 1).
  c.norm_weights_include_one = c.traits().norm == NormForm::kRmsOnePlusWeight;
  // GGUF has no query_pre_attn_scalar: llama.cpp scales Gemma 2's and 3's queries by head_dim^-1/2,
  // but by (hidden / heads)^-1/2 in their 27Bs (46 and 62 layers), as gemma_pytorch does.
  if ((a == "gemma3" && c.num_layers == 62) || (a == "gemma2" && c.num_layers == 46)) {  // the 27Bs
    c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.hidden_size / c.num_heads));
  }
  const bool all_f32 = std::all_of(f.tensors().begin(), f.tensors().end(),
                                   [](const GgufTensorInfo& t) { return t.type == uint32_t(GgmlType::kF32); });
  c.torch_dtype = all_f32 ? "float32" : "bfloat16";  // the dtype to compute in, after dequantization
  c.bos_token_id = vocab.bos_token_id;
  // llama.cpp stops on end-of-generation tokens: eos and, when present, eot (e.g. <|im_end|>, <|eot_id|>).
  for (int64_t id : {vocab.eos_token_id, token_id(f, "tokenizer.ggml.eot_token_id", vocab.tokens.size())}) {
    if (id >= 0 && std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) {
      c.eos_token_ids.push_back(id);
    }
  }
  harmony_stop_tokens(vocab.tokens, c.eos_token_ids);
  refuse_unsupported_features(f, a, c);
  c.validate();
  return c;
}

void check_tensor_types(const GgufFile& f) {
  for (const GgufTensorInfo& t : f.tensors()) {
    MINIVLLM_CHECK(ggml_type_supported(t.type))
        << f.path() << ": tensor '" << t.name << "' has unsupported type " << ggml_type_name(t.type) << " ("
        << t.type << "); supported: " << kGgmlSupportedTypes;
  }
}

}  // namespace

VocabData read_gguf_vocab(const GgufFile& f) {
  VocabData v;
  v.model = f.get_string("tokenizer.ggml.model", "");
  v.pre = f.get_string("tokenizer.ggml.pre", "");
  auto strings = [&](const char* key) -> std::vector<std::string> {
    const GgufValue* x = f.find(key);
    if (!x) return {};
    MINIVLLM_CHECK(x->type == GgufValueType::kArray && x->array_size() == x->strings.size())
        << f.path() << ": GGUF key " << key << " must be an array of strings";
    return x->strings;
  };
  v.tokens = strings("tokenizer.ggml.tokens");
  v.merges = strings("tokenizer.ggml.merges");
  if (const GgufValue* s = f.find("tokenizer.ggml.scores")) {
    MINIVLLM_CHECK(s->type == GgufValueType::kArray && s->floats.size() == v.tokens.size())
        << f.path() << ": tokenizer.ggml.scores must be an array of " << v.tokens.size() << " floats";
    v.scores.assign(s->floats.begin(), s->floats.end());
  }
  if (const GgufValue* t = f.find("tokenizer.ggml.token_type")) {
    MINIVLLM_CHECK(t->type == GgufValueType::kArray && t->ints.size() == v.tokens.size())
        << f.path() << ": tokenizer.ggml.token_type must be an array of " << v.tokens.size() << " integers";
    v.token_types.assign(t->ints.begin(), t->ints.end());
  }
  v.bos_token_id = token_id(f, "tokenizer.ggml.bos_token_id", v.tokens.size());
  v.eos_token_id = token_id(f, "tokenizer.ggml.eos_token_id", v.tokens.size());
  v.unknown_token_id = token_id(f, "tokenizer.ggml.unknown_token_id", v.tokens.size());
  v.padding_token_id = token_id(f, "tokenizer.ggml.padding_token_id", v.tokens.size());
  // llama.cpp's defaults when the keys are absent: SentencePiece adds BOS and a space prefix.
  const bool spm = v.model == "llama";
  v.add_bos_token = f.get_bool("tokenizer.ggml.add_bos_token", spm);
  v.add_eos_token = f.get_bool("tokenizer.ggml.add_eos_token", false);
  v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", spm);
  return v;
}

GgufModel open_gguf(const std::string& path) {
  auto file = std::make_shared<const GgufFile>(path);
  check_tensor_types(*file);
  GgufModel m;
  m.path = path;
  m.vocab = read_gguf_vocab(*file);
  m.config = gguf_config(*file, m.vocab);
  m.chat_template = file->get_string("tokenizer.chat_template", "");
  // Fused tensors (phi3's attn_qkv, ffn_up) appear to the model as their roles' weights.
  m.weights = split_fused_weights(make_gguf_weight_source(file, m.config), m.config);
  return m;
}

}  // namespace minivllm
