// Fuzzes the GGUF reader: the input bytes are a .gguf file. Parses the header, metadata and tensor
// infos (GgufFile), reads every metadata value through the typed getters, dequantizes the small
// tensors, then goes the way a model load goes: the tokenizer vocabulary (read_gguf_vocab ->
// Tokenizer, encode/decode) and open_gguf (ModelConfig from the metadata, the weight source).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "loader/gguf.h"
#include "loader/gguf_dequant.h"
#include "loader/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace {

using minivllm::fuzz::expect_ok_or_error;

constexpr int64_t kMaxDequantElements = 1 << 16;  // keep each input fast and small
constexpr size_t kMaxVocabForTokenizer = 1 << 12;

void touch_metadata(const minivllm::GgufFile& f) {
  for (const auto& [key, v] : f.metadata()) {
    expect_ok_or_error([&] { (void)f.get_int(key); });
    expect_ok_or_error([&] { (void)f.get_int(key, 0); });
    expect_ok_or_error([&] { (void)f.get_float(key, 0.0); });
    expect_ok_or_error([&] { (void)f.get_string(key, ""); });
    expect_ok_or_error([&] { (void)f.get_bool(key, false); });
    (void)minivllm::gguf_value_type_name(v.type);
    (void)v.array_size();
  }
}

void touch_tensors(const minivllm::GgufFile& f) {
  for (const minivllm::GgufTensorInfo& t : f.tensors()) {
    if (f.find_tensor(t.name) == nullptr) __builtin_trap();  // every listed tensor is found by name
    (void)t.hf_shape();
    (void)minivllm::ggml_type_name(t.type);
    // Only small tensors, counted here without overflow (numel() itself is the library's: a
    // product of untrusted dims that the reader must have checked before any caller uses it).
    int64_t n = 1;
    bool overflow = false;
    for (int64_t d : t.ne) overflow |= __builtin_mul_overflow(n, d, &n);
    if (overflow || n < 0 || n > kMaxDequantElements) continue;
    expect_ok_or_error([&] {
      minivllm::Tensor out = f.get_f32(t);
      (void)out;
    });
  }
}

void touch_vocab(const minivllm::GgufFile& f) {
  minivllm::VocabData vocab;
  if (!expect_ok_or_error([&] { vocab = minivllm::read_gguf_vocab(f); })) return;
  if (vocab.tokens.empty() || vocab.tokens.size() > kMaxVocabForTokenizer) return;
  expect_ok_or_error([&] {
    auto tok = minivllm::Tokenizer::from_vocab_data(vocab);
    for (const char* text : {"Hello world", " <s>x</s> 12 345\n\n", "\xC3\xBC \xE6\x97\xA5 \t a"}) {
      std::vector<int32_t> ids = tok->encode(text, true);
      (void)tok->decode(ids, false);
      (void)tok->decode(ids, true);
    }
  });
}

// The weights as the model reads them: whole (q/k rows unpermuted for llama) and as
// tensor-parallel shards (row and column slices), for the small tensors.
void touch_weights(const minivllm::GgufModel& m) {
  const minivllm::WeightSource& w = *m.weights;
  (void)w.describe();
  for (const std::string& name : w.names()) {
    if (!w.has(name)) __builtin_trap();
    expect_ok_or_error([&] {
      const minivllm::Tensor full = w.get_f32(name);
      const std::vector<int64_t> shape = full.shape();
      expect_ok_or_error([&] { (void)w.get_f32(name, shape); });
      for (int dim = 0; dim < 2 && static_cast<size_t>(dim) < shape.size(); ++dim) {
        for (int64_t parts : {2, 4}) {
          if (shape[dim] % parts != 0) continue;
          const int64_t len = shape[dim] / parts;
          expect_ok_or_error([&] { (void)w.get_f32_slice(name, shape, dim, len, len); });
        }
        expect_ok_or_error([&] { (void)w.get_f32_slice(name, shape, dim, 1, shape[dim]); });  // past the end
      }
    });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static minivllm::fuzz::MemFile file("gguf_fuzz");
  const std::string& path = file.write(data, size);
  expect_ok_or_error([&] {
    minivllm::GgufFile f(path);
    (void)f.version();
    (void)f.alignment();
    (void)f.data_offset();
    touch_metadata(f);
    touch_tensors(f);
    touch_vocab(f);
  });
  expect_ok_or_error([&] {
    const minivllm::GgufModel m = minivllm::open_gguf(path);
    touch_weights(m);
  });
  return 0;
}
