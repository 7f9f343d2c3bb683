// The sampling defaults a model's creator ships in generation_config.json, as vLLM applies them
// (--generation-config auto): a request, a SamplingParams left unset or a CLI flag not given takes
// the model's temperature, top_p, top_k, min_p, repetition_penalty and (as max_tokens)
// max_new_tokens. Qwen3 ships temperature 0.6, top_p 0.95, top_k 20: without them a server would
// sample it at temperature 1.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"

namespace minivllm {

struct GenerationDefaults {
  // Sampling keys (SamplingParams' names) the file sets, e.g. {"temperature": 0.6, "top_k": 20}.
  nlohmann::json keys = nlohmann::json::object();
  std::string source;  // the file read, or "" when none was
  SamplingParams params;  // SamplingParams{} with the keys set

  // `base` with every key above set (each as the sampling table reads it).
  SamplingParams apply(const SamplingParams& base) const;
  // max_new_tokens, when the file sets it. (Inline: the server's request parser, also built alone
  // into a fuzzer without this library, reads it.)
  std::optional<int> max_tokens() const {
    if (!keys.contains("max_tokens")) return std::nullopt;
    return keys["max_tokens"].get<int>();
  }
};

// generation_config: "auto" (the model folder's generation_config.json, when there is one; a .gguf's
// general.sampling.* metadata, which llama.cpp's converter copies from it and llama.cpp applies:
// temp, top_p, top_k, min_p, penalty_repeat), "vllm" (none: the engine's own defaults, as vLLM names
// it), or a folder holding a generation_config.json. A generation_config.json key whose value
// transformers' GenerationConfig would drop as its own default (temperature 1, top_p 1, top_k 50,
// repetition_penalty 1) is not taken, as vLLM takes only the file's difference from those. An
// invalid value is an error naming the file and the key.
GenerationDefaults read_generation_defaults(const std::string& generation_config, const std::string& model_path);

}  // namespace minivllm
