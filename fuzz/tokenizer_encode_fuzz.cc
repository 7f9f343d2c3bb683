// Fuzzes encode / decode / streaming decode of a real tokenizer (Qwen3's tokenizer.json from
// ../shared/models/qwen3-0.6b, loaded once) on arbitrary bytes. The first input byte picks the mode:
//
//   bit 0: add_special_tokens for encode      bit 1: skip_special_tokens for decode
//   bit 2: ids mode: the rest is little-endian int32 token ids (any value) instead of text
//
// Invariants checked (a break aborts, so libFuzzer keeps the input):
//   - text mode: invalid UTF-8 is refused with an Error; the lossy repair of the text is then
//     encoded, and decode(encode(t)) is t up to NFC (the byte-level BPE loses nothing else);
//   - both modes: IncrementalDetokenizer's pieces, concatenated, equal decode of the same ids;
//   - an Error is expected only for invalid UTF-8 (encode) and ids outside the vocabulary
//     (decode); any other Error is reported as a crash.
//
// The tokenizer: $MINIVLLM_FUZZ_TOKENIZER (a tokenizer.json), else
// $MINIVLLM_SHARED_DIR/models/qwen3-0.6b/tokenizer.json, else the shared folder known at build time.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "fuzz_util.h"
#include "tokenizer/nfc.h"
#include "tokenizer/tokenizer.h"

#ifndef MINIVLLM_SHARED_DIR
#define MINIVLLM_SHARED_DIR ""
#endif

namespace {

using minivllm::fuzz::check_equal;
using minivllm::fuzz::expect_ok_or_error;

std::unique_ptr<minivllm::Tokenizer> g_tok;

std::string tokenizer_path() {
  if (const char* p = std::getenv("MINIVLLM_FUZZ_TOKENIZER"); p && *p) return p;
  const char* shared = std::getenv("MINIVLLM_SHARED_DIR");
  const std::string dir = shared && *shared ? shared : MINIVLLM_SHARED_DIR;
  return dir + "/models/qwen3-0.6b/tokenizer.json";
}

std::string nfc(const std::string& s) {
  return minivllm::is_trivially_nfc(s) ? s : minivllm::nfc_normalize(s);
}

// The pieces IncrementalDetokenizer returns, concatenated, must equal decode().
void check_streaming(const std::vector<int32_t>& ids, bool skip_special, const std::string& decoded) {
  minivllm::IncrementalDetokenizer detok(*g_tok, skip_special);
  std::string streamed;
  for (int32_t id : ids) streamed += detok.push(id);
  streamed += detok.flush();
  check_equal("IncrementalDetokenizer pieces == decode(ids)", streamed, decoded);
}

void fuzz_text(const std::string& input, bool add_special, bool skip_special) {
  std::string text = input;
  if (minivllm::utf8::first_invalid(input) != std::string::npos) {
    // Refused as a whole...
    if (expect_ok_or_error([&] { (void)g_tok->encode(input, add_special); })) {
      minivllm::fuzz::invariant_failed("encode accepts invalid UTF-8", input, "an Error");
    }
    // ...and the repaired text goes on.
    text.clear();
    minivllm::utf8::append_lossy(input, true, text);
  }
  const std::vector<int32_t> ids = g_tok->encode(text, add_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= g_tok->vocab_size()) minivllm::fuzz::invariant_failed("encode returns an id out of range", text, "");
  }
  const std::string decoded = g_tok->decode(ids, false);
  if (!add_special) check_equal("nfc(decode(encode(text))) == nfc(text)", nfc(decoded), nfc(text));
  check_streaming(ids, false, decoded);
  if (skip_special) check_streaming(ids, true, g_tok->decode(ids, true));
}

void fuzz_ids(const uint8_t* data, size_t size, bool skip_special) {
  std::vector<int32_t> ids(size / 4);
  if (!ids.empty()) std::memcpy(ids.data(), data, ids.size() * 4);
  // Mostly valid ids: fold large values into [-8, vocab + 8).
  const int64_t span = g_tok->vocab_size() + 16;
  for (int32_t& id : ids) {
    if (id < -8 || id >= span - 8) id = static_cast<int32_t>(static_cast<uint32_t>(id) % span) - 8;
  }
  std::string decoded;
  if (!expect_ok_or_error([&] { decoded = g_tok->decode(ids, skip_special); })) return;
  check_streaming(ids, skip_special, decoded);
  // decode's output is valid UTF-8, so it encodes.
  (void)g_tok->encode(decoded, false);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  const std::string path = tokenizer_path();
  try {
    g_tok = minivllm::Tokenizer::from_tokenizer_json(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokenizer_encode_fuzz: cannot load %s: %s\n"
                         "set MINIVLLM_FUZZ_TOKENIZER to a tokenizer.json\n", path.c_str(), e.what());
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const bool add_special = mode & 1, skip_special = mode & 2;
  ++data;
  --size;
  // Only the refusals named above are expected: any other Error escapes, and libFuzzer reports it.
  if (mode & 4) {
    fuzz_ids(data, size, skip_special);
  } else {
    fuzz_text(std::string(reinterpret_cast<const char*>(data), size), add_special, skip_special);
  }
  return 0;
}
