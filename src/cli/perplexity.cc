#include "cli/perplexity.h"

#include <algorithm>
#include <cmath>

#include "api/llm_engine.h"
#include "common/check.h"
#include "sampling/logits_processing.h"

namespace minivllm::cli {

std::vector<PerplexityWindow> perplexity_windows(int64_t num_tokens, int64_t window, int64_t stride) {
  MINIVLLM_CHECK(num_tokens >= 2) << "perplexity needs at least 2 tokens (the first is only context), got "
                                  << num_tokens;
  MINIVLLM_CHECK(window >= 2) << "the window must hold at least 2 tokens, got " << window;
  MINIVLLM_CHECK(stride >= 1 && stride <= window)
      << "the stride must be in [1, window = " << window << "] (a larger one would skip tokens), got " << stride;
  std::vector<PerplexityWindow> windows;
  int64_t scored_end = 0;  // every token before it is scored (or is the text's first)
  for (int64_t begin = 0;; begin += stride) {
    PerplexityWindow w;
    w.begin = begin;
    w.end = std::min(begin + window, num_tokens);
    w.first_scored = std::max(scored_end, begin + 1);
    if (w.first_scored < w.end) {
      windows.push_back(w);
      scored_end = w.end;
    }
    if (w.end == num_tokens) break;
  }
  return windows;
}

double PerplexityResult::perplexity() const { return std::exp(mean_nll()); }

PerplexityResult perplexity(LLMEngine& engine, const std::vector<int32_t>& tokens, int64_t window, int64_t stride) {
  PerplexityResult r;
  r.windows = perplexity_windows(static_cast<int64_t>(tokens.size()), window, stride);
  for (PerplexityWindow& w : r.windows) {
    const std::vector<int32_t> ids(tokens.begin() + w.begin, tokens.begin() + w.end);
    const std::vector<float> logits = engine.score(ids);
    const int64_t vocab = static_cast<int64_t>(logits.size()) / static_cast<int64_t>(ids.size());
    MINIVLLM_CHECK_EQ(vocab * static_cast<int64_t>(ids.size()), static_cast<int64_t>(logits.size()))
        << "score() returned logits that are not one row per token";
    // Row p - 1 of the window predicts token p.
    for (int64_t p = w.first_scored; p < w.end; ++p) {
      float logprob = 0;
      logprobs_row(logits.data() + (p - 1 - w.begin) * vocab, vocab, tokens[static_cast<size_t>(p)], 0, &logprob,
                   nullptr, nullptr);
      w.nll_sum -= logprob;
    }
    r.nll_sum += w.nll_sum;
    r.num_scored += w.end - w.first_scored;
  }
  return r;
}

}  // namespace minivllm::cli
