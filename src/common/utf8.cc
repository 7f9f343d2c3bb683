// UTF-8 scanning (see utf8.h). The accepted ranges follow RFC 3629 / Unicode table 3-7: no
// overlong forms, no surrogates, nothing above U+10FFFF.
#include "common/utf8.h"

namespace minivllm::utf8 {
namespace {

// Length of the sequence a lead byte starts, and the allowed range of the second byte.
struct Lead {
  int len;  // 0: not a lead byte
  unsigned char lo, hi;
};

Lead lead_of(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

Step step(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const Lead lead = lead_of(p[0]);
  if (lead.len == 1) return {StepKind::kValid, 1};
  if (lead.len == 0) return {StepKind::kInvalid, 1};
  for (int i = 1; i < lead.len; ++i) {
    if (static_cast<size_t>(i) >= s.size()) return {StepKind::kIncomplete, s.size()};
    const unsigned char lo = i == 1 ? lead.lo : 0x80;
    const unsigned char hi = i == 1 ? lead.hi : 0xBF;
    if (p[i] < lo || p[i] > hi) return {StepKind::kInvalid, static_cast<size_t>(i)};
  }
  return {StepKind::kValid, static_cast<size_t>(lead.len)};
}

size_t first_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path: most text is ASCII, skip it eight bytes at a time.
    while (i + 8 <= s.size()) {
      unsigned long long w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const Step st = step(s.substr(i));
    if (st.kind != StepKind::kValid) return i;
    i += st.len;
  }
  return std::string_view::npos;
}

size_t append_lossy(std::string_view s, bool final_chunk, std::string& out) {
  size_t i = 0;
  while (i < s.size()) {
    const Step st = step(s.substr(i));
    if (st.kind == StepKind::kIncomplete && !final_chunk) break;
    if (st.kind == StepKind::kValid) {
      out.append(s.data() + i, st.len);
    } else {
      out.append(kReplacementChar);
    }
    i += st.len;
  }
  return i;
}

void append_code_point(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace minivllm::utf8
