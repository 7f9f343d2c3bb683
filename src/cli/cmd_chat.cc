// `minivllm chat`: an interactive conversation. Each stdin line is a user message; the assistant's
// reply streams to stdout as it is generated, and the whole history goes into the next prompt.
// The "> " prompt goes to stderr so that piped stdout holds only the replies.
#include <iostream>

#include "api/llm_engine.h"
#include "cli/cli_io.h"
#include "cli/commands.h"
#include "cli/options.h"

namespace minivllm::cli {
namespace {

constexpr int kDefaultChatMaxTokens = 512;

// Streams one reply: steps the engine until request `id` finishes, printing its new text as it
// comes. Returns the finished output.
RequestOutput stream_reply(LLMEngine& engine, int64_t id) {
  while (!engine.is_finished()) {
    StepResult r = engine.step();
    for (const RequestDelta& d : r.deltas) {
      if (d.request_id == id && !d.text.empty()) std::cout << d.text << std::flush;
    }
    for (RequestOutput& o : r.finished) {
      if (o.request_id == id) return std::move(o);
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
    const SamplingParams params = sampling_params_from(a, kDefaultChatMaxTokens, engine.generation_defaults());
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
        const RequestOutput out = stream_reply(engine, id);
        std::cout << "\n" << std::flush;
        messages.push_back({{"role", "assistant"}, {"content", out.text}});
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
