#include "api/resolved_config.h"

#include <algorithm>
#include <set>

namespace minivllm {

ResolvedConfig resolve_config(const EngineConfig& config, const ModelConfig& model, const Tokenizer* tokenizer) {
  ResolvedConfig r;
  static_cast<EngineConfig&>(r) = config;
  r.max_model_length = static_cast<int>(std::min<int64_t>(config.max_model_length, model.max_context_length()));
  // Without chunked prefill a whole prompt is one step's tokens.
  if (!config.enable_chunked_prefill) {
    r.max_num_batched_tokens = std::max(config.max_num_batched_tokens, r.max_model_length);
  }
  // One block table serves every layer: a block is released only once it is out of every layer's
  // window, so a single full-attention layer keeps them all.
  const std::vector<int64_t>& windows = model.layer_sliding_window;
  if (!windows.empty() && std::all_of(windows.begin(), windows.end(), [](int64_t w) { return w > 0; })) {
    r.sliding_window = static_cast<int>(*std::max_element(windows.begin(), windows.end()));
  }
  if (config.eos >= 0) {
    r.eos_token_ids = {config.eos};
  } else {
    std::set<int64_t> eos(model.eos_token_ids.begin(), model.eos_token_ids.end());
    if (tokenizer != nullptr && tokenizer->eos_token_id() >= 0) eos.insert(tokenizer->eos_token_id());
    r.eos_token_ids.assign(eos.begin(), eos.end());
  }
  return r;
}

RunnerConfig ResolvedConfig::runner_config() const {
  RunnerConfig r;
  r.backend = device == "cpu" ? BackendKind::kCpu : device == "cuda" ? BackendKind::kCuda : BackendKind::kAuto;
  r.num_threads = num_threads;
  r.max_num_seqs = max_num_seqs;
  r.max_num_batched_tokens = max_num_batched_tokens;
  r.max_model_length = max_model_length;
  r.block_size = block_size;
  r.num_kvcache_blocks = num_kvcache_blocks;
  r.kv_cache_dtype = kv_cache_dtype;
  r.quantization = quantization;
  r.gpu_memory_utilization = gpu_memory_utilization;
  r.enforce_eager = enforce_eager;
  r.world_size = world_size;
  r.enable_expert_parallel = enable_expert_parallel;
  r.load_format = load_format;
  r.dummy_seed = dummy_seed;
  r.hf_overrides = hf_overrides;
  return r;
}

SchedulerConfig ResolvedConfig::scheduler_config() const {
  SchedulerConfig s;
  s.max_num_seqs = max_num_seqs;
  s.max_num_batched_tokens = max_num_batched_tokens;
  s.num_kvcache_blocks = num_kvcache_blocks;
  s.block_size = block_size;
  s.max_model_length = max_model_length;
  s.eos_token_ids = eos_token_ids;
  s.enable_chunked_prefill = enable_chunked_prefill;
  s.sliding_window = sliding_window;
  return s;
}

}  // namespace minivllm
