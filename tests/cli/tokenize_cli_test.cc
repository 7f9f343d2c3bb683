// `minivllm tokenize / detokenize / template` against Hugging Face's own outputs
// (shared/tokenizer-vectors/hf_goldens.json) for Qwen3-0.6B, whose folder has no weights.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run_cli.h"

namespace minivllm::test {
namespace {

const std::string kQwen3 = MINIVLLM_SHARED_DIR "/models/qwen3-0.6b";

const nlohmann::json& goldens() {
  static const nlohmann::json g =
      nlohmann::json::parse(read_text_file(MINIVLLM_SHARED_DIR "/tokenizer-vectors/hf_goldens.json"));
  return g;
}

nlohmann::json parse_stdout(const CliResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(CliTokenize, MatchesHuggingFaceIds) {
  const CliResult r = run_cli({"tokenize", "--model", kQwen3}, goldens()["texts"].dump());
  const nlohmann::json ids = parse_stdout(r);
  const nlohmann::json& expected = goldens()["qwen3"]["ids"];
  ASSERT_EQ(ids.size(), expected.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i], expected[i]) << "text " << goldens()["texts"][i];
}

TEST(CliTokenize, AddSpecialTokensMatchesHuggingFace) {
  const CliResult r = run_cli({"tokenize", "--model", kQwen3, "--add-special-tokens"}, goldens()["texts"].dump());
  EXPECT_EQ(parse_stdout(r), goldens()["qwen3"]["ids_with_special"]);
}

TEST(CliDetokenize, MatchesHuggingFaceText) {
  const CliResult r = run_cli({"detokenize", "--model", kQwen3}, goldens()["qwen3"]["ids"].dump());
  const nlohmann::json texts = parse_stdout(r);
  const nlohmann::json& expected = goldens()["qwen3"]["decoded"];
  ASSERT_EQ(texts.size(), expected.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(texts[i], expected[i]) << "entry " << i;
}

TEST(CliDetokenize, SkipSpecialTokensDropsThem) {
  // 151644 <|im_start|>, 872 "user", 198 "\n", 6023 "hi", 151645 <|im_end|> (see the goldens).
  const CliResult keep = run_cli({"detokenize", "--model", kQwen3}, "[[151644, 872, 198, 6023, 151645]]");
  EXPECT_EQ(parse_stdout(keep), nlohmann::json::array({"<|im_start|>user\nhi<|im_end|>"}));
  const CliResult skip =
      run_cli({"detokenize", "--model", kQwen3, "--skip-special-tokens"}, "[[151644, 872, 198, 6023, 151645]]");
  EXPECT_EQ(parse_stdout(skip), nlohmann::json::array({"user\nhi"}));
}

TEST(CliTemplate, MatchesTransformersApplyChatTemplate) {
  const nlohmann::json& convs = goldens()["chat"]["conversations"];
  const nlohmann::json& expected = goldens()["chat"]["qwen3"];
  for (size_t i = 0; i < convs.size(); ++i) {
    const std::string in = convs[i].dump();
    const CliResult gen = run_cli({"template", "--model", kQwen3}, in);
    EXPECT_EQ(gen.exit_code, 0) << gen.err;
    EXPECT_EQ(gen.out, expected[i]["prompt"].get<std::string>()) << "conversation " << i;
    const CliResult no_gen = run_cli({"template", "--model", kQwen3, "--no-generation-prompt"}, in);
    EXPECT_EQ(no_gen.out, expected[i]["no_generation_prompt"].get<std::string>()) << "conversation " << i;
    const CliResult no_think = run_cli({"template", "--model", kQwen3, "--var", "enable_thinking=false"}, in);
    EXPECT_EQ(no_think.out, expected[i]["enable_thinking_false"].get<std::string>()) << "conversation " << i;
  }
}

TEST(CliTokenize, BadStdinIsARuntimeError) {
  const CliResult r = run_cli({"tokenize", "--model", kQwen3}, "[\"unterminated");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("error: stdin is not valid JSON"), std::string::npos) << r.err;
  const CliResult wrong = run_cli({"tokenize", "--model", kQwen3}, "[1, 2]");
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("element 0 must be a string"), std::string::npos) << wrong.err;
}

TEST(CliTokenize, MissingModelNamesThePath) {
  const CliResult r = run_cli({"tokenize", "--model", "/nonexistent/model-dir"}, "[\"hi\"]");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/model-dir"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace minivllm::test
