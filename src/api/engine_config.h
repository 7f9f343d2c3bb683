// EngineConfig: the seeds' config keys with sensible defaults, validated with messages that name
// the key. Architecture keys come from the checkpoint, not from here.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/runner_config.h"

namespace minivllm {

struct EngineConfig {
  std::string model;  // HF directory, .gguf file, or the default model's name
  int world_size = 1;
  int max_num_seqs = 512;
  int max_num_batched_tokens = 16384;  // tokens one step computes (decodes and prefill chunks)
  // Prompts longer than the budget prefilled in chunks, decodes batched with them. Off: whole
  // prompts in prefill-only steps (then max_num_batched_tokens >= max_model_length).
  bool enable_chunked_prefill = true;
  int num_kvcache_blocks = -1;  // -1: sized from free memory
  int block_size = 256;
  int64_t eos = -1;  // -1: the model's own eos ids (config.json, generation_config.json)
  bool enforce_eager = false;
  float gpu_memory_utilization = 0.9f;
  int max_model_length = 4096;  // capped by the model's max_position_embeddings
  std::string device = "auto";  // auto | cpu | cuda
  int num_threads = 0;          // CPU threads, 0 = all cores

  // Throws an Error naming the key when a value is invalid.
  void validate() const;
  // From a JSON object with the keys above (unknown keys are an error naming them).
  static EngineConfig from_json(const nlohmann::json& j);
  RunnerConfig runner_config() const;
};

}  // namespace minivllm
