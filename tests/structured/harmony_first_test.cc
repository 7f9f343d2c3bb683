// StructuredOutputs::harmony_first with xgrammar: a harmony reply (gpt-oss) whose final message's
// body is the schema's, after analysis messages if the model writes any. gpt-oss's tokenizer is not
// in ../shared: Qwen3-0.6B's stands in, with harmony's markers added as special tokens (so they
// are one id each, as in gpt-oss's). Without harmony_first, or in a vocabulary whose markers are
// not special tokens, nothing changes for other grammars.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "structured/structured_output_engine.h"
#include "tokenizer/tokenizer.h"

namespace minivllm {
namespace {

constexpr const char* kSchema =
    R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false})";
constexpr const char* kMarkers[] = {"<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>"};
constexpr int32_t kFirstId = 151669;  // after Qwen3's added tokens

class HarmonyFirst : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!StructuredOutputEngine::available()) return;
    const std::string qwen3 = std::string(MINIVLLM_SHARED_DIR) + "/models/qwen3-0.6b";
    dir_ = std::filesystem::temp_directory_path() / ("minivllm_harmony_first_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    nlohmann::json tok = nlohmann::json::parse(std::ifstream(qwen3 + "/tokenizer.json"));
    for (int i = 0; i < 5; ++i) {
      tok["added_tokens"].push_back({{"id", kFirstId + i}, {"content", kMarkers[i]}, {"single_word", false},
                                     {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
    }
    std::ofstream(dir_ / "tokenizer.json") << tok.dump();
    std::filesystem::copy_file(qwen3 + "/tokenizer_config.json", dir_ / "tokenizer_config.json");
    tokenizer_ = Tokenizer::from_dir(dir_.string());
    eos_ = kFirstId + 4;  // <|return|>
    engine_ = std::make_unique<StructuredOutputEngine>(*tokenizer_, 151936, std::vector<int64_t>{eos_});
  }
  static void TearDownTestSuite() {
    engine_.reset();
    tokenizer_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  void SetUp() override {
    if (!StructuredOutputEngine::available()) GTEST_SKIP() << "built without xgrammar";
  }

  // The reply's tokens, each checked against the mask first, then the eos: a complete reply?
  static bool reads(bool harmony_first, const std::string& reply) {
    StructuredOutputs so;
    so.json = kSchema;
    so.harmony_first = harmony_first;
    return reads(so, reply);
  }
  static bool reads(const StructuredOutputs& so, const std::string& reply) {
    std::unique_ptr<TokenConstraint> c = engine_->make_constraint(so, "response_format");
    const std::vector<int32_t> ids = tokenizer_->encode(reply, /*add_special_tokens=*/false);
    std::vector<int32_t> mask(static_cast<size_t>(c->bitmask_words()));
    for (int32_t id : ids) {
      c->fill_bitmask(mask.data());
      const uint32_t word = static_cast<uint32_t>(mask[static_cast<size_t>(id / 32)]);
      if (((word >> (id % 32)) & 1u) == 0 || !c->accept(id)) return false;
    }
    return c->accept(eos_) && c->is_terminated();
  }

  static std::filesystem::path dir_;
  static std::unique_ptr<Tokenizer> tokenizer_;
  static std::unique_ptr<StructuredOutputEngine> engine_;
  static int32_t eos_;
};

std::filesystem::path HarmonyFirst::dir_;
std::unique_ptr<Tokenizer> HarmonyFirst::tokenizer_;
std::unique_ptr<StructuredOutputEngine> HarmonyFirst::engine_;
int32_t HarmonyFirst::eos_ = -1;

TEST_F(HarmonyFirst, AnalysisThenTheFinalMessagesSchema) {
  ASSERT_EQ(tokenizer_->encode("<|channel|>", false), std::vector<int32_t>{kFirstId + 3});
  const std::string final_open = "<|channel|>final<|message|>";
  EXPECT_TRUE(reads(true, final_open + "{\"city\": \"Paris\"}"));
  EXPECT_TRUE(reads(true, "<|channel|>analysis<|message|>User wants a city; a < b.<|end|><|start|>assistant" +
                              final_open + "{\"city\": \"Oslo\"}"));
  EXPECT_TRUE(reads(true, "<|channel|>analysis<|message|>One.<|end|><|start|>assistant<|channel|>analysis"
                          "<|message|>Two.<|end|><|start|>assistant" + final_open + "{\"city\": \"Rome\"}"));
  // The body must be the schema's; the final message must be written; thoughts hold no marker.
  EXPECT_FALSE(reads(true, final_open + "{\"town\": \"Paris\"}"));
  EXPECT_FALSE(reads(true, "{\"city\": \"Paris\"}"));
  EXPECT_FALSE(reads(true, "<|channel|>analysis<|message|>Hmm<|end|>" + final_open + "{\"city\": \"Paris\"}"));
  EXPECT_FALSE(reads(true, "<|channel|>analysis<|message|>a <|message|> b<|end|><|start|>assistant" + final_open +
                               "{\"city\": \"Paris\"}"));
  EXPECT_FALSE(reads(true, "<|channel|>analysis<|message|>still thinking"));
}

// A forced call (tool_choice named or required): analysis first if any, then a commentary message
// to one of the functions, its body that function's arguments.
TEST_F(HarmonyFirst, AForcedCallIsACommentaryMessageToTheFunction) {
  StructuredOutputs named;
  named.harmony_first = true;
  named.harmony_calls = {{"get_weather", kSchema}};
  const std::string call = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>";
  EXPECT_TRUE(reads(named, call + "{\"city\": \"Paris\"}"));
  EXPECT_TRUE(reads(named, "<|channel|>analysis<|message|>I call it.<|end|><|start|>assistant" + call +
                               "{\"city\": \"Paris\"}"));
  EXPECT_FALSE(reads(named, call + "{\"town\": \"Paris\"}"));
  EXPECT_FALSE(reads(named, "<|channel|>final<|message|>{\"city\": \"Paris\"}"));
  EXPECT_FALSE(reads(named, "<|channel|>commentary to=functions.now <|constrain|>json<|message|>{}"));
  StructuredOutputs required = named;
  required.harmony_calls.push_back({"now", R"({"type": "object", "properties": {}, "additionalProperties": false})"});
  EXPECT_TRUE(reads(required, call + "{\"city\": \"Paris\"}"));
  EXPECT_TRUE(reads(required, "<|channel|>commentary to=functions.now <|constrain|>json<|message|>{}"));
  EXPECT_FALSE(reads(required, "<|channel|>commentary to=functions.now <|constrain|>json<|message|>{\"city\": \"x\"}"));
}

TEST_F(HarmonyFirst, WithoutItTheReplyIsTheSchemasAlone) {
  EXPECT_TRUE(reads(false, "{\"city\": \"Paris\"}"));
  EXPECT_FALSE(reads(false, "<|channel|>final<|message|>{\"city\": \"Paris\"}"));
}

}  // namespace
}  // namespace minivllm
