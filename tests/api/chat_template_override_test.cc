// EngineConfig::chat_template (vLLM's --chat-template): a template given inline or as a file
// replaces the model's for every chat render; errors name the key and the template problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "api/llm_engine.h"
#include "../golden/engine_test_util.h"

namespace minivllm {
namespace {

namespace fs = std::filesystem;

EngineConfig stories(const std::string& chat_template) {
  EngineConfig c = tiny_config("unused");
  c.model = std::string(MINIVLLM_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  c.chat_template = chat_template;
  return c;
}

const nlohmann::json kMessages = nlohmann::json::array({{{"role", "user"}, {"content", "hello"}}});

TEST(ChatTemplateOverride, InlineAndFile) {
  LLMEngine inline_engine(stories("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"));
  EXPECT_EQ(inline_engine.apply_chat_template(kMessages), "<user>hello");
  const fs::path file = fs::temp_directory_path() / ("minivllm_tmpl_" + std::to_string(::getpid()) + ".jinja");
  std::ofstream(file) << "{% for m in messages %}[{{ m.content }}]{% endfor %}{% if add_generation_prompt %}>{% endif %}";
  LLMEngine file_engine(stories(file.string()));
  EXPECT_EQ(file_engine.apply_chat_template(kMessages), "[hello]>");
  fs::remove(file);
  // The engine's chat requests render with it too.
  const std::vector<RequestOutput> out = inline_engine.chat({kMessages}, greedy(2));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].finish_reason, "length");
}

TEST(ChatTemplateOverride, ErrorsNameTheKey) {
  for (const std::string& bad : {std::string("/nonexistent/template.jinja"), std::string("{% for x in %}")}) {
    SCOPED_TRACE(bad);
    try {
      LLMEngine e(stories(bad));
      FAIL() << "the template was taken";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("chat_template"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace minivllm
