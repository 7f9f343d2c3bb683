// minivllm command line: dispatches to one subcommand per file (cmd_*.cc).
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli_io.h"
#include "cli/commands.h"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(const std::vector<std::string>&);
  const char* summary;
};

constexpr Subcommand kSubcommands[] = {
    {"generate", minivllm::cli::run_generate, "complete prompts (text, token ids or chat messages)"},
    {"chat", minivllm::cli::run_chat, "interactive chat, streaming the replies"},
    {"tokenize", minivllm::cli::run_tokenize, "JSON array of strings on stdin -> JSON array of id arrays"},
    {"detokenize", minivllm::cli::run_detokenize, "JSON array of id arrays on stdin -> JSON array of strings"},
    {"template", minivllm::cli::run_template, "JSON messages on stdin -> the rendered chat prompt"},
    {"bench", minivllm::cli::run_bench, "throughput (nano-vllm's bench.py workload) and decode speed"},
    {"perplexity", minivllm::cli::run_perplexity, "mean negative log-likelihood and perplexity of a text file"},
    {"serve", minivllm::cli::run_serve, "OpenAI-compatible HTTP server (completions, chat, streaming)"},
    {"knobs", minivllm::cli::run_knobs, "the MINIVLLM_* environment variables: values, defaults, why"},
};

void print_usage(std::ostream& os) {
  os << "usage: minivllm <command> [options]   (minivllm <command> --help for its options)\n\ncommands:\n";
  for (const Subcommand& c : kSubcommands) {
    std::string name = c.name;
    name.resize(12, ' ');
    os << "  " << name << c.summary << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  if (argc < 2) {
    minivllm::cli::print_error("no command given");
    print_usage(std::cerr);
    return minivllm::cli::kExitUsageError;
  }
  const std::string command = argv[1];
  if (command == "--help" || command == "-h" || command == "help") {
    print_usage(std::cout);
    return minivllm::cli::kExitOk;
  }
  const std::vector<std::string> rest(argv + 2, argv + argc);
  for (const Subcommand& c : kSubcommands) {
    if (command == c.name) return c.run(rest);
  }
  minivllm::cli::print_error("unknown command '" + command + "' (try minivllm --help)");
  return minivllm::cli::kExitUsageError;
}
