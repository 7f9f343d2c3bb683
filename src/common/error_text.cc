#include "common/error_text.h"

namespace minivllm {

std::string text_excerpt(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  size_t cut = max_chars > 3 ? max_chars - 3 : 0;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
  return std::string(text.substr(0, cut)) + "...";
}

std::string json_error_excerpt(const nlohmann::json::exception& e) {
  std::string msg = e.what();
  if (msg.rfind("[json.exception.", 0) == 0) {
    const size_t close = msg.find("] ");
    if (close != std::string::npos) msg.erase(0, close + 2);
  }
  const size_t open = msg.find('\'');
  const size_t close = msg.rfind('\'');
  if (open != std::string::npos && close > open + 1) {
    const std::string quoted = msg.substr(open + 1, close - open - 1);
    msg = msg.substr(0, open + 1) + text_excerpt(quoted) + msg.substr(close);
  }
  return text_excerpt(msg, 4 * kMaxExcerptChars);
}

}  // namespace minivllm
