// WeightSource::get_f32_slice: every row and column slice of odd-shaped safetensors (F32, BF16,
// F16) and GGUF (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, rope-permuted llama q/k) tensors
// equals, bit for bit, the same part of the full get_f32 result; bad slices throw errors naming the tensor.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <random>

#include "common/dtype.h"
#include "common/quant_blocks.h"
#include "loader/gguf_dequant.h"
#include "loader/gguf_file.h"
#include "loader/gguf_weights.h"
#include "loader/safetensors.h"
#include "loader/tensor_slice.h"
#include "loader/weight_source.h"
#include "gguf_test_writer.h"
#include "loader_test_util.h"

namespace minivllm {
namespace {

using testing::expect_error_naming;
using testing::GgufTestWriter;
using testing::ScratchDir;
using testing::write_bytes;

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Checks get_f32_slice(name, shape, dim, start, length) against the full tensor for every dim < min(2, ndim)
// and every (start, length) that `allowed(dim, start, length)` accepts. Returns how many slices it checked.
int check_all_slices(const WeightSource& src, const std::string& name, const std::vector<int64_t>& shape,
                     const std::function<bool(int, int64_t, int64_t)>& allowed = nullptr) {
  SCOPED_TRACE(name);
  const Tensor full = src.get_f32(name, shape);
  EXPECT_EQ(full.shape(), shape);
  const float* f = full.ptr<float>();
  int checked = 0;
  const int ndim = static_cast<int>(shape.size());
  for (int dim = 0; dim < std::min(ndim, 2); ++dim) {
    const int64_t size = shape[static_cast<size_t>(dim)];
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < dim; ++i) outer *= shape[static_cast<size_t>(i)];
    for (int i = dim + 1; i < ndim; ++i) inner *= shape[static_cast<size_t>(i)];
    for (int64_t start = 0; start < size; ++start) {
      for (int64_t length = 1; start + length <= size; ++length) {
        if (allowed && !allowed(dim, start, length)) continue;
        SCOPED_TRACE("dim " + std::to_string(dim) + " start " + std::to_string(start) + " length " +
                     std::to_string(length));
        const Tensor s = src.get_f32_slice(name, shape, dim, start, length);
        std::vector<int64_t> want_shape = shape;
        want_shape[static_cast<size_t>(dim)] = length;
        EXPECT_EQ(s.shape(), want_shape);
        EXPECT_EQ(s.dtype(), DType::kF32);
        if (s.shape() != want_shape) return checked;
        const float* p = s.ptr<float>();
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t k = 0; k < length * inner; ++k) {
            const float want = f[(o * size + start) * inner + k];
            const float got = p[o * length * inner + k];
            if (bits_of(want) != bits_of(got)) {
              ADD_FAILURE() << "element " << o << "/" << k << ": got " << got << ", want " << want;
              return checked;
            }
          }
        }
        ++checked;
      }
    }
  }
  return checked;
}

// ---------------------------------------------------------------------------------------- safetensors

Tensor random_tensor(DType dtype, const std::vector<int64_t>& shape, std::mt19937* rng) {
  std::normal_distribution<float> dist(0.0f, 2.0f);
  Tensor t = host_tensor(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float x = dist(*rng);
    if (dtype == DType::kF32) t.ptr<float>()[i] = x;
    else if (dtype == DType::kBF16) static_cast<uint16_t*>(t.data())[i] = f32_to_bf16(x);
    else static_cast<uint16_t*>(t.data())[i] = f32_to_f16(x);
  }
  return t;
}

struct StCase {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

const std::vector<StCase>& st_cases() {
  static const std::vector<StCase> kCases = {
      {"w_f32", DType::kF32, {7, 13}},  {"w_bf16", DType::kBF16, {11, 5}}, {"w_f16", DType::kF16, {9, 3}},
      {"norm_bf16", DType::kBF16, {13}}, {"norm_f32", DType::kF32, {1}},  {"t3_f16", DType::kF16, {3, 5, 4}},
      {"row_f32", DType::kF32, {1, 17}}};
  return kCases;
}

class SafetensorsSlice : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(11);
    std::map<std::string, Tensor> tensors;
    for (const StCase& c : st_cases()) tensors.emplace(c.name, random_tensor(c.dtype, c.shape, &rng));
    write_safetensors(dir_.file("model.safetensors"), tensors);
    src_ = open_safetensors_dir(dir_.str());
  }
  ScratchDir dir_{"st_slice"};
  std::unique_ptr<WeightSource> src_;
};

TEST_F(SafetensorsSlice, EverySliceMatchesFullTensor) {
  int total = 0;
  for (const StCase& c : st_cases()) {
    const int n = check_all_slices(*src_, c.name, c.shape);
    int64_t want = 0;
    for (int dim = 0; dim < std::min<int>(2, static_cast<int>(c.shape.size())); ++dim) {
      want += c.shape[static_cast<size_t>(dim)] * (c.shape[static_cast<size_t>(dim)] + 1) / 2;
    }
    EXPECT_EQ(n, want) << c.name;
    total += n;
  }
  EXPECT_GT(total, 300);
}

TEST_F(SafetensorsSlice, TensorParallelShardsConcatenateToFull) {
  // rows [r*N/ws, (r+1)*N/ws) of a [7, 13] bf16... here f32 weight, for ws = 1..7.
  const Tensor full = src_->get_f32("w_f32", {7, 13});
  for (int64_t ws = 1; ws <= 7; ++ws) {
    std::vector<float> rows, cols(7 * 13);
    for (int64_t r = 0; r < ws; ++r) {
      const int64_t b = r * 7 / ws, e = (r + 1) * 7 / ws;
      if (e > b) {
        const Tensor s = src_->get_f32_slice("w_f32", {7, 13}, 0, b, e - b);
        rows.insert(rows.end(), s.ptr<float>(), s.ptr<float>() + s.numel());
      }
      const int64_t cb = r * 13 / ws, ce = (r + 1) * 13 / ws;
      const Tensor s = src_->get_f32_slice("w_f32", {7, 13}, 1, cb, ce - cb);
      for (int64_t i = 0; i < 7; ++i) {
        for (int64_t j = 0; j < ce - cb; ++j) cols[i * 13 + cb + j] = s.ptr<float>()[i * (ce - cb) + j];
      }
    }
    EXPECT_EQ(rows, std::vector<float>(full.ptr<float>(), full.ptr<float>() + full.numel())) << "ws " << ws;
    EXPECT_EQ(cols, std::vector<float>(full.ptr<float>(), full.ptr<float>() + full.numel())) << "ws " << ws;
  }
}

TEST_F(SafetensorsSlice, BadSlicesNameTensorFileAndSlice) {
  const std::string file = dir_.file("model.safetensors");
  const WeightSource& s = *src_;
  // Wrong full shape.
  expect_error_naming([&] { s.get_f32_slice("w_f32", {13, 7}, 0, 0, 1); },
                      {"'w_f32'", file, "[13, 7]", "[7, 13]", "[0, 1) along dim 0"});
  expect_error_naming([&] { s.get_f32_slice("w_f32", {}, 0, 0, 1); }, {"'w_f32'", file, "[7, 13]"});
  // Bad dims.
  expect_error_naming([&] { s.get_f32_slice("w_f32", {7, 13}, 2, 0, 1); }, {"'w_f32'", file, "along dim 2"});
  expect_error_naming([&] { s.get_f32_slice("w_f32", {7, 13}, -1, 0, 1); }, {"'w_f32'", file, "along dim -1"});
  expect_error_naming([&] { s.get_f32_slice("norm_bf16", {13}, 1, 0, 1); }, {"'norm_bf16'", file, "along dim 1"});
  // Out of range.
  expect_error_naming([&] { s.get_f32_slice("w_f32", {7, 13}, 0, -1, 2); },
                      {"'w_f32'", file, "[-1, 1) along dim 0", "out of range"});
  expect_error_naming([&] { s.get_f32_slice("w_f32", {7, 13}, 0, 3, 0); },
                      {"'w_f32'", file, "[3, 3) along dim 0", "out of range"});
  expect_error_naming([&] { s.get_f32_slice("w_f32", {7, 13}, 0, 4, 4); },
                      {"'w_f32'", file, "[4, 8) along dim 0", "out of range", "[7, 13]"});
  expect_error_naming([&] { s.get_f32_slice("w_f32", {7, 13}, 1, 13, 1); },
                      {"'w_f32'", file, "[13, 14) along dim 1", "out of range"});
  expect_error_naming([&] { s.get_f32_slice("norm_bf16", {13}, 0, 0, 14); },
                      {"'norm_bf16'", file, "[0, 14) along dim 0", "out of range"});
  expect_error_naming([&] { s.get_f32_slice("w_f32", {7, 13}, 0, 1, INT64_MAX); }, {"'w_f32'", "out of range"});
  // Missing tensor.
  expect_error_naming([&] { s.get_f32_slice("nope", {7, 13}, 0, 0, 1); }, {"'nope'", dir_.str()});
}

TEST(SafetensorsSliceFile, UnsupportedDtypeNamed) {
  ScratchDir dir("st_slice_i32");
  std::map<std::string, Tensor> tensors;
  tensors.emplace("x", host_tensor(DType::kF32, {2, 2}));
  std::memset(tensors.at("x").data(), 0, 16);
  write_safetensors(dir.file("model.safetensors"), tensors);
  // Patch the header's dtype to I32 (same size): the reader knows its size but cannot convert it.
  std::ifstream in(dir.file("model.safetensors"), std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string text(bytes.begin(), bytes.end());
  const size_t at = text.find("\"F32\"");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1] = 'I';
  write_bytes(dir.file("model.safetensors"), bytes);
  const SafetensorsFile f(dir.file("model.safetensors"));
  expect_error_naming([&] { f.get_f32_slice("x", {2, 2}, 0, 0, 1); }, {"'x'", dir.file("model.safetensors"), "I32"});
}

// ----------------------------------------------------------------------------------------------- GGUF

enum GType : uint32_t { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ8_0 = 8, kQ4_K = 12, kQ6_K = 14, kBF16 = 30 };

template <typename T>
void append(std::vector<uint8_t>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));
}

// Random bytes of `n` elements of `type`: finite scales, every quant value possible.
std::vector<uint8_t> random_gguf_bytes(uint32_t type, int64_t n, std::mt19937* rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<uint8_t> out;
  switch (type) {
    case kF32: for (int64_t i = 0; i < n; ++i) append(&out, dist(*rng)); break;
    case kF16: for (int64_t i = 0; i < n; ++i) append(&out, f32_to_f16(dist(*rng))); break;
    case kBF16: for (int64_t i = 0; i < n; ++i) append(&out, f32_to_bf16(dist(*rng))); break;
    case kQ5_0:  // d, then 4 + 16 bytes of codes
      for (int64_t b = 0; b < n / 32; ++b) {
        append(&out, f32_to_f16(dist(*rng) * 0.1f));
        for (int i = 0; i < 20; ++i) append(&out, static_cast<uint8_t>(byte(*rng)));
      }
      break;
    case kQ4_K:  // d, dmin, then 12 + 128 bytes of scales and codes
      for (int64_t b = 0; b < n / 256; ++b) {
        append(&out, f32_to_f16(dist(*rng) * 0.01f));
        append(&out, f32_to_f16(dist(*rng) * 0.01f));
        for (int i = 0; i < 140; ++i) append(&out, static_cast<uint8_t>(byte(*rng)));
      }
      break;
    case kQ6_K:  // 208 bytes of codes and scales, then d
      for (int64_t b = 0; b < n / 256; ++b) {
        for (int i = 0; i < 208; ++i) append(&out, static_cast<uint8_t>(byte(*rng)));
        append(&out, f32_to_f16(dist(*rng) * 0.001f));
      }
      break;
    default: {
      const int quant_bytes = type == kQ8_0 ? 32 : 16;
      for (int64_t b = 0; b < n / 32; ++b) {
        append(&out, f32_to_f16(dist(*rng) * 0.1f));                   // d
        if (type == kQ4_1) append(&out, f32_to_f16(dist(*rng)));       // m
        for (int i = 0; i < quant_bytes; ++i) append(&out, static_cast<uint8_t>(byte(*rng)));
      }
    }
  }
  return out;
}

struct GgufCase {
  std::string gguf_name;
  std::string hf_name;
  uint32_t type;
  std::vector<int64_t> shape;  // HF order
  int64_t rope_heads;          // heads of a rope-permuted q/k tensor (llama), else 0
};

constexpr int64_t kQHeads = 3, kKvHeads = 2;  // head_dim 6

const std::vector<GgufCase>& gguf_cases() {
  static const std::vector<GgufCase> kCases = {
      {"token_embd.weight", "model.embed_tokens.weight", kQ4_1, {5, 96}, 0},
      {"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", kQ4_0, {kQHeads * 6, 64}, kQHeads},
      {"blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight", kF32, {kKvHeads * 6, 13}, kKvHeads},
      {"blk.0.attn_v.weight", "model.layers.0.self_attn.v_proj.weight", kQ5_0, {7, 64}, 0},
      {"blk.0.attn_output.weight", "model.layers.0.self_attn.o_proj.weight", kQ8_0, {7, 96}, 0},
      {"blk.0.ffn_gate.weight", "model.layers.0.mlp.gate_proj.weight", kBF16, {5, 11}, 0},
      {"blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight", kQ4_K, {9, 512}, 0},
      {"blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight", kQ8_0, {3, 160}, 0},
      {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight", kF32, {13}, 0},
      {"blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight", kQ8_0, {64}, 0},
      {"output.weight", "lm_head.weight", kQ4_1, {1, 32}, 0},
      {"output_norm.weight", "model.norm.weight", kF16, {7}, 0}};
  return kCases;
}

std::vector<uint8_t> build_gguf() {
  std::mt19937 rng(5);
  GgufTestWriter w;
  w.add_string("general.architecture", "llama");
  for (const GgufCase& c : gguf_cases()) {
    const std::vector<uint64_t> ne(c.shape.rbegin(), c.shape.rend());
    w.add_tensor(c.gguf_name, ne, c.type, random_gguf_bytes(c.type, numel_of(c.shape), &rng));
  }
  return w.build();
}

class GgufSlice : public ::testing::Test {
 protected:
  void SetUp() override {
    write_bytes(path_, build_gguf());
    file_ = std::make_shared<const GgufFile>(path_);
    ModelConfig llama;
    llama.arch = &find_hf_architecture("LlamaForCausalLM", "test");
    llama.num_heads = kQHeads;
    llama.num_kv_heads = kKvHeads;
    src_ = make_gguf_weight_source(file_, llama);
  }
  const GgufCase& find(const std::string& hf) const {
    for (const GgufCase& c : gguf_cases()) {
      if (c.hf_name == hf) return c;
    }
    throw std::runtime_error("no case " + hf);
  }
  ScratchDir dir_{"gguf_slice"};
  std::string path_ = dir_.file("slice.gguf");
  std::shared_ptr<const GgufFile> file_;
  std::unique_ptr<WeightSource> src_;
};

TEST_F(GgufSlice, EveryAllowedSliceMatchesFullTensor) {
  for (const GgufCase& c : gguf_cases()) {
    const int64_t block = ggml_block_size(c.type);
    const int last = static_cast<int>(c.shape.size()) - 1;
    const int64_t head_dim = c.rope_heads ? c.shape[0] / c.rope_heads : 1;
    int want = 0;
    auto allowed = [&](int dim, int64_t start, int64_t length) {
      if (dim == last && (start % block || length % block)) return false;
      if (dim == 0 && c.rope_heads && (start % head_dim || length % head_dim)) return false;
      ++want;
      return true;
    };
    const int n = check_all_slices(*src_, c.hf_name, c.shape, allowed);
    EXPECT_EQ(n, want) << c.hf_name;
    EXPECT_GT(n, 0) << c.hf_name;
  }
}

// The stored-format slice (what the CPU backend keeps) holds the checkpoint's dtype, and decodes,
// bit for bit, to the fp32 slice: same rows, same columns, same rope unpermute, blocks untouched.
TEST_F(GgufSlice, StoredSliceDecodesToTheF32Slice) {
  for (const GgufCase& c : gguf_cases()) {
    if (c.shape.size() != 2) continue;
    SCOPED_TRACE(c.hf_name);
    const DType want_dtype = ggml_type_dtype(c.type);
    EXPECT_EQ(src_->stored_dtype(c.hf_name), want_dtype);
    const int64_t block = dtype_block(want_dtype);
    const int64_t head_dim = c.rope_heads ? c.shape[0] / c.rope_heads : 1;
    int checked = 0;
    for (int dim = 0; dim < 2; ++dim) {
      const int64_t size = c.shape[static_cast<size_t>(dim)];
      const int64_t step = dim == 1 ? block : head_dim;
      for (int64_t start = 0; start < size; start += step) {
        for (int64_t length = step; start + length <= size; length += step) {
          const Tensor stored = src_->get_stored_slice(c.hf_name, c.shape, dim, start, length);
          const Tensor f32 = src_->get_f32_slice(c.hf_name, c.shape, dim, start, length);
          ASSERT_EQ(stored.dtype(), want_dtype);
          ASSERT_EQ(stored.shape(), f32.shape());
          std::vector<float> decoded(static_cast<size_t>(f32.numel()));
          dequantize_to_f32(stored.dtype(), stored.data(), decoded.data(), stored.numel());
          for (int64_t i = 0; i < f32.numel(); ++i) {
            ASSERT_EQ(bits_of(decoded[static_cast<size_t>(i)]), bits_of(f32.ptr<float>()[i]))
                << "dim " << dim << " start " << start << " length " << length << " element " << i;
          }
          ++checked;
        }
      }
    }
    EXPECT_GT(checked, 0);
  }
}

TEST_F(GgufSlice, RopeSliceIsUnpermutedPerHead) {
  // k_proj is F32: the slice of heads [1, 2) must be HF rows 6..11, i.e. GGUF rows 6..11 unpermuted
  // within the head: hf[6 + i*3 + j] = gguf[6 + 2*j + i].
  const GgufCase& c = find("model.layers.0.self_attn.k_proj.weight");
  const GgufTensorInfo& t = *file_->find_tensor(c.gguf_name);
  const float* raw = reinterpret_cast<const float*>(file_->tensor_data(t));
  const Tensor s = src_->get_f32_slice(c.hf_name, c.shape, 0, 6, 6);
  ASSERT_EQ(s.shape(), (std::vector<int64_t>{6, 13}));
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int col = 0; col < 13; ++col) {
        EXPECT_EQ(s.ptr<float>()[(i * 3 + j) * 13 + col], raw[(6 + 2 * j + i) * 13 + col]);
      }
    }
  }
}

TEST_F(GgufSlice, TensorParallelShardsOfQuantizedWeights) {
  // q_proj rows split by heads, o_proj / down_proj columns split by blocks, as ranks would load them.
  const Tensor q = src_->get_f32("model.layers.0.self_attn.q_proj.weight", {18, 64});
  for (int64_t ws : {1, 3}) {
    std::vector<float> rows;
    for (int64_t r = 0; r < ws; ++r) {
      const Tensor s = src_->get_f32_slice("model.layers.0.self_attn.q_proj.weight", {18, 64}, 0, r * 18 / ws, 18 / ws);
      rows.insert(rows.end(), s.ptr<float>(), s.ptr<float>() + s.numel());
    }
    EXPECT_EQ(rows, std::vector<float>(q.ptr<float>(), q.ptr<float>() + q.numel())) << "ws " << ws;
  }
  const Tensor down = src_->get_f32("model.layers.0.mlp.down_proj.weight", {3, 160});
  for (int64_t r = 0; r < 5; ++r) {
    const Tensor s = src_->get_f32_slice("model.layers.0.mlp.down_proj.weight", {3, 160}, 1, r * 32, 32);
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 32; ++j) ASSERT_EQ(s.ptr<float>()[i * 32 + j], down.ptr<float>()[i * 160 + r * 32 + j]);
    }
  }
}

TEST_F(GgufSlice, NonLlamaRowsAreNotPermutedAndSliceFreely) {
  ModelConfig qwen;
  qwen.arch = &find_hf_architecture("Qwen3ForCausalLM", "test");
  qwen.num_heads = kQHeads;
  qwen.num_kv_heads = kKvHeads;
  const auto src = make_gguf_weight_source(file_, qwen);
  const GgufCase& c = find("model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(check_all_slices(*src, c.hf_name, c.shape), 12 * 13 / 2 + 13 * 14 / 2);
  const float* raw = reinterpret_cast<const float*>(file_->tensor_data(*file_->find_tensor(c.gguf_name)));
  const Tensor s = src->get_f32_slice(c.hf_name, c.shape, 0, 1, 2);
  for (int i = 0; i < 2 * 13; ++i) EXPECT_EQ(s.ptr<float>()[i], raw[13 + i]);
}

TEST_F(GgufSlice, BadSlicesNameTensorAndFile) {
  const WeightSource& s = *src_;
  const std::string o = "model.layers.0.self_attn.o_proj.weight";
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  const std::string k = "model.layers.0.self_attn.k_proj.weight";
  // Column slices of quantised rows must start and end on a 32-element block.
  expect_error_naming([&] { s.get_f32_slice(o, {7, 96}, 1, 16, 32); },
                      {o, "blk.0.attn_output.weight", path_, "[16, 48) along dim 1", "Q8_0", "block"});
  expect_error_naming([&] { s.get_f32_slice(o, {7, 96}, 1, 32, 48); }, {o, path_, "[32, 80) along dim 1", "block"});
  expect_error_naming([&] { s.get_f32_slice(q, {18, 64}, 1, 0, 1); }, {q, path_, "Q4_0", "block"});
  expect_error_naming([&] { s.get_f32_slice("lm_head.weight", {1, 32}, 1, 0, 31); },
                      {"lm_head.weight", "Q4_1", "block"});
  // K-quants: on a 256-element super-block (a tensor-parallel split of a 512-wide row over 4 ranks).
  expect_error_naming([&] { s.get_f32_slice("model.layers.0.mlp.up_proj.weight", {9, 512}, 1, 128, 128); },
                      {"model.layers.0.mlp.up_proj.weight", "[128, 256) along dim 1", "Q4_K", "256"});
  expect_error_naming([&] { s.get_f32_slice("model.layers.0.post_attention_layernorm.weight", {64}, 0, 8, 8); },
                      {"model.layers.0.post_attention_layernorm.weight", "[8, 16) along dim 0", "block"});
  // Row slices of rope-permuted q/k must cover whole heads (head_dim 6).
  expect_error_naming([&] { s.get_f32_slice(q, {18, 64}, 0, 3, 6); },
                      {q, path_, "[3, 9) along dim 0", "whole heads", "6"});
  expect_error_naming([&] { s.get_f32_slice(k, {12, 13}, 0, 0, 4); }, {k, path_, "[0, 4) along dim 0", "whole heads"});
  expect_error_naming([&] { s.get_f32_slice(k, {12, 13}, 0, 6, 1); }, {k, "whole heads"});
  // Range, dim and shape checks.
  expect_error_naming([&] { s.get_f32_slice(o, {7, 96}, 0, 5, 3); },
                      {o, path_, "[5, 8) along dim 0", "out of range"});
  expect_error_naming([&] { s.get_f32_slice(o, {7, 96}, 0, -1, 1); }, {o, "out of range"});
  expect_error_naming([&] { s.get_f32_slice(o, {7, 96}, 0, 0, 0); }, {o, "out of range"});
  expect_error_naming([&] { s.get_f32_slice(o, {7, 96}, 1, 96, 32); }, {o, "[96, 128) along dim 1", "out of range"});
  expect_error_naming([&] { s.get_f32_slice(o, {96, 7}, 0, 0, 1); }, {o, path_, "[96, 7]", "[7, 96]"});
  expect_error_naming([&] { s.get_f32_slice(o, {7, 96}, 2, 0, 1); }, {o, "along dim 2"});
  expect_error_naming([&] { s.get_f32_slice("model.norm.weight", {7}, 1, 0, 1); },
                      {"model.norm.weight", "along dim 1"});
  expect_error_naming([&] { s.get_f32_slice("model.layers.9.mlp.up_proj.weight", {9, 5}, 0, 0, 1); },
                      {"model.layers.9.mlp.up_proj.weight", path_});
}

// A tensor with a zero dim: its slices are empty, with no chunks to visit, however large the
// other dims (which nothing bounds then: a fuzzed GGUF of 0 x 1,179,648 x 2,336,462,209,024
// elements kept the loader looping over 2.3e12 empty chunks).
TEST(SliceGeometry, ZeroDimTensorHasNoChunks) {
  const std::vector<int64_t> shape = {2336462209024, 1179648, 0};
  for (int dim : {0, 1}) {
    const int64_t length = shape[static_cast<size_t>(dim)] / 2;
    const SliceGeometry g = check_slice("tensor 't'", shape, shape, dim, 0, length);
    EXPECT_EQ(g.outer, 0) << dim;
    EXPECT_EQ(g.chunk_elems(), 0) << dim;
    std::vector<int64_t> out = shape;
    out[static_cast<size_t>(dim)] = length;
    EXPECT_EQ(g.out_shape, out) << dim;
    int calls = 0;
    convert_slice_chunks(g, nullptr, [&](int64_t, int64_t, float*) { ++calls; });
    EXPECT_EQ(calls, 0) << dim;
    copy_slice_chunks(g, DType::kF32, nullptr, nullptr);  // nothing to copy, nothing read
  }
  // A zero dim itself cannot be sliced: length >= 1 is out of its range.
  const std::vector<int64_t> zero_rows = {0, 5};
  expect_error_naming([&] { (void)check_slice("tensor 'z'", zero_rows, zero_rows, 0, 0, 1); },
                      {"tensor 'z'", "out of range"});
  // A non-empty tensor keeps its geometry.
  const std::vector<int64_t> small = {3, 4, 5};
  const SliceGeometry g = check_slice("tensor 's'", small, small, 1, 1, 2);
  EXPECT_EQ(g.outer, 3);
  EXPECT_EQ(g.inner, 5);
  EXPECT_EQ(g.chunk_elems(), 10);
}

}  // namespace
}  // namespace minivllm
