// The seeds' vocabulary-parallel layers: each rank holds rows [r V/ws, (r+1) V/ws) of the
// embedding (and of the LM head, which shares them when the embeddings are tied).
#pragma once

#include <string>

#include "model/parallel_linear.h"

namespace minivllm {

class VocabParallelEmbedding {
 public:
  VocabParallelEmbedding() = default;
  VocabParallelEmbedding(const ShardContext& ctx, const std::string& name, int64_t vocab, int64_t hidden);
  const Tensor& weight() const { return weight_; }
  int64_t vocab_start() const { return vocab_start_; }
  // out[T, H] = the embedding of each id: this rank's rows, zeros elsewhere, summed over ranks.
  void forward(Backend& b, Communicator& comm, const Tensor& ids, const Tensor& out) const;

 private:
  Tensor weight_;
  int64_t vocab_start_ = 0;
};

class ParallelLMHead {
 public:
  ParallelLMHead() = default;
  // Its own `name` [V, H], or the embedding's shard when tied.
  ParallelLMHead(const ShardContext& ctx, const std::string& name, int64_t vocab, int64_t hidden, int64_t max_rows);
  ParallelLMHead(const ShardContext& ctx, const VocabParallelEmbedding& tied, int64_t vocab, int64_t max_rows);
  // This rank's slice of the logits: f32 [S, V / ws] of x [S, H] (ids vocab_start() + column). No
  // communication: the vocabulary-parallel sampler draws from the slices where it can, and only
  // the steps that need every logit on rank 0 gather them.
  void forward(Backend& b, const Tensor& x, const Tensor& local) const;
  // logits f32 [S, V] on rank 0 = every rank's `local` (world_size > 1; collective). The other
  // ranks only send; their `logits` are ignored.
  void gather(Backend& b, Communicator& comm, const Tensor& local, const Tensor& logits) const;
  int64_t vocab_start() const { return vocab_start_; }

 private:
  void allocate(Backend& b, int world, int64_t vocab, int64_t max_rows);
  Tensor weight_;
  int64_t vocab_start_ = 0;
  Tensor gathered_;  // f32 [ws * max_rows * V / ws], rank-major (rank 0)
};

}  // namespace minivllm
