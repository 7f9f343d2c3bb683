// Environment variables set for one scope, then put back as they were. The backends and
// communicators read their MINIVLLM_* knobs when they are made, so tests that compare a knob's
// settings make each object inside such a scope.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace minivllm::test {

// (name, value) pairs; a value of nullptr unsets the variable for the scope.
using EnvVars = std::vector<std::pair<const char*, const char*>>;

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : ScopedEnv(EnvVars{{name, value}}) {}
  explicit ScopedEnv(const EnvVars& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old != nullptr ? std::optional<std::string>(old) : std::nullopt);
      if (value != nullptr) {
        ::setenv(name, value, 1);
      } else {
        ::unsetenv(name);
      }
    }
  }
  ~ScopedEnv() {
    // In reverse, so that a name given twice ends as it was before the first.
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// f() with `vars` set, the variables put back before its result is used: for an object that reads
// its knobs when it is made (an engine, a backend) and must not leave them set for what the test
// makes after it. The result is returned as a prvalue, so a type that cannot be moved works too.
template <typename F>
auto with_env(const EnvVars& vars, F&& f) {
  ScopedEnv env(vars);
  return f();
}

}  // namespace minivllm::test
