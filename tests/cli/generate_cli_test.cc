// `minivllm generate / bench / chat` on models with weights: the tiny random Qwen3 checkpoint
// (greedy ids from transformers in tests/goldens/qwen3-tiny/goldens.json), the real trained
// stories260K GGUF (llama2.c's greedy text from BOS), and the default SmolLM2 GGUF when fetched.
// Each test skips when its model is not there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "run_cli.h"
#include "scoped_env.h"

namespace minivllm::test {
namespace {

const std::string kTiny = MINIVLLM_SOURCE_DIR "/tests/goldens/qwen3-tiny";
const std::string kStories = MINIVLLM_SHARED_DIR "/models/stories260K/stories260K.gguf";
const std::string kSmolLM2 = MINIVLLM_SOURCE_DIR "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
// Small engine settings keep start-up fast on the CPU.
const std::vector<std::string> kSmallEngine = {"--device", "cpu", "--max-num-seqs", "8", "--max-model-len", "512",
                                               "--num-kvcache-blocks", "16", "--num-threads", "1"};

#define SKIP_WITHOUT(path) \
  if (!std::filesystem::exists(path)) GTEST_SKIP() << (path) << " does not exist yet"

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(CliGenerate, GreedyIdsMatchTransformers) {
  SKIP_WITHOUT(kTiny + "/model.safetensors");
  const nlohmann::json g = nlohmann::json::parse(read_text_file(kTiny + "/goldens.json"));
  nlohmann::json prompts = nlohmann::json::array();
  for (const auto& c : g["cases"]) prompts.push_back(c["prompt_ids"]);
  const int max_tokens = g["cases"][0]["max_new_tokens"];
  const CliResult r = run_cli(concat({"generate", "--model", kTiny, "--prompt-ids", prompts.dump(), "--max-tokens",
                                      std::to_string(max_tokens), "--temperature", "0", "--ignore-eos", "--json"},
                                     kSmallEngine));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out.size(), g["cases"].size());
  for (size_t i = 0; i < out.size(); ++i) {
    const auto& c = g["cases"][i];
    EXPECT_EQ(out[i]["prompt_token_ids"], c["prompt_ids"]);
    EXPECT_EQ(out[i]["finish_reason"], "length");
    EXPECT_FALSE(out[i].contains("error"));
    // Compare up to the first step whose top-1/top-2 logit margin is too small to call.
    const auto& want = c["greedy_ids"];
    const auto& got = out[i]["token_ids"];
    ASSERT_EQ(got.size(), want.size()) << "case " << i;
    for (size_t t = 0; t < want.size() && c["greedy_margins"][t].get<double>() > 1e-2; ++t) {
      EXPECT_EQ(got[t], want[t]) << "case " << i << " token " << t;
    }
  }
}

// --n, --logprobs and the penalties: N entries per prompt with their index, logprobs per token
// with K alternatives, the same seed giving the same choices; bad values name the flag.
TEST(CliGenerate, NLogprobsAndPenalties) {
  SKIP_WITHOUT(kTiny + "/model.safetensors");
  const std::vector<std::string> args =
      concat({"generate", "--model", kTiny, "--prompt-ids", "[[5,6,7,8,9],[3,4]]", "--max-tokens", "4", "--n", "3",
              "--seed", "7", "--logprobs", "2", "--presence-penalty", "0.5", "--frequency-penalty", "0.5",
              "--repetition-penalty", "1.2", "--ignore-eos", "--json"},
             kSmallEngine);
  const CliResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out.size(), 6u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i]["index"], static_cast<int>(i % 3));
    EXPECT_EQ(out[i]["prompt_token_ids"].size(), i < 3 ? 5u : 2u);
    ASSERT_EQ(out[i]["logprobs"].size(), 4u);
    for (size_t t = 0; t < 4; ++t) {
      const auto& lp = out[i]["logprobs"][t];
      EXPECT_EQ(lp["token_id"], out[i]["token_ids"][t]);
      EXPECT_LE(lp["logprob"].get<double>(), 0.0);
      EXPECT_EQ(lp["top"].size(), 2u);
    }
  }
  const CliResult again = run_cli(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out), out);

  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--n", "0"}, {"--logprobs", "21"}, {"--presence-penalty", "3"}, {"--frequency-penalty", "-2.5"},
           {"--repetition-penalty", "0"}}) {
    const CliResult bad =
        run_cli(concat({"generate", "--model", kTiny, "--prompt-ids", "[[5,6]]", "--json", flag, value}, kSmallEngine));
    EXPECT_NE(bad.exit_code, 0) << flag;
    EXPECT_NE(bad.err.find(flag), std::string::npos) << bad.err;
  }
}

// --prompt-logprobs K: one entry per prompt token after the first, that token with K alternatives;
// without --json it is a usage error (nothing would show them).
TEST(CliGenerate, PromptLogprobs) {
  SKIP_WITHOUT(kTiny + "/model.safetensors");
  const CliResult r = run_cli(concat({"generate", "--model", kTiny, "--prompt-ids", "[[5,6,7,8,9],[3]]", "--max-tokens",
                                      "2", "--prompt-logprobs", "1", "--ignore-eos", "--json"},
                                     kSmallEngine));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[0]["prompt_logprobs"].size(), 4u);
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_EQ(out[0]["prompt_logprobs"][j]["token_id"], 6 + static_cast<int>(j));
    EXPECT_LE(out[0]["prompt_logprobs"][j]["logprob"].get<double>(), 0.0);
    EXPECT_EQ(out[0]["prompt_logprobs"][j]["top"].size(), 1u);
  }
  EXPECT_TRUE(out[1]["prompt_logprobs"].empty());
  EXPECT_FALSE(out[0].contains("logprobs"));
  const CliResult text =
      run_cli(concat({"generate", "--model", kTiny, "--prompt-ids", "[[5,6]]", "--prompt-logprobs", "0"}, kSmallEngine));
  EXPECT_NE(text.exit_code, 0);
  EXPECT_NE(text.err.find("--prompt-logprobs needs --json"), std::string::npos) << text.err;
}

TEST(CliGenerate, RejectedPromptIsReportedAndTheOthersRun) {
  SKIP_WITHOUT(kTiny + "/model.safetensors");
  const CliResult r = run_cli(concat({"generate", "--model", kTiny, "--prompt-ids", "[[1,2,3],[600],[4]]",
                                      "--max-tokens", "5", "--ignore-eos", "--json", "--seed", "1"},
                                     kSmallEngine));
  EXPECT_EQ(r.exit_code, 1);
  const nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0]["token_ids"].size(), 5u);
  EXPECT_EQ(out[2]["token_ids"].size(), 5u);
  EXPECT_EQ(out[1]["finish_reason"], "error");
  EXPECT_NE(out[1]["error"].get<std::string>().find("600"), std::string::npos) << out[1];
  EXPECT_NE(r.err.find("error: prompt 1 rejected"), std::string::npos) << r.err;
}

TEST(CliGenerate, TextPromptWithoutTokenizerIsAnError) {
  SKIP_WITHOUT(kTiny + "/model.safetensors");
  const CliResult r = run_cli(concat({"generate", "--model", kTiny, "--prompt", "hi"}, kSmallEngine));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no tokenizer"), std::string::npos) << r.err;
}

TEST(CliGenerate, StoriesGreedyTextFromBos) {
  SKIP_WITHOUT(kStories);
  // An empty text prompt is just BOS; llama2.c's run.c greedy output on these weights.
  const CliResult r =
      run_cli(concat({"generate", "--model", kStories, "--prompt", "", "--temperature", "0", "--max-tokens", "14"},
                     kSmallEngine));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("Once upon a time, there was a little girl named Lily", 0), 0u) << r.out;
}

TEST(CliGenerate, StopStringCutsTheText) {
  SKIP_WITHOUT(kStories);
  const CliResult r = run_cli(concat({"generate", "--model", kStories, "--prompt", "", "--temperature", "0",
                                      "--max-tokens", "30", "--stop", " girl", "--json"},
                                     kSmallEngine));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out[0]["text"], "Once upon a time, there was a little");
  EXPECT_EQ(out[0]["finish_reason"], "stop");
}

TEST(CliBench, WorkloadFileRunsAndCountsTokens) {
  SKIP_WITHOUT(kTiny + "/model.safetensors");
  const std::string path = testing::TempDir() + "/cli_bench_workload.json";
  std::ofstream(path) << R"({"prompt_token_ids": [[1,2,3,4,5],[7,8,9],[10,11]], "max_tokens": [5, 9, 3]})";
  const CliResult js = run_cli(concat({"bench", "--model", kTiny, "--workload", path, "--decode-tokens", "8", "--json"},
                                      kSmallEngine));
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const nlohmann::json report = nlohmann::json::parse(js.out);
  EXPECT_EQ(report["num_seqs"], 3);
  EXPECT_EQ(report["prompt_tokens"], 10);
  EXPECT_EQ(report["output_tokens"], 17);
  EXPECT_EQ(report["decode_tokens"], 7);  // the first of the 8 comes from the prefill step
  EXPECT_GT(report["throughput_tok_s"].get<double>(), 0.0);
  EXPECT_GT(report["decode_tok_s"].get<double>(), 0.0);

  const CliResult text = run_cli(
      concat({"bench", "--model", kTiny, "--workload", path, "--num-seqs", "2", "--decode-tokens", "4"}, kSmallEngine));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(std::regex_search(text.out, std::regex(R"(^Total: 14tok, Time: \d+\.\d\ds, Throughput: \d+\.\d\dtok/s\n)")))
      << text.out;
  EXPECT_TRUE(std::regex_search(text.out, std::regex(R"(\nDecode: 3tok, Time: \d+\.\d\ds, Throughput: \d+\.\d\dtok/s)")))
      << text.out;
}

// --decode-context: the batch-1 run's prompt length (the workload's first prompt repeated), reported
// in the JSON; one that cannot fit max_model_len with the decode tokens is refused by name.
TEST(CliBench, DecodeContextSetsTheDecodeRunsPrompt) {
  SKIP_WITHOUT(kTiny + "/model.safetensors");
  const std::string path = testing::TempDir() + "/cli_bench_decode_context.json";
  std::ofstream(path) << R"({"prompt_token_ids": [[1,2,3,4,5]], "max_tokens": [2]})";
  const CliResult js = run_cli(concat(
      {"bench", "--model", kTiny, "--workload", path, "--decode-tokens", "4", "--decode-context", "300", "--json"},
      kSmallEngine));
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const nlohmann::json report = nlohmann::json::parse(js.out);
  EXPECT_EQ(report["decode_context"], 300);
  EXPECT_EQ(report["decode_tokens"], 3);
  const CliResult text = run_cli(concat(
      {"bench", "--model", kTiny, "--workload", path, "--num-seqs", "0", "--decode-tokens", "2", "--decode-context", "7"},
      kSmallEngine));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("(batch 1, 7-token prompt)"), std::string::npos) << text.out;

  // --decode-batch: that many prompts decode together; every sequence's tokens past its prefill count.
  const CliResult batch = run_cli(concat({"bench", "--model", kTiny, "--workload", path, "--num-seqs", "0",
                                          "--decode-tokens", "5", "--decode-context", "20", "--decode-batch", "3",
                                          "--json"},
                                         kSmallEngine));
  ASSERT_EQ(batch.exit_code, 0) << batch.err;
  const nlohmann::json batch_report = nlohmann::json::parse(batch.out);
  EXPECT_EQ(batch_report["decode_batch"], 3);
  EXPECT_EQ(batch_report["decode_tokens"], 12);  // 3 x (5 - the prefill step's token)
  const CliResult batch_text = run_cli(concat({"bench", "--model", kTiny, "--workload", path, "--num-seqs", "0",
                                               "--decode-tokens", "2", "--decode-context", "7", "--decode-batch", "2"},
                                              kSmallEngine));
  ASSERT_EQ(batch_text.exit_code, 0) << batch_text.err;
  EXPECT_NE(batch_text.out.find("Decode: 2tok"), std::string::npos) << batch_text.out;
  EXPECT_NE(batch_text.out.find("(batch 2, 7-token prompts)"), std::string::npos) << batch_text.out;
  const CliResult too_many = run_cli(concat({"bench", "--model", kTiny, "--workload", path, "--num-seqs", "0",
                                             "--decode-batch", "9"},
                                            kSmallEngine));
  EXPECT_NE(too_many.exit_code, 0);
  EXPECT_NE(too_many.err.find("--decode-batch 9 exceeds --max-num-seqs 8"), std::string::npos) << too_many.err;

  const CliResult too_long = run_cli(concat(
      {"bench", "--model", kTiny, "--workload", path, "--decode-tokens", "16", "--decode-context", "500"}, kSmallEngine));
  EXPECT_NE(too_long.exit_code, 0);
  EXPECT_NE(too_long.err.find("--decode-context 500 plus --decode-tokens 16 exceeds max_model_len 512"),
            std::string::npos)
      << too_long.err;
}

// --repeat 3: three runs, their figures and the median; each run starts from an empty prefix
// cache, so the 300-token prompt (one full 256-token block) is never found cached, though every run
// sends it again.
TEST(CliBench, RepeatRunsFromAnEmptyPrefixCache) {
  SKIP_WITHOUT(kTiny + "/model.safetensors");
  const std::string path = testing::TempDir() + "/cli_bench_repeat_workload.json";
  std::string prompt;
  for (int i = 0; i < 300; ++i) {
    if (i > 0) prompt += ',';
    prompt += std::to_string(1 + i % 97);
  }
  std::ofstream(path) << R"({"prompt_token_ids": [[)" << prompt << R"(], [5, 6, 7]], "max_tokens": [2, 4]})";
  const CliResult js = run_cli(
      concat({"bench", "--model", kTiny, "--workload", path, "--decode-tokens", "0", "--repeat", "3", "--json"},
             kSmallEngine));
  ASSERT_EQ(js.exit_code, 0) << js.err;
  const nlohmann::json report = nlohmann::json::parse(js.out);
  ASSERT_EQ(report["throughput_runs_tok_s"].size(), 3u) << js.out;
  std::vector<double> runs;
  for (const auto& v : report["throughput_runs_tok_s"]) runs.push_back(v.get<double>());
  std::sort(runs.begin(), runs.end());
  EXPECT_DOUBLE_EQ(report["throughput_tok_s"].get<double>(), runs[1]) << "the median run";
  EXPECT_EQ(report["output_tokens"], 6);
  EXPECT_EQ(report["prefix_cache_hit_tokens"], 0) << "a later run found the earlier run's prompt cached";

  const CliResult text = run_cli(concat(
      {"bench", "--model", kTiny, "--workload", path, "--decode-tokens", "0", "--repeat", "2"}, kSmallEngine));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(std::regex_search(text.out, std::regex(R"(^(Total: 6tok, [^\n]*\n){2}Median of 2 runs: \d+\.\d\dtok/s)")))
      << text.out;
  const CliResult bad = run_cli(concat({"bench", "--model", kTiny, "--workload", path, "--repeat", "0"}, kSmallEngine));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--repeat"), std::string::npos) << bad.err;
}

// A workload step that fails (MINIVLLM_STEP_FAULT: the batch holding token 9 throws, as a device
// error would) fails the bench, naming the error, instead of reporting the throughput of what was
// left.
TEST(CliBench, FailedSequencesFailTheRun) {
  SKIP_WITHOUT(kTiny + "/model.safetensors");
  const std::string path = testing::TempDir() + "/cli_bench_fault_workload.json";
  std::ofstream(path) << R"({"prompt_token_ids": [[1,2,3,4,5],[7,8,9],[10,11]], "max_tokens": [5, 9, 3]})";
  const CliResult r = with_env({{"MINIVLLM_STEP_FAULT", "9"}}, [&] {
    return run_cli(concat({"bench", "--model", kTiny, "--workload", path, "--decode-tokens", "0", "--json"},
                          kSmallEngine));
  });
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find("sequences failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("injected step fault"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("throughput_tok_s"), std::string::npos) << r.out;
}

// MINIVLLM_PROFILE_HOST=1: each process of a world_size 2 run prints its host-time table at exit,
// rank 0 its engine's step parts and the worker its reads and launches, one launch per step on
// each; without it, nothing.
TEST(CliBench, HostProfileTablesAtExit) {
  SKIP_WITHOUT(kTiny + "/model.safetensors");
  const std::string path = testing::TempDir() + "/cli_bench_host_profile.json";
  std::ofstream(path) << R"({"prompt_token_ids": [[1,2,3,4,5],[7,8,9]], "max_tokens": [4, 6]})";
  const std::vector<std::string> args = concat(
      {"bench", "--model", kTiny, "--workload", path, "--decode-tokens", "0", "--tensor-parallel-size", "2"},
      kSmallEngine);
  const CliResult plain = run_cli(args);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err.find("[host-profile]"), std::string::npos) << plain.err;
  const CliResult r = with_env({{"MINIVLLM_PROFILE_HOST", "1"}}, [&] { return run_cli(args); });
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto calls = [&](const std::string& scope) {
    std::smatch m;
    if (!std::regex_search(r.err, m, std::regex("\\[host-profile\\] +" + scope + " +(\\d+) "))) return -1;
    return std::stoi(m[1]);
  };
  const int steps = calls("engine\\.launch");
  EXPECT_GE(steps, 6) << r.err;  // at least one step per output token of the longer sequence
  EXPECT_EQ(calls("group\\.write"), steps) << r.err;
  EXPECT_EQ(calls("worker\\.launch"), steps) << r.err;
  EXPECT_EQ(calls("engine\\.collect"), steps) << r.err;
}

// A profiling switch with a value other than 0 or 1 stops the run before any step, naming it (it
// was once read as "anything but 0 is on"), with world_size 2 as with 1.
TEST(CliBench, BadProfileSwitchIsAnError) {
  SKIP_WITHOUT(kTiny + "/model.safetensors");
  const std::string path = testing::TempDir() + "/cli_bench_bad_switch.json";
  std::ofstream(path) << R"({"prompt_token_ids": [[1,2,3]], "max_tokens": [2]})";
  for (const char* name : {"MINIVLLM_PROFILE_HOST", "MINIVLLM_PROFILE_STEPS"}) {
    for (const char* tp : {"1", "2"}) {
      SCOPED_TRACE(std::string(name) + " tp " + tp);
      const CliResult r = with_env({{name, "yes"}}, [&] {
        return run_cli(concat(
            {"bench", "--model", kTiny, "--workload", path, "--decode-tokens", "0", "--tensor-parallel-size", tp},
            kSmallEngine));
      });
      EXPECT_NE(r.exit_code, 0) << r.out;
      EXPECT_NE(r.err.find(std::string(name) + "=yes must be 0 or 1"), std::string::npos) << r.err;
    }
  }
}

TEST(CliBench, DryRunReportsTheSeedsWorkloadTotals) {
  // Totals from python3's random.seed(0) draw (tools/make_bench_workload.py checks the same);
  // the first 4 of the 256 sequences: sum(map(len, p[:4])) = 2680, sum(m[:4]) = 2607.
  const CliResult all = run_cli({"bench", "--dry-run", "--json"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(nlohmann::json::parse(all.out),
            (nlohmann::json{{"num_seqs", 256}, {"prompt_tokens", 142827}, {"output_tokens", 133966}}));
  const CliResult four = run_cli({"bench", "--dry-run", "--num-seqs", "4"});
  ASSERT_EQ(four.exit_code, 0) << four.err;
  EXPECT_EQ(four.out, "Workload: 4 sequences, 2680 prompt tokens, 2607 output tokens\n");
  const CliResult too_many = run_cli({"bench", "--dry-run", "--num-seqs", "300"});
  EXPECT_EQ(too_many.exit_code, 1);
  EXPECT_NE(too_many.err.find("--num-seqs 300"), std::string::npos) << too_many.err;
}

TEST(CliChat, StreamsTheSameReplyAsGenerate) {
  SKIP_WITHOUT(kSmolLM2);
  const std::vector<std::string> sampling = {"--temperature", "0", "--max-tokens", "16"};
  const CliResult chat = run_cli(concat(concat({"chat", "--model", kSmolLM2}, sampling), kSmallEngine),
                                 "Hi\n/exit\nnot read\n");
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_EQ(chat.err.find("error"), std::string::npos) << chat.err;
  EXPECT_NE(chat.err.find("> "), std::string::npos) << chat.err;
  const CliResult gen = run_cli(concat(concat({"generate", "--model", kSmolLM2, "--chat", "Hi", "--json"}, sampling),
                                       kSmallEngine));
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  const std::string reply = nlohmann::json::parse(gen.out)[0]["text"];
  EXPECT_FALSE(reply.empty());
  EXPECT_EQ(chat.out, reply + "\n");
}

TEST(CliChat, KeepsTheConversation) {
  SKIP_WITHOUT(kSmolLM2);
  // Two turns, then end of input: two replies, each ended by a newline; the second turn's prompt
  // holds the first exchange, so it must differ from asking the second question alone.
  const std::vector<std::string> args = concat({"chat", "--model", kSmolLM2, "--temperature", "0", "--max-tokens",
                                                "12", "--system", "Answer briefly."},
                                               kSmallEngine);
  const CliResult two = run_cli(args, "My name is Ada.\nWhat is my name?\n");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  const CliResult one = run_cli(args, "What is my name?\n");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_FALSE(one.out.empty());
  EXPECT_GT(two.out.size(), one.out.size());
  EXPECT_NE(two.out.substr(two.out.size() - one.out.size()), one.out) << two.out;
}

// A thinking model's thoughts stream to stderr, its answers to stdout and the conversation:
// Qwen3-0.6B's tokenizer and template (../shared) with dummy weights, every token steered to <think>
// by logit_bias, so the first opens the block, the rest are its thoughts and the answer is empty.
TEST(CliChat, ThoughtsGoToStderr) {
  const std::string qwen3 = std::string(MINIVLLM_SHARED_DIR) + "/models/qwen3-0.6b";
  SKIP_WITHOUT(qwen3 + "/tokenizer.json");
  const CliResult r = run_cli({"chat", "--model", qwen3, "--load-format", "dummy", "--device", "cpu",
                               "--max-model-len", "256", "--num-kvcache-blocks", "16", "--temperature", "0",
                               "--max-tokens", "3", "--logit-bias", "151667=100"},
                              "Hi\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "\n");
  EXPECT_NE(r.err.find("<think><think>\n"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace minivllm::test
