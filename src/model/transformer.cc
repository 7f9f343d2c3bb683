#include "model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/check.h"
#include "common/quant_blocks.h"
#include "common/tuning.h"
#include "model/rope.h"

namespace minivllm {

bool has_dense_mlp(const ModelConfig& cfg) {
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    if (!cfg.moe.is_sparse_layer(l)) return true;
  }
  return false;
}

void check_tensor_parallel_shapes(const ModelConfig& cfg, int world_size, bool expert_parallel) {
  MINIVLLM_CHECK(world_size >= 1) << "world_size must be at least 1, got " << world_size;
  // A model whose every layer is sparse (Qwen3-30B-A3B) has no dense MLP to split.
  const int64_t dense_width = has_dense_mlp(cfg) ? cfg.intermediate_size : 0;
  const std::pair<const char*, int64_t> splits[] = {{"num_attention_heads", cfg.num_heads},
                                                    {"num_key_value_heads", cfg.num_kv_heads},
                                                    {"vocab_size", cfg.vocab_size},
                                                    {"intermediate_size", dense_width}};
  for (const auto& [key, n] : splits) {
    MINIVLLM_CHECK(n % world_size == 0) << "tensor parallelism: the model's " << key << " (" << n
                                        << ") does not divide by world_size " << world_size;
  }
  check_moe_parallel_shapes(cfg.moe, world_size, expert_parallel);
}

Transformer::Transformer(const ModelConfig& cfg, const WeightSource& src, Backend& backend, Communicator& comm,
                         int64_t max_num_tokens, int64_t max_num_seqs, int64_t max_positions, bool expert_parallel)
    : cfg_(cfg),
      backend_(backend),
      comm_(comm),
      world_(comm.world_size()),
      expert_parallel_(expert_parallel),
      max_num_tokens_(max_num_tokens),
      max_num_seqs_(max_num_seqs) {
  cfg_.validate();
  check_tensor_parallel_shapes(cfg_, world_, expert_parallel_);
  MINIVLLM_CHECK(!cfg_.moe.any() || backend_.supports_moe())
      << cfg_.source << ": " << cfg_.arch_name << " is a mixture-of-experts model, and " << backend_.moe_missing();
  backend_.check_attention_shape(num_local_heads(), num_local_kv_heads(), static_cast<int>(cfg_.head_dim));
  backend_.check_rotary_dim(static_cast<int>(cfg_.head_dim), static_cast<int>(cfg_.rope_dim()));
  const char* device = backend_.device() == DeviceKind::kCuda ? "cuda" : "cpu";
  MINIVLLM_CHECK((cfg_.attn_logit_softcapping == 0 && cfg_.final_logit_softcapping == 0) || backend_.supports_softcap())
      << cfg_.source << ": " << cfg_.arch_name << " soft-caps its attention scores and logits "
      << "(attn_logit_softcapping " << cfg_.attn_logit_softcapping << ", final_logit_softcapping "
      << cfg_.final_logit_softcapping << "), which the " << device
      << " backend does not implement; run the model on the cpu backend (--device cpu)";
  if (cfg_.attn_logit_softcapping > 0) backend_.set_attention_softcap(static_cast<float>(cfg_.attn_logit_softcapping));
  MINIVLLM_CHECK(!cfg_.traits().attention_sinks || backend_.supports_attention_sinks())
      << cfg_.source << ": " << cfg_.arch_name << " attends with sink logits, which the " << device
      << " backend does not implement; run the model on the cpu backend (--device cpu)";
  MINIVLLM_CHECK(backend_.supports_activation(cfg_.traits().activation))
      << cfg_.source << ": " << cfg_.arch_name << "'s MLP activation " << activation_name(cfg_.traits().activation)
      << " is not implemented by the " << device << " backend; run the model on the cpu backend (--device cpu)";
  MINIVLLM_CHECK(max_num_tokens >= max_num_seqs && max_num_seqs >= 1)
      << "max_num_tokens " << max_num_tokens << ", max_num_seqs " << max_num_seqs;
  const ShardContext ctx{src, backend_, comm_};
  const int64_t h = cfg_.hidden_size, v = cfg_.vocab_size;
  embed_tokens_ = VocabParallelEmbedding(ctx, weight(WeightRole::kEmbedTokens), v, h);
  for (int64_t i = 0; i < cfg_.num_layers; ++i) layers_.push_back(load_layer(ctx, i));
  // Granite divides the final logits by logits_scaling: the final norm's weights do it, since the LM
  // head is linear in them (and may be the tied embedding, which must stay as it is).
  norm_ = load_norm(ctx, WeightRole::kFinalNorm, -1, h, 1.0 / cfg_.logits_scaling);
  // Tied embeddings share one matrix even when the checkpoint also stores lm_head.weight (Qwen3-0.6B).
  const std::string lm_head = weight(WeightRole::kLmHead);
  if (cfg_.tie_word_embeddings || !src.has(lm_head)) {
    MINIVLLM_CHECK(cfg_.tie_word_embeddings)
        << src.describe() << ": " << lm_head << " is missing and the config does not tie the embeddings";
    lm_head_ = ParallelLMHead(ctx, embed_tokens_, v, max_num_seqs);
  } else {
    lm_head_ = ParallelLMHead(ctx, lm_head, v, h, max_num_seqs);
  }
  cos_sin_ = backend_.upload_weight(rope_cos_sin_table(cfg_, max_positions), /*keep_f32=*/true);
  if (cfg_.rope_theta_sliding > 0 &&
      (cfg_.rope_theta_sliding != cfg_.rope_theta || !cfg_.rope_scaling.type.empty())) {
    ModelConfig sliding = cfg_;  // the sliding layers rotate at their own base, unscaled
    sliding.rope_theta = cfg_.rope_theta_sliding;
    sliding.rope_scaling = RopeScaling{};
    cos_sin_sliding_ = backend_.upload_weight(rope_cos_sin_table(sliding, max_positions), /*keep_f32=*/true);
  }
  if (std::find(cfg_.layer_no_rope.begin(), cfg_.layer_no_rope.end(), true) != cfg_.layer_no_rope.end()) {
    // A NoPE layer rotates by nothing: cos 1 and sin 0 at every position, through the same kernels.
    Tensor identity = host_tensor(DType::kF32, {max_positions, cfg_.rope_dim()});
    float* v = identity.ptr<float>();
    const int64_t r = cfg_.rope_dim();
    for (int64_t i = 0; i < identity.numel(); ++i) v[i] = i % r < r / 2 ? 1.0f : 0.0f;
    cos_sin_none_ = backend_.upload_weight(identity, /*keep_f32=*/true);
  }
  attention_scale_ = static_cast<float>(cfg_.attention_scale > 0 ? cfg_.attention_scale
                                                                  : 1.0 / std::sqrt(static_cast<double>(cfg_.head_dim)));
  // Granite adds each sublayer's output times residual_multiplier m. The stream is kept divided by m
  // instead (s = r / m), so that every add stays a plain one and no kernel knows of m: the
  // embeddings enter it times embedding_multiplier / m, and each RMSNorm of the stream, which sees m
  // times less, takes eps / m^2, since rms(m s) = m sqrt(mean(s^2) + eps / m^2): the same output.
  const double m = cfg_.residual_multiplier;
  const double embed = cfg_.traits().embed_scale_sqrt_hidden ? std::sqrt(static_cast<double>(h)) : 1.0;
  embed_scale_ = static_cast<float>(embed * cfg_.embedding_multiplier / m);
  stream_eps_ = static_cast<float>(cfg_.rms_norm_eps / (m * m));

  const DType act = backend_.activation_dtype();
  const int64_t t = max_num_tokens, hd = cfg_.head_dim;
  const int64_t nq = num_local_heads(), nkv = num_local_kv_heads(), inter = cfg_.intermediate_size / world_;
  hidden_ = backend_.empty(act, {t, h});
  // The residual stream stays fp32 on every backend: a bf16 stream would round 2 x num_layers times.
  residual_ = backend_.empty(DType::kF32, {t, h});
  // Row-parallel partial sums travel in `hidden_` (the activation dtype) unless fp32 ones are asked for.
  if (world_ > 1 && RowParallelLinear::tp_partials_f32()) partial_ = backend_.empty(DType::kF32, {t, h});
  qkv_ = backend_.empty(act, {t, (nq + 2 * nkv) * hd});
  attn_out_ = backend_.empty(act, {t, nq * hd});
  if (cfg_.qk_norm && cfg_.traits().qk_norm_full_width && world_ > 1) qk_sums_ = backend_.empty(DType::kF32, {t, 2});
  if (has_dense_mlp(cfg_)) {  // (for Qwen3-30B-A3B these would be 800 MB of f32 the CPU never touches)
    gate_up_ = backend_.empty(act, {t, 2 * inter});
    mlp_act_ = backend_.empty(act, {t, inter});
  }
  if (cfg_.moe.any()) moe_ = MoeBuffers::allocate(backend_, cfg_, t, world_, expert_parallel_);
  if (knob_switch("MINIVLLM_DECODE_PERSISTENT").value_or(false)) {
    prepare_persistent_decode();
    report_persistent_decode();
  }
  last_hidden_ = backend_.empty(act, {max_num_seqs, h});
  logits_f32_ = backend_.empty(DType::kF32, {max_num_seqs, v / world_});
  if (world_ > 1 && comm_.rank() == 0) full_logits_ = backend_.empty(DType::kF32, {max_num_seqs, v});
}

std::string Transformer::module(WeightRole role, int64_t layer) const {
  std::string name = module_name(*cfg_.arch, WeightFormat::kHuggingFace, role, layer);
  MINIVLLM_CHECK(!name.empty()) << cfg_.source << ": the " << cfg_.arch_name << " row names no "
                                << weight_role_name(role) << " weight";
  return name;
}

Tensor Transformer::load_norm(const ShardContext& ctx, WeightRole role, int64_t layer, int64_t n, double scale) const {
  const Tensor stored = ctx.replicated(weight(role, layer), {n});
  const bool plain = cfg_.traits().norm == NormForm::kRms;
  if (plain && scale == 1.0) return backend_.upload_weight(stored);
  // x_hat * (1 + w): the 1 is added here, in fp32, and the weight stays fp32 on the device, so
  // the kernels keep one norm form and round nothing that the reference does not. A GGUF from
  // llama.cpp stores 1 + w already (its f32 norms), which is used as it is.
  const bool add_one = !plain && !cfg_.norm_weights_include_one;
  Tensor w = host_tensor(DType::kF32, {n});  // (the source's tensor may be a view of its file)
  const float* in = stored.ptr<float>();
  float* out = w.ptr<float>();
  for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>((in[j] + (add_one ? 1.0 : 0.0)) * scale);
  return backend_.upload_weight(w, /*keep_f32=*/!plain);
}

Transformer::Layer Transformer::load_layer(const ShardContext& ctx, int64_t i) const {
  using R = WeightRole;
  const int64_t h = cfg_.hidden_size, hd = cfg_.head_dim, inter = cfg_.intermediate_size;
  Layer l;
  const bool input_norms = cfg_.traits().input_norms;
  if (input_norms) l.attn_input_norm = load_norm(ctx, R::kAttnInputNorm, i, h);
  l.qkv_proj = QKVParallelLinear(ctx, {module(R::kQProj, i), module(R::kKProj, i), module(R::kVProj, i)}, h,
                                 cfg_.num_heads, cfg_.num_kv_heads, hd, cfg_.attention_bias);
  // This rank's share of a per-head vector of `total` values (its heads' part), in f32: the kernels take it so.
  auto heads_part = [&](const std::string& name, int64_t total) {
    const int64_t n = total / world_;
    return backend_.upload_weight(ctx.src.get_f32_slice(name, {total}, 0, ctx.rank() * n, n), /*keep_f32=*/true);
  };
  if (cfg_.qk_norm && cfg_.traits().qk_norm_full_width) {  // the norms over all heads, as of q and k
    l.q_norm = heads_part(weight(R::kQNorm, i), cfg_.num_heads * hd);
    l.k_norm = heads_part(weight(R::kKNorm, i), cfg_.num_kv_heads * hd);
  } else if (cfg_.qk_norm) {
    l.q_norm = load_norm(ctx, R::kQNorm, i, hd);
    l.k_norm = load_norm(ctx, R::kKNorm, i, hd);
  }
  l.o_proj = RowParallelLinear(ctx, module(R::kOProj, i), cfg_.num_heads * hd, h, cfg_.o_proj_bias);
  if (cfg_.traits().attention_sinks) l.sinks = heads_part(module(R::kAttnSinks, i) + ".sinks", cfg_.num_heads);
  if (input_norms) l.ffn_input_norm = load_norm(ctx, R::kFfnInputNorm, i, h);
  if (cfg_.traits().post_norms) {
    l.attn_output_norm = load_norm(ctx, R::kAttnOutputNorm, i, h);
    l.ffn_output_norm = load_norm(ctx, R::kFfnOutputNorm, i, h);
  }
  if (cfg_.moe.is_sparse_layer(i)) {
    l.moe = FusedMoE(ctx, cfg_, i, expert_parallel_);
    return l;
  }
  l.gate_up_proj = MergedColumnParallelLinear(ctx, {weight(R::kGateProj, i), weight(R::kUpProj, i)}, h, inter);
  l.down_proj = RowParallelLinear(ctx, module(R::kDownProj, i), inter, h);
  return l;
}

Tensor Transformer::forward(const Tensor& input_ids, const Tensor& positions, const std::vector<KVCache>& caches,
                            const AttentionMetadata& meta) {
  const int64_t n = meta.num_tokens;
  MINIVLLM_CHECK(n >= 1 && n <= max_num_tokens_) << "batch of " << n << " tokens, buffers hold " << max_num_tokens_;
  MINIVLLM_CHECK_EQ(static_cast<int64_t>(caches.size()), cfg_.num_layers);
  const Tensor ids = input_ids.rows(0, n), pos = positions.rows(0, n);
  const Tensor hidden = hidden_.rows(0, n), residual = residual_.rows(0, n);
  const float eps = stream_eps_;

  // The residual stream is fp32; every sublayer reads it through a norm fused into its first
  // linear and adds its (all-reduced) output into it from its last linear.
  if (world_ == 1) {
    embed_tokens_.forward(backend_, comm_, ids, residual);  // straight into the fp32 stream: one kernel fewer
  } else {  // the shards' rows are summed in the activation dtype, then widened
    embed_tokens_.forward(backend_, comm_, ids, hidden);
    backend_.to_f32(hidden, residual);
  }
  if (embed_scale_ != 1.0f) backend_.scale(residual, embed_scale_);
  if (use_persistent_decode(meta, caches)) {  // every layer in one launch; the final norm here
    backend_.persistent_decode(persistent_, residual, pos, caches, meta);
    backend_.rms_norm(residual, norm_, eps, hidden);
    return hidden;
  }
  normed_ = false;
  for (int64_t l = 0; l < cfg_.num_layers; ++l) {
    attention_block(l, n, pos, caches[l], meta);
    mlp_block(l, n);
  }
  if (!normed_) backend_.rms_norm(residual, norm_, eps, hidden);
  return hidden;
}

void Transformer::attention_block(int64_t layer, int64_t n, const Tensor& positions, const KVCache& cache,
                                  const AttentionMetadata& meta) {
  const Layer& l = layers_[layer];
  const int nq = num_local_heads(), nkv = num_local_kv_heads();
  const int hd = static_cast<int>(cfg_.head_dim);
  const float eps = stream_eps_, head_eps = static_cast<float>(cfg_.rms_norm_eps);
  const Tensor qkv = qkv_.rows(0, n), attn_out = attn_out_.rows(0, n), hidden = hidden_.rows(0, n);
  const Tensor residual = residual_.rows(0, n);
  const Tensor partial = partial_.defined() ? partial_.rows(0, n) : Tensor();
  const Tensor* q_norm = l.q_norm.empty() ? nullptr : &l.q_norm;
  const Tensor* k_norm = l.k_norm.empty() ? nullptr : &l.k_norm;
  if (l.attn_input_norm.empty() && !normed_) stream_into_hidden(n);
  // The backend may fuse the q/k norms, the rope and the cache store into the projection. Norms over
  // all heads (OLMo 2) come between the projection and the rope, which then takes none.
  const bool full_qk = cfg_.qk_norm && cfg_.traits().qk_norm_full_width;
  const RopeStoreEpilogue rope{nq, nkv, hd, full_qk ? nullptr : q_norm, full_qk ? nullptr : k_norm, head_eps,
                               positions, cos_sin(layer), cache, meta};
  if (full_qk) {
    if (normed_) {
      backend_.linear(hidden, l.qkv_proj.weight(), l.qkv_proj.bias(), qkv);
    } else {
      backend_.rms_norm_linear({residual, l.attn_input_norm, eps, hidden}, l.qkv_proj.weight(), l.qkv_proj.bias(),
                               qkv);
    }
    norm_qk_full_width(l, n);
    backend_.qk_norm_rope_store(qkv, rope);
  } else if (normed_) {  // hidden holds the input: the all-reduce normed it, or the layer has no input norm
    backend_.linear_rope_store(hidden, l.qkv_proj.weight(), l.qkv_proj.bias(), qkv, rope);
  } else {
    backend_.rms_norm_linear_rope_store({residual, l.attn_input_norm, eps, hidden}, l.qkv_proj.weight(),
                                        l.qkv_proj.bias(), qkv, rope);
  }
  backend_.attention(qkv, nq, cache, meta, attention_scale_, attention_window(layer), attn_out,
                     l.sinks.empty() ? nullptr : &l.sinks);
  if (!l.attn_output_norm.empty()) {
    add_sandwiched(l.o_proj, attn_out, l.attn_output_norm, l.ffn_input_norm, n);
    return;
  }
  // A sparse layer's norm goes to its router (FusedMoE), which takes no folded norm.
  normed_ = l.o_proj.forward_add_residual_norm(backend_, comm_, attn_out, hidden, partial, residual,
                                               l.ffn_input_norm, eps, hidden, /*note_norm=*/!l.moe.defined());
}

void Transformer::add_sandwiched(const RowParallelLinear& proj, const Tensor& x, const Tensor& output_norm,
                                 const Tensor& next_norm, int64_t n) {
  const Tensor hidden = hidden_.rows(0, n), residual = residual_.rows(0, n);
  proj.forward(backend_, comm_, x, hidden);
  // The output norm's eps is the model's (it norms the sublayer's output, not the stream); an empty
  // next_norm (no input norm after it) copies the stream into hidden.
  backend_.norm_add_norm(hidden, output_norm, static_cast<float>(cfg_.rms_norm_eps), residual, next_norm, stream_eps_);
  normed_ = true;
}

void Transformer::stream_into_hidden(int64_t n) {
  backend_.to_activation(residual_.rows(0, n), hidden_.rows(0, n));
  normed_ = true;
}

void Transformer::norm_qk_full_width(const Layer& l, int64_t n) {
  const int nq = num_local_heads(), nkv = num_local_kv_heads(), hd = static_cast<int>(cfg_.head_dim);
  const Tensor qkv = qkv_.rows(0, n);
  Tensor sums;  // one rank: the norm kernel sums the squares itself
  if (world_ > 1) {
    sums = qk_sums_.rows(0, n);
    backend_.qk_sum_squares(qkv, nq, nkv, hd, sums);
    comm_.all_reduce_sum(sums);  // each rank summed its own heads
  }
  backend_.qk_norm_full_width(qkv, nq, nkv, hd, sums, cfg_.num_heads * cfg_.head_dim, cfg_.num_kv_heads * cfg_.head_dim,
                              l.q_norm, l.k_norm, static_cast<float>(cfg_.rms_norm_eps));
}

void Transformer::mlp_block(int64_t layer, int64_t n) {
  const Layer& l = layers_[layer];
  if (l.moe.defined()) {
    moe_block(layer, n);
    return;
  }
  const float eps = stream_eps_;
  const Tensor hidden = hidden_.rows(0, n), gate_up = gate_up_.rows(0, n), act = mlp_act_.rows(0, n);
  const Activation activation = cfg_.traits().activation;
  const Tensor residual = residual_.rows(0, n);
  const Tensor partial = partial_.defined() ? partial_.rows(0, n) : Tensor();
  const Tensor& next_norm = layer + 1 < cfg_.num_layers ? layers_[layer + 1].attn_input_norm : norm_;
  if (l.ffn_input_norm.empty() && !normed_) stream_into_hidden(n);
  if (!normed_ && world_ == 1 && l.ffn_output_norm.empty()) {  // norm, gate/up, down in one backend call
    backend_.note_next_norm(residual, next_norm, eps);  // what follows the down projection's add
    backend_.rms_norm_mlp_add_residual({residual, l.ffn_input_norm, eps, hidden}, l.gate_up_proj.weight(),
                                       l.down_proj.weight(), gate_up, act, hidden, residual, activation);
    return;  // normed_ stays false: nothing normed the residual after the add
  }
  if (normed_) {  // the o projection's all-reduce normed the residual into hidden
    backend_.linear_act_mul(hidden, l.gate_up_proj.weight(), gate_up, act, activation);
  } else {
    backend_.rms_norm_linear_act_mul({residual, l.ffn_input_norm, eps, hidden}, l.gate_up_proj.weight(), gate_up, act,
                                     activation);
  }
  if (!l.ffn_output_norm.empty()) {
    add_sandwiched(l.down_proj, act, l.ffn_output_norm, next_norm, n);
    return;
  }
  normed_ = l.down_proj.forward_add_residual_norm(backend_, comm_, act, hidden, partial, residual, next_norm, eps,
                                                  hidden);
}

// A sparse layer: the router and every expert read the normed hidden rows (so the norm goes with
// the router and the route, not into a projection), and their weighted sum lands in the residual.
void Transformer::moe_block(int64_t layer, int64_t n) {
  const Layer& l = layers_[layer];
  const float eps = stream_eps_;
  const Tensor hidden = hidden_.rows(0, n), residual = residual_.rows(0, n);
  MINIVLLM_CHECK(l.ffn_output_norm.empty()) << cfg_.arch_name << ": sandwich norms around a sparse MLP";
  const Tensor& next_norm = layer + 1 < cfg_.num_layers ? layers_[layer + 1].attn_input_norm : norm_;
  const NormPrologue pro{residual, l.ffn_input_norm, eps, hidden};  // unless the all-reduce normed it
  normed_ = l.moe.forward_add_residual_norm(backend_, comm_, normed_ ? nullptr : &pro, hidden, moe_, residual,
                                            next_norm, eps, hidden, cfg_.traits().activation);
}

void Transformer::prepare_persistent_decode() {
  const ArchitectureTraits& t = cfg_.traits();
  bool sliding = !cos_sin_sliding_.empty() || !cos_sin_none_.empty();  // (the kernel takes one rope table)
  for (int64_t w : cfg_.layer_sliding_window) sliding = sliding || w > 0;
  if (world_ != 1) {
    persistent_why_ = "tensor parallelism (the kernel runs on one GPU)";
  } else if (cfg_.moe.any()) {
    persistent_why_ = "a mixture-of-experts model";
  } else if (t.norm != NormForm::kRms || t.post_norms || t.embed_scale_sqrt_hidden || !t.input_norms ||
             t.qk_norm_full_width) {
    persistent_why_ = "its norms (the kernel takes plain RMSNorm before each sublayer, q/k norms per head)";
  } else if (sliding || cfg_.rope_dim() != cfg_.head_dim) {
    persistent_why_ = "sliding-window or NoPE layers, or a partial rotary";
  } else if (layers_.empty() || layers_[0].qkv_proj.bias() != nullptr) {
    persistent_why_ = "q/k/v biases";
  } else if (cfg_.attn_logit_softcapping > 0) {
    persistent_why_ = "soft-capped attention scores";
  }
  if (!persistent_why_.empty()) return;
  PersistentDecodeModel m;
  for (const Layer& l : layers_) {
    m.layers.push_back({l.attn_input_norm, l.ffn_input_norm, l.q_norm, l.k_norm, l.qkv_proj.weight(), l.o_proj.weight(),
                        l.gate_up_proj.weight(), l.down_proj.weight()});
  }
  m.cos_sin = cos_sin_;
  m.hidden = cfg_.hidden_size;
  m.inter = cfg_.intermediate_size;
  m.num_q_heads = num_local_heads();
  m.num_kv_heads = num_local_kv_heads();
  m.head_dim = static_cast<int>(cfg_.head_dim);
  m.eps = stream_eps_;  // also its q/k norms' eps: no row has both q/k norms and a residual_multiplier
  m.scale = attention_scale_;
  m.activation = t.activation;
  persistent_why_ = backend_.prepare_persistent_decode(m);
  if (persistent_why_.empty()) persistent_ = std::move(m);
}

// The knob asked for the kernel: say once why this model decodes layer by layer instead.
void Transformer::report_persistent_decode() const {
  if (persistent_why_.empty() || comm_.rank() != 0) return;
  std::fprintf(stderr, "minivllm: MINIVLLM_DECODE_PERSISTENT=1, but %s: %s; decoding layer by layer\n",
               cfg_.arch_name.c_str(), persistent_why_.c_str());
}

bool Transformer::use_persistent_decode(const AttentionMetadata& meta, const std::vector<KVCache>& caches) const {
  return persistent_.max_batch > 0 && !meta.is_prefill && meta.num_seqs <= persistent_.max_batch &&
         meta.num_tokens == meta.num_seqs && !caches.empty() && caches[0].dtype() == DType::kBF16;
}

const Tensor& Transformer::cos_sin(int64_t layer) const {
  if (!cfg_.layer_no_rope.empty() && cfg_.layer_no_rope[static_cast<size_t>(layer)]) return cos_sin_none_;
  const bool sliding = !cfg_.layer_sliding.empty() && cfg_.layer_sliding[static_cast<size_t>(layer)];
  return sliding && !cos_sin_sliding_.empty() ? cos_sin_sliding_ : cos_sin_;
}

int Transformer::attention_window(int64_t layer) const {
  const auto& w = cfg_.layer_sliding_window;
  return w.empty() ? 0 : static_cast<int>(w[static_cast<size_t>(layer)]);
}

Tensor Transformer::compute_logits(const Tensor& hidden, const Tensor* row_indices, int64_t num_rows) {
  MINIVLLM_CHECK(num_rows >= 1 && num_rows <= max_num_seqs_) << "logits for " << num_rows << " rows";
  Tensor rows = hidden.rows(0, num_rows);
  if (row_indices != nullptr) {
    rows = last_hidden_.rows(0, num_rows);
    backend_.gather_rows(hidden, row_indices->rows(0, num_rows), rows);
  }
  const Tensor logits = logits_f32_.rows(0, num_rows);
  lm_head_.forward(backend_, rows, logits);
  if (cfg_.final_logit_softcapping > 0) backend_.softcap(logits, static_cast<float>(cfg_.final_logit_softcapping));
  return logits;
}

std::vector<float> Transformer::hidden_rows_to_host(const Tensor& hidden, const Tensor& row_indices,
                                                    int64_t num_rows) {
  MINIVLLM_CHECK(num_rows >= 1 && num_rows <= max_num_seqs_) << "hidden states of " << num_rows << " rows";
  const Tensor rows = last_hidden_.rows(0, num_rows);
  backend_.gather_rows(hidden, row_indices.rows(0, num_rows), rows);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows.nbytes()));
  backend_.copy_to_host(bytes.data(), rows);
  std::vector<float> out(static_cast<size_t>(rows.numel()));
  dequantize_to_f32(rows.dtype(), bytes.data(), out.data(), rows.numel());
  return out;
}

Tensor Transformer::gather_logits(const Tensor& local) {
  if (world_ == 1) return local;
  const Tensor full = comm_.rank() == 0 ? full_logits_.rows(0, local.size(0)) : Tensor();
  lm_head_.gather(backend_, comm_, local, full);
  return full;
}

}  // namespace minivllm
