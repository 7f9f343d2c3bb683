// The decoder-only transformer (Qwen3, Qwen2, Llama 3), written once against the Backend's ops.
// Every activation buffer is allocated here, at start-up, for at most `max_num_tokens` rows (and
// `max_num_seqs` logit rows): a forward pass allocates nothing, so decode can be a CUDA graph.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "loader/model_config.h"
#include "loader/weight_source.h"
#include "model/layer_weights.h"

namespace minivllm {

class Transformer {
 public:
  Transformer(const ModelConfig& cfg, const WeightSource& src, Backend& backend, int64_t max_num_tokens,
              int64_t max_num_seqs, int64_t max_positions);

  const ModelConfig& config() const { return cfg_; }

  // hidden[num_tokens, H] for input_ids / positions (device i32, meta.num_tokens rows used).
  // Writes K/V of the new tokens into `caches` (one per layer) and attends over them.
  Tensor forward(const Tensor& input_ids, const Tensor& positions, const std::vector<KVCache>& caches,
                 const AttentionMetadata& meta);

  // f32 logits[num_rows, V] of hidden rows `row_indices` (device i32[num_rows]); nullptr takes the
  // first num_rows rows in order (decode).
  Tensor compute_logits(const Tensor& hidden, const Tensor* row_indices, int64_t num_rows);

  // The f32 logits buffer [max_num_seqs, V] that compute_logits writes (read after a graph replay).
  const Tensor& logits_buffer() const { return logits_f32_; }

  int64_t max_num_tokens() const { return max_num_tokens_; }
  int64_t max_num_seqs() const { return max_num_seqs_; }
  // Bytes of KV cache per token per layer (K and V), in the backend's activation dtype.
  int64_t kv_bytes_per_token_per_layer() const;

 private:
  void attention_block(int64_t layer, int64_t n, const Tensor& positions, const KVCache& cache,
                       const AttentionMetadata& meta);
  void mlp_block(int64_t layer, int64_t n);

  ModelConfig cfg_;
  Backend& backend_;
  ModelWeights w_;
  int64_t max_num_tokens_, max_num_seqs_;
  Tensor cos_sin_;  // f32 [max_positions, head_dim]
  // Activations.
  Tensor hidden_, residual_, qkv_, attn_out_, gate_up_, mlp_act_;
  Tensor last_hidden_, logits_f32_;
};

}  // namespace minivllm
