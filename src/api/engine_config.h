// EngineConfig: the seeds' config keys. Each key is defined once, in the table in engine_config.cc
// (name, alias, help, range; the default is the member's initializer below): the JSON parser, the
// validation, the CLI flags and --help, and the Python keyword arguments all read that table.
// Architecture keys come from the checkpoint, not from here. Values derived from the model and
// the device (the clamped max_model_length, the KV block count) are resolved once, into the
// engine's ResolvedConfig (resolved_config.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "common/config_table.h"

namespace minivllm {

struct EngineConfig {
  std::string model;  // HF directory, .gguf file, or the default model's name
  int world_size = 1;
  // A mixture-of-experts model's experts split whole over the ranks (each rank its E / ws experts),
  // rather than each expert's width (model/fused_moe.h). vLLM's --enable-expert-parallel.
  bool enable_expert_parallel = false;
  int max_num_seqs = 512;
  int max_num_batched_tokens = 16384;  // tokens one step computes (decodes and prefill chunks)
  // Prompts longer than the budget prefilled in chunks, decodes batched with them. Off: whole
  // prompts in prefill-only steps (then max_num_batched_tokens >= max_model_length).
  bool enable_chunked_prefill = true;
  int num_kvcache_blocks = -1;  // -1: sized from free memory
  std::string kv_cache_dtype = "auto";  // auto | bf16 | fp8 (alias fp8_e4m3): backend/kv_cache_spec.h
  // none | fp8: quantize an unquantized checkpoint's linear weights at load (loader/online_fp8.h).
  std::string quantization = "none";
  int block_size = 256;
  int64_t eos = -1;  // -1: the model's own eos ids (config.json, generation_config.json)
  bool enforce_eager = false;
  // Schedule and launch step n+1 before step n's tokens are back (auto: on CUDA at world_size 1).
  std::string async_scheduling = "auto";  // auto | on | off
  // Structured outputs: fill a step's grammar masks while its forward runs, and with async
  // scheduling launch a constrained step before the last one's tokens are back (off: masks filled
  // before the launch, a constrained step collected before the next launch; for A/B runs).
  bool overlap_grammar_masks = true;
  float gpu_memory_utilization = 0.9f;
  int max_model_length = 4096;  // capped by the model's max_position_embeddings
  std::string device = "auto";  // auto | cpu | cuda
  int num_threads = 0;          // CPU threads, 0 = all cores
  // auto: the checkpoint's weights; dummy: made up from dummy_seed (loader/dummy_weights.h), only
  // config.json needed (vLLM's --load-format dummy).
  std::string load_format = "auto";
  int64_t dummy_seed = 0;
  // vLLM's --hf-overrides: a JSON object merged into the checkpoint's config.json before it is read
  // (RFC 7386: objects merge key by key, null removes a key), e.g. Qwen's long-context recipe
  // {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}.
  // "": none. A Python dict or a JSON object in a config file is taken as its text.
  std::string hf_overrides;
  // vLLM's --generation-config: auto (the sampling defaults of the model's generation_config.json,
  // api/generation_defaults.h), vllm (the engine's own), or a folder holding a generation_config.json.
  std::string generation_config = "auto";
  // vLLM's --chat-template: a file holding a Jinja chat template, or the template itself (text with
  // a brace or a newline), used instead of the model's; "": the model's.
  std::string chat_template;
  // Serving (AsyncEngine) only: sequences queued before a new request is refused (the server's
  // 503), so overload is an answer, not a wait without end. LLM.generate queues everything.
  int max_waiting_requests = 1024;

  // Throws a ConfigKeyError naming the key when a value is invalid.
  void validate() const;
  // From a JSON object of the table's keys (or their aliases). Errors (an unknown key, a wrong
  // type, a value out of range) are ConfigKeyErrors naming the key. When max_num_batched_tokens
  // is not given it is raised to fit max_num_seqs (and max_model_length without chunked prefill).
  static EngineConfig from_json(const nlohmann::json& j);
  nlohmann::ordered_json to_json() const;  // every key; from_json of it gives this config back
};

// The table's rows (for the CLI and the server) and the keys with their defaults (for the Python
// bindings and docs), in the order --help lists them.
std::span<const KeyRow<EngineConfig>> engine_config_rows();
std::span<const ConfigKey> engine_config_keys();
inline constexpr std::string_view kEngineKeyKind = "config key";

}  // namespace minivllm
