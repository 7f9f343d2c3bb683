// The part of an Error's message meant for users: without the "file:line: check failed: cond: "
// prefix that MINIVLLM_CHECK writes for developers. The CLI prints it; the server sends it to
// clients (which should not see source paths).
#pragma once

#include <string>

namespace minivllm {

// Every "file:line: check failed: cond: " is removed, the nested ones too: an Error that wraps
// another's what() ("malformed tokenizer file F: <inner>") would otherwise still show the inner
// source path.
inline std::string message_for_users(std::string what) {
  const std::string marker = "check failed: ";
  for (size_t at; (at = what.find(marker)) != std::string::npos;) {
    // The failed condition follows the marker and ends at the next ": ".
    const size_t colon = what.find(": ", at + marker.size());
    if (colon == std::string::npos) break;
    // "file:line: " ends just before the marker; source paths hold no spaces.
    const size_t space = at >= 2 ? what.rfind(' ', at - 2) : std::string::npos;
    const size_t start = space == std::string::npos ? 0 : space + 1;
    what.erase(start, colon + 2 - start);
  }
  return what;
}

}  // namespace minivllm
