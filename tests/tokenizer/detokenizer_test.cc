// IncrementalDetokenizer: pushed one id at a time, it must print exactly the full decode, in
// whole characters only, for the reference texts (CJK, emoji split over several tokens, ...).
#include <gtest/gtest.h>

#include "common/check.h"
#include "golden_data.h"

namespace minivllm::test {
namespace {

// A strict UTF-8 check written independently of the tokenizer's own scanner.
bool is_valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) { n = 1; cp = c; }
    else if ((c & 0xE0) == 0xC0) { n = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 4; cp = c & 0x07; }
    else return false;
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

std::string stream(const Tokenizer& t, const std::vector<int32_t>& ids, bool skip_special,
                   std::vector<std::string>* chunks = nullptr) {
  IncrementalDetokenizer detok(t, skip_special);
  std::string all;
  for (int32_t id : ids) {
    const std::string piece = detok.push(id);
    EXPECT_TRUE(is_valid_utf8(piece)) << "after id " << id;
    if (chunks) chunks->push_back(piece);
    all += piece;
  }
  const std::string rest = detok.flush();
  EXPECT_TRUE(is_valid_utf8(rest));
  return all + rest;
}

TEST(IncrementalDetokenizer, MatchesFullDecodeOnAllReferenceTexts) {
  for (const char* model : {"qwen3", "llama32"}) {
    const Tokenizer& t = std::string(model) == "qwen3" ? qwen3() : llama();
    for (size_t i = 0; i < goldens().at("texts").size(); ++i) {
      const std::string expected = goldens().at(model).at("decoded").at(i).get<std::string>();
      EXPECT_EQ(stream(t, golden_ids(model, "ids", i), false), expected) << model << " text #" << i;
      const std::vector<int32_t> with_special = golden_ids(model, "ids_with_special", i);
      EXPECT_EQ(stream(t, with_special, true), t.decode(with_special, true)) << model << " text #" << i;
    }
  }
}

TEST(IncrementalDetokenizer, HoldsBackSplitCharacters) {
  // Llama spells 🤖 (F0 9F A4 96) with three tokens; the character appears only with the last.
  const std::vector<int32_t> robot = {9468, 97, 244};
  ASSERT_EQ(llama().decode(robot), "\xF0\x9F\xA4\x96");
  std::vector<std::string> chunks;
  EXPECT_EQ(stream(llama(), {9468, 97, 244, 9468, 97, 244}, false, &chunks), "\xF0\x9F\xA4\x96\xF0\x9F\xA4\x96");
  EXPECT_EQ(chunks, (std::vector<std::string>{"", "", "\xF0\x9F\xA4\x96", "", "", "\xF0\x9F\xA4\x96"}));
  // CJK from Qwen: every chunk is whole characters, and each character comes once.
  const std::vector<int32_t> cjk = golden_ids("qwen3", "ids", 22);
  chunks.clear();
  EXPECT_EQ(stream(qwen3(), cjk, false, &chunks), "你好，世界！今天天气很好。");
}

TEST(IncrementalDetokenizer, RowsBeyondTheTokenizerAreNoText) {
  // Qwen3's embedding has 151,936 rows for 151,669 tokens; dummy weights sample the extra rows (the
  // H200 serving benchmark failed every request on them). They add no text and break no character.
  const int32_t beyond = static_cast<int32_t>(qwen3().vocab_size()) + 5;
  EXPECT_FALSE(qwen3().has_piece(beyond));
  EXPECT_FALSE(qwen3().has_piece(-1));
  EXPECT_TRUE(qwen3().has_piece(9707));
  const std::vector<int32_t> cjk = golden_ids("qwen3", "ids", 22);
  std::vector<int32_t> with_gaps;
  for (int32_t id : cjk) {
    with_gaps.push_back(id);
    with_gaps.push_back(beyond);
  }
  EXPECT_EQ(stream(qwen3(), with_gaps, false), "你好，世界！今天天气很好。");
  // A negative id is no row of any model: still an error.
  IncrementalDetokenizer detok(qwen3(), false);
  EXPECT_THROW(detok.push(-1), Error);
}

TEST(IncrementalDetokenizer, BrokenSequencesBecomeReplacementCharsLikeDecode) {
  // F0 9F A4 then "Hello": the cut character is one U+FFFD, as HF's from_utf8_lossy makes it.
  const std::vector<int32_t> ids = {9468, 97, 9906};
  EXPECT_EQ(llama().decode(ids), "\xEF\xBF\xBDHello");
  EXPECT_EQ(stream(llama(), ids, false), "\xEF\xBF\xBDHello");
  // A truncated character at the very end: held back by push, released by flush.
  IncrementalDetokenizer detok(llama());
  EXPECT_EQ(detok.push(9468), "");
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(llama().decode({9468}), "\xEF\xBF\xBD");
}

TEST(IncrementalDetokenizer, SkipsSpecialTokens) {
  IncrementalDetokenizer detok(llama(), /*skip_special_tokens=*/true);
  EXPECT_EQ(detok.push(128000), "");
  EXPECT_EQ(detok.push(9906), "Hello");
  EXPECT_EQ(detok.push(128009), "");
  IncrementalDetokenizer keep(llama());
  EXPECT_EQ(keep.push(128009), "<|eot_id|>");
}

}  // namespace
}  // namespace minivllm::test
