// The option groups several subcommands share: engine flags (-> EngineConfig), sampling flags
// (-> SamplingParams) and chat-template variables (--var NAME=JSON).
#pragma once

#include <nlohmann/json.hpp>

#include "api/engine_config.h"
#include "cli/args.h"
#include "engine/sampling_params.h"

namespace minivllm::cli {

// --model plus --device, --max-num-seqs, --max-num-batched-tokens, --max-model-len, --block-size,
// --num-kvcache-blocks, --gpu-memory-utilization, --enforce-eager, --num-threads, --eos.
void add_engine_options(ArgParser& p);
// Unset flags keep EngineConfig's defaults. Invalid values are a UsageError naming the flag.
EngineConfig engine_config_from(const ParsedArgs& a);

// --max-tokens, --temperature, --top-k, --top-p, --min-p, --seed, --ignore-eos, --stop.
void add_sampling_options(ArgParser& p, int default_max_tokens);
SamplingParams sampling_params_from(const ParsedArgs& a, int default_max_tokens);

// --var NAME=JSON (repeatable): extra chat-template variables, e.g. --var enable_thinking=false.
void add_template_var_option(ArgParser& p);
nlohmann::json template_vars_from(const ParsedArgs& a);

}  // namespace minivllm::cli
