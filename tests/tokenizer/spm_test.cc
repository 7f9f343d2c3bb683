// SentencePiece BPE from GGUF vocabularies: a hand-made vocabulary whose results are worked out
// by hand below, and the real 512-piece vocabulary of stories260K.gguf checked against ids from
// llama2.c's encoder (run.c), the tokenizer this model was trained with.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/check.h"
#include "loader/gguf.h"
#include "tokenizer/tokenizer.h"

namespace minivllm {
namespace {

// 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then pieces with scores.
VocabData tiny_vocab(bool byte_tokens = true) {
  VocabData v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>"};
  v.token_types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    v.tokens.push_back(byte_tokens ? name : "<unused" + std::to_string(b) + ">");
    v.token_types.push_back(byte_tokens ? 6 : 5);
  }
  v.scores.assign(v.tokens.size(), 0.0f);
  const std::vector<std::pair<std::string, float>> pieces = {
      {"\xE2\x96\x81", -1.0f},         // 259 ▁
      {"a", -2.0f},                    // 260
      {"b", -3.0f},                    // 261
      {"c", -4.0f},                    // 262
      {"ab", -0.5f},                   // 263
      {"\xE2\x96\x81" "a", -0.7f},     // 264 ▁a
      {"bc", -0.2f},                   // 265
      {"\xE2\x96\x81" "ab", -0.1f},    // 266 ▁ab
      {"abc", -0.05f},                 // 267
  };
  for (const auto& [p, s] : pieces) {
    v.tokens.push_back(p);
    v.scores.push_back(s);
    v.token_types.push_back(1);
  }
  v.bos_token_id = 1;
  v.eos_token_id = 2;
  v.unknown_token_id = 0;
  v.add_bos_token = true;
  v.add_space_prefix = true;
  return v;
}

TEST(SentencePieceBpe, MergesHighestScoreFirst) {
  const auto t = Tokenizer::from_vocab_data(tiny_vocab());
  // "▁abc": bc (-0.2) beats ab (-0.5) and ▁a (-0.7); then a+bc = abc (-0.05); "▁abc" is no piece.
  EXPECT_EQ(t->encode("abc", false), (std::vector<int32_t>{259, 267}));
  // "▁ab▁ab": ab (leftmost of two equal scores), ▁ab, ab, ▁ab.
  EXPECT_EQ(t->encode("ab ab", false), (std::vector<int32_t>{266, 266}));
  EXPECT_EQ(t->encode("ab ab", true), (std::vector<int32_t>{1, 266, 266}));
  EXPECT_EQ(t->encode("", true), (std::vector<int32_t>{1}));
  EXPECT_EQ(t->bos_token_id(), 1);
  EXPECT_EQ(t->eos_token(), "</s>");
}

TEST(SentencePieceBpe, ByteFallbackAndUnknown) {
  const auto t = Tokenizer::from_vocab_data(tiny_vocab());
  // é (C3 A9) is no piece: byte tokens 3 + 0xC3, 3 + 0xA9.
  EXPECT_EQ(t->encode("a\xC3\xA9", false), (std::vector<int32_t>{264, 198, 172}));
  const auto no_bytes = Tokenizer::from_vocab_data(tiny_vocab(/*byte_tokens=*/false));
  EXPECT_EQ(no_bytes->encode("a\xC3\xA9", false), (std::vector<int32_t>{264, 0}));
}

TEST(SentencePieceBpe, SpecialTokensInTextAndSpacePrefix) {
  const auto t = Tokenizer::from_vocab_data(tiny_vocab());
  // A space prefix at the start of the text and after each special token (llama.cpp).
  EXPECT_EQ(t->encode("<s>a</s>", false), (std::vector<int32_t>{1, 264, 2}));
  VocabData v = tiny_vocab();
  v.add_space_prefix = false;
  EXPECT_EQ(Tokenizer::from_vocab_data(v)->encode("abc", false), (std::vector<int32_t>{267}));
}

TEST(SentencePieceBpe, DecodeDropsTheAddedSpace) {
  const auto t = Tokenizer::from_vocab_data(tiny_vocab());
  EXPECT_EQ(t->decode({266, 266}), "ab ab");
  EXPECT_EQ(t->decode({1, 264, 198, 172}, /*skip_special_tokens=*/true), "a\xC3\xA9");
  EXPECT_EQ(t->decode({1, 264, 198, 172}), "<s> a\xC3\xA9");
  IncrementalDetokenizer detok(*t, true);
  EXPECT_EQ(detok.push(1), "");
  EXPECT_EQ(detok.push(264), "a");
  EXPECT_EQ(detok.push(198), "");
  EXPECT_EQ(detok.push(172), "\xC3\xA9");
  EXPECT_EQ(detok.flush(), "");
}

TEST(SentencePieceBpe, Stories260kMatchesLlama2cEncoder) {
  const GgufFile file(std::string(MINIVLLM_SHARED_DIR) + "/models/stories260K/stories260K.gguf");
  const auto t = Tokenizer::from_vocab_data(read_gguf_vocab(file));
  EXPECT_EQ(t->vocab_size(), 512);
  EXPECT_EQ(t->bos_token_id(), 1);
  EXPECT_EQ(t->eos_token_id(), 2);
  // Reference ids from llama2.c's encode() (dummy prefix, best-score merges, byte fallback +3).
  const std::string story = "Once upon a time, there was a little girl named Lily.";
  EXPECT_EQ(t->encode(story, true),
            (std::vector<int32_t>{1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426}));
  EXPECT_EQ(t->encode("Hello  world", false), (std::vector<int32_t>{346, 306, 414, 410, 263, 304, 341}));
  const std::string mixed = "Lily's caf\xC3\xA9 \xF0\x9F\x98\x80!";
  EXPECT_EQ(t->encode(mixed, false),
            (std::vector<int32_t>{317, 439, 419, 280, 412, 431, 485, 410, 243, 162, 155, 131, 443}));
  EXPECT_EQ(t->decode(t->encode(story, true), true), story);
  EXPECT_EQ(t->decode(t->encode(mixed, false)), mixed);
}

}  // namespace
}  // namespace minivllm
