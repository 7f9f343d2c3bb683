// The decoder-only transformer, written once against the layers tier (parallel_linear.h,
// vocab_parallel.h) and the Backend's ops, from the traits of the model's architecture row
// (loader/architecture.h): its weights are asked for by role, its activation and norm form come
// from the row. With world_size > 1 this rank holds
// 1/ws of the heads, of the MLP and of the vocabulary; the communicator joins the shards.
// Every activation buffer is allocated here, at start-up, for at most `max_num_tokens` rows (and
// `max_num_seqs` logit rows): a forward pass allocates nothing, so decode can be a CUDA graph.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "loader/model_config.h"
#include "loader/weight_source.h"
#include "model/fused_moe.h"
#include "model/parallel_linear.h"
#include "model/vocab_parallel.h"

namespace minivllm {

class Transformer {
 public:
  // expert_parallel: a mixture-of-experts model's experts split whole over the ranks
  // (fused_moe.h), not each expert's width.
  Transformer(const ModelConfig& cfg, const WeightSource& src, Backend& backend, Communicator& comm,
              int64_t max_num_tokens, int64_t max_num_seqs, int64_t max_positions, bool expert_parallel = false);

  const ModelConfig& config() const { return cfg_; }

  // hidden[num_tokens, H] for input_ids / positions (device i32, meta.num_tokens rows used).
  // Writes K/V of the new tokens into `caches` (one per layer) and attends over them.
  Tensor forward(const Tensor& input_ids, const Tensor& positions, const std::vector<KVCache>& caches,
                 const AttentionMetadata& meta);

  // f32 logits[num_rows, V / ws] of hidden rows `row_indices` (device i32[num_rows]); nullptr takes
  // the first num_rows rows in order (decode). This rank's slice of the vocabulary, ids
  // vocab_start() + column: the whole row at world_size 1. No communication.
  Tensor compute_logits(const Tensor& hidden, const Tensor* row_indices, int64_t num_rows);
  // Every rank's slice of `local` (compute_logits' rows) joined into f32 [rows, V] on rank 0
  // (collective at world_size > 1; `local` itself at 1). Other ranks get an undefined tensor.
  Tensor gather_logits(const Tensor& local);
  int64_t vocab_start() const { return lm_head_.vocab_start(); }

  // Rows `row_indices` (device i32, num_rows <= max_num_seqs of them) of forward()'s final-normed
  // hidden states, f32 on the host, row-major [num_rows, H]: an embedding request's pooled state.
  // Every rank holds the whole hidden state, so no rank but the caller takes part.
  std::vector<float> hidden_rows_to_host(const Tensor& hidden, const Tensor& row_indices, int64_t num_rows);
  // The f32 logits buffer [max_num_seqs, V / ws] that compute_logits writes (read after a graph replay).
  const Tensor& logits_buffer() const { return logits_f32_; }

  int64_t max_num_tokens() const { return max_num_tokens_; }
  int64_t max_num_seqs() const { return max_num_seqs_; }
  // This rank's heads.
  int num_local_heads() const { return static_cast<int>(cfg_.num_heads / world_); }
  int num_local_kv_heads() const { return static_cast<int>(cfg_.num_kv_heads / world_); }

 private:
  struct Layer {
    Tensor attn_input_norm, ffn_input_norm;    // [H], replicated
    Tensor attn_output_norm, ffn_output_norm;  // [H] with sandwich norms (Gemma), else empty
    QKVParallelLinear qkv_proj;
    Tensor q_norm, k_norm;  // [hd] (Qwen3), this rank's [nq hd] / [nkv hd] (OLMo 2's full width), or empty
    RowParallelLinear o_proj;
    Tensor sinks;  // this rank's heads' sink logits, f32 [nq / ws] (gpt-oss), or empty
    MergedColumnParallelLinear gate_up_proj;  // a dense layer's MLP
    RowParallelLinear down_proj;
    FusedMoE moe;  // a sparse layer's (ModelConfig::moe), instead of gate_up_proj / down_proj
  };
  Layer load_layer(const ShardContext& ctx, int64_t i) const;
  // The checkpoint's (HF) name of `role` in layer `layer` through the registry row: the module, or
  // its tensor.
  std::string module(WeightRole role, int64_t layer = -1) const;
  std::string weight(WeightRole role, int64_t layer = -1) const { return module(role, layer) + ".weight"; }
  // A norm's [n] weight, in the form the kernels take (x_hat * w): the row's NormForm applied.
  // The norm's weights times `scale` (the final norm's: 1 / logits_scaling).
  Tensor load_norm(const ShardContext& ctx, WeightRole role, int64_t layer, int64_t n, double scale = 1.0) const;
  void attention_block(int64_t layer, int64_t n, const Tensor& positions, const KVCache& cache,
                       const AttentionMetadata& meta);
  void mlp_block(int64_t layer, int64_t n);
  void moe_block(int64_t layer, int64_t n);
  // The persistent decode kernel (issue 50): the model's layers as the backend's one-launch decode
  // reads them, when every layer is one the kernel takes; else why not (persistent_why_).
  void prepare_persistent_decode();
  void report_persistent_decode() const;
  bool use_persistent_decode(const AttentionMetadata& meta, const std::vector<KVCache>& caches) const;
  // OLMo 2's q/k norms over every head of q and of k: the squares summed on each rank, then over the ranks.
  void norm_qk_full_width(const Layer& l, int64_t n);
  // A sublayer with no input norm (OLMo 2) reads the residual stream as it is: hidden = the stream.
  void stream_into_hidden(int64_t n);
  // Sandwich norms (Gemma): the sublayer's whole output x W^T (all-reduced) normed by output_norm,
  // added to the residual, and the sum normed by next_norm into hidden for the next sublayer (copied,
  // where that sublayer has no input norm: next_norm empty).
  void add_sandwiched(const RowParallelLinear& proj, const Tensor& x, const Tensor& output_norm,
                      const Tensor& next_norm, int64_t n);

  ModelConfig cfg_;
  Backend& backend_;
  Communicator& comm_;
  int world_;
  bool expert_parallel_ = false;
  int64_t max_num_tokens_, max_num_seqs_;
  VocabParallelEmbedding embed_tokens_;
  std::vector<Layer> layers_;
  Tensor norm_;  // [H]
  ParallelLMHead lm_head_;
  Tensor cos_sin_;          // f32 [max_positions, rope_dim()]
  Tensor cos_sin_sliding_;  // the sliding layers' own table (Gemma 3's local base), else empty
  Tensor cos_sin_none_;     // the NoPE layers' (cos 1, sin 0), else empty
  const Tensor& cos_sin(int64_t layer) const;
  int attention_window(int64_t layer) const;  // the layer's sliding window, 0 for full attention
  float attention_scale_ = 0;
  // The residual stream is kept divided by Granite's residual_multiplier m (1 elsewhere): the
  // embeddings enter it times embed_scale_, and its RMSNorms take stream_eps_ (the constructor says why).
  float embed_scale_ = 1;
  float stream_eps_ = 0;
  // Activations (this rank's widths).
  Tensor hidden_, residual_, partial_, qkv_, attn_out_, gate_up_, mlp_act_;
  Tensor qk_sums_;  // f32 [T, 2], the full-width q/k norms' sums of squares (OLMo 2, world_size > 1), else empty
  MoeBuffers moe_;  // allocated when some layer is sparse
  Tensor last_hidden_, logits_f32_;
  Tensor full_logits_;  // f32 [max_num_seqs, V], rank 0 at world_size > 1 (gather_logits)
  // The last row-parallel all-reduce also normed the residual into hidden_ for the next block
  // (world_size > 1, Communicator::all_reduce_sum_into_norm), which then skips its own norm.
  bool normed_ = false;
  PersistentDecodeModel persistent_;  // max_batch 0: not taken
  std::string persistent_why_;
};

// A clear error when world_size does not divide what tensor parallelism splits (heads, KV heads,
// vocabulary, MLP width; the experts' width, or their count with expert parallelism), naming both numbers.
void check_tensor_parallel_shapes(const ModelConfig& cfg, int world_size, bool expert_parallel = false);
// Whether some layer's MLP is dense (every layer's but a mixture-of-experts model's sparse ones).
bool has_dense_mlp(const ModelConfig& cfg);

}  // namespace minivllm
