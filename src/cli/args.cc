#include "cli/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace minivllm::cli {

ArgParser::ArgParser(std::string command, std::string usage, std::string description)
    : command_(std::move(command)), usage_(std::move(usage)), description_(std::move(description)) {}

ArgParser& ArgParser::option(const std::string& name, const std::string& value_name, const std::string& help) {
  // A flag declared twice (by hand and by a config table) would parse as one and show twice.
  if (find(name) != nullptr) throw std::logic_error("minivllm " + command_ + ": " + name + " is declared twice");
  specs_.push_back({name, value_name, help});
  return *this;
}

ArgParser& ArgParser::flag(const std::string& name, const std::string& help) { return option(name, "", help); }

std::vector<std::string> ArgParser::names() const {
  std::vector<std::string> out;
  for (const Spec& s : specs_) out.push_back(s.name);
  return out;
}

const ArgParser::Spec* ArgParser::find(const std::string& name) const {
  for (const Spec& s : specs_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

ParsedArgs ArgParser::parse(const std::vector<std::string>& argv) const {
  ParsedArgs out;
  for (const std::string& a : argv) {
    if (a == "--help" || a == "-h") {
      out.help_requested = true;
      return out;
    }
  }
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      throw UsageError("unexpected argument '" + arg + "' for '" + command_ + "' (see minivllm " + command_ +
                       " --help)");
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const Spec* spec = find(name);
    if (spec == nullptr) {
      throw UsageError("unknown option '" + name + "' for '" + command_ + "' (see minivllm " + command_ + " --help)");
    }
    if (spec->value_name.empty()) {
      if (eq != std::string::npos) throw UsageError(name + " takes no value");
      out.values_[name].push_back("");
      continue;
    }
    if (eq != std::string::npos) {
      out.values_[name].push_back(arg.substr(eq + 1));
    } else {
      if (i + 1 >= argv.size()) throw UsageError(name + " needs a value (" + name + " " + spec->value_name + ")");
      out.values_[name].push_back(argv[++i]);
    }
  }
  return out;
}

std::string ArgParser::help() const {
  std::ostringstream os;
  os << "usage: minivllm " << usage_ << "\n\n" << description_ << "\n\noptions:\n";
  for (const Spec& s : specs_) {
    std::string left = "  " + s.name + (s.value_name.empty() ? "" : " " + s.value_name);
    if (left.size() < 34) left.resize(34, ' ');
    else left += "\n" + std::string(34, ' ');
    os << left << s.help << "\n";
  }
  os << "  --help, -h                      this help\n";
  return os.str();
}

bool ParsedArgs::has(const std::string& name) const { return values_.count(name) != 0; }

std::optional<std::string> ParsedArgs::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::string ParsedArgs::required(const std::string& name) const {
  auto v = get(name);
  if (!v) throw UsageError(name + " is required");
  return *v;
}

std::optional<int64_t> ParsedArgs::get_optional_int(const std::string& name, int64_t min, int64_t max) const {
  auto v = get(name);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno == ERANGE) {
    throw UsageError(name + " expects an integer, got '" + *v + "'");
  }
  if (x < min || x > max) {
    throw UsageError(name + " must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + *v);
  }
  return x;
}

int64_t ParsedArgs::get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  return get_optional_int(name, min, max).value_or(fallback);
}

double ParsedArgs::get_float(const std::string& name, double fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x)) {
    throw UsageError(name + " expects a number, got '" + *v + "'");
  }
  return x;
}

}  // namespace minivllm::cli
