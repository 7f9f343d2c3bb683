// The part of an Error's message meant for users: without the "file:line: check failed: cond: "
// prefix that MINIVLLM_CHECK writes for developers. The CLI prints it; the server sends it to
// clients (which should not see source paths).
#pragma once

#include <string>

namespace minivllm {

inline std::string message_for_users(const std::string& what) {
  const std::string marker = "check failed: ";
  const size_t at = what.find(marker);
  if (at == std::string::npos) return what;
  // The failed condition follows the marker and ends at the next ": ".
  const size_t colon = what.find(": ", at + marker.size());
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

}  // namespace minivllm
