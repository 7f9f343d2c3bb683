// GPT-2's bytes_to_unicode table: printable Latin-1 bytes stand for themselves, the other 68
// bytes are shifted to U+0100.. in byte order.
#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "common/utf8.h"

namespace minivllm::byte_level {
namespace {

bool is_printable(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); }

struct Tables {
  std::array<std::string, 256> byte_to_text;
  std::array<int16_t, 0x200> code_point_to_byte;  // -1 when not in the alphabet
  Tables() {
    code_point_to_byte.fill(-1);
    int shifted = 0;
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = is_printable(b) ? static_cast<char32_t>(b) : static_cast<char32_t>(0x100 + shifted++);
      utf8::append_code_point(cp, byte_to_text[b]);
      code_point_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string encode(std::string_view raw) {
  const Tables& t = tables();
  std::string out;
  out.reserve(raw.size() * 2);
  for (unsigned char b : raw) out += t.byte_to_text[b];
  return out;
}

std::optional<std::string> decode(std::string_view visible) {
  const Tables& t = tables();
  std::string out;
  out.reserve(visible.size());
  size_t i = 0;
  while (i < visible.size()) {
    const utf8::Step st = utf8::step(visible.substr(i));
    if (st.kind != utf8::StepKind::kValid) return std::nullopt;
    const auto* p = reinterpret_cast<const unsigned char*>(visible.data() + i);
    char32_t cp;
    if (st.len == 1) {
      cp = p[0];
    } else if (st.len == 2) {
      cp = ((p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    } else {
      return std::nullopt;  // the alphabet stops at U+0143
    }
    if (cp >= t.code_point_to_byte.size() || t.code_point_to_byte[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(t.code_point_to_byte[cp]));
    i += st.len;
  }
  return out;
}

}  // namespace minivllm::byte_level
