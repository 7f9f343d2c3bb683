#include "api/engine_config.h"

#include "common/check.h"

namespace minivllm {

void EngineConfig::validate() const {
  MINIVLLM_CHECK(!model.empty()) << "config key 'model' is empty";
  MINIVLLM_CHECK(world_size >= 1) << "config key 'world_size' must be >= 1, got " << world_size;
  MINIVLLM_CHECK(max_num_seqs >= 1) << "config key 'max_num_seqs' must be >= 1, got " << max_num_seqs;
  MINIVLLM_CHECK(max_num_batched_tokens >= 1)
      << "config key 'max_num_batched_tokens' must be >= 1, got " << max_num_batched_tokens;
  MINIVLLM_CHECK(block_size >= 16 && block_size % 16 == 0)
      << "config key 'block_size' must be a positive multiple of 16, got " << block_size;
  MINIVLLM_CHECK(num_kvcache_blocks == -1 || num_kvcache_blocks >= 1)
      << "config key 'num_kvcache_blocks' must be -1 (auto) or >= 1, got " << num_kvcache_blocks;
  MINIVLLM_CHECK(gpu_memory_utilization > 0.0f && gpu_memory_utilization <= 1.0f)
      << "config key 'gpu_memory_utilization' must be in (0, 1], got " << gpu_memory_utilization;
  MINIVLLM_CHECK(max_model_length >= 1) << "config key 'max_model_length' must be >= 1, got " << max_model_length;
  MINIVLLM_CHECK(enable_chunked_prefill || max_num_batched_tokens >= max_model_length)
      << "config key 'max_num_batched_tokens' (" << max_num_batched_tokens
      << ") must be >= 'max_model_length' (" << max_model_length
      << ") when 'enable_chunked_prefill' is false, so that any prompt fits one prefill";
  // Every running sequence gets its decode token in each step.
  MINIVLLM_CHECK(max_num_batched_tokens >= max_num_seqs)
      << "config key 'max_num_batched_tokens' (" << max_num_batched_tokens << ") must be >= 'max_num_seqs' ("
      << max_num_seqs << "): a step holds one decode token for each running sequence";
  MINIVLLM_CHECK(eos >= -1) << "config key 'eos' must be -1 (model default) or a token id, got " << eos;
  MINIVLLM_CHECK(device == "auto" || device == "cpu" || device == "cuda")
      << "config key 'device' must be auto, cpu or cuda, got '" << device << "'";
  MINIVLLM_CHECK(num_threads >= 0) << "config key 'num_threads' must be >= 0, got " << num_threads;
}

EngineConfig EngineConfig::from_json(const nlohmann::json& j) {
  MINIVLLM_CHECK(j.is_object()) << "engine config must be a JSON object";
  EngineConfig c;
  for (const auto& [key, v] : j.items()) {
    try {
      if (key == "model") c.model = v.get<std::string>();
      else if (key == "world_size" || key == "tensor_parallel_size") c.world_size = v.get<int>();
      else if (key == "max_num_seqs") c.max_num_seqs = v.get<int>();
      else if (key == "max_num_batched_tokens") c.max_num_batched_tokens = v.get<int>();
      else if (key == "enable_chunked_prefill") c.enable_chunked_prefill = v.get<bool>();
      else if (key == "num_kvcache_blocks") c.num_kvcache_blocks = v.get<int>();
      else if (key == "block_size") c.block_size = v.get<int>();
      else if (key == "eos") c.eos = v.get<int64_t>();
      else if (key == "enforce_eager") c.enforce_eager = v.get<bool>();
      else if (key == "gpu_memory_utilization") c.gpu_memory_utilization = v.get<float>();
      else if (key == "max_model_length" || key == "max_model_len") c.max_model_length = v.get<int>();
      else if (key == "device") c.device = v.get<std::string>();
      else if (key == "num_threads") c.num_threads = v.get<int>();
      else MINIVLLM_FAIL() << "unknown config key '" << key << "'";
    } catch (const nlohmann::json::exception& e) {
      MINIVLLM_FAIL() << "config key '" << key << "' has the wrong type: " << e.what();
    }
  }
  c.validate();
  return c;
}

RunnerConfig EngineConfig::runner_config() const {
  RunnerConfig r;
  r.backend = device == "cpu" ? BackendKind::kCpu : device == "cuda" ? BackendKind::kCuda : BackendKind::kAuto;
  r.num_threads = num_threads;
  r.max_num_seqs = max_num_seqs;
  r.max_num_batched_tokens = max_num_batched_tokens;
  r.max_model_length = max_model_length;
  r.block_size = block_size;
  r.num_kvcache_blocks = num_kvcache_blocks;
  r.gpu_memory_utilization = gpu_memory_utilization;
  r.enforce_eager = enforce_eager;
  r.world_size = world_size;
  return r;
}

}  // namespace minivllm
