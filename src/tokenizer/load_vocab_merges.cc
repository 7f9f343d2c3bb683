// vocab.json + merges.txt (+ tokenizer_config.json), the "slow" GPT-2/Qwen2 tokenizer files.
// They do not say which split regex or normalizer to use: Qwen2's (and NFC) unless the config
// names a GPT-2 tokenizer class.
#include <sstream>

#include "common/check.h"
#include "tokenizer/loaders.h"
#include "tokenizer/string_map.h"

namespace minivllm {
namespace {

bool is_gpt2_class(const std::string& config_path) {
  if (config_path.empty()) return false;
  const nlohmann::json config = parse_json_file(config_path);
  auto it = config.find("tokenizer_class");
  return it != config.end() && it->is_string() && it->get<std::string>().rfind("GPT2", 0) == 0;
}

}  // namespace

TokenizerSpec load_vocab_merges(const std::string& vocab_json, const std::string& merges_txt,
                                const std::string& tokenizer_config_json) {
  TokenizerSpec spec;
  spec.source = vocab_json;
  StringMap<int32_t> ids;
  const nlohmann::json vocab = parse_json_file(vocab_json);
  MINIVLLM_CHECK(vocab.is_object() && !vocab.empty()) << vocab_json << ": not an object of token -> id";
  try {
    for (const auto& [text, id_json] : vocab.items()) {
      const int32_t id = checked_vocab_id(id_json, vocab.size(), vocab_json, text);
      if (static_cast<size_t>(id) >= spec.vocab.size()) spec.vocab.resize(static_cast<size_t>(id) + 1);
      spec.vocab[id] = text;
      ids.emplace(text, static_cast<int32_t>(id));
    }
  } catch (const nlohmann::json::exception& e) {
    MINIVLLM_FAIL() << "malformed tokenizer file " << vocab_json << ": " << e.what();
  }

  std::istringstream merges(read_file(merges_txt));
  std::string line;
  for (size_t line_no = 1; std::getline(merges, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (line_no == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    MINIVLLM_CHECK(space != std::string::npos && line.find(' ', space + 1) == std::string::npos)
        << merges_txt << ":" << line_no << ": '" << line << "' is not two tokens";
    auto l = ids.find(std::string_view(line).substr(0, space));
    auto r = ids.find(std::string_view(line).substr(space + 1));
    MINIVLLM_CHECK(l != ids.end() && r != ids.end())
        << merges_txt << ":" << line_no << ": '" << line << "' names a token not in " << vocab_json;
    spec.merges.emplace_back(l->second, r->second);
  }

  const bool gpt2 = is_gpt2_class(tokenizer_config_json);
  spec.pre_tokenizer.push_back({gpt2 ? kGpt2SplitRegex : kQwen2SplitRegex, SplitBehavior::kIsolated, false, false});
  spec.nfc = !gpt2;
  if (!tokenizer_config_json.empty()) apply_tokenizer_config(tokenizer_config_json, /*full=*/true, spec);
  return spec;
}

}  // namespace minivllm
