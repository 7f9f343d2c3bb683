// The order in which a decode step's sequences should start on the GPU: longest context first.
//
// Why: decode attention is one CTA (or a few splits) per (sequence, kv head), and at the batch
// sizes that hold most of a run's KV bytes those CTAs come in several waves. The block scheduler
// starts them in index order, so a long context in the batch's last rows would start in the last
// wave and run on while the SMs around it have nothing left (a tail as long as that sequence).
// Starting the longest first (LPT scheduling) lets the short ones fill in behind them.
#pragma once

#include <cstdint>

namespace minivllm {

// order[0..n) := the rows 0..n-1 by context_lens descending; equal lengths keep row order, so
// padding rows (the runner's context 1) come after every real sequence.
void longest_context_first(const int32_t* context_lens, int n, int32_t* order);

}  // namespace minivllm
