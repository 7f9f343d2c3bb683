// Bad input gives a minivllm::Error that names what is wrong: the file, the byte offset, the id.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/check.h"
#include "golden_data.h"

namespace minivllm::test {
namespace {

std::string scratch_file(const std::string& name, const std::string& content) {
  const std::string dir = std::string(MINIVLLM_BINARY_DIR) + "/tokenizer_test_errors";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// Runs f, expects an Error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(TokenizerErrors, MissingFilesAreNamed) {
  expect_error([] { Tokenizer::from_tokenizer_json("/nonexistent/tokenizer.json"); },
               {"/nonexistent/tokenizer.json"});
  expect_error([] { Tokenizer::from_dir("/nonexistent/model"); }, {"/nonexistent/model", "tokenizer.json"});
  expect_error([] { Tokenizer::from_tiktoken("/nonexistent/tokenizer.model"); }, {"/nonexistent/tokenizer.model"});
  expect_error([] { Tokenizer::from_vocab_merges(qwen3_dir() + "/vocab.json", "/nonexistent/merges.txt", ""); },
               {"/nonexistent/merges.txt"});
}

TEST(TokenizerErrors, MalformedFilesAreNamed) {
  const std::string bad_json = scratch_file("bad.json", "{\"model\": {\"vocab\": ");
  expect_error([&] { Tokenizer::from_tokenizer_json(bad_json); }, {bad_json, "malformed"});
  const std::string no_model = scratch_file("no_model.json", "{\"added_tokens\": []}");
  expect_error([&] { Tokenizer::from_tokenizer_json(no_model); }, {no_model, "model"});
  const std::string wordpiece = scratch_file("wordpiece.json", R"({"model": {"type": "WordPiece", "vocab": {}}})");
  expect_error([&] { Tokenizer::from_tokenizer_json(wordpiece); }, {wordpiece, "WordPiece"});
  const std::string bad_merge = scratch_file(
      "bad_merge.json",
      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a c"]},
          "pre_tokenizer": {"type": "ByteLevel"}})");
  expect_error([&] { Tokenizer::from_tokenizer_json(bad_merge); }, {bad_merge, "merge #0", "a c"});
  const std::string merges = scratch_file("merges.txt", "#version: 0.2\nĠ Ġ\nnot_a_token x\n");
  expect_error([&] { Tokenizer::from_vocab_merges(qwen3_dir() + "/vocab.json", merges, ""); },
               {merges + ":3", "not_a_token x"});
  const std::string tiktoken = scratch_file("tokenizer.model", "IQ== 0\n!!!! 1\n");
  expect_error([&] { Tokenizer::from_tiktoken(tiktoken); }, {tiktoken + ":2", "base64"});
  VocabData v;
  v.model = "wordpiece";
  v.tokens = {"a"};
  expect_error([&] { Tokenizer::from_vocab_data(v); }, {"wordpiece"});
}

TEST(TokenizerErrors, InvalidUtf8NamesTheByteOffset) {
  expect_error([] { qwen3().encode("ab\xFF" "cd", false); }, {"invalid UTF-8", "offset 2"});
  expect_error([] { qwen3().encode("hello \xE4\xBD", false); }, {"offset 6"});  // truncated 你
  expect_error([] { llama().encode("\xC0\x80", false); }, {"offset 0"});         // overlong NUL
  expect_error([] { llama().encode("x\xED\xA0\x80", false); }, {"offset 1"});    // surrogate
  EXPECT_NO_THROW(llama().encode("\xF4\x8F\xBF\xBF", false));                    // U+10FFFF is fine
}

TEST(TokenizerErrors, UnknownIdsAreNamed) {
  expect_error([] { qwen3().decode({9707, 151669}); }, {"151669"});
  expect_error([] { llama().decode({-5}); }, {"-5"});
  expect_error([] { llama().id_to_token(128256); }, {"128256"});
  expect_error([] { llama().is_special(999999); }, {"999999"});
}

}  // namespace
}  // namespace minivllm::test
