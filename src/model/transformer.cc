#include "model/transformer.h"

#include <cmath>

#include "common/check.h"
#include "model/rope.h"

namespace minivllm {

Transformer::Transformer(const ModelConfig& cfg, const WeightSource& src, Backend& backend, int64_t max_num_tokens,
                         int64_t max_num_seqs, int64_t max_positions)
    : cfg_(cfg), backend_(backend), max_num_tokens_(max_num_tokens), max_num_seqs_(max_num_seqs) {
  cfg_.validate();
  MINIVLLM_CHECK(max_num_tokens >= max_num_seqs && max_num_seqs >= 1)
      << "max_num_tokens " << max_num_tokens << ", max_num_seqs " << max_num_seqs;
  w_ = load_model_weights(cfg_, src, backend_);
  cos_sin_ = backend_.upload_weight(rope_cos_sin_table(cfg_, max_positions), /*keep_f32=*/true);

  const DType act = backend_.activation_dtype();
  const int64_t t = max_num_tokens, h = cfg_.hidden_size, hd = cfg_.head_dim;
  const int64_t nq = cfg_.num_heads, nkv = cfg_.num_kv_heads, inter = cfg_.intermediate_size;
  hidden_ = backend_.empty(act, {t, h});
  // The residual stream stays fp32 on every backend: a bf16 stream would round 2 x num_layers times.
  residual_ = backend_.empty(DType::kF32, {t, h});
  qkv_ = backend_.empty(act, {t, (nq + 2 * nkv) * hd});
  attn_out_ = backend_.empty(act, {t, nq * hd});
  gate_up_ = backend_.empty(act, {t, 2 * inter});
  mlp_act_ = backend_.empty(act, {t, inter});
  last_hidden_ = backend_.empty(act, {max_num_seqs, h});
  logits_f32_ = backend_.empty(DType::kF32, {max_num_seqs, cfg_.vocab_size});
}

int64_t Transformer::kv_bytes_per_token_per_layer() const {
  return 2 * cfg_.num_kv_heads * cfg_.head_dim * static_cast<int64_t>(dtype_size(backend_.activation_dtype()));
}

Tensor Transformer::forward(const Tensor& input_ids, const Tensor& positions, const std::vector<KVCache>& caches,
                            const AttentionMetadata& meta) {
  const int64_t n = meta.num_tokens;
  MINIVLLM_CHECK(n >= 1 && n <= max_num_tokens_) << "batch of " << n << " tokens, buffers hold " << max_num_tokens_;
  MINIVLLM_CHECK_EQ(static_cast<int64_t>(caches.size()), cfg_.num_layers);
  const Tensor ids = input_ids.rows(0, n), pos = positions.rows(0, n);
  const Tensor hidden = hidden_.rows(0, n), residual = residual_.rows(0, n);
  const float eps = static_cast<float>(cfg_.rms_norm_eps);

  // The residual stream is fp32; every sublayer reads it through a norm fused into its first
  // linear and adds its output into it from its last linear (backend fusions, see backend.h).
  backend_.embedding(ids, w_.embed_tokens, 0, hidden);
  backend_.to_f32(hidden, residual);
  for (int64_t l = 0; l < cfg_.num_layers; ++l) {
    attention_block(l, n, pos, caches[l], meta);
    mlp_block(l, n);
  }
  backend_.rms_norm(residual, w_.norm, eps, hidden);
  return hidden;
}

void Transformer::attention_block(int64_t layer, int64_t n, const Tensor& positions, const KVCache& cache,
                                  const AttentionMetadata& meta) {
  const LayerWeights& lw = w_.layers[layer];
  const int nq = static_cast<int>(cfg_.num_heads), nkv = static_cast<int>(cfg_.num_kv_heads);
  const int hd = static_cast<int>(cfg_.head_dim);
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const Tensor qkv = qkv_.rows(0, n), attn_out = attn_out_.rows(0, n), hidden = hidden_.rows(0, n);
  const Tensor residual = residual_.rows(0, n);
  backend_.rms_norm_linear(residual, lw.input_layernorm, eps, hidden, lw.qkv_proj,
                           lw.qkv_bias.empty() ? nullptr : &lw.qkv_bias, qkv);
  backend_.qk_norm_rope_store(qkv, nq, nkv, hd, lw.q_norm.empty() ? nullptr : &lw.q_norm,
                              lw.k_norm.empty() ? nullptr : &lw.k_norm, eps, positions, cos_sin_, cache, meta);
  backend_.attention(qkv, nq, cache, meta, 1.0f / std::sqrt(static_cast<float>(hd)), attn_out);
  backend_.linear_add_residual(attn_out, lw.o_proj, hidden, residual);
}

void Transformer::mlp_block(int64_t layer, int64_t n) {
  const LayerWeights& lw = w_.layers[layer];
  const float eps = static_cast<float>(cfg_.rms_norm_eps);
  const Tensor hidden = hidden_.rows(0, n), gate_up = gate_up_.rows(0, n), act = mlp_act_.rows(0, n);
  const Tensor residual = residual_.rows(0, n);
  backend_.rms_norm_linear_silu_mul(residual, lw.post_attention_layernorm, eps, hidden, lw.gate_up_proj, gate_up, act);
  backend_.linear_add_residual(act, lw.down_proj, hidden, residual);
}

Tensor Transformer::compute_logits(const Tensor& hidden, const Tensor* row_indices, int64_t num_rows) {
  MINIVLLM_CHECK(num_rows >= 1 && num_rows <= max_num_seqs_) << "logits for " << num_rows << " rows";
  Tensor rows = hidden.rows(0, num_rows);
  if (row_indices != nullptr) {
    rows = last_hidden_.rows(0, num_rows);
    backend_.gather_rows(hidden, row_indices->rows(0, num_rows), rows);
  }
  // The LM head writes fp32 logits: bf16 logits would round near-ties before sampling.
  const Tensor logits = logits_f32_.rows(0, num_rows);
  backend_.linear(rows, w_.lm_head, nullptr, logits);
  return logits;
}

}  // namespace minivllm
