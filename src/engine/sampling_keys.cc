// The sampling table: every SamplingParams key, defined once.
#include "engine/sampling_keys.h"

#include <array>

#include <nlohmann/json.hpp>

namespace minivllm {
namespace {

using P = SamplingParams;

// To add a key: a member in SamplingParams (its initializer is the default) and one row here.
constexpr auto kRows = std::to_array<KeyRow<P>>({
    key<&P::max_tokens>({.name = "max_tokens", .help = "tokens to generate at most", .min = 1}),
    key<&P::temperature>(
        {.name = "temperature", .help = "sampling temperature, 0 = greedy", .value_name = "T", .min = 0}),
    key<&P::top_k>({.name = "top_k",
                    .help = "keep the K most likely tokens",
                    .value_name = "K",
                    .min = -1,
                    .range = "-1 or 0 (off) or >= 1"}),
    key<&P::top_p>({.name = "top_p",
                    .help = "nucleus sampling: keep the most likely tokens up to this probability mass",
                    .value_name = "P",
                    .min = 0,
                    .max = 1,
                    .min_open = true}),
    key<&P::min_p>(
        {.name = "min_p", .help = "drop tokens below P x the top probability", .value_name = "P", .min = 0, .max = 1}),
    key<&P::seed>({.name = "seed", .help = "seed for reproducible sampling", .value_name = "S"}),
    key<&P::ignore_eos>({.name = "ignore_eos", .help = "keep generating past end-of-sequence tokens"}),
    key<&P::include_stop_str_in_output>(
        {.name = "include_stop_str_in_output",
         .help = "keep the stop string (or the text of the eos / stop token) that ended the completion in its text"}),
    key<&P::skip_special_tokens>(
        {.name = "skip_special_tokens", .help = "leave special tokens (chat markers, eos) out of the text"}),
    key<&P::truncate_prompt_tokens>({.name = "truncate_prompt_tokens",
                                     .help = "use only the prompt's last K tokens (-1: the last max_model_len)",
                                     .value_name = "K",
                                     .min = -1,
                                     .range = "-1 (max_model_len) or 0 (off) or >= 1"}),
    key<&P::stop>({.name = "stop", .help = "stop string, not included in the output (repeatable)", .value_name = "STR"}),
    key<&P::stop_token_ids>({.name = "stop_token_ids",
                             .help = "token id that ends the completion besides eos (repeatable)",
                             .value_name = "ID",
                             .min = 0,
                             .max = 2147483647}),
    key<&P::presence_penalty>({.name = "presence_penalty",
                               .help = "subtract F from the logits of tokens already generated",
                               .value_name = "F",
                               .min = -2,
                               .max = 2}),
    key<&P::frequency_penalty>({.name = "frequency_penalty",
                                .help = "subtract F x times generated from a token's logit",
                                .value_name = "F",
                                .min = -2,
                                .max = 2}),
    key<&P::repetition_penalty>({.name = "repetition_penalty",
                                 .help = "divide positive (multiply negative) logits of prompt and generated tokens "
                                         "by F; 1 = off",
                                 .value_name = "F",
                                 .min = 0,
                                 .min_open = true}),
    key<&P::logit_bias>({.name = "logit_bias",
                         .help = "add VALUE to token ID's logit before sampling (repeatable)",
                         .value_name = "ID=VALUE",
                         .min = -100,
                         .max = 100}),
    key<&P::min_tokens>(
        {.name = "min_tokens", .help = "generate at least N tokens before eos or a stop token id", .min = 0}),
    key<&P::bad_words>({.name = "bad_words", .help = "a word never to generate (repeatable)", .value_name = "WORD"}),
    key<&P::allowed_token_ids>({.name = "allowed_token_ids",
                                .help = "sample only these token ids (repeatable; eos only if listed)",
                                .value_name = "ID",
                                .min = 0,
                                .max = 2147483647}),
    key<&P::structured_outputs>({.name = "structured_outputs",
                                 .help = "what the completion must match: json, json_object, regex, choice or grammar",
                                 .value_name = "OBJ",
                                 .cli = CliUse::kNone}),  // --json-schema FILE, --regex, --grammar FILE instead
    key<&P::n>({.name = "n",
                .help = "completions per prompt; with seed S choice i draws from (S, i)",
                .min = 1,
                .max = P::kMaxN,
                .cli = CliUse::kOptIn}),
    key<&P::logprobs>({.name = "logprobs",
                       .help = "each token's logprob and the K most likely tokens'",
                       .value_name = "K",
                       .min = 0,
                       .max = P::kMaxLogprobs,
                       .has_sentinel = true,
                       .sentinel = -1,
                       .sentinel_meaning = "none",
                       .cli = CliUse::kOptIn}),
    key<&P::prompt_logprobs>({.name = "prompt_logprobs",
                              .help = "each prompt token's logprob (after the first) and the K most likely tokens'",
                              .value_name = "K",
                              .min = 0,
                              .max = P::kMaxLogprobs,
                              .has_sentinel = true,
                              .sentinel = -1,
                              .sentinel_meaning = "none",
                              .cli = CliUse::kOptIn}),
});

}  // namespace

std::span<const KeyRow<SamplingParams>> sampling_rows() { return kRows; }

std::span<const ConfigKey> sampling_keys() {
  static const std::vector<ConfigKey> keys = list_keys(sampling_rows());
  return keys;
}

SamplingParams SamplingParams::from_json(const nlohmann::json& j) {
  return read_object(sampling_rows(), j, kSamplingKeyKind);
}

nlohmann::ordered_json SamplingParams::to_json() const { return write_object(sampling_rows(), *this); }

void SamplingParams::validate() const {
  check_all(sampling_rows(), *this, kSamplingKeyKind);
  if (min_tokens > max_tokens) {
    throw ConfigKeyError(kSamplingKeyKind, "min_tokens",
                         "must be at most max_tokens (" + std::to_string(max_tokens) + "), got " +
                             std::to_string(min_tokens));
  }
}

}  // namespace minivllm
