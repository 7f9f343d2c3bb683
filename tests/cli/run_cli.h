// Runs the built minivllm binary with arguments and stdin; captures its exit status and output.
#pragma once

#include <string>
#include <vector>

namespace minivllm::test {

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text = "");

std::string read_text_file(const std::string& path);

}  // namespace minivllm::test
