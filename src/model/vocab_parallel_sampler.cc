#include "model/vocab_parallel_sampler.h"

#include "common/check.h"

namespace minivllm {

namespace {
int64_t round_up4(int64_t n) { return (n + 3) / 4 * 4; }
}  // namespace

VocabParallelSampler::VocabParallelSampler(Backend& b, int world, int64_t max_rows) : max_rows_(max_rows) {
  params_ = b.empty(DType::kF32, {max_rows * 2});
  stats_ = b.empty(DType::kF32, {max_rows * 4});
  pieces_ = b.empty(DType::kF32, {max_rows * Backend::kShardPieceFloats});
  all_stats_ = b.empty(DType::kF32, {world * max_rows * 4});
  picks_ = b.empty(DType::kI32, {round_up4(max_rows)});
  all_picks_ = b.empty(DType::kI32, {world * round_up4(max_rows)});
  b.fill_bytes(picks_, 0);  // the padding past a step's rows travels too: keep it defined
}

void VocabParallelSampler::sample(Backend& b, Communicator& comm, const Tensor& logits, int64_t vocab_start,
                                  const SamplingBatch& batch, const Tensor& tokens) {
  const int64_t rows = batch.size();
  const int world = comm.world_size();
  MINIVLLM_CHECK(rows >= 1 && rows <= max_rows_ && logits.size(0) == rows && tokens.numel() >= rows)
      << "VocabParallelSampler: " << rows << " rows (at most " << max_rows_ << "), logits " << logits.describe()
      << ", tokens " << tokens.describe();
  host_params_.resize(static_cast<size_t>(2 * rows));
  for (int64_t r = 0; r < rows; ++r) {
    host_params_[2 * r] = batch.temperature[r];
    host_params_[2 * r + 1] = batch.uniform[r];
  }
  const Tensor params = params_.rows(0, 2 * rows), stats = stats_.rows(0, 4 * rows);
  const Tensor all_stats = all_stats_.rows(0, world * 4 * rows);
  b.copy_from_host(params, host_params_.data());
  b.shard_sample_stats(logits, params, vocab_start, stats, pieces_);
  comm.all_gather(stats, all_stats);
  const int64_t p4 = round_up4(rows);
  const Tensor picks = picks_.rows(0, p4), all_picks = all_picks_.rows(0, world * p4);
  b.shard_sample_pick(logits, params, vocab_start, comm.rank(), all_stats, pieces_, picks);
  comm.all_gather(picks, all_picks);
  b.shard_sample_merge(all_picks, world, tokens.rows(0, rows));
}

}  // namespace minivllm
