// Exact agreement with Hugging Face tokenizers on the 44 reference texts, for both real
// tokenizers and for every file format they ship in.
#include <gtest/gtest.h>

#include <filesystem>

#include "golden_data.h"

namespace minivllm::test {
namespace {

struct Case {
  const char* golden_key;
  const Tokenizer& (*tokenizer)();
};

class HfGoldens : public ::testing::TestWithParam<Case> {};

TEST_P(HfGoldens, IdsWithoutSpecialTokens) {
  const auto& texts = goldens().at("texts");
  ASSERT_EQ(texts.size(), 44u);
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    EXPECT_EQ(GetParam().tokenizer().encode(text, false), golden_ids(GetParam().golden_key, "ids", i))
        << "text #" << i << ": " << text;
  }
}

TEST_P(HfGoldens, IdsWithSpecialTokens) {
  const auto& texts = goldens().at("texts");
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    EXPECT_EQ(GetParam().tokenizer().encode(text, true), golden_ids(GetParam().golden_key, "ids_with_special", i))
        << "text #" << i << ": " << text;
  }
}

TEST_P(HfGoldens, Decode) {
  const auto& texts = goldens().at("texts");
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string expected = goldens().at(GetParam().golden_key).at("decoded").at(i).get<std::string>();
    EXPECT_EQ(GetParam().tokenizer().decode(golden_ids(GetParam().golden_key, "ids", i)), expected) << "text #" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, HfGoldens,
                         ::testing::Values(Case{"qwen3", &qwen3}, Case{"llama32", &llama}),
                         [](const auto& info) { return std::string(info.param.golden_key); });

TEST(Qwen3Tokenizer, VocabMergesGiveTheSameIds) {
  const auto t = Tokenizer::from_vocab_merges(qwen3_dir() + "/vocab.json", qwen3_dir() + "/merges.txt",
                                              qwen3_dir() + "/tokenizer_config.json");
  const auto& texts = goldens().at("texts");
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    EXPECT_EQ(t->encode(text, false), golden_ids("qwen3", "ids", i)) << "text #" << i << ": " << text;
    EXPECT_EQ(t->encode(text, true), golden_ids("qwen3", "ids_with_special", i)) << "text #" << i;
  }
  EXPECT_EQ(t->vocab_size(), 151669);
  EXPECT_EQ(t->eos_token_id(), 151645);
  EXPECT_EQ(t->bos_token_id(), -1);
}

TEST(Qwen3Tokenizer, SpecialTokensAndConfig) {
  const Tokenizer& t = qwen3();
  EXPECT_EQ(t.vocab_size(), 151669);
  EXPECT_EQ(t.bos_token_id(), -1);
  EXPECT_EQ(t.bos_token(), "");
  EXPECT_EQ(t.eos_token_id(), 151645);
  EXPECT_EQ(t.eos_token(), "<|im_end|>");
  EXPECT_EQ(t.token_to_id("<|im_start|>"), 151644);
  EXPECT_EQ(t.token_to_id("<think>"), 151667);
  EXPECT_EQ(t.token_to_id("Ġworld"), 1879);  // the vocabulary's own spelling of " world"
  EXPECT_EQ(t.token_to_id("no such token"), std::nullopt);
  EXPECT_EQ(t.id_to_token(1879), "Ġworld");
  EXPECT_TRUE(t.is_special(151644));
  EXPECT_FALSE(t.is_special(151667));  // <think> is added but not special
  EXPECT_FALSE(t.is_special(1879));
  // The README's reference chat prompt.
  EXPECT_EQ(t.encode("<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n", false),
            (std::vector<int32_t>{151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198}));
  EXPECT_EQ(t.decode({151644, 872, 198, 6023, 151645}, /*skip_special_tokens=*/true), "user\nhi");
  EXPECT_EQ(t.decode({151667, 198}, /*skip_special_tokens=*/true), "<think>\n");
}

TEST(Qwen3Tokenizer, NfcNormalizes) {
  // "é" as e + U+0301 composes to U+00E9 before BPE, so both spellings give the same ids.
  EXPECT_EQ(qwen3().encode("caf\x65\xCC\x81", false), qwen3().encode("caf\xC3\xA9", false));
}

TEST(Llama3Tokenizer, TiktokenGivesTheSameIds) {
  const auto t = Tokenizer::from_tiktoken(llama_dir() + "/original/tokenizer.model");
  const auto& texts = goldens().at("texts");
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    EXPECT_EQ(t->encode(text, false), golden_ids("llama32", "ids", i)) << "text #" << i << ": " << text;
    EXPECT_EQ(t->encode(text, true), golden_ids("llama32", "ids_with_special", i)) << "text #" << i;
    EXPECT_EQ(t->decode(golden_ids("llama32", "ids", i)), text) << "text #" << i;
  }
  EXPECT_EQ(t->vocab_size(), 128256);
  EXPECT_EQ(t->bos_token_id(), 128000);
  EXPECT_EQ(t->eos_token_id(), 128001);  // Meta's tokenizer.py: <|end_of_text|>
  // Every special token where tokenizer.json has it.
  const Tokenizer& ref = llama();
  for (int32_t id = 128000; id < 128256; ++id) {
    EXPECT_EQ(t->id_to_token(id), ref.id_to_token(id)) << "id " << id;
    EXPECT_TRUE(t->is_special(id));
  }
  EXPECT_EQ(t->id_to_token(1917), ref.id_to_token(1917));
}

TEST(Llama3Tokenizer, SpecialTokensAndConfig) {
  const Tokenizer& t = llama();
  EXPECT_EQ(t.vocab_size(), 128256);
  EXPECT_EQ(t.bos_token_id(), 128000);
  EXPECT_EQ(t.bos_token(), "<|begin_of_text|>");
  EXPECT_EQ(t.eos_token_id(), 128009);  // tokenizer_config.json: <|eot_id|>
  EXPECT_EQ(t.eos_token(), "<|eot_id|>");
  // Meta's own tokenizer test.
  EXPECT_EQ(t.encode("This is a test sentence.", true),
            (std::vector<int32_t>{128000, 2028, 374, 264, 1296, 11914, 13}));
  EXPECT_EQ(t.decode({128000, 9906, 128009}, true), "Hello");
  EXPECT_EQ(t.decode({128000, 9906, 128009}, false), "<|begin_of_text|>Hello<|eot_id|>");
}

TEST(Llama3Tokenizer, FromDirWithOnlyTiktokenReadsTheConfig) {
  // A folder with original/tokenizer.model and tokenizer_config.json but no tokenizer.json.
  const std::string dir = std::string(MINIVLLM_BINARY_DIR) + "/tokenizer_test_tiktoken_dir";
  std::filesystem::create_directories(dir + "/original");
  std::filesystem::copy_file(llama_dir() + "/original/tokenizer.model", dir + "/original/tokenizer.model",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(llama_dir() + "/tokenizer_config.json", dir + "/tokenizer_config.json",
                             std::filesystem::copy_options::overwrite_existing);
  const auto t = Tokenizer::from_dir(dir);
  EXPECT_EQ(t->eos_token_id(), 128009);
  EXPECT_EQ(t->encode("Hello, world!", true), (std::vector<int32_t>{128000, 9906, 11, 1917, 0}));
}

}  // namespace
}  // namespace minivllm::test
