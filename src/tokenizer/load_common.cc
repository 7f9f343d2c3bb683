// Helpers shared by the loaders: reading files with errors that name them, the split regexes,
// and tokenizer_config.json (bos/eos and, for vocab.json + merges.txt, added tokens).
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/check.h"
#include "tokenizer/loaders.h"

namespace minivllm {

const char* const kGpt2SplitRegex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2SplitRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MINIVLLM_CHECK(in.good()) << "cannot open tokenizer file " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  MINIVLLM_CHECK(!in.bad()) << "cannot read tokenizer file " << path;
  return ss.str();
}

nlohmann::json parse_json_file(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    MINIVLLM_FAIL() << "malformed JSON in tokenizer file " << path << ": " << e.what();
  }
}

int32_t json_token_id(const nlohmann::json& j, const std::string& path, const std::string& what) {
  const bool in_range = (j.is_number_unsigned() && j.get<uint64_t>() <= INT32_MAX) ||
                        (j.is_number_integer() && j.get<int64_t>() >= 0 && j.get<int64_t>() <= INT32_MAX);
  MINIVLLM_CHECK(in_range) << path << ": " << what << " has id "
                           << (j.is_primitive() && !j.is_string() ? j.dump() : std::string(j.type_name()))
                           << ", not a token id (an integer from 0 to 2^31 - 1)";
  return static_cast<int32_t>(j.get<int64_t>());
}

int32_t checked_vocab_id(const nlohmann::json& j, size_t entries, const std::string& path, const std::string& token) {
  const int32_t id = json_token_id(j, path, "token '" + token + "'");
  MINIVLLM_CHECK(static_cast<size_t>(id) < entries + kTokenIdSlack)
      << path << ": token '" << token << "' has id " << id << ", far beyond the " << entries
      << " entries of the vocabulary";
  return id;
}

std::optional<int32_t> find_token(const TokenizerSpec& spec, const std::string& text) {
  for (const AddedTokenSpec& a : spec.added_tokens) {
    if (a.content == text) return a.id;
  }
  for (size_t id = 0; id < spec.vocab.size(); ++id) {
    if (spec.vocab[id] == text) return static_cast<int32_t>(id);
  }
  return std::nullopt;
}

namespace {

// bos_token / eos_token: a string, {"content": ...}, or null.
std::optional<std::string> token_field(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content")) return it->at("content").get<std::string>();
  return std::nullopt;
}

bool bool_field(const nlohmann::json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<bool>();
}

void apply_added_tokens_decoder(const nlohmann::json& config, const std::string& path, TokenizerSpec& spec) {
  auto it = config.find("added_tokens_decoder");
  if (it == config.end()) return;
  for (const auto& [id_text, tok] : it->items()) {
    size_t used = 0;
    long long parsed = -1;
    try {
      parsed = std::stoll(id_text, &used);
    } catch (const std::exception&) {
    }
    MINIVLLM_CHECK(used == id_text.size() && parsed >= 0 && parsed <= INT32_MAX)
        << path << ": added_tokens_decoder key '" << id_text << "' is not a token id";
    const auto id = static_cast<int32_t>(parsed);
    bool known = false;
    for (const AddedTokenSpec& a : spec.added_tokens) known |= a.id == id;
    if (known) continue;
    spec.added_tokens.push_back({id, tok.at("content").get<std::string>(), bool_field(tok, "special", false)});
  }
}

}  // namespace

void apply_tokenizer_config(const std::string& path, bool full, TokenizerSpec& spec) {
  const nlohmann::json config = parse_json_file(path);
  try {
    if (full) apply_added_tokens_decoder(config, path, spec);
    for (const char* key : {"bos_token", "eos_token"}) {
      const std::optional<std::string> text = token_field(config, key);
      if (!text) continue;
      const std::optional<int32_t> id = find_token(spec, *text);
      MINIVLLM_CHECK(id.has_value()) << path << ": " << key << " '" << *text << "' is not in the vocabulary";
      (std::string(key) == "bos_token" ? spec.bos_id : spec.eos_id) = *id;
    }
    if (full) {
      if (bool_field(config, "add_bos_token", false) && spec.bos_id >= 0) spec.prefix_ids = {spec.bos_id};
      if (bool_field(config, "add_eos_token", false) && spec.eos_id >= 0) spec.suffix_ids = {spec.eos_id};
    }
  } catch (const nlohmann::json::exception& e) {
    MINIVLLM_FAIL() << "malformed tokenizer config " << path << ": " << e.what();
  }
}

}  // namespace minivllm
