// `minivllm generate`: completes one or more prompts given as token ids, text, or one-message chats,
// and prints the completions (text, or JSON with ids and finish reasons).
#include <cstdint>
#include <iostream>

#include "api/llm_engine.h"
#include "cli/cli_io.h"
#include "cli/commands.h"
#include "cli/json_input.h"
#include "cli/options.h"

namespace minivllm::cli {
namespace {

constexpr int kDefaultMaxTokens = 64;

std::vector<std::vector<int32_t>> parse_prompt_ids(const std::string& text) {
  nlohmann::ordered_json j;
  try {
    j = parse_json_input(text, "--prompt-ids", "e.g. '[[1,2,3],[4,5]]'");
  } catch (const Error& e) {
    throw UsageError(user_message(e));
  }
  if (!j.is_array() || j.empty()) throw UsageError("--prompt-ids must be a non-empty JSON array of id arrays");
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& p = j[i];
    if (!p.is_array()) {
      throw UsageError("--prompt-ids must hold arrays of token ids; prompt " + std::to_string(i) + " is " +
                       json_excerpt(p));
    }
    std::vector<int32_t> ids;
    for (size_t k = 0; k < p.size(); ++k) {
      const std::optional<int32_t> id = json_token_id(p[k]);
      if (!id) {
        throw UsageError("--prompt-ids: prompt " + std::to_string(i) + ", id " + std::to_string(k) + ": " +
                         not_a_token_id(p[k]));
      }
      ids.push_back(*id);
    }
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

nlohmann::json logprobs_json(const std::vector<TokenLogprob>& lps) {
  nlohmann::json out = nlohmann::json::array();
  for (const TokenLogprob& lp : lps) {
    nlohmann::json top = nlohmann::json::array();
    for (const auto& [id, value] : lp.top) top.push_back({id, value});
    out.push_back({{"token_id", lp.token_id}, {"logprob", lp.logprob}, {"top", top}});
  }
  return out;
}

nlohmann::json to_json(const RequestOutput& o, const SamplingParams& params) {
  nlohmann::json j = {{"index", o.index},
                      {"token_ids", o.token_ids},
                      {"text", o.text},
                      {"finish_reason", o.finish_reason},
                      {"prompt_token_ids", o.prompt_token_ids},
                      {"num_cached_tokens", o.num_cached_tokens}};
  if (params.logprobs >= 0) j["logprobs"] = logprobs_json(o.logprobs);
  if (params.prompt_logprobs >= 0) j["prompt_logprobs"] = logprobs_json(o.prompt_logprobs);  // tokens 1..: the first has none
  if (o.finish_reason == "error") j["error"] = user_message(Error(o.error));
  return j;
}

// `outputs` holds n consecutive outputs (choices) per prompt.
int print_outputs(const std::vector<RequestOutput>& outputs, const SamplingParams& params, bool as_json) {
  int status = kExitOk;
  if (as_json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const RequestOutput& o : outputs) arr.push_back(to_json(o, params));
    std::cout << dump_json(arr) << "\n";
  } else {
    for (const RequestOutput& o : outputs) {
      if (o.finish_reason != "error") std::cout << o.text << "\n";
    }
  }
  std::cout.flush();
  const size_t n = static_cast<size_t>(params.n);
  for (size_t i = 0; i < outputs.size(); i += n) {
    if (outputs[i].finish_reason != "error") continue;
    print_error("prompt " + std::to_string(i / n) + " rejected: " + user_message(Error(outputs[i].error)));
    status = kExitRuntimeError;
  }
  return status;
}

}  // namespace

int run_generate(const std::vector<std::string>& argv) {
  ArgParser p("generate",
              "generate --model M (--prompt-ids JSON | --prompt TEXT... | --chat TEXT...) [options]",
              "Completes each prompt and prints its text (one per line; --n N: N lines per prompt), or with\n"
              "--json a JSON array of {index, token_ids, text, finish_reason, prompt_token_ids,\n"
              "num_cached_tokens[, logprobs][, prompt_logprobs][, error]}, N per prompt, in prompt order\n"
              "(prompt_logprobs: one per prompt token after the first). Exits 1 when a\n"
              "prompt was rejected (after printing every output).");
  p.option("--prompt-ids", "JSON", "prompts as token ids, e.g. '[[1,2,3],[4,5]]'")
      .option("--prompt", "TEXT", "a text prompt (repeatable)")
      .option("--chat", "TEXT", "a user message, rendered with the chat template (repeatable)")
      .flag("--json", "print JSON (needed for --logprobs and --prompt-logprobs)");
  add_template_var_option(p);
  add_sampling_options(p, kDefaultMaxTokens, /*with_opt_in=*/true);  // --n, --logprobs, --prompt-logprobs
  add_engine_options(p);
  return run_command(p, argv, [](const ParsedArgs& a) {
    const int sources = a.has("--prompt-ids") + a.has("--prompt") + a.has("--chat");
    if (sources != 1) throw UsageError("give exactly one of --prompt-ids, --prompt or --chat");
    if (a.all("--prompt-ids").size() > 1) throw UsageError("--prompt-ids takes all prompts in one JSON array");
    const EngineConfig config = engine_config_from(a);
    SamplingParams params = sampling_params_from(a, kDefaultMaxTokens);
    if (params.logprobs >= 0 && !a.has("--json")) throw UsageError("--logprobs needs --json");
    if (params.prompt_logprobs >= 0 && !a.has("--json")) throw UsageError("--prompt-logprobs needs --json");
    const nlohmann::json vars = template_vars_from(a);
    const bool as_json = a.has("--json");
    std::vector<std::vector<int32_t>> prompt_ids;
    if (a.has("--prompt-ids")) prompt_ids = parse_prompt_ids(*a.get("--prompt-ids"));

    LLMEngine engine(config);
    params = sampling_params_from(a, kDefaultMaxTokens, engine.generation_defaults());
    if (a.has("--prompt-ids")) return print_outputs(engine.generate(prompt_ids, params), params, as_json);
    if (a.has("--prompt")) return print_outputs(engine.generate(a.all("--prompt"), params), params, as_json);
    std::vector<nlohmann::json> chats;
    for (const std::string& text : a.all("--chat")) {
      chats.push_back(nlohmann::json::array({{{"role", "user"}, {"content", text}}}));
    }
    return print_outputs(engine.chat(chats, params, vars), params, as_json);
  });
}

}  // namespace minivllm::cli
