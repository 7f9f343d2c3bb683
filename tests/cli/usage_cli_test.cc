// Usage errors exit with status 2 and a message naming the flag at fault; runtime errors exit 1.
#include <gtest/gtest.h>

#include "run_cli.h"

namespace minivllm::test {
namespace {

void expect_usage_error(const std::vector<std::string>& args, const std::string& names) {
  const CliResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(names), std::string::npos) << "stderr should name " << names << ": " << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliUsage, ErrorsNameTheFlag) {
  expect_usage_error({"generate", "--model", "m", "--prompt", "hi", "--max-tokens", "abc"}, "--max-tokens");
  expect_usage_error({"generate", "--model", "m", "--prompt", "hi", "--max-tokens", "0"}, "--max-tokens");
  expect_usage_error({"generate", "--model", "m", "--prompt", "hi", "--temperature", "x"}, "--temperature");
  expect_usage_error({"generate", "--model", "m", "--prompt", "hi", "--top-p", "1.5"}, "--top-p");
  expect_usage_error({"generate", "--model", "m", "--prompt", "hi", "--device", "tpu"}, "--device");
  expect_usage_error({"generate", "--model", "m", "--prompt", "hi", "--block-size", "20"}, "--block-size");
  expect_usage_error({"generate", "--model", "m", "--prompt", "hi", "--frobnicate"}, "--frobnicate");
  expect_usage_error({"generate", "--model", "m", "--prompt"}, "--prompt");
  expect_usage_error({"generate", "--prompt", "hi"}, "--model");
  expect_usage_error({"generate", "--model", "m"}, "--prompt-ids");
  expect_usage_error({"generate", "--model", "m", "--prompt", "a", "--chat", "b"}, "--chat");
  expect_usage_error({"generate", "--model", "m", "--prompt-ids", "[[1,2"}, "--prompt-ids");
  expect_usage_error({"generate", "--model", "m", "--prompt-ids", "[[1,\"x\"]]"}, "--prompt-ids");
  expect_usage_error({"template", "--model", "m", "--var", "enable_thinking"}, "--var");
  expect_usage_error({"bench", "--model", "m", "--num-seqs", "-3"}, "--num-seqs");
  expect_usage_error({"tokenize"}, "--model");
  expect_usage_error({"tokenize", "--model", "m", "stray"}, "stray");
  expect_usage_error({"frobnicate"}, "frobnicate");
  expect_usage_error({}, "command");
}

TEST(CliUsage, HelpForEachSubcommand) {
  for (const char* cmd : {"generate", "chat", "tokenize", "detokenize", "template", "bench", "perplexity"}) {
    const CliResult r = run_cli({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_EQ(r.out.rfind(std::string("usage: minivllm ") + cmd, 0), 0u) << r.out;
    EXPECT_NE(r.out.find("--model"), std::string::npos) << r.out;
  }
  EXPECT_EQ(run_cli({"--help"}).exit_code, 0);
}

TEST(CliUsage, MissingModelIsARuntimeErrorNamingThePath) {
  const CliResult r = run_cli({"generate", "--model", "/nonexistent/dir-for-cli-test", "--prompt", "hi"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("/nonexistent/dir-for-cli-test"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace minivllm::test
