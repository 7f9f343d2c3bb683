// Streaming detokenization: bytes accumulate until they end on a character boundary, so each
// push returns only whole characters; invalid sequences become U+FFFD exactly where the full
// decode would put them.
#include "tokenizer/tokenizer.h"
#include "common/utf8.h"

namespace minivllm {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(tok), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  // The model sampled a row the tokenizer has no piece for: no text, as HF's decode gives none.
  // (The sampler only picks ids of the model's vocabulary, so this is not a user's bad id.)
  if (id >= 0 && !tok_.has_piece(id)) return "";
  std::string_view bytes = tok_.token_bytes(id);
  if (skip_special_tokens_ && tok_.is_special(id)) return "";
  if (!started_ && !bytes.empty()) {
    started_ = true;
    if (tok_.strips_leading_space() && bytes.front() == ' ') bytes.remove_prefix(1);
  }
  pending_ += bytes;
  std::string out;
  const size_t used = utf8::append_lossy(pending_, false, out);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  utf8::append_lossy(pending_, true, out);
  pending_.clear();
  return out;
}

}  // namespace minivllm
