// tiktoken rank files (Meta's original/tokenizer.model): "base64(token bytes) rank" per line,
// with Llama 3's conventions: its split regex, 256 special tokens after the last rank, BOS added.
#include <sstream>

#include "common/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/loaders.h"

namespace minivllm {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::optional<std::string> base64_decode(std::string_view s) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    const int v = base64_value(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

// Meta's Llama 3.1+ special tokens, in id order after the ranks; the rest are reserved.
std::vector<std::string> llama3_special_tokens(int count) {
  std::vector<std::string> names = {"<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                                    "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>",
                                    "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
                                    "<|eom_id|>", "<|eot_id|>", "<|python_tag|>"};
  for (int i = 3; static_cast<int>(names.size()) < count; ++i) {
    names.push_back("<|reserved_special_token_" + std::to_string(i) + "|>");
  }
  return names;
}

}  // namespace

TokenizerSpec load_tiktoken(const std::string& path) {
  TokenizerSpec spec;
  spec.source = path;
  std::istringstream in(read_file(path));
  std::string line;
  for (size_t line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    MINIVLLM_CHECK(space != std::string::npos) << path << ":" << line_no << ": expected 'base64 rank'";
    const std::optional<std::string> bytes = base64_decode(std::string_view(line).substr(0, space));
    MINIVLLM_CHECK(bytes && !bytes->empty()) << path << ":" << line_no << ": bad base64 '" << line.substr(0, space) << "'";
    size_t used = 0;
    long rank = -1;
    try {
      rank = std::stol(line.substr(space + 1), &used);
    } catch (const std::exception&) {
    }
    MINIVLLM_CHECK(rank >= 0 && used == line.size() - space - 1) << path << ":" << line_no << ": bad rank";
    MINIVLLM_CHECK_EQ(static_cast<size_t>(rank), spec.vocab.size()) << path << ":" << line_no << ": ranks must be 0, 1, 2, ...";
    spec.vocab.push_back(byte_level::encode(*bytes));
  }
  MINIVLLM_CHECK(spec.vocab.size() >= 256) << path << ": only " << spec.vocab.size() << " ranks; not a tiktoken file";
  spec.merges_from_ranks = true;
  spec.ignore_merges = true;
  spec.pre_tokenizer.push_back({kLlama3SplitRegex, SplitBehavior::kIsolated, false, false});
  const auto first = static_cast<int32_t>(spec.vocab.size());
  const std::vector<std::string> names = llama3_special_tokens(256);
  for (size_t i = 0; i < names.size(); ++i) spec.added_tokens.push_back({first + static_cast<int32_t>(i), names[i], true});
  spec.bos_id = first;      // <|begin_of_text|>
  spec.eos_id = first + 1;  // <|end_of_text|>, as Meta's tokenizer.py; tokenizer_config.json may say otherwise
  spec.prefix_ids = {spec.bos_id};
  return spec;
}

}  // namespace minivllm
