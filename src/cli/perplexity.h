// Perplexity of a token sequence, as llama.cpp's llama-perplexity and Hugging Face's sliding-window
// recipe: the sequence is cut into windows of at most `window` tokens starting every `stride`
// tokens; each window is one teacher-forced prefill (LLMEngine::score), and scores only the tokens
// no earlier window scored, so each token counts once, with the most context its window gives.
#pragma once

#include <cstdint>
#include <vector>

namespace minivllm {
class LLMEngine;
}

namespace minivllm::cli {

struct PerplexityWindow {
  int64_t begin = 0, end = 0;  // the tokens [begin, end) the prefill sees
  int64_t first_scored = 0;    // it scores [first_scored, end): each predicted from the tokens before it
  double nll_sum = 0;          // filled by perplexity(): -sum of those tokens' logprobs
};

// Window i is [i * stride, min(i * stride + window, n)); the windows stop at the one that reaches
// the end. The text's first token is never scored (nothing predicts it), nor is the first token of
// a window that starts where the one before it ended (stride == window). Needs n >= 2,
// window >= 2, 1 <= stride <= window (a larger stride would skip tokens); throws an Error naming
// the value otherwise.
std::vector<PerplexityWindow> perplexity_windows(int64_t num_tokens, int64_t window, int64_t stride);

struct PerplexityResult {
  std::vector<PerplexityWindow> windows;
  int64_t num_scored = 0;
  double nll_sum = 0;  // natural log

  double mean_nll() const { return nll_sum / static_cast<double>(num_scored); }
  double perplexity() const;  // exp(mean_nll())
};

// Runs every window through engine.score() and sums the log-softmax of the logits (the sampler's
// logprobs_row, the same as `generate --logprobs`) at each scored token.
PerplexityResult perplexity(LLMEngine& engine, const std::vector<int32_t>& tokens, int64_t window, int64_t stride);

}  // namespace minivllm::cli
