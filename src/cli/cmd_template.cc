// `minivllm template`: renders a JSON messages array with the model's chat template, without
// loading weights. Prints exactly the rendered prompt (no newline added), so it can be diffed.
#include <iostream>

#include "api/model_source.h"
#include "cli/cli_io.h"
#include "cli/commands.h"
#include "cli/options.h"

namespace minivllm::cli {

int run_template(const std::vector<std::string>& argv) {
  ArgParser p("template", "template --model M [--no-generation-prompt] [--var NAME=JSON]... < messages.json",
              "Reads a JSON array of {role, content} messages on stdin; prints the prompt the model's chat\n"
              "template renders from it.");
  add_model_option(p);
  p.flag("--no-generation-prompt", "do not open an assistant turn at the end");
  add_template_var_option(p);
  return run_command(p, argv, [](const ParsedArgs& a) {
    const std::string model = a.required("--model");
    const bool add_generation_prompt = !a.has("--no-generation-prompt");
    // ordered_json keeps the caller's key order, which `tojson` in a template prints.
    nlohmann::ordered_json vars = nlohmann::ordered_json::parse(template_vars_from(a).dump());
    const nlohmann::ordered_json messages = read_stdin_json("a JSON array of messages");
    MINIVLLM_CHECK(messages.is_array()) << "stdin must be a JSON array of messages, got " << messages.type_name();
    const ModelSource source = open_model(model, /*with_weights=*/false);
    add_special_token_vars(source, vars);
    std::cout << source.require_chat_template().render(messages, add_generation_prompt, vars);
    std::cout.flush();
    return kExitOk;
  });
}

}  // namespace minivllm::cli
