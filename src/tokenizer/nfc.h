// Unicode NFC normalization (Qwen's tokenizer normalizer), through ICU.
#pragma once

#include <string>
#include <string_view>

namespace minivllm {

// True when `text` (valid UTF-8) is certainly NFC already, checked without ICU: code points below
// U+0300 never change under NFC, which covers ASCII and Latin-1 text.
bool is_trivially_nfc(std::string_view text);

// The NFC form of `text` (valid UTF-8).
std::string nfc_normalize(std::string_view text);

}  // namespace minivllm
