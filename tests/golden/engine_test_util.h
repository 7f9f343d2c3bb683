// Helpers shared by the end-to-end engine tests.
#pragma once

#include <string>

#include "api/engine_config.h"
#include "engine/sampling_params.h"

namespace minivllm {

inline std::string golden_dir(const std::string& model) {
  return std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/" + model;
}

// A tiny checkpoint of tests/goldens on the CPU, with small engine settings that start fast.
inline EngineConfig tiny_config(const std::string& model, int world_size = 1) {
  EngineConfig c;
  c.world_size = world_size;
  c.model = golden_dir(model);
  c.device = "cpu";
  c.block_size = 16;
  c.max_num_seqs = 16;
  c.max_model_length = 256;
  c.max_num_batched_tokens = 1024;
  c.num_kvcache_blocks = 256;
  return c;
}

// The real trained stories260K model of ../shared (it has a tokenizer: stop strings, text).
inline EngineConfig stories_config() {
  EngineConfig c;
  c.model = std::string(MINIVLLM_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  c.device = "cpu";
  c.block_size = 16;
  c.max_num_seqs = 8;
  c.max_model_length = 256;
  c.max_num_batched_tokens = 512;
  c.num_kvcache_blocks = 128;
  return c;
}

// Greedy decoding of exactly max_tokens tokens (eos ignored), as the references were made.
inline SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

}  // namespace minivllm
