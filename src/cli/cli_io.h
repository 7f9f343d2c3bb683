// What every subcommand does at its edges: read stdin (as text or JSON), write JSON, and turn an
// exception into "error: <message>" on stderr plus the exit status (2 usage, 1 runtime).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "common/check.h"

namespace minivllm::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntimeError = 1;
inline constexpr int kExitUsageError = 2;

// An Error's message without the "file:line: check failed: cond: " prefix that helps developers
// but not users of the command line.
std::string user_message(const std::exception& e);

std::string read_all_stdin();
// Parses all of stdin as JSON, keeping key order (parse_json_input: nesting is limited, errors quote
// only a short excerpt); a parse error is a runtime error that names `what` is expected.
nlohmann::ordered_json read_stdin_json(const std::string& what);

// Compact JSON; invalid UTF-8 in strings (a partial character) becomes U+FFFD instead of throwing.
std::string dump_json(const nlohmann::json& j);

void print_error(const std::string& message);

// Parses argv with `parser`, prints --help when asked, runs `body` and maps exceptions to exit codes.
int run_command(const ArgParser& parser, const std::vector<std::string>& argv,
                const std::function<int(const ParsedArgs&)>& body);

}  // namespace minivllm::cli
