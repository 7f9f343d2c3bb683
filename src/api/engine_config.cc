// The engine's config table: every EngineConfig key, defined once.
#include "api/engine_config.h"

#include <algorithm>
#include <array>

namespace minivllm {
namespace {

using C = EngineConfig;

// To add a key: a member in EngineConfig (its initializer is the default) and one row here.
constexpr auto kRows = std::to_array<KeyRow<C>>({
    key<&C::model>({.name = "model",
                    .help = "Hugging Face directory, .gguf file, or SmolLM2-135M-Instruct",
                    .value_name = "M",
                    .required = true}),
    key<&C::device>({.name = "device",
                     .help = "the backend; auto: cuda where a GPU is visible, else cpu",
                     .value_name = "D",
                     .choices = {"auto", "cpu", "cuda"}}),
    key<&C::max_num_seqs>({.name = "max_num_seqs", .help = "sequences per batch", .min = 1}),
    key<&C::max_waiting_requests>(
        {.name = "max_waiting_requests",
         .help = "serve: sequences (a request of n choices counts n) waiting to be scheduled before new requests "
                 "are refused with 503 and Retry-After; a request into an empty queue is always taken",
         .min = 1}),
    key<&C::max_num_batched_tokens>(
        {.name = "max_num_batched_tokens",
         .help = "tokens one step computes: the running decodes, then prefill chunks (when not given: raised "
                 "to max_num_seqs, and to max_model_len without chunked prefill)",
         .min = 1}),
    key<&C::enable_chunked_prefill>(
        {.name = "enable_chunked_prefill",
         .help = "prefill long prompts in chunks that share steps with the running decodes; off: whole prompts in "
                 "prefill-only steps"}),
    key<&C::max_model_length>({.name = "max_model_len",
                               .help = "longest prompt + completion; capped by the model's max_position_embeddings (or the longer context its yarn or linear rope scaling serves)",
                               .alias = "max_model_length",
                               .min = 1}),
    key<&C::block_size>({.name = "block_size", .help = "KV cache block size in tokens", .min = 16, .multiple_of = 16}),
    key<&C::num_kvcache_blocks>({.name = "num_kvcache_blocks",
                                 .help = "KV cache blocks",
                                 .min = 1,
                                 .has_sentinel = true,
                                 .sentinel = -1,
                                 .sentinel_meaning = "sized from free memory"}),
    key<&C::kv_cache_dtype>({.name = "kv_cache_dtype",
                             .help = "KV cache elements; auto: the backend's activations (bf16 on cuda, f32 on cpu); "
                                     "fp8: e4m3 with an fp32 scale per token and kv head, about twice the tokens",
                             .value_name = "T",
                             .choices = {"auto", "bf16", "fp8", "fp8_e4m3"}}),
    key<&C::quantization>({.name = "quantization",
                           .help = "fp8: quantize the checkpoint's linear weights at load to e4m3 with a scale per "
                                   "output channel (for an unquantized checkpoint; FP8 checkpoints need no flag)",
                           .value_name = "Q",
                           .choices = {"none", "fp8"}}),
    key<&C::gpu_memory_utilization>({.name = "gpu_memory_utilization",
                                     .help = "fraction of GPU memory to use",
                                     .value_name = "F",
                                     .min = 0,
                                     .max = 1,
                                     .min_open = true}),
    key<&C::enforce_eager>({.name = "enforce_eager", .help = "no CUDA graphs"}),
    key<&C::async_scheduling>(
        {.name = "async_scheduling",
         .help = "schedule and launch each step before the previous one's tokens are back, so the host's work "
                 "overlaps the device's (auto: on with CUDA; on the CPU a step's work "
                 "is the host's, so overlapping only delays each step's output by one step)",
         .value_name = "A",
         .choices = {"auto", "on", "off"}}),
    key<&C::overlap_grammar_masks>(
        {.name = "overlap_grammar_masks",
         .help = "structured outputs: fill each step's grammar masks on the host while the device runs its forward "
                 "(and, with async scheduling, keep constrained steps overlapped); off: masks before the launch"}),
    key<&C::world_size>({.name = "tensor_parallel_size",
                         .help = "ranks (GPUs, or CPU processes) the model is split over",
                         .alias = "world_size",
                         .min = 1,
                         .max = 64}),
    key<&C::enable_expert_parallel>(
        {.name = "enable_expert_parallel",
         .help = "mixture-of-experts models: split the experts whole over the tensor-parallel ranks (each rank "
                 "computes its experts for every token) instead of each expert's width"}),
    key<&C::num_threads>({.name = "num_threads", .help = "CPU threads, 0 = all cores", .min = 0, .max = 4096}),
    key<&C::load_format>({.name = "load_format",
                          .help = "auto: the checkpoint's weights; dummy: seeded random weights of the config's "
                                  "shapes (only config.json is read; not for a .gguf file), for benchmarks",
                          .value_name = "F",
                          .choices = {"auto", "dummy"}}),
    key<&C::dummy_seed>({.name = "dummy_seed",
                         .help = "seed of the dummy weights (the same at every tensor_parallel_size)",
                         .value_name = "N",
                         .min = 0}),
    key<&C::hf_overrides>({.name = "hf_overrides",
                           .help = "a JSON object merged into the model's config.json before it is read (nested "
                                   "objects merge, null removes a key), e.g. "
                                   "'{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
                                   "\"original_max_position_embeddings\": 32768}}'; not for a .gguf file",
                           .value_name = "JSON"}),
    key<&C::generation_config>(
        {.name = "generation_config",
         .help = "sampling defaults for what a request leaves unset: auto (the model's generation_config.json: "
                 "temperature, top_p, top_k, min_p, repetition_penalty, max_new_tokens), vllm (the engine's own), "
                 "or a folder holding a generation_config.json",
         .value_name = "G"}),
    key<&C::chat_template>({.name = "chat_template",
                            .help = "a Jinja chat template file, or the template itself, used instead of the "
                                    "model's (chat requests, --chat)",
                            .value_name = "T"}),
    key<&C::eos>({.name = "eos",
                  .help = "end-of-sequence token id",
                  .value_name = "ID",
                  .min = 0,
                  .has_sentinel = true,
                  .sentinel = -1,
                  .sentinel_meaning = "the model's own"}),
});

[[noreturn]] void fail(const char* key, std::string problem) {
  throw ConfigKeyError(kEngineKeyKind, key, std::move(problem));
}

}  // namespace

std::span<const KeyRow<EngineConfig>> engine_config_rows() { return kRows; }

std::span<const ConfigKey> engine_config_keys() {
  static const std::vector<ConfigKey> keys = list_keys(engine_config_rows());
  return keys;
}

void EngineConfig::validate() const {
  check_all(engine_config_rows(), *this, kEngineKeyKind);
  if (!hf_overrides.empty()) {
    const nlohmann::json o = nlohmann::json::parse(hf_overrides, nullptr, /*allow_exceptions=*/false);
    if (o.is_discarded() || !o.is_object()) {
      fail("hf_overrides", "must be a JSON object of config.json keys, got " + hf_overrides);
    }
  }
  if (!enable_chunked_prefill && max_num_batched_tokens < max_model_length) {
    fail("max_num_batched_tokens", "must be >= max_model_len (" + std::to_string(max_model_length) +
                                       ") without chunked prefill, so that any prompt fits one prefill, got " +
                                       std::to_string(max_num_batched_tokens));
  }
  // Every running sequence gets its decode token in each step.
  if (max_num_batched_tokens < max_num_seqs) {
    fail("max_num_batched_tokens", "must be >= max_num_seqs (" + std::to_string(max_num_seqs) +
                                       ": a step holds one decode token per running sequence), got " +
                                       std::to_string(max_num_batched_tokens));
  }
}

EngineConfig EngineConfig::from_json(const nlohmann::json& j) {
  // hf_overrides is JSON text; an object given as such (a Python dict, a config file's object) is
  // taken as its text.
  const auto overrides = j.is_object() ? j.find("hf_overrides") : j.end();
  if (overrides != j.end() && overrides->is_object()) {
    nlohmann::json copy = j;
    copy["hf_overrides"] = overrides->dump();
    return from_json(copy);
  }
  EngineConfig c = read_object(engine_config_rows(), j, kEngineKeyKind);
  // A large max_num_seqs should not trip the batched-tokens check when the user left that key
  // alone; without chunked prefill a larger max_model_len raises the default budget too, so that
  // any prompt fits one prefill.
  if (!j.contains("max_num_batched_tokens") || j["max_num_batched_tokens"].is_null()) {
    c.max_num_batched_tokens = std::max(c.max_num_batched_tokens, c.max_num_seqs);
    if (!c.enable_chunked_prefill) c.max_num_batched_tokens = std::max(c.max_num_batched_tokens, c.max_model_length);
  }
  c.validate();
  return c;
}

nlohmann::ordered_json EngineConfig::to_json() const { return write_object(engine_config_rows(), *this); }

}  // namespace minivllm
