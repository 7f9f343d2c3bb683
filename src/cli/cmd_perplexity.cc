// `minivllm perplexity`: the mean negative log-likelihood and perplexity of a text file's tokens
// (or of given token ids), in windows (perplexity.h), as llama.cpp's llama-perplexity. How an fp8
// KV cache, a quantized checkpoint or a kernel change is judged on a trained model.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "api/llm_engine.h"
#include "cli/cli_io.h"
#include "cli/commands.h"
#include "cli/json_input.h"
#include "cli/options.h"
#include "cli/perplexity.h"

namespace minivllm::cli {
namespace {

constexpr int64_t kDefaultWindow = 512;  // llama-perplexity's default context

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MINIVLLM_CHECK(in) << "cannot open text file '" << path << "'";
  std::ostringstream text;
  text << in.rdbuf();
  MINIVLLM_CHECK(!text.str().empty()) << "text file '" << path << "' is empty";
  return text.str();
}

std::vector<int32_t> parse_token_ids(const std::string& text) {
  nlohmann::ordered_json j;
  try {
    j = parse_json_input(text, "--token-ids", "e.g. '[1,2,3]'");
  } catch (const Error& e) {
    throw UsageError(user_message(e));
  }
  if (!j.is_array()) throw UsageError("--token-ids must be one JSON array of token ids, got " + json_excerpt(j));
  std::vector<int32_t> ids;
  for (size_t k = 0; k < j.size(); ++k) {
    const std::optional<int32_t> id = json_token_id(j[k]);
    if (!id) throw UsageError("--token-ids: id " + std::to_string(k) + ": " + not_a_token_id(j[k]));
    ids.push_back(*id);
  }
  return ids;
}

// The text's tokens as a prompt of `generate --prompt` gets them (special tokens such as bos added).
std::vector<int32_t> tokens_of(const LLMEngine& engine, const ParsedArgs& a) {
  if (a.has("--token-ids")) return parse_token_ids(*a.get("--token-ids"));
  const std::string path = *a.get("--file");
  const std::string text = read_text(path);
  MINIVLLM_CHECK(engine.tokenizer() != nullptr)
      << "model '" << engine.config().model << "' has no tokenizer: pass --token-ids instead of --file";
  std::vector<int32_t> ids = engine.tokenizer()->encode(text, /*add_special_tokens=*/true);
  MINIVLLM_CHECK(ids.size() >= 2) << "text file '" << path << "' is " << ids.size()
                                  << " token(s); perplexity needs at least 2 (the first is only context)";
  return ids;
}

UsageError stride_error(int64_t stride, int64_t window) {
  return UsageError("--stride " + std::to_string(stride) + " exceeds the window (" + std::to_string(window) +
                    "): the tokens between windows would not be scored");
}

nlohmann::json to_json(const PerplexityResult& r, int64_t num_tokens, int64_t window, int64_t stride,
                       const LLMEngine& engine) {
  nlohmann::json windows = nlohmann::json::array();
  for (const PerplexityWindow& w : r.windows) {
    windows.push_back({{"begin", w.begin}, {"end", w.end}, {"first_scored", w.first_scored}, {"nll_sum", w.nll_sum}});
  }
  return {{"model", engine.config().model},
          {"kv_cache_dtype", dtype_name(engine.config().kv_cache_element)},
          {"num_tokens", num_tokens},
          {"window", window},
          {"stride", stride},
          {"num_scored", r.num_scored},
          {"nll_sum", r.nll_sum},
          {"mean_nll", r.mean_nll()},
          {"perplexity", r.perplexity()},
          {"windows", windows}};
}

}  // namespace

int run_perplexity(const std::vector<std::string>& argv) {
  ArgParser p("perplexity", "perplexity --model M (--file TEXT | --token-ids JSON) [--window N] [--stride S] [options]",
              "The mean negative log-likelihood (natural log) of the text's tokens and its perplexity,\n"
              "exp(mean NLL), from teacher-forced prefills of windows of N tokens starting every S tokens:\n"
              "each token is scored once, in the first window that holds it after some context; the\n"
              "text's first token (and with S = N each window's first) is context only.");
  p.option("--file", "TEXT", "the text file, tokenized as a prompt (the tokenizer's bos added)")
      .option("--token-ids", "JSON", "token ids instead of a file, e.g. '[1,2,3]'")
      .option("--window", "N", "tokens a prefill sees (default 512, or max_model_len when smaller)")
      .option("--stride", "S", "tokens between window starts, 1..N (default N / 2)")
      .flag("--json", "print {num_tokens, num_scored, nll_sum, mean_nll, perplexity, windows, ...}");
  add_engine_options(p);
  return run_command(p, argv, [](const ParsedArgs& a) {
    if (a.has("--file") == a.has("--token-ids")) throw UsageError("give exactly one of --file or --token-ids");
    const std::optional<int64_t> window_flag = a.get_optional_int("--window", 2, 1 << 30);
    const std::optional<int64_t> stride_flag = a.get_optional_int("--stride", 1, 1 << 30);
    if (window_flag && stride_flag && *stride_flag > *window_flag) throw stride_error(*stride_flag, *window_flag);
    const EngineConfig config = engine_config_from(a);
    LLMEngine engine(config);
    // The defaults and the window's bound need the resolved max_model_len (capped by the model's).
    const int64_t max_len = engine.config().max_model_length;
    const int64_t window = window_flag.value_or(std::min(kDefaultWindow, max_len));
    if (window > max_len) {
      throw UsageError("--window " + std::to_string(window) + " exceeds max_model_len " + std::to_string(max_len) +
                       " (raise --max-model-len or lower --window)");
    }
    const int64_t stride = stride_flag.value_or(std::max<int64_t>(window / 2, 1));
    if (stride > window) throw stride_error(stride, window);
    const std::vector<int32_t> tokens = tokens_of(engine, a);
    const PerplexityResult r = perplexity(engine, tokens, window, stride);
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (a.has("--json")) {
      std::cout << dump_json(to_json(r, n, window, stride, engine)) << std::endl;
    } else {
      char line[256];
      std::snprintf(line, sizeof line,
                    "Perplexity: %.4f (mean NLL %.5f over %lld of %lld tokens; %zu window%s of %lld, stride %lld)",
                    r.perplexity(), r.mean_nll(), static_cast<long long>(r.num_scored), static_cast<long long>(n),
                    r.windows.size(), r.windows.size() == 1 ? "" : "s", static_cast<long long>(window),
                    static_cast<long long>(stride));
      std::cout << line << std::endl;
    }
    return kExitOk;
  });
}

}  // namespace minivllm::cli
