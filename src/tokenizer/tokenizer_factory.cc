// The Tokenizer::from_* entry points: pick the loader, then read tokenizer_config.json beside the
// files for bos/eos (HF keeps them there, not in tokenizer.json).
#include <filesystem>

#include "common/check.h"
#include "tokenizer/loaders.h"
#include "tokenizer/tokenizer.h"

namespace minivllm {
namespace {

std::string sibling(const std::string& path, const char* name) {
  return (std::filesystem::path(path).parent_path() / name).string();
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_tokenizer_json(const std::string& path) {
  TokenizerSpec spec = load_tokenizer_json(path);
  const std::string config = sibling(path, "tokenizer_config.json");
  if (file_exists(config)) apply_tokenizer_config(config, /*full=*/false, spec);
  return std::make_unique<Tokenizer>(std::move(spec));
}

std::unique_ptr<Tokenizer> Tokenizer::from_vocab_merges(const std::string& vocab_json, const std::string& merges_txt,
                                                        const std::string& tokenizer_config_json) {
  return std::make_unique<Tokenizer>(load_vocab_merges(vocab_json, merges_txt, tokenizer_config_json));
}

std::unique_ptr<Tokenizer> Tokenizer::from_tiktoken(const std::string& path) {
  return std::make_unique<Tokenizer>(load_tiktoken(path));
}

std::unique_ptr<Tokenizer> Tokenizer::from_vocab_data(const VocabData& v) {
  return std::make_unique<Tokenizer>(spec_from_vocab_data(v));
}

std::unique_ptr<Tokenizer> Tokenizer::from_dir(const std::string& dir) {
  const std::filesystem::path d(dir);
  const std::string config = (d / "tokenizer_config.json").string();
  if (file_exists((d / "tokenizer.json").string())) return from_tokenizer_json((d / "tokenizer.json").string());
  if (file_exists((d / "vocab.json").string()) && file_exists((d / "merges.txt").string())) {
    return from_vocab_merges((d / "vocab.json").string(), (d / "merges.txt").string(),
                             file_exists(config) ? config : "");
  }
  const std::string tiktoken = (d / "original" / "tokenizer.model").string();
  MINIVLLM_CHECK(file_exists(tiktoken)) << "no tokenizer in " << dir
                                        << ": expected tokenizer.json, vocab.json + merges.txt, or original/tokenizer.model";
  TokenizerSpec spec = load_tiktoken(tiktoken);
  if (file_exists(config)) apply_tokenizer_config(config, /*full=*/false, spec);
  return std::make_unique<Tokenizer>(std::move(spec));
}

}  // namespace minivllm
