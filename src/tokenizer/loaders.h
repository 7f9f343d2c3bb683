// File formats -> TokenizerSpec. Each loader names the file in every error it raises.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/vocab_data.h"
#include "tokenizer/tokenizer_spec.h"

namespace minivllm {

// The split regexes the supported families use (PCRE2 syntax).
extern const char* const kGpt2SplitRegex;
extern const char* const kLlama3SplitRegex;
extern const char* const kQwen2SplitRegex;

TokenizerSpec load_tokenizer_json(const std::string& path);
TokenizerSpec load_vocab_merges(const std::string& vocab_json, const std::string& merges_txt,
                                const std::string& tokenizer_config_json);
TokenizerSpec load_tiktoken(const std::string& path);
TokenizerSpec spec_from_vocab_data(const VocabData& v);

// tokenizer_config.json: bos_token / eos_token always; with `full`, also added_tokens_decoder and
// add_bos_token / add_eos_token (the slow-tokenizer files carry them nowhere else).
void apply_tokenizer_config(const std::string& path, bool full, TokenizerSpec& spec);

// Shared helpers.
std::string read_file(const std::string& path);  // throws naming the file
nlohmann::json parse_json_file(const std::string& path);
bool file_exists(const std::string& path);
// A token id in a JSON file: an integer in [0, 2^31); otherwise throws naming `path` and `what`.
int32_t json_token_id(const nlohmann::json& j, const std::string& path, const std::string& what);
// A vocabulary id (`entries` ids in all): refused when it lies kTokenIdSlack or more beyond them.
int32_t checked_vocab_id(const nlohmann::json& j, size_t entries, const std::string& path, const std::string& token);
std::optional<int32_t> find_token(const TokenizerSpec& spec, const std::string& text);

}  // namespace minivllm
