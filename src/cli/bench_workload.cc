#include "cli/bench_workload.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/json_input.h"
#include "cli/py_random.h"
#include "common/check.h"

namespace minivllm::cli {

int64_t BenchWorkload::num_prompt_tokens() const {
  int64_t n = 0;
  for (const auto& p : prompt_token_ids) n += static_cast<int64_t>(p.size());
  return n;
}

int64_t BenchWorkload::num_output_tokens() const {
  int64_t n = 0;
  for (int m : max_tokens) n += m;
  return n;
}

void BenchWorkload::truncate(size_t n) {
  if (n >= prompt_token_ids.size()) return;
  prompt_token_ids.resize(n);
  max_tokens.resize(n);
}

BenchWorkload make_seeds_workload(int num_seqs) {
  constexpr int kMaxInputLen = 1024, kMaxOutputLen = 1024;
  PyRandom rng(0);
  BenchWorkload w;
  for (int i = 0; i < num_seqs; ++i) {
    // range(randint(100, max_input_len)) is evaluated before the ids are drawn.
    const int64_t len = rng.randint(100, kMaxInputLen);
    std::vector<int32_t> ids(static_cast<size_t>(len));
    for (int32_t& id : ids) id = static_cast<int32_t>(rng.randint(0, 10000));
    w.prompt_token_ids.push_back(std::move(ids));
  }
  for (int i = 0; i < num_seqs; ++i) w.max_tokens.push_back(static_cast<int>(rng.randint(100, kMaxOutputLen)));
  return w;
}

BenchWorkload load_workload(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  MINIVLLM_CHECK(in) << "cannot open workload file '" << path << "'";
  std::ostringstream text;
  text << in.rdbuf();
  const nlohmann::ordered_json j =
      parse_json_input(text.str(), "workload file '" + path + "'", "{\"prompt_token_ids\": [[...]], \"max_tokens\": [...]}");
  MINIVLLM_CHECK(j.is_object() && j.contains("prompt_token_ids") && j.contains("max_tokens"))
      << "workload file '" << path << "' must be an object with 'prompt_token_ids' and 'max_tokens'";
  const auto& prompts = j.at("prompt_token_ids");
  const auto& max_tokens = j.at("max_tokens");
  MINIVLLM_CHECK(prompts.is_array() && max_tokens.is_array())
      << "workload file '" << path << "': 'prompt_token_ids' must be arrays of token ids and 'max_tokens' an array of ints";
  BenchWorkload w;
  for (size_t i = 0; i < prompts.size(); ++i) {
    MINIVLLM_CHECK(prompts[i].is_array()) << "workload file '" << path << "': prompt " << i << " is not an array: "
                                          << json_excerpt(prompts[i]);
    std::vector<int32_t> ids;
    for (size_t k = 0; k < prompts[i].size(); ++k) {
      const std::optional<int32_t> id = json_token_id(prompts[i][k]);
      MINIVLLM_CHECK(id.has_value()) << "workload file '" << path << "': prompt " << i << ", id " << k << ": "
                                     << not_a_token_id(prompts[i][k]);
      ids.push_back(*id);
    }
    w.prompt_token_ids.push_back(std::move(ids));
  }
  for (size_t i = 0; i < max_tokens.size(); ++i) {
    const std::optional<int32_t> m = json_token_id(max_tokens[i]);  // an int32, like a token id
    MINIVLLM_CHECK(m.has_value()) << "workload file '" << path << "': max_tokens[" << i << "] is not a 32-bit integer: "
                                  << json_excerpt(max_tokens[i]);
    w.max_tokens.push_back(*m);
  }
  MINIVLLM_CHECK(!w.prompt_token_ids.empty()) << "workload file '" << path << "' has no prompts";
  MINIVLLM_CHECK_EQ(w.prompt_token_ids.size(), w.max_tokens.size())
      << "workload file '" << path << "': one max_tokens per prompt";
  for (size_t i = 0; i < w.max_tokens.size(); ++i) {
    MINIVLLM_CHECK(w.max_tokens[i] >= 1) << "workload file '" << path << "': max_tokens[" << i << "] must be >= 1";
    MINIVLLM_CHECK(!w.prompt_token_ids[i].empty()) << "workload file '" << path << "': prompt " << i << " is empty";
  }
  return w;
}

}  // namespace minivllm::cli
