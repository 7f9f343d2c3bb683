// A 0 / 1 switch read from the environment (the MINIVLLM_* tuning knobs).
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

#include "common/check.h"

namespace minivllm {

// nullopt when the variable is unset or empty; any value other than 0 or 1 is an error naming it.
inline std::optional<bool> env_switch(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return std::nullopt;
  const std::string w = v;
  MINIVLLM_CHECK(w == "0" || w == "1") << name << "=" << w << " must be 0 or 1";
  return w == "1";
}

}  // namespace minivllm
