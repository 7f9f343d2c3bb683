// `minivllm perplexity` on the trained stories260K (and SmolLM2 when fetched): the figure is exp of
// the mean NLL, agrees with the logprobs `generate` reports for the same tokens, follows the
// windows, passes engine flags through (the KV cache dtype, tensor parallelism), and names what is
// wrong with a bad file, window or stride.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "run_cli.h"

namespace minivllm::test {
namespace {

const std::string kStories = MINIVLLM_SHARED_DIR "/models/stories260K/stories260K.gguf";
const std::string kSmolLM2 = MINIVLLM_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::vector<std::string> kSmallEngine = {"--device", "cpu", "--max-num-seqs", "8", "--max-model-len", "512",
                                               "--num-kvcache-blocks", "16", "--num-threads", "1"};
const char* kStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw "
    "a big red ball under a tree. She ran to the ball and kicked it high in the sky. Her friend Tom came to play "
    "with her. They played with the ball all day and had a lot of fun. When the sun went down, they went home happy.";

#define SKIP_WITHOUT(path) \
  if (!std::filesystem::exists(path)) GTEST_SKIP() << (path) << " does not exist yet"

// Named after the test too: ctest may run the tests of this file at once, each in its process.
std::string write_temp(const std::string& name, const std::string& text) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::filesystem::path p = std::filesystem::temp_directory_path() / ("minivllm_ppl_" + test + "_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

nlohmann::json perplexity_json(const std::string& model, std::vector<std::string> args) {
  std::vector<std::string> all = {"perplexity", "--model", model, "--json"};
  all.insert(all.end(), args.begin(), args.end());
  all.insert(all.end(), kSmallEngine.begin(), kSmallEngine.end());
  const CliResult r = run_cli(all);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

std::vector<int32_t> story_tokens() {
  const CliResult r = run_cli({"tokenize", "--model", kStories, "--add-special-tokens"},
                              nlohmann::json::array({kStory}).dump());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out).at(0).get<std::vector<int32_t>>();
}

TEST(CliPerplexity, IsExpOfTheMeanNllOfTheTextsTokens) {
  SKIP_WITHOUT(kStories);
  const nlohmann::json j = perplexity_json(kStories, {"--file", write_temp("story.txt", kStory)});
  const size_t n = story_tokens().size();
  EXPECT_EQ(j["num_tokens"], n);  // tokenized as a prompt: bos first
  EXPECT_EQ(j["num_scored"], n - 1);  // one window (the default 512 > n): all but the first token
  const double ppl = j["perplexity"], mean = j["mean_nll"];
  EXPECT_TRUE(std::isfinite(ppl));
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 512.0);  // a trained model beats the uniform guess over its 512 tokens
  EXPECT_NEAR(ppl, std::exp(mean), 1e-9 * ppl);
  EXPECT_NEAR(mean, j["nll_sum"].get<double>() / j["num_scored"].get<double>(), 1e-12);
}

// Independently: greedy `generate` from a prefix reports each new token's logprob; the NLL of
// prefix + continuation less the NLL of the prefix (one window each, so the prefix is scored alike)
// is minus their sum.
TEST(CliPerplexity, AgreesWithTheLogprobsOfGenerate) {
  SKIP_WITHOUT(kStories);
  std::vector<int32_t> prefix = story_tokens();
  prefix.resize(20);
  std::vector<std::string> gen = {"generate", "--model", kStories, "--prompt-ids", nlohmann::json({prefix}).dump(),
                                  "--max-tokens", "24", "--temperature", "0", "--ignore-eos", "--logprobs", "0",
                                  "--json"};
  gen.insert(gen.end(), kSmallEngine.begin(), kSmallEngine.end());
  const CliResult r = run_cli(gen);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out).at(0);
  std::vector<int32_t> all = prefix;
  double logprob_sum = 0;
  for (const auto& lp : out["logprobs"]) {
    all.push_back(lp["token_id"]);
    logprob_sum += lp["logprob"].get<double>();
  }
  ASSERT_EQ(all.size(), 44u);
  const nlohmann::json whole = perplexity_json(kStories, {"--token-ids", nlohmann::json(all).dump(), "--window", "44"});
  const nlohmann::json head = perplexity_json(kStories, {"--token-ids", nlohmann::json(prefix).dump(), "--window", "20"});
  EXPECT_EQ(whole["num_scored"], 43);
  EXPECT_NEAR(whole["nll_sum"].get<double>() - head["nll_sum"].get<double>(), -logprob_sum,
              1e-3 * (1 + std::abs(logprob_sum)));
}

TEST(CliPerplexity, WindowsAndStride) {
  SKIP_WITHOUT(kStories);
  const std::string file = write_temp("story.txt", kStory);
  const std::vector<int32_t> tokens = story_tokens();
  const int64_t n = static_cast<int64_t>(tokens.size());
  ASSERT_GT(n, 40);
  // Overlapping windows of 16 every 8: every token but the first, each once.
  const nlohmann::json half = perplexity_json(kStories, {"--file", file, "--window", "16", "--stride", "8"});
  EXPECT_EQ(half["window"], 16);
  EXPECT_EQ(half["stride"], 8);
  EXPECT_EQ(half["num_scored"], n - 1);
  double sum = 0;
  for (const auto& w : half["windows"]) sum += w["nll_sum"].get<double>();
  EXPECT_NEAR(sum, half["nll_sum"].get<double>(), 1e-9 * sum);
  // Its first window is the first 16 tokens alone.
  std::vector<int32_t> first16(tokens.begin(), tokens.begin() + 16);
  const nlohmann::json alone =
      perplexity_json(kStories, {"--token-ids", nlohmann::json(first16).dump(), "--window", "16"});
  EXPECT_NEAR(half["windows"][0]["nll_sum"].get<double>(), alone["nll_sum"].get<double>(), 1e-5);
  // Disjoint windows leave each window's first token as context only.
  const nlohmann::json disjoint = perplexity_json(kStories, {"--file", file, "--window", "16", "--stride", "16"});
  EXPECT_EQ(disjoint["num_scored"], n - static_cast<int64_t>(disjoint["windows"].size()));
  // Less context per token costs likelihood: one window over the text beats windows of 16.
  const nlohmann::json whole = perplexity_json(kStories, {"--file", file});
  EXPECT_LT(whole["perplexity"].get<double>(), disjoint["perplexity"].get<double>());
  // The default stride is half the window.
  EXPECT_EQ(perplexity_json(kStories, {"--file", file, "--window", "16"})["stride"], 8);
}

TEST(CliPerplexity, EngineFlagsPassThrough) {
  SKIP_WITHOUT(kStories);
  const std::string file = write_temp("story.txt", kStory);
  const nlohmann::json base = perplexity_json(kStories, {"--file", file});
  const nlohmann::json fp8 = perplexity_json(kStories, {"--file", file, "--kv-cache-dtype", "fp8"});
  EXPECT_NE(fp8["kv_cache_dtype"], base["kv_cache_dtype"]);
  EXPECT_NEAR(fp8["perplexity"].get<double>(), base["perplexity"].get<double>(),
              0.05 * base["perplexity"].get<double>());
  // Two ranks (worker processes on the CPU) score the same windows to float rounding.
  const nlohmann::json two = perplexity_json(kStories, {"--file", file, "--tensor-parallel-size", "2"});
  EXPECT_NEAR(two["nll_sum"].get<double>(), base["nll_sum"].get<double>(), 1e-4 * base["nll_sum"].get<double>());
}

void expect_error(std::vector<std::string> args, int exit_code, const std::string& names) {
  std::vector<std::string> all = {"perplexity", "--model", kStories};
  all.insert(all.end(), args.begin(), args.end());
  all.insert(all.end(), kSmallEngine.begin(), kSmallEngine.end());
  const CliResult r = run_cli(all);
  EXPECT_EQ(r.exit_code, exit_code) << r.err;
  EXPECT_NE(r.err.find(names), std::string::npos) << "stderr should name " << names << ": " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliPerplexity, ErrorsNameTheProblem) {
  SKIP_WITHOUT(kStories);
  const std::string file = write_temp("story.txt", kStory);
  expect_error({"--file", write_temp("empty.txt", "")}, 1, "is empty");
  expect_error({"--file", "/nonexistent/ppl.txt"}, 1, "/nonexistent/ppl.txt");
  expect_error({"--token-ids", "[1]"}, 1, "at least 2 tokens");
  expect_error({"--file", file, "--window", "1"}, 2, "--window");
  expect_error({"--file", file, "--window", "8", "--stride", "9"}, 2, "--stride 9 exceeds the window (8)");
  expect_error({"--file", file, "--window", "600"}, 2, "--window 600 exceeds max_model_len 512");
  expect_error({"--file", file, "--stride", "0"}, 2, "--stride");
  expect_error({}, 2, "--file or --token-ids");
  expect_error({"--file", file, "--token-ids", "[1,2]"}, 2, "--file or --token-ids");
}

TEST(CliPerplexity, SmolLM2OnEnglish) {
  SKIP_WITHOUT(kSmolLM2);
  const nlohmann::json j = perplexity_json(kSmolLM2, {"--file", write_temp("story.txt", kStory)});
  const double ppl = j["perplexity"];
  EXPECT_TRUE(std::isfinite(ppl));
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 100.0) << "a trained 135M model on plain English";
}

}  // namespace
}  // namespace minivllm::test
