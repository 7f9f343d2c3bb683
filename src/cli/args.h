// Command-line arguments of one subcommand: the options it accepts (declared up front, so unknown
// flags and missing values are caught in one pass), its --help text, and typed accessors whose
// errors name the flag. A UsageError makes the program exit with status 2.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace minivllm::cli {

// A mistake in how the program was called (exit status 2), as opposed to a runtime failure (1).
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

class ParsedArgs;

class ArgParser {
 public:
  // `usage` is the one-line synopsis after "usage: minivllm ".
  ArgParser(std::string command, std::string usage, std::string description);

  // An option taking a value (`--name V` or `--name=V`); may be given several times. Declaring a
  // name twice is a std::logic_error (a programming mistake, e.g. a flag a config table also adds).
  ArgParser& option(const std::string& name, const std::string& value_name, const std::string& help);
  // A boolean flag (`--name`).
  ArgParser& flag(const std::string& name, const std::string& help);

  // The declared option and flag names, in order.
  std::vector<std::string> names() const;

  // Throws UsageError naming the unknown flag, the flag missing its value, or a stray argument.
  // `--help` / `-h` anywhere sets ParsedArgs::help_requested and skips the other checks.
  ParsedArgs parse(const std::vector<std::string>& argv) const;
  std::string help() const;
  const std::string& command() const { return command_; }

 private:
  struct Spec {
    std::string name;
    std::string value_name;  // empty for flags
    std::string help;
  };
  const Spec* find(const std::string& name) const;

  std::string command_, usage_, description_;
  std::vector<Spec> specs_;
};

class ParsedArgs {
 public:
  bool help_requested = false;

  bool has(const std::string& name) const;
  // The last value given for `name`, if any.
  std::optional<std::string> get(const std::string& name) const;
  // Every value given for `name`, in order.
  std::vector<std::string> all(const std::string& name) const;
  // Throws UsageError "--name is required" when absent.
  std::string required(const std::string& name) const;

  // Typed values; a malformed or out-of-range value is a UsageError naming the flag.
  int64_t get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;
  double get_float(const std::string& name, double fallback) const;
  std::optional<int64_t> get_optional_int(const std::string& name, int64_t min, int64_t max) const;

 private:
  friend class ArgParser;
  std::map<std::string, std::vector<std::string>> values_;
};

}  // namespace minivllm::cli
