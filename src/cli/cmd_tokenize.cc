// `minivllm tokenize` and `minivllm detokenize`: the model's tokenizer over JSON on stdin, without
// loading weights.
#include <iostream>

#include "api/model_source.h"
#include "cli/cli_io.h"
#include "cli/commands.h"
#include "cli/json_input.h"
#include "cli/options.h"

namespace minivllm::cli {
namespace {

const Tokenizer& require_tokenizer(const ModelSource& source) {
  MINIVLLM_CHECK(source.tokenizer != nullptr) << "model '" << source.path << "' has no tokenizer";
  return *source.tokenizer;
}

}  // namespace

int run_tokenize(const std::vector<std::string>& argv) {
  ArgParser p("tokenize", "tokenize --model M [--add-special-tokens] < strings.json",
              "Reads a JSON array of strings on stdin; prints a JSON array of token id arrays.");
  add_model_option(p);
  p.flag("--add-special-tokens", "add the tokenizer's special tokens (e.g. bos) as Hugging Face does");
  return run_command(p, argv, [](const ParsedArgs& a) {
    const std::string model = a.required("--model");
    const bool add_special = a.has("--add-special-tokens");
    const nlohmann::ordered_json in = read_stdin_json("a JSON array of strings");
    MINIVLLM_CHECK(in.is_array()) << "stdin must be a JSON array of strings, got " << in.type_name();
    for (size_t i = 0; i < in.size(); ++i) {
      MINIVLLM_CHECK(in[i].is_string()) << "stdin element " << i << " must be a string, got " << in[i].type_name();
    }
    const ModelSource source = open_model(model, /*with_weights=*/false);
    const Tokenizer& tok = require_tokenizer(source);
    nlohmann::json out = nlohmann::json::array();
    for (const auto& text : in) out.push_back(tok.encode(text.get<std::string>(), add_special));
    std::cout << dump_json(out) << "\n";
    return kExitOk;
  });
}

int run_detokenize(const std::vector<std::string>& argv) {
  ArgParser p("detokenize", "detokenize --model M [--skip-special-tokens] < ids.json",
              "Reads a JSON array of token id arrays on stdin; prints a JSON array of strings.");
  add_model_option(p);
  p.flag("--skip-special-tokens", "leave special tokens out of the text");
  return run_command(p, argv, [](const ParsedArgs& a) {
    const std::string model = a.required("--model");
    const bool skip_special = a.has("--skip-special-tokens");
    const nlohmann::ordered_json in = read_stdin_json("a JSON array of token id arrays");
    MINIVLLM_CHECK(in.is_array()) << "stdin must be a JSON array of token id arrays, got " << in.type_name();
    std::vector<std::vector<int32_t>> seqs;
    for (size_t i = 0; i < in.size(); ++i) {
      MINIVLLM_CHECK(in[i].is_array()) << "stdin element " << i << " must be an array of token ids, got "
                                       << in[i].type_name();
      std::vector<int32_t> ids;
      for (size_t k = 0; k < in[i].size(); ++k) {
        const std::optional<int32_t> id = json_token_id(in[i][k]);
        MINIVLLM_CHECK(id.has_value()) << "stdin element " << i << ", id " << k << ": " << not_a_token_id(in[i][k]);
        ids.push_back(*id);
      }
      seqs.push_back(std::move(ids));
    }
    const ModelSource source = open_model(model, /*with_weights=*/false);
    const Tokenizer& tok = require_tokenizer(source);
    nlohmann::json out = nlohmann::json::array();
    for (const auto& ids : seqs) out.push_back(tok.decode(ids, skip_special));
    std::cout << dump_json(out) << "\n";
    return kExitOk;
  });
}

}  // namespace minivllm::cli
