// StructuredOutputs::think_first with Qwen3-0.6B's real tokenizer (../shared) and xgrammar: a
// forced tool call's schema may follow one <think>...</think> block (Qwen3's added tokens, or the
// same text in pieces), thoughts may hold '<' and partial tags, and the grammar holds as before
// once the thoughts end; without think_first a thought is refused.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "structured/structured_output_engine.h"
#include "tokenizer/tokenizer.h"

namespace minivllm {
namespace {

constexpr const char* kSchema =
    R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false})";

class ThinkFirst : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!StructuredOutputEngine::available()) return;
    tokenizer_ = Tokenizer::from_dir(std::string(MINIVLLM_SHARED_DIR) + "/models/qwen3-0.6b");
    eos_ = *tokenizer_->token_to_id("<|im_end|>");
    engine_ = std::make_unique<StructuredOutputEngine>(*tokenizer_, 151936, std::vector<int64_t>{eos_});
  }
  static void TearDownTestSuite() {
    engine_.reset();
    tokenizer_.reset();
  }
  void SetUp() override {
    if (!StructuredOutputEngine::available()) GTEST_SKIP() << "built without xgrammar";
  }

  // Feeds `text`'s tokens, each checked against the mask first; how many were allowed and taken.
  static size_t feed(TokenConstraint& c, const std::string& text) {
    const std::vector<int32_t> ids = tokenizer_->encode(text, /*add_special_tokens=*/false);
    std::vector<int32_t> mask(static_cast<size_t>(c.bitmask_words()));
    for (size_t i = 0; i < ids.size(); ++i) {
      c.fill_bitmask(mask.data());
      const uint32_t word = static_cast<uint32_t>(mask[static_cast<size_t>(ids[i] / 32)]);
      if (((word >> (ids[i] % 32)) & 1u) == 0 || !c.accept(ids[i])) return i;
    }
    return ids.size();
  }
  static size_t num_tokens(const std::string& text) { return tokenizer_->encode(text, false).size(); }

  static std::unique_ptr<TokenConstraint> constraint(bool think_first) {
    StructuredOutputs so;
    so.json = kSchema;
    so.think_first = think_first;
    return engine_->make_constraint(so, "structured_outputs");
  }
  // The reply's tokens, then the eos: is it a complete reply of the grammar?
  static bool reads(bool think_first, const std::string& reply) {
    std::unique_ptr<TokenConstraint> c = constraint(think_first);
    if (feed(*c, reply) != num_tokens(reply)) return false;
    return c->accept(eos_) && c->is_terminated();
  }
  // Whether the grammar refuses one of the reply's tokens (not only the eos after them).
  static bool refuses_a_token(bool think_first, const std::string& reply) {
    std::unique_ptr<TokenConstraint> c = constraint(think_first);
    return feed(*c, reply) < num_tokens(reply);
  }

  static std::unique_ptr<Tokenizer> tokenizer_;
  static std::unique_ptr<StructuredOutputEngine> engine_;
  static int32_t eos_;
};

std::unique_ptr<Tokenizer> ThinkFirst::tokenizer_;
std::unique_ptr<StructuredOutputEngine> ThinkFirst::engine_;
int32_t ThinkFirst::eos_ = -1;

TEST_F(ThinkFirst, ThoughtsThenTheCall) {
  // Qwen3 writes <think> and </think> as its added tokens: one id each.
  ASSERT_EQ(num_tokens("<think>"), 1u);
  EXPECT_TRUE(reads(true, "<think>\nThe user wants Paris's weather; I call it.\n</think>\n\n{\"city\": \"Paris\"}"));
  EXPECT_TRUE(reads(true, "{\"city\": \"Paris\"}"));  // no thoughts: the call alone
  EXPECT_TRUE(reads(true, "<think></think>{\"city\": \"Oslo\"}"));
  // Thoughts with '<', a tag that is not </think>, and parts of it.
  EXPECT_TRUE(reads(true, "<think>a < b, <b>bold</b>, </thin, <</th<x </thinking? no</think>{\"city\": \"Rome\"}"));
  // What the schema refuses is refused after the thoughts too; nothing follows the call.
  EXPECT_TRUE(refuses_a_token(true, "<think>hmm</think>{\"town\": \"Paris\"}"));
  EXPECT_TRUE(refuses_a_token(true, "<think>hmm</think>Paris"));
  EXPECT_TRUE(refuses_a_token(true, "<think>hmm</think>{\"city\": \"Paris\"}<think>more</think>"));
  EXPECT_TRUE(refuses_a_token(true, "<think>a</think> b</think>{\"city\": \"Paris\"}"));  // one block
  EXPECT_TRUE(refuses_a_token(true, "Sure! {\"city\": \"Paris\"}"));
  // Thoughts that never end are not a reply: every token taken, but not the eos.
  EXPECT_FALSE(refuses_a_token(true, "<think>still thinking"));
  EXPECT_FALSE(reads(true, "<think>still thinking"));
}

TEST_F(ThinkFirst, WithoutItAThoughtIsRefused) {
  EXPECT_TRUE(reads(false, "{\"city\": \"Paris\"}"));
  EXPECT_TRUE(refuses_a_token(false, "<think>hmm</think>{\"city\": \"Paris\"}"));
}

// think_open: the prompt opened the block, so the reply's thoughts come first (no <think> of its
// own) and must end with </think> before the call; a call without thoughts is still thought text.
TEST_F(ThinkFirst, AnOpenBlockMustCloseBeforeTheCall) {
  auto reads_open = [](const std::string& reply) {
    StructuredOutputs so;
    so.json = kSchema;
    so.think_open = true;
    std::unique_ptr<TokenConstraint> c = engine_->make_constraint(so, "structured_outputs");
    if (feed(*c, reply) != num_tokens(reply)) return false;
    return c->accept(eos_) && c->is_terminated();
  };
  EXPECT_TRUE(reads_open("The user wants Paris's weather.\n</think>\n\n{\"city\": \"Paris\"}"));
  EXPECT_TRUE(reads_open("</think>{\"city\": \"Oslo\"}"));
  EXPECT_TRUE(reads_open("a < b, </thin, <</th<x </thinking? no</think>{\"city\": \"Rome\"}"));
  EXPECT_FALSE(reads_open("{\"city\": \"Paris\"}"));  // thoughts, never closed
  EXPECT_FALSE(reads_open("hmm</think>{\"town\": \"Paris\"}"));
  EXPECT_FALSE(reads_open("hmm</think>{\"city\": \"Paris\"}</think>"));
}

// The thoughts' end is found in whatever pieces the tokens cut it into: "</think>" in the middle of
// a thought's tokens ends them, and only one block is allowed.
TEST_F(ThinkFirst, TheTagEndsThoughtsInAnyPieces) {
  StructuredOutputs so;
  so.json = kSchema;
  so.think_first = true;
  std::unique_ptr<TokenConstraint> c = engine_->make_constraint(so, "structured_outputs");
  const std::vector<int32_t> open = tokenizer_->encode("<think>", false);
  ASSERT_EQ(open.size(), 1u);
  ASSERT_TRUE(c->accept(open[0]));
  for (const char* piece : {"x", "</", "th", "ink", ">", "{\"", "city", "\": \"", "A", "\"}"}) {
    for (int32_t id : tokenizer_->encode(piece, false)) ASSERT_TRUE(c->accept(id)) << piece;
  }
  EXPECT_TRUE(c->accept(eos_));
  EXPECT_TRUE(c->is_terminated());
}

}  // namespace
}  // namespace minivllm
