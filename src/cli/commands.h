// The subcommands of the minivllm program; each takes the arguments after its name and returns the
// exit status (0 ok, 1 runtime error, 2 usage error).
#pragma once

#include <string>
#include <vector>

namespace minivllm::cli {

int run_generate(const std::vector<std::string>& argv);
int run_chat(const std::vector<std::string>& argv);
int run_tokenize(const std::vector<std::string>& argv);
int run_detokenize(const std::vector<std::string>& argv);
int run_template(const std::vector<std::string>& argv);
int run_bench(const std::vector<std::string>& argv);
int run_perplexity(const std::vector<std::string>& argv);
int run_serve(const std::vector<std::string>& argv);
int run_knobs(const std::vector<std::string>& argv);

}  // namespace minivllm::cli
