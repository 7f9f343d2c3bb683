// Helpers shared by the end-to-end engine tests.
#pragma once

#include "engine/sampling_params.h"

namespace minivllm {

// Greedy decoding of exactly max_tokens tokens (eos ignored), as the references were made.
inline SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

}  // namespace minivllm
