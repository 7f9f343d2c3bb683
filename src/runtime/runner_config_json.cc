#include "runtime/runner_config_json.h"

namespace minivllm {

nlohmann::json runner_config_to_json(const RunnerConfig& c) {
  return {{"backend", static_cast<int>(c.backend)},
          {"device_index", c.device_index},
          {"num_threads", c.num_threads},
          {"max_num_seqs", c.max_num_seqs},
          {"max_num_batched_tokens", c.max_num_batched_tokens},
          {"max_model_length", c.max_model_length},
          {"block_size", c.block_size},
          {"num_kvcache_blocks", c.num_kvcache_blocks},
          {"gpu_memory_utilization", c.gpu_memory_utilization},
          {"enforce_eager", c.enforce_eager},
          {"world_size", c.world_size}};
}

RunnerConfig runner_config_from_json(const nlohmann::json& j) {
  RunnerConfig c;
  c.backend = static_cast<BackendKind>(j.at("backend").get<int>());
  c.device_index = j.at("device_index").get<int>();
  c.num_threads = j.at("num_threads").get<int>();
  c.max_num_seqs = j.at("max_num_seqs").get<int>();
  c.max_num_batched_tokens = j.at("max_num_batched_tokens").get<int>();
  c.max_model_length = j.at("max_model_length").get<int>();
  c.block_size = j.at("block_size").get<int>();
  c.num_kvcache_blocks = j.at("num_kvcache_blocks").get<int>();
  c.gpu_memory_utilization = j.at("gpu_memory_utilization").get<float>();
  c.enforce_eager = j.at("enforce_eager").get<bool>();
  c.world_size = j.at("world_size").get<int>();
  return c;
}

}  // namespace minivllm
