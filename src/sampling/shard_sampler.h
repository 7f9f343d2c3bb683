// The vocabulary-parallel sampler's row math on the host (the CPU backend's shard_sample_* ops and
// the reference the GPU kernels are tested against). With tensor parallelism each rank holds the
// logits of its slice of the vocabulary; instead of gathering every logit to rank 0, each rank
// sums up its slice (ShardStats), the ranks exchange these few numbers, and the rank whose slice
// holds the draw finds the token. Semantics are sampler.h's for rows without top-k, top-p, min-p:
//   greedy: the largest logit, the lowest id among ties;
//   T > 0: the inverse CDF of softmax(l / T) in increasing id order: slice r's mass in common
//   units is mass_r * exp((m_r - M) / T) (M the largest m_r); the draw u * (sum of masses) falls
//   in the first slice whose running mass exceeds it, and within it at the first id whose
//   running mass exceeds what is left; rounding that leaves it unreached takes the last id that
//   has weight (in the last slice that has any).
#pragma once

#include <cstdint>

namespace minivllm {

// One row's summary of one slice, as the stats tensor stores it (4 floats).
struct ShardStats {
  float max_logit;  // -inf when no logit of the slice is above -inf
  float argmax;     // the lowest global id holding max_logit (vocab_start when none), as a float
  float mass;       // sum of exp((l_i - max_logit) / T) over the slice; 0 when T == 0
  float bad;        // 1 + the slice index of the first NaN or +inf logit, or 0
};

// Stats of logits[0, n) (ids vocab_start + i) at temperature T.
ShardStats shard_stats_row(const float* logits, int64_t n, int64_t vocab_start, float temperature);

// Where the row's draw falls, from every rank's stats of this row (stats[r], r < world): the rank
// that holds the token, and (T > 0) the target within that rank's slice in its own units
// (running sum of exp((l_i - m_r) / T)). Greedy rows: the rank of the winning max.
struct ShardChoice {
  int rank;
  double target;
};
ShardChoice shard_choose(const ShardStats* stats, int world, float temperature, float uniform);

// The token of a row from the slice that holds it (choice.rank's): greedy its argmax, else the
// first id whose running mass exceeds choice.target, or the last id with weight.
int32_t shard_pick_row(const float* logits, int64_t n, int64_t vocab_start, const ShardStats& own, float temperature,
                       double target);

}  // namespace minivllm
