// ICU's Normalizer2 works on UTF-8 directly (normalizeUTF8), so no UTF-16 round trip.
#include "tokenizer/nfc.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include "common/check.h"

namespace minivllm {

bool is_trivially_nfc(std::string_view text) {
  // Lead bytes below 0xCC start code points below U+0300.
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0xCC) return false;
  }
  return true;
}

std::string nfc_normalize(std::string_view text) {
  if (is_trivially_nfc(text)) return std::string(text);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  MINIVLLM_CHECK(U_SUCCESS(status)) << "ICU NFC normalizer unavailable: " << u_errorName(status);
  std::string out;
  out.reserve(text.size());
  icu::StringByteSink<std::string> sink(&out);
  nfc->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr, status);
  MINIVLLM_CHECK(U_SUCCESS(status)) << "NFC normalization failed: " << u_errorName(status);
  return out;
}

}  // namespace minivllm
