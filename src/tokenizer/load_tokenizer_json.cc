// Hugging Face tokenizer.json: a BPE model over the byte-level alphabet, added tokens, an optional
// NFC normalizer, Split / ByteLevel / Digits pre-tokenizers and a TemplateProcessing
// post-processor. Anything else is refused with a message naming it, rather than mis-tokenized.
#include "common/check.h"
#include "tokenizer/loaders.h"
#include "tokenizer/string_map.h"
#include "tokenizer/regex.h"

namespace minivllm {
namespace {

using nlohmann::json;

// j[key] by reference, null when absent: json::value() would copy the member, recursively.
const json& member(const json& j, const char* key) {
  static const json null;
  auto it = j.find(key);
  return it == j.end() ? null : *it;
}

bool bool_or(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<bool>();
}

std::string string_or(const json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<std::string>();
}

void load_vocab(const json& model, const std::string& path, TokenizerSpec& spec, StringMap<int32_t>& ids) {
  const json& vocab = model.at("vocab");
  MINIVLLM_CHECK(vocab.is_object()) << path << ": model.vocab is not an object";
  MINIVLLM_CHECK(!vocab.empty()) << path << ": model.vocab is empty";
  for (const auto& [text, id_json] : vocab.items()) {
    const int32_t id = checked_vocab_id(id_json, vocab.size(), path, text);
    if (static_cast<size_t>(id) >= spec.vocab.size()) spec.vocab.resize(static_cast<size_t>(id) + 1);
    spec.vocab[id] = text;
    ids.emplace(text, id);
  }
}

void load_merges(const json& model, const std::string& path, const StringMap<int32_t>& ids, TokenizerSpec& spec) {
  const json& merges = model.at("merges");
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    std::string left, right;
    const json& m = merges[i];
    if (m.is_string()) {  // "a b"
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      MINIVLLM_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos)
          << path << ": merge #" << i << " '" << s << "' is not two tokens";
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else {  // ["a", "b"]
      MINIVLLM_CHECK(m.is_array() && m.size() == 2) << path << ": merge #" << i << " is not a pair";
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    }
    auto l = ids.find(left), r = ids.find(right);
    MINIVLLM_CHECK(l != ids.end() && r != ids.end())
        << path << ": merge #" << i << " '" << left << " " << right << "' names a token not in the vocabulary";
    spec.merges.emplace_back(l->second, r->second);
  }
}

// Sequences nest (each stage may be a Sequence); this deep is a broken file, refused before the
// recursion below could overflow the stack.
constexpr int kMaxSequenceDepth = 64;

void check_sequence_depth(int depth, const std::string& path, const char* what) {
  MINIVLLM_CHECK(depth <= kMaxSequenceDepth)
      << path << ": " << what << " Sequences nest more than " << kMaxSequenceDepth << " deep";
}

void load_normalizer(const json& n, const std::string& path, TokenizerSpec& spec, int depth = 0) {
  if (n.is_null()) return;
  check_sequence_depth(depth, path, "normalizer");
  const std::string type = n.at("type").get<std::string>();
  if (type == "NFC") {
    spec.nfc = true;
  } else if (type == "Sequence") {
    for (const json& sub : n.at("normalizers")) load_normalizer(sub, path, spec, depth + 1);
  } else {
    MINIVLLM_FAIL() << path << ": unsupported normalizer type '" << type << "'";
  }
}

SplitBehavior split_behavior(const std::string& b, const std::string& path) {
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  MINIVLLM_FAIL() << path << ": unsupported Split behavior '" << b << "'";
}

// Returns whether a ByteLevel stage was seen (the model is byte-level only then).
bool load_pre_tokenizer(const json& p, const std::string& path, TokenizerSpec& spec, int depth = 0) {
  if (p.is_null()) return false;
  check_sequence_depth(depth, path, "pre_tokenizer");
  const std::string type = p.at("type").get<std::string>();
  if (type == "Sequence") {
    bool byte_level = false;
    for (const json& sub : p.at("pretokenizers")) byte_level |= load_pre_tokenizer(sub, path, spec, depth + 1);
    return byte_level;
  }
  PreTokenizerStage stage;
  if (type == "ByteLevel") {
    if (bool_or(p, "use_regex", true)) stage.regex = kGpt2SplitRegex;
    stage.add_prefix_space = bool_or(p, "add_prefix_space", false);
    spec.pre_tokenizer.push_back(stage);
    return true;
  }
  if (type == "Split") {
    const json& pattern = p.at("pattern");
    if (pattern.contains("Regex")) {
      stage.regex = pattern.at("Regex").get<std::string>();
    } else {
      stage.regex = regex_escape(pattern.at("String").get<std::string>());
    }
    stage.behavior = split_behavior(p.at("behavior").get<std::string>(), path);
    stage.invert = bool_or(p, "invert", false);
  } else if (type == "Digits") {
    stage.regex = bool_or(p, "individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)";
  } else {
    MINIVLLM_FAIL() << path << ": unsupported pre_tokenizer type '" << type << "'";
  }
  spec.pre_tokenizer.push_back(stage);
  return false;
}

std::vector<int32_t> special_ids(const json& specials, const std::string& name, const std::string& path) {
  auto it = specials.find(name);
  MINIVLLM_CHECK(it != specials.end()) << path << ": post_processor uses undeclared special token '" << name << "'";
  std::vector<int32_t> ids;
  for (const json& id : it->at("ids")) ids.push_back(json_token_id(id, path, "post_processor special token '" + name + "'"));
  return ids;
}

void load_post_processor(const json& p, const std::string& path, TokenizerSpec& spec, int depth = 0) {
  if (p.is_null()) return;
  check_sequence_depth(depth, path, "post_processor");
  const std::string type = p.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const json& sub : p.at("processors")) load_post_processor(sub, path, spec, depth + 1);
  } else if (type == "ByteLevel") {
    // Only adjusts offsets.
  } else if (type == "TemplateProcessing") {
    bool after_text = false;
    for (const json& item : p.at("single")) {
      if (item.contains("Sequence")) {
        after_text = true;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      for (int32_t id : special_ids(p.at("special_tokens"), name, path)) {
        (after_text ? spec.suffix_ids : spec.prefix_ids).push_back(id);
      }
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    spec.prefix_ids.push_back(json_token_id(p.at("cls").at(1), path, "post_processor cls token"));
    spec.suffix_ids.push_back(json_token_id(p.at("sep").at(1), path, "post_processor sep token"));
  } else {
    MINIVLLM_FAIL() << path << ": unsupported post_processor type '" << type << "'";
  }
}

}  // namespace

TokenizerSpec load_tokenizer_json(const std::string& path) {
  const json j = parse_json_file(path);
  TokenizerSpec spec;
  spec.source = path;
  try {
    const json& model = j.at("model");
    const std::string type = string_or(model, "type", "BPE");
    MINIVLLM_CHECK(type == "BPE") << path << ": unsupported model type '" << type << "' (only BPE)";
    MINIVLLM_CHECK(string_or(model, "continuing_subword_prefix", "").empty() &&
                   string_or(model, "end_of_word_suffix", "").empty())
        << path << ": BPE with a subword prefix or word suffix is not supported";
    StringMap<int32_t> ids;
    load_vocab(model, path, spec, ids);
    load_merges(model, path, ids, spec);
    spec.ignore_merges = bool_or(model, "ignore_merges", false);
    const json& added = member(j, "added_tokens");
    MINIVLLM_CHECK(added.is_null() || added.is_array()) << path << ": added_tokens is not an array";
    for (const json& a : added) {  // null: no elements
      std::string content = a.at("content").get<std::string>();
      const int32_t id = json_token_id(a.at("id"), path, "added token '" + content + "'");
      spec.added_tokens.push_back({id, std::move(content), bool_or(a, "special", false)});
    }
    load_normalizer(member(j, "normalizer"), path, spec);
    const bool byte_level = load_pre_tokenizer(member(j, "pre_tokenizer"), path, spec);
    MINIVLLM_CHECK(byte_level) << path << ": only byte-level BPE is supported (no ByteLevel pre_tokenizer)";
    load_post_processor(member(j, "post_processor"), path, spec);
    if (!spec.prefix_ids.empty()) spec.bos_id = spec.prefix_ids.front();
  } catch (const nlohmann::json::exception& e) {
    MINIVLLM_FAIL() << "malformed tokenizer file " << path << ": " << e.what();
  }
  return spec;
}

}  // namespace minivllm
