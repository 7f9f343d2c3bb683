// Tokenizer: added-token split -> NFC -> pre-tokenizer -> BPE, and decode by concatenating each
// id's bytes. The loaders (load_*.cc) turn files into a TokenizerSpec; this file owns the rest.
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "common/check.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/nfc.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/spm_model.h"
#include "tokenizer/tokenizer_spec.h"
#include "common/utf8.h"

namespace minivllm {

struct Tokenizer::Impl {
  TokenizerSpec spec;
  std::vector<std::string> token_text;  // id -> as the vocabulary spells it ("" for no token)
  std::vector<std::string> bytes;       // id -> what decode writes
  std::vector<uint8_t> special;
  std::vector<uint8_t> present;
  StringMap<int32_t> text_to_id;
  std::unique_ptr<BpeModel> bpe;
  std::unique_ptr<SentencePieceModel> spm;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<AddedTokenMatcher> added;
  bool strip_leading_space = false;  // SentencePiece decode drops the space its encode added

  void encode_plain(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
};

namespace {

// What a model token decodes to.
std::string model_token_bytes(const TokenizerSpec& spec, const std::string& text) {
  if (spec.model == TokenizerModel::kByteLevelBpe) {
    // A token outside the byte alphabet stands for its own UTF-8, as HF's ByteLevel decoder does.
    std::optional<std::string> raw = byte_level::decode(text);
    return raw ? *raw : text;
  }
  const int b = SentencePieceModel::byte_of_piece(text);
  if (b >= 0) return std::string(1, static_cast<char>(b));
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 3, "\xE2\x96\x81") == 0) {  // "▁"
      out.push_back(' ');
      i += 3;
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer(TokenizerSpec spec) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.spec = std::move(spec);
  const TokenizerSpec& s = m.spec;
  MINIVLLM_CHECK(std::any_of(s.vocab.begin(), s.vocab.end(), [](const std::string& t) { return !t.empty(); }))
      << s.source << ": the vocabulary is empty";
  // Added tokens follow the vocabulary (possibly after a gap); an id far beyond it is a broken
  // file, and would make every id-indexed table below that large.
  const size_t id_limit = s.vocab.size() + s.added_tokens.size() + kTokenIdSlack;
  size_t n = s.vocab.size();
  for (const AddedTokenSpec& a : s.added_tokens) {
    MINIVLLM_CHECK(a.id >= 0) << s.source << ": added token '" << a.content << "' has a negative id";
    MINIVLLM_CHECK(static_cast<size_t>(a.id) < id_limit)
        << s.source << ": added token '" << a.content << "' has id " << a.id << ", far outside the vocabulary of "
        << s.vocab.size() << " tokens and " << s.added_tokens.size() << " added tokens (ids below " << id_limit
        << " are accepted)";
    n = std::max(n, static_cast<size_t>(a.id) + 1);
  }
  m.token_text.assign(n, "");
  m.bytes.assign(n, "");
  m.special.assign(n, 0);
  m.present.assign(n, 0);
  std::vector<std::string> model_bytes(s.vocab.size());
  for (size_t id = 0; id < s.vocab.size(); ++id) {
    if (s.vocab[id].empty()) continue;
    m.token_text[id] = s.vocab[id];
    m.bytes[id] = model_token_bytes(s, s.vocab[id]);
    m.present[id] = 1;
    if (s.model == TokenizerModel::kByteLevelBpe) model_bytes[id] = m.bytes[id];
    m.text_to_id.emplace(s.vocab[id], static_cast<int32_t>(id));
  }
  for (const AddedTokenSpec& a : s.added_tokens) {
    // An added token is written as itself, never through the byte alphabet; it is not a target
    // of BPE merges either.
    m.token_text[a.id] = a.content;
    m.bytes[a.id] = a.content;
    m.special[a.id] = a.special;
    m.present[a.id] = 1;
    if (static_cast<size_t>(a.id) < model_bytes.size()) model_bytes[a.id].clear();
    m.text_to_id[a.content] = a.id;
  }
  if (s.model == TokenizerModel::kByteLevelBpe) {
    m.bpe = std::make_unique<BpeModel>(model_bytes, s.merges, s.merges_from_ranks, s.ignore_merges, s.source);
  } else {
    std::vector<std::string> pieces = s.vocab;
    for (const AddedTokenSpec& a : s.added_tokens) {
      if (static_cast<size_t>(a.id) < pieces.size() && a.special) pieces[a.id].clear();
    }
    m.spm = std::make_unique<SentencePieceModel>(pieces, s.scores, s.unk_id);
    m.strip_leading_space = s.add_space_prefix;
  }
  m.pre_tokenizer = std::make_unique<PreTokenizer>(s.pre_tokenizer);
  m.added = std::make_unique<AddedTokenMatcher>(s.added_tokens);
  for (int32_t id : s.prefix_ids) check_id(id);
  for (int32_t id : s.suffix_ids) check_id(id);
}

Tokenizer::~Tokenizer() = default;

void Tokenizer::Impl::encode_plain(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  if (spm) {
    // llama.cpp: a space before the first piece of text, and after each special token.
    std::string escaped = spec.add_space_prefix && at_start ? "\xE2\x96\x81" : "";
    for (char c : text) {
      if (c == ' ') {
        escaped += "\xE2\x96\x81";
      } else {
        escaped.push_back(c);
      }
    }
    spm->encode(escaped, out);
    return;
  }
  std::string normalized;
  if (spec.nfc && !is_trivially_nfc(text)) {
    normalized = nfc_normalize(text);
    text = normalized;
  }
  pre_tokenizer->split(text, [&](std::string_view piece) { bpe->encode_word(piece, out); });
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const size_t bad = utf8::first_invalid(text);
  MINIVLLM_CHECK(bad == std::string_view::npos)
      << "invalid UTF-8 in the text to encode at byte offset " << bad << " (byte 0x" << std::hex
      << static_cast<int>(static_cast<unsigned char>(text[bad])) << std::dec << ")";
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special_tokens) out.insert(out.end(), m.spec.prefix_ids.begin(), m.spec.prefix_ids.end());
  size_t pos = 0;
  bool at_start = true;  // no text yet, or an added token just before
  while (pos < text.size()) {
    const AddedTokenMatcher::Match match = m.added->find(text, pos);
    const size_t plain_end = match.id >= 0 ? match.begin : text.size();
    if (plain_end > pos) {
      m.encode_plain(text.substr(pos, plain_end - pos), at_start, out);
      at_start = false;
    }
    if (match.id < 0) break;
    out.push_back(match.id);
    at_start = true;
    pos = match.begin + match.len;
  }
  if (add_special_tokens) out.insert(out.end(), m.spec.suffix_ids.begin(), m.spec.suffix_ids.end());
  return out;
}

void Tokenizer::check_id(int32_t id) const {
  MINIVLLM_CHECK(has_piece(id)) << "token id " << id << " is outside the vocabulary of " << impl_->spec.source
                                << " (size " << impl_->present.size() << ")";
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string raw;
  for (int32_t id : ids) {
    check_id(id);
    if (skip_special_tokens && impl_->special[id]) continue;
    raw += impl_->bytes[id];
  }
  std::string_view view = raw;
  if (impl_->strip_leading_space && !view.empty() && view.front() == ' ') view.remove_prefix(1);
  std::string out;
  out.reserve(view.size());
  utf8::append_lossy(view, true, out);
  return out;
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->present.size()); }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->text_to_id.find(token);
  if (it == impl_->text_to_id.end()) return std::nullopt;
  return it->second;
}

std::string Tokenizer::id_to_token(int32_t id) const {
  check_id(id);
  return impl_->token_text[id];
}

bool Tokenizer::is_special(int32_t id) const {
  check_id(id);
  return impl_->special[id];
}

bool Tokenizer::has_piece(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->present.size() && impl_->present[id];
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  check_id(id);
  return impl_->bytes[id];
}

bool Tokenizer::strips_leading_space() const { return impl_->strip_leading_space; }

int32_t Tokenizer::bos_token_id() const { return impl_->spec.bos_id; }
int32_t Tokenizer::eos_token_id() const { return impl_->spec.eos_id; }
std::string Tokenizer::bos_token() const { return bos_token_id() >= 0 ? id_to_token(bos_token_id()) : ""; }
std::string Tokenizer::eos_token() const { return eos_token_id() >= 0 ? id_to_token(eos_token_id()) : ""; }

}  // namespace minivllm
