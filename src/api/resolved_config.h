// ResolvedConfig: the engine's config once the model and the device are known. LLMEngine's
// constructor resolves it once (resolve_config, then the KV block count its runner allocated) and
// only reads it after; so do the scheduler, the runners, the server and bench. Each derived value
// is resolved here and nowhere else:
//   max_model_length        the key, capped by the model's max_position_embeddings
//   max_num_batched_tokens  the key, raised to max_model_length (any prompt fits one prefill)
//   num_kvcache_blocks      the key, or for -1 what the runner sized from free memory
//   kv_cache_element        the element type kv_cache_dtype names on the runner's backend
//   eos_token_ids           the eos key, or the model's own ids (config, generation config, tokenizer)
//   sliding_window          the window every layer slides over, 0 where some layer sees every key
#pragma once

#include <cstdint>
#include <vector>

#include "api/engine_config.h"
#include "common/dtype.h"
#include "engine/scheduler.h"
#include "loader/model_config.h"
#include "runtime/runner_config.h"
#include "tokenizer/tokenizer.h"

namespace minivllm {

struct ResolvedConfig : EngineConfig {
  std::vector<int64_t> eos_token_ids;
  DType kv_cache_element = DType::kF32;  // set with num_kvcache_blocks, from the runner
  int sliding_window = 0;  // SchedulerConfig::sliding_window: blocks out of every layer's window are released

  RunnerConfig runner_config() const;
  SchedulerConfig scheduler_config() const;
};

// Every derived value but num_kvcache_blocks, which the runner reports once it allocated the cache.
ResolvedConfig resolve_config(const EngineConfig& config, const ModelConfig& model, const Tokenizer* tokenizer);

}  // namespace minivllm
