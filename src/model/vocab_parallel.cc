#include "model/vocab_parallel.h"

#include "common/check.h"

namespace minivllm {

VocabParallelEmbedding::VocabParallelEmbedding(const ShardContext& ctx, const std::string& name, int64_t vocab,
                                               int64_t hidden) {
  MINIVLLM_CHECK(vocab % ctx.world_size() == 0)
      << "vocab_size " << vocab << " does not divide by world_size " << ctx.world_size();
  vocab_start_ = ctx.rank() * (vocab / ctx.world_size());
  weight_ = ctx.upload_rows({ctx.row_shard(name, vocab, hidden)});
}

void VocabParallelEmbedding::forward(Backend& b, Communicator& comm, const Tensor& ids, const Tensor& out) const {
  b.embedding(ids, weight_, vocab_start_, out);
  if (comm.world_size() > 1) comm.all_reduce_sum(out);  // one rank's row plus zeros: exact in any dtype
}

ParallelLMHead::ParallelLMHead(const ShardContext& ctx, const std::string& name, int64_t vocab, int64_t hidden,
                               int64_t max_rows)
    : vocab_start_(ctx.rank() * (vocab / ctx.world_size())) {
  weight_ = ctx.upload_rows({ctx.row_shard(name, vocab, hidden)});
  allocate(ctx.backend, ctx.world_size(), vocab, max_rows);
}

ParallelLMHead::ParallelLMHead(const ShardContext& ctx, const VocabParallelEmbedding& tied, int64_t vocab,
                               int64_t max_rows)
    : weight_(tied.weight()), vocab_start_(tied.vocab_start()) {
  allocate(ctx.backend, ctx.world_size(), vocab, max_rows);
}

void ParallelLMHead::allocate(Backend& b, int world, int64_t vocab, int64_t max_rows) {
  if (world == 1) return;
  gathered_ = b.empty(DType::kF32, {world * max_rows * (vocab / world)});
}

void ParallelLMHead::forward(Backend& b, const Tensor& x, const Tensor& local) const {
  b.linear(x, weight_, nullptr, local);  // f32 logits: no rounding before sampling
}

void ParallelLMHead::gather(Backend& b, Communicator& comm, const Tensor& local, const Tensor& logits) const {
  const int world = comm.world_size();
  MINIVLLM_CHECK(world > 1) << "ParallelLMHead::gather at world_size 1";
  const int64_t rows = local.size(0), part = weight_.size(0), n = rows * part;
  comm.gather(local.view({n}), gathered_.rows(0, world * n));
  if (comm.rank() != 0) return;
  for (int r = 0; r < world; ++r) {
    b.copy_into_columns(logits, r * part, gathered_.rows(r * n, (r + 1) * n).view({rows, part}));
  }
}

}  // namespace minivllm
