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
  // logits (f32 [S, V]) of x [S, H]: each rank's vocabulary slice, gathered to rank 0. Only rank 0's
  // `logits` are written; the other ranks only send.
  void forward(Backend& b, Communicator& comm, const Tensor& x, const Tensor& logits) const;

 private:
  void allocate(Backend& b, int world, int64_t vocab, int64_t max_rows);
  Tensor weight_;
  Tensor local_;     // f32 [max_rows, V / ws] (world_size > 1)
  Tensor gathered_;  // f32 [ws * max_rows * V / ws], rank-major (rank 0)
};

}  // namespace minivllm
