#include "runtime/runner_config_json.h"

namespace minivllm {

// The wire names are the members' (one list, no second spelling to keep in step).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RunnerConfig, backend, device_index, num_threads, max_num_seqs,
                                   max_num_batched_tokens, max_model_length, block_size, num_kvcache_blocks,
                                   kv_cache_dtype, quantization, gpu_memory_utilization, enforce_eager, world_size,
                                   enable_expert_parallel, load_format, dummy_seed, hf_overrides)

nlohmann::json runner_config_to_json(const RunnerConfig& c) { return c; }

RunnerConfig runner_config_from_json(const nlohmann::json& j) { return j.get<RunnerConfig>(); }

}  // namespace minivllm
