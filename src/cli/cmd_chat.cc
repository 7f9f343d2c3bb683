// `minivllm chat`: an interactive conversation. Each stdin line is a user message; the assistant's
// reply streams to stdout as it is generated, and the whole history goes into the next prompt.
// The "> " prompt goes to stderr so that piped stdout holds only the replies. A thinking model's
// thoughts (a <think> block, Seed-OSS's <seed:think>, gpt-oss's analysis channel) stream to stderr
// too, split off as the server's reasoning parsers split them; the history keeps the answers.
#include <iostream>

#include "api/llm_engine.h"
#include "cli/cli_io.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "server/chat_reply.h"
#include "template/chat_template.h"

namespace minivllm::cli {
namespace {

constexpr int kDefaultChatMaxTokens = 512;

// How the model's replies are split, from its chat template (as `serve` picks its parsers with
// --reasoning-parser auto): inactive for a model that does not think.
server::ReplyParsing reply_parsing(const LLMEngine& engine) {
  const std::string source = engine.chat_template() ? engine.chat_template()->source() : "";
  server::ReplyParsing p;
  p.harmony = server::is_harmony_template(source);
  p.think_tags = server::template_think_tags(source);
  p.reasoning = p.harmony || server::template_thinks(source, p.think_tags);
  return p;
}

// Streams one reply: steps the engine until request `id` finishes, printing its new text as it
// comes (its thoughts to stderr, ended by a newline there, when `parser`). Returns the answer.
std::string stream_reply(LLMEngine& engine, int64_t id, server::ChatReplyParser* parser) {
  std::string answer;
  bool thought = false;
  auto show = [&](server::ReplyDelta d) {
    if (!d.reasoning.empty()) std::cerr << d.reasoning << std::flush;
    thought = thought || !d.reasoning.empty();
    answer += d.content;
    std::cout << d.content << std::flush;
  };
  while (!engine.is_finished()) {
    StepResult r = engine.step();
    for (const RequestDelta& d : r.deltas) {
      if (d.request_id != id || d.text.empty()) continue;
      show(parser ? parser->feed(d.text) : server::ReplyDelta{"", d.text, {}});
    }
    for (RequestOutput& o : r.finished) {
      if (o.request_id != id) continue;
      if (parser) show(parser->finish());
      if (thought) std::cerr << "\n";
      return answer;
    }
  }
  MINIVLLM_FAIL() << "the engine went idle before request " << id << " finished";
}

}  // namespace

int run_chat(const std::vector<std::string>& argv) {
  ArgParser p("chat", "chat --model M [--system TEXT] [options]",
              "Interactive chat: type a message and press enter; the reply streams back. The conversation\n"
              "is kept. /exit or end of input quits.");
  p.option("--system", "TEXT", "a system message opening the conversation");
  add_template_var_option(p);
  add_sampling_options(p, kDefaultChatMaxTokens);
  add_engine_options(p);
  return run_command(p, argv, [](const ParsedArgs& a) {
    const EngineConfig config = engine_config_from(a);
    (void)sampling_params_from(a, kDefaultChatMaxTokens);  // usage errors before the model loads
    const nlohmann::json vars = template_vars_from(a);
    LLMEngine engine(config);
    SamplingParams params = sampling_params_from(a, kDefaultChatMaxTokens, engine.generation_defaults());
    const server::ReplyParsing parsing = reply_parsing(engine);
    if (parsing.harmony) params.skip_special_tokens = false;  // its channels are marked by special tokens
    nlohmann::json messages = nlohmann::json::array();
    if (auto system = a.get("--system")) messages.push_back({{"role", "system"}, {"content", *system}});

    int status = kExitOk;
    std::string line;
    while (true) {
      std::cerr << "> " << std::flush;
      if (!std::getline(std::cin, line)) break;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line == "/exit") break;
      if (line.empty()) continue;
      messages.push_back({{"role", "user"}, {"content", line}});
      try {
        const int64_t id = engine.add_chat_request(messages, params, vars);
        const auto parser = parsing.active() ? parsing.make(/*streaming=*/true) : nullptr;
        const std::string answer = stream_reply(engine, id, parser.get());
        std::cout << "\n" << std::flush;
        messages.push_back({{"role", "assistant"}, {"content", answer}});
      } catch (const Error& e) {
        // A rejected turn (e.g. the history outgrew max_model_len) leaves the conversation as it was.
        messages.erase(messages.size() - 1);
        print_error(user_message(e));
        status = kExitRuntimeError;
      }
    }
    std::cerr << "\n";
    return status;
  });
}

}  // namespace minivllm::cli
