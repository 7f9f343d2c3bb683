#include "cli/cli_io.h"

#include <iostream>
#include <iterator>

#include "cli/json_input.h"
#include "common/error_text.h"

namespace minivllm::cli {

std::string user_message(const std::exception& e) { return message_for_users(e.what()); }

std::string read_all_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

nlohmann::ordered_json read_stdin_json(const std::string& what) {
  return parse_json_input(read_all_stdin(), "stdin", what);
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

void print_error(const std::string& message) {
  std::cout.flush();
  std::cerr << "error: " << message << std::endl;
}

int run_command(const ArgParser& parser, const std::vector<std::string>& argv,
                const std::function<int(const ParsedArgs&)>& body) {
  try {
    const ParsedArgs args = parser.parse(argv);
    if (args.help_requested) {
      std::cout << parser.help();
      return kExitOk;
    }
    return body(args);
  } catch (const UsageError& e) {
    print_error(e.what());
    return kExitUsageError;
  } catch (const std::exception& e) {
    print_error(user_message(e));
    return kExitRuntimeError;
  }
}

}  // namespace minivllm::cli
