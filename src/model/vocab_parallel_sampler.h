// The sampler of a vocabulary split over ranks (world_size > 1). Gathering every rank's logits to
// rank 0 moves rows x V x 4 bytes a step (78 MB for Qwen3-0.6B at 256 rows over two ranks); this
// moves 16 bytes a row per rank and then 4. Each rank summarises its slice of each row
// (Backend::shard_sample_stats), the summaries are all-gathered, every rank works out which slice
// holds each row's draw and that rank finds the token (shard_sample_pick), and the picks are
// all-gathered and merged, so that every rank ends with the tokens (async scheduling resolves the
// next step's inputs from them on each device). Semantics: sampling/shard_sampler.h, i.e.
// sampler.h's for rows without top-k, top-p or min-p; steps with those (or penalties, logprobs)
// gather the logits instead (StepInput::needs_full_logits).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"

namespace minivllm {

class VocabParallelSampler {
 public:
  VocabParallelSampler() = default;
  VocabParallelSampler(Backend& b, int world, int64_t max_rows);
  // tokens (i32 [>= rows], device) on every rank = the batch's tokens, drawn from `logits` (this
  // rank's slice, f32 [rows, V / ws], ids vocab_start + column). Collective.
  void sample(Backend& b, Communicator& comm, const Tensor& logits, int64_t vocab_start, const SamplingBatch& batch,
              const Tensor& tokens);

 private:
  int64_t max_rows_ = 0;
  Tensor params_;     // f32 [max_rows, 2]: (temperature, uniform)
  Tensor stats_;      // f32 [max_rows, 4]
  Tensor pieces_;     // f32 [max_rows, Backend::kShardPieceFloats]: this rank's, from stats to pick
  Tensor all_stats_;  // f32 [ws, max_rows, 4]
  Tensor picks_;      // i32 [max_rows rounded up to 4]: whole 16-byte vectors for the gather
  Tensor all_picks_;  // i32 [ws, max_rows rounded up to 4]
  std::vector<float> host_params_;
};

}  // namespace minivllm
