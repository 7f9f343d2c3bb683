// The runtime's share of the engine config (seeds: the ModelRunner's keys), always built from the
// engine's resolved config (ResolvedConfig::runner_config()): the keys' defaults and ranges are
// the config table's (api/engine_config.cc), not repeated here.
#pragma once

#include <cstdint>
#include <string>

namespace minivllm {

enum class BackendKind { kAuto, kCpu, kCuda };

struct RunnerConfig {
  BackendKind backend = BackendKind::kAuto;
  int device_index = 0;  // not a key: rank r runs on device device_index + r
  int num_threads = 0;
  int max_num_seqs = 0;
  int max_num_batched_tokens = 0;
  int max_model_length = 0;  // resolved: capped by the model
  int block_size = 0;
  int num_kvcache_blocks = -1;  // -1: sized from memory
  std::string kv_cache_dtype = "auto";  // the key's value; the runner resolves it on its backend
  std::string quantization = "none";    // the key's value: online quantization at load (loader/online_fp8.h)
  float gpu_memory_utilization = 0.0f;
  bool enforce_eager = false;
  int world_size = 1;
  bool enable_expert_parallel = false;  // the key's value (model/fused_moe.h)
  std::string load_format = "auto";  // every rank loads its shard the same way (EngineConfig)
  int64_t dummy_seed = 0;
  std::string hf_overrides;  // merged into config.json by every rank alike (EngineConfig)
};

}  // namespace minivllm
