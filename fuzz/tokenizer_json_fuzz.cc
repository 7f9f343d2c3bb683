// Fuzzes tokenizer.json loading: the input bytes are a tokenizer.json. Loads it into a
// TokenizerSpec (load_tokenizer_json), builds the Tokenizer (BPE merges, pre-tokenizer regexes,
// added-token matcher, post-processor ids), then encodes and decodes a few texts with it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "tokenizer/loaders.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_spec.h"

namespace {

using minivllm::fuzz::expect_ok_or_error;

const char* const kTexts[] = {
    "Hello world! It's 2024: 12345 apples.",
    "<|im_start|>user\nHi there<|im_end|>\n<|endoftext|>",
    "  leading spaces\t\ttabs\r\nnewlines\n\n\n",
    "\xC3\xBC\xC3\xB1\xC3\xAF\xC3\xA7\xC3\xB6\xC3\xB0\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x99\x82",
    "e\xCC\x81 A\xCC\x8A",  // decomposed: NFC changes them
    "",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static minivllm::fuzz::MemFile file("tokenizer_json_fuzz");
  const std::string& path = file.write(data, size);
  expect_ok_or_error([&] {
    minivllm::TokenizerSpec spec = minivllm::load_tokenizer_json(path);
    minivllm::Tokenizer tok(std::move(spec));
    (void)tok.vocab_size();
    (void)tok.bos_token();
    (void)tok.eos_token();
    for (const char* text : kTexts) {
      for (bool add_special : {false, true}) {
        expect_ok_or_error([&] {
          const std::vector<int32_t> ids = tok.encode(text, add_special);
          (void)tok.decode(ids, false);
          (void)tok.decode(ids, true);
          for (int32_t id : ids) {
            (void)tok.id_to_token(id);
            (void)tok.token_bytes(id);
          }
        });
      }
    }
    const int64_t n = tok.vocab_size();
    expect_ok_or_error([&] { (void)tok.decode({0, static_cast<int32_t>(n > 1 ? n - 1 : 0)}, false); });
    expect_ok_or_error([&] { (void)tok.decode({static_cast<int32_t>(n)}, false); });  // out of range
  });
  return 0;
}
