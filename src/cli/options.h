// The option groups several subcommands share: engine flags (-> EngineConfig), sampling flags
// (-> SamplingParams) and chat-template variables (--var NAME=JSON).
#pragma once

#include <nlohmann/json.hpp>

#include "api/engine_config.h"
#include "api/generation_defaults.h"
#include "cli/args.h"
#include "engine/sampling_params.h"

namespace minivllm::cli {

// One flag per engine config key (engine_config_keys(): --model, --block-size, ...; aliases such
// as --tensor-parallel-size too). Unset flags keep EngineConfig's defaults. Invalid values are a
// UsageError naming the flag.
void add_engine_options(ArgParser& p);
// --model alone, for the commands that open only the tokenizer or the chat template.
void add_model_option(ArgParser& p);
EngineConfig engine_config_from(const ParsedArgs& a);

// One flag per sampling key (sampling_keys(): --max-tokens, --temperature, ...); the opt-in ones
// (--n, --logprobs) only `with_opt_in`. --max-tokens defaults to `default_max_tokens`.
void add_sampling_options(ArgParser& p, int default_max_tokens, bool with_opt_in = false);
// The flags given, over the model's sampling defaults (generation_config.json; none before the
// engine is made), over the table's; max_tokens unless given: default_max_tokens, capped by the
// model's max_new_tokens.
SamplingParams sampling_params_from(const ParsedArgs& a, int default_max_tokens,
                                    const GenerationDefaults& model = {});

// --var NAME=JSON (repeatable): extra chat-template variables, e.g. --var enable_thinking=false.
void add_template_var_option(ArgParser& p);
nlohmann::json template_vars_from(const ParsedArgs& a);

}  // namespace minivllm::cli
