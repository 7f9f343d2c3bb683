// Inputs at the edges: files whose ids or nesting would blow up memory or the stack are refused
// with a message naming the id or the file; valid text with very long runs still tokenizes.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/check.h"
#include "golden_data.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/loaders.h"
#include "tokenizer/pre_tokenizer.h"

namespace minivllm::test {
namespace {

std::string scratch_file(const std::string& name, const std::string& content) {
  const std::string dir = std::string(MINIVLLM_BINARY_DIR) + "/tokenizer_test_limits";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

// A byte-level tokenizer.json with `vocab` (a JSON object) and `added` (a JSON array).
std::string tokenizer_json(const std::string& vocab, const std::string& added = "[]",
                           const std::string& normalizer = "null") {
  return R"({"model": {"type": "BPE", "vocab": )" + vocab + R"(, "merges": []}, "added_tokens": )" + added +
         R"(, "normalizer": )" + normalizer + R"(, "pre_tokenizer": {"type": "ByteLevel"}})";
}

TEST(TokenizerLimits, EmptyVocabularyIsAnError) {
  const std::string path = scratch_file("empty_vocab.json", tokenizer_json("{}"));
  const std::string msg = error_of([&] { Tokenizer::from_tokenizer_json(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("empty"), std::string::npos) << msg;
  // Only added tokens, no model vocabulary: still nothing to encode plain text with.
  const std::string only_added = scratch_file(
      "only_added.json", tokenizer_json("{}", R"([{"id": 0, "content": "<s>", "special": true}])"));
  EXPECT_NE(error_of([&] { Tokenizer::from_tokenizer_json(only_added); }).find("empty"), std::string::npos);
}

TEST(TokenizerLimits, AddedTokenFarOutsideTheVocabularyIsRefusedQuickly) {
  const auto start = std::chrono::steady_clock::now();
  const std::string path = scratch_file(
      "far_added.json", tokenizer_json(R"({"a": 0, "b": 1})", R"([{"id": 200000000, "content": "<x>"}])"));
  const std::string msg = error_of([&] { Tokenizer::from_tokenizer_json(path); });
  EXPECT_NE(msg.find("200000000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("<x>"), std::string::npos) << msg;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  // Just after the vocabulary (or a little gap) is how real files are laid out, and fine.
  const std::string near = scratch_file(
      "near_added.json", tokenizer_json(R"({"a": 0, "b": 1})", R"([{"id": 2, "content": "<x>"}, {"id": 1000, "content": "<y>"}])"));
  const auto t = Tokenizer::from_tokenizer_json(near);
  EXPECT_EQ(t->encode("a<y>b<x>", false), (std::vector<int32_t>{0, 1000, 1, 2}));
}

TEST(TokenizerLimits, IdsBeyondInt32AreNamedNotTruncated) {
  // 4294967297 = 2^32 + 1 would have become id 1.
  const std::string added = scratch_file(
      "int64_added.json", tokenizer_json(R"({"a": 0, "b": 1})", R"([{"id": 4294967297, "content": "<x>"}])"));
  const std::string msg = error_of([&] { Tokenizer::from_tokenizer_json(added); });
  EXPECT_NE(msg.find("4294967297"), std::string::npos) << msg;
  const std::string vocab = scratch_file("int64_vocab.json", tokenizer_json(R"({"a": 0, "b": 4294967297})"));
  EXPECT_NE(error_of([&] { Tokenizer::from_tokenizer_json(vocab); }).find("4294967297"), std::string::npos);
  const std::string negative = scratch_file("negative_vocab.json", tokenizer_json(R"({"a": 0, "b": -1})"));
  EXPECT_NE(error_of([&] { Tokenizer::from_tokenizer_json(negative); }).find("-1"), std::string::npos);
  const std::string fractional = scratch_file("float_vocab.json", tokenizer_json(R"({"a": 0, "b": 1.5})"));
  EXPECT_NE(error_of([&] { Tokenizer::from_tokenizer_json(fractional); }).find("1.5"), std::string::npos);
}

TEST(TokenizerLimits, SparseVocabularyIdFarBeyondItsEntriesIsRefused) {
  const std::string path = scratch_file("sparse_vocab.json", tokenizer_json(R"({"a": 0, "b": 900000000})"));
  const std::string msg = error_of([&] { Tokenizer::from_tokenizer_json(path); });
  EXPECT_NE(msg.find("900000000"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'b'"), std::string::npos) << msg;
}

TEST(TokenizerLimits, AddedTokensDecoderKeyMustBeAnId) {
  const std::string vocab = scratch_file("vm_vocab.json", R"({"a": 0, "b": 1, "ab": 2})");
  const std::string merges = scratch_file("vm_merges.txt", "#version: 0.2\na b\n");
  const std::string bad_key =
      scratch_file("vm_config.json", R"({"added_tokens_decoder": {"seven": {"content": "<x>"}}})");
  const std::string msg = error_of([&] { Tokenizer::from_vocab_merges(vocab, merges, bad_key); });
  EXPECT_NE(msg.find("seven"), std::string::npos) << msg;
  EXPECT_NE(msg.find(bad_key), std::string::npos) << msg;
  const std::string far_key =
      scratch_file("vm_config_far.json", R"({"added_tokens_decoder": {"300000000": {"content": "<x>"}}})");
  EXPECT_NE(error_of([&] { Tokenizer::from_vocab_merges(vocab, merges, far_key); }).find("300000000"),
            std::string::npos);
}

TEST(TokenizerLimits, DeeplyNestedSequencesAreRefusedNotRecursedInto) {
  std::string normalizer;
  for (int i = 0; i < 100000; ++i) normalizer += R"({"type": "Sequence", "normalizers": [)";
  normalizer += R"({"type": "NFC"})";
  for (int i = 0; i < 100000; ++i) normalizer += "]}";
  const std::string path = scratch_file("deep_normalizer.json", tokenizer_json(R"({"a": 0})", "[]", normalizer));
  const std::string msg = error_of([&] { Tokenizer::from_tokenizer_json(path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("nest"), std::string::npos) << msg;
}

TEST(TokenizerLimits, GgufSpecialIdsOutsideTheVocabularyAreErrors) {
  VocabData v;
  v.model = "gpt2";
  v.pre = "qwen2";
  v.tokens = {"a", "b"};
  v.bos_token_id = 7;
  EXPECT_NE(error_of([&] { Tokenizer::from_vocab_data(v); }).find("bos_token_id 7"), std::string::npos);
  v.bos_token_id = 0;
  v.eos_token_id = 2;
  EXPECT_NE(error_of([&] { Tokenizer::from_vocab_data(v); }).find("eos_token_id 2"), std::string::npos);
  v.eos_token_id = 1;
  EXPECT_NO_THROW(Tokenizer::from_vocab_data(v));
}

TEST(TokenizerLimits, RealTokenizersStayWithinTheLimits) {
  EXPECT_EQ(qwen3().vocab_size(), 151669);
  EXPECT_EQ(llama().vocab_size(), 128256);
}

// The split regexes backtrack once per character of a whitespace run; PCRE2's default match limit
// (10 million) made a valid text with a longer run fail with "match limit exceeded".
TEST(TokenizerLimits, SplitRegexesHandleVeryLongWhitespaceRuns) {
  constexpr size_t kRun = 12'000'000;
  for (const char* regex : {kQwen2SplitRegex, kLlama3SplitRegex, kGpt2SplitRegex}) {
    const PreTokenizer pre({PreTokenizerStage{regex, SplitBehavior::kIsolated, false, false}});
    for (const char c : {' ', '\t'}) {
      std::vector<size_t> sizes;
      const std::string text = std::string(kRun, c) + "a";
      ASSERT_NO_THROW(pre.split(text, [&](std::string_view piece) { sizes.push_back(piece.size()); })) << regex;
      // As in HF: the run but its last character, then that character with the letter (" a").
      if (c == ' ') {
        EXPECT_EQ(sizes, (std::vector<size_t>{kRun - 1, 2})) << regex;
      } else {
        size_t total = 0;
        for (size_t s : sizes) total += s;
        EXPECT_EQ(total, text.size()) << regex;
      }
    }
  }
}

// End to end through Tokenizer::encode, with a byte alphabet and no merges so that BPE costs little
// (real vocabularies merge a 10 MB run for minutes under the sanitizers): Qwen's tokenizer.json
// layout, a Split stage with its regex, then ByteLevel without a regex.
TEST(TokenizerLimits, TenMegabytesOfWhitespaceTokenize) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level::encode(std::string(1, static_cast<char>(b)))] = b;
  nlohmann::json split = {{"type", "Split"},
                          {"pattern", {{"Regex", kQwen2SplitRegex}}},
                          {"behavior", "Isolated"},
                          {"invert", false}};
  nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  const nlohmann::json file = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
                               {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}}}};
  const std::string path = scratch_file("bytes_only.json", file.dump());
  const auto t = Tokenizer::from_tokenizer_json(path);
  const std::string text = std::string(10'100'000, ' ') + "a";  // was "match limit exceeded"
  std::vector<int32_t> ids;
  ASSERT_NO_THROW(ids = t->encode(text, false));
  EXPECT_EQ(ids.size(), text.size());
  EXPECT_TRUE(t->decode(ids) == text);
}

}  // namespace
}  // namespace minivllm::test
