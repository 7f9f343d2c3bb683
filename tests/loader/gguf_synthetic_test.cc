// A hand-built GGUF llama (hidden 32, 2 heads / 1 KV head, head_dim 16, ffn 64, 4 tokens) with
// Q8_0 / Q4_0 / Q4_1 / F16 / BF16 / F32 tensors. Expected values are written from the block
// format's definition element by element, not through the loader's code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "common/dtype.h"
#include "loader/gguf.h"
#include "gguf_test_writer.h"
#include "loader_test_util.h"

namespace minivllm {
namespace {

using testing::expect_error_naming;
using testing::GgufTestWriter;
using testing::ScratchDir;
using testing::write_bytes;
using W = GgufTestWriter;

constexpr int kHidden = 32, kHeads = 2, kKvHeads = 1, kHeadDim = 16, kFfn = 64, kVocab = 4;

// Expected HF-layout values of every tensor, as functions of (row, col).
float embd_scale(int r) { return std::vector<float>{0.5f, 1.0f, 0.25f, -0.5f}[r]; }
const uint16_t kEmbdScaleBits[] = {0x3800, 0x3C00, 0x3400, 0xB800};
float expect_embd(int r, int c) { return static_cast<float>(c - 16 + r) * embd_scale(r); }          // Q8_0
float expect_q(int r, int c) { return static_cast<float>(r * 100 + c); }                            // F32
float expect_k(int r, int c) { return (r - 8) * 0.5f + c * 0.03125f; }                              // F16
float expect_v(int r, int c) { return (r - c) * 0.25f; }                                            // BF16
float expect_o(int r, int c) {                                                                      // Q4_0
  const float d = r % 2 ? 0.125f : 0.25f;
  const int q = c < 16 ? (c + r) & 15 : 15 - (c - 16);  // low nibbles: elements 0..15, high: 16..31
  return static_cast<float>(q - 8) * d;
}
float expect_gate(int r, int c) {                                                                   // Q4_1
  const float m = -static_cast<float>(r % 4);
  const int q = c < 16 ? (3 * c + r) % 16 : (c - 16 + r) % 16;
  return static_cast<float>(q) * 0.5f + m;
}
float expect_up(int r, int c) { return static_cast<float>(r) - static_cast<float>(c) / 8; }         // F32
float expect_down(int r, int c) { return static_cast<float>((r + c) % 50 - 25) * (c < 32 ? 1.0f : 2.0f); }  // Q8_0
float expect_norm(int, int c) { return 1.0f + static_cast<float>(c) / 32; }

template <typename T>
void append(std::vector<uint8_t>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));
}

// GGUF rows of a HF q/k matrix: convert_hf_to_gguf.py's w.reshape(n_head, 2, D/2, cols).swapaxes(1, 2),
// i.e. output row (h, j, i) = input row (h, i, j).
int gguf_row_to_hf_row(int gguf_row, int rows, int n_head) {
  const int d = rows / n_head, h = gguf_row / d, j = (gguf_row % d) / 2, i = gguf_row % 2;
  return h * d + i * (d / 2) + j;
}

std::vector<uint8_t> f32_bytes(int rows, int cols, float (*f)(int, int), int rope_heads = 0) {
  std::vector<uint8_t> out;
  for (int g = 0; g < rows; ++g) {
    const int r = rope_heads ? gguf_row_to_hf_row(g, rows, rope_heads) : g;
    for (int c = 0; c < cols; ++c) append(&out, f(r, c));
  }
  return out;
}

std::vector<uint8_t> half_bytes(int rows, int cols, float (*f)(int, int), bool bf16, int rope_heads = 0) {
  std::vector<uint8_t> out;
  for (int g = 0; g < rows; ++g) {
    const int r = rope_heads ? gguf_row_to_hf_row(g, rows, rope_heads) : g;
    for (int c = 0; c < cols; ++c) {
      const float x = f(r, c);
      uint32_t bits;
      std::memcpy(&bits, &x, 4);
      append(&out, bf16 ? static_cast<uint16_t>(bits >> 16) : f32_to_f16(x));  // exact values: no rounding
    }
  }
  return out;
}

std::vector<uint8_t> embd_q8_0() {
  std::vector<uint8_t> out;
  for (int r = 0; r < kVocab; ++r) {
    append(&out, kEmbdScaleBits[r]);
    for (int i = 0; i < 32; ++i) append(&out, static_cast<int8_t>(i - 16 + r));
  }
  return out;
}

std::vector<uint8_t> o_q4_0() {
  std::vector<uint8_t> out;
  for (int r = 0; r < kHidden; ++r) {
    append(&out, uint16_t(r % 2 ? 0x3000 : 0x3400));  // 0.125, 0.25
    for (int j = 0; j < 16; ++j) append(&out, static_cast<uint8_t>(((j + r) & 15) | ((15 - j) << 4)));
  }
  return out;
}

std::vector<uint8_t> gate_q4_1() {
  const uint16_t kMins[] = {0x0000, 0xBC00, 0xC000, 0xC200};  // 0, -1, -2, -3
  std::vector<uint8_t> out;
  for (int r = 0; r < kFfn; ++r) {
    append(&out, uint16_t{0x3800});  // d = 0.5
    append(&out, kMins[r % 4]);
    for (int j = 0; j < 16; ++j) append(&out, static_cast<uint8_t>(((3 * j + r) % 16) | (((j + r) % 16) << 4)));
  }
  return out;
}

std::vector<uint8_t> down_q8_0() {  // rows of 64: two blocks, scales 1 and 2
  std::vector<uint8_t> out;
  for (int r = 0; r < kHidden; ++r) {
    for (int b = 0; b < 2; ++b) {
      append(&out, uint16_t(b ? 0x4000 : 0x3C00));
      for (int i = 0; i < 32; ++i) append(&out, static_cast<int8_t>((r + b * 32 + i) % 50 - 25));
    }
  }
  return out;
}

struct BuildOptions {
  uint64_t alignment = 32;
  bool omit_block_count = false;
  bool unsupported_tensor = false;
};

std::vector<uint8_t> build_model(const BuildOptions& o = {}) {
  W w;
  w.add_string("general.architecture", "llama");
  if (o.alignment != 32) w.add_scalar("general.alignment", W::U32, uint32_t(o.alignment));
  w.add_scalar("llama.embedding_length", W::U32, uint32_t{kHidden});
  if (!o.omit_block_count) w.add_scalar("llama.block_count", W::U32, uint32_t{1});
  w.add_scalar("llama.feed_forward_length", W::U32, uint32_t{kFfn});
  w.add_scalar("llama.attention.head_count", W::U32, uint32_t{kHeads});
  w.add_scalar("llama.attention.head_count_kv", W::U32, uint32_t{kKvHeads});
  w.add_scalar("llama.attention.layer_norm_rms_epsilon", W::F32, 1e-5f);
  w.add_scalar("llama.rope.freq_base", W::F32, 500000.0f);
  w.add_scalar("llama.context_length", W::U64, uint64_t{256});
  // Values of the other types, for the parser.
  w.add_scalar("test.u8", W::U8, uint8_t{200});
  w.add_scalar("test.i8", W::I8, int8_t{-5});
  w.add_scalar("test.u16", W::U16, uint16_t{65000});
  w.add_scalar("test.i16", W::I16, int16_t{-30000});
  w.add_scalar("test.i64", W::I64, int64_t{-(int64_t{1} << 40)});
  w.add_scalar("test.f64", W::F64, 0.125);
  w.add_array("test.u8s", W::U8, std::vector<uint8_t>{1, 2, 255});
  w.add_array("test.f64s", W::F64, std::vector<double>{0.5, -1.5});
  w.add_nested_i32("test.nested", {{1, 2}, {}, {-3}});
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "test-pre");
  w.add_strings("tokenizer.ggml.tokens", {"a", "b", "<s>", "</s>"});
  w.add_array("tokenizer.ggml.token_type", W::I32, std::vector<int32_t>{1, 1, 3, 3});
  w.add_strings("tokenizer.ggml.merges", {"a b"});
  w.add_scalar("tokenizer.ggml.bos_token_id", W::U32, uint32_t{2});
  w.add_scalar("tokenizer.ggml.eos_token_id", W::U32, uint32_t{3});
  w.add_scalar("tokenizer.ggml.eot_token_id", W::U32, uint32_t{1});
  w.add_scalar("tokenizer.ggml.padding_token_id", W::U32, uint32_t{0xFFFFFFFF});
  w.add_scalar("tokenizer.ggml.add_bos_token", W::BOOL, uint8_t{1});
  w.add_string("tokenizer.chat_template", "{{ messages }}");

  w.add_tensor("token_embd.weight", {kHidden, kVocab}, 8, embd_q8_0());
  w.add_tensor("blk.0.attn_q.weight", {kHidden, kHeads * kHeadDim}, 0,
               f32_bytes(kHeads * kHeadDim, kHidden, expect_q, kHeads));
  w.add_tensor("blk.0.attn_k.weight", {kHidden, kKvHeads * kHeadDim}, 1,
               half_bytes(kKvHeads * kHeadDim, kHidden, expect_k, false, kKvHeads));
  w.add_tensor("blk.0.attn_v.weight", {kHidden, kKvHeads * kHeadDim}, 30,
               half_bytes(kKvHeads * kHeadDim, kHidden, expect_v, true));
  w.add_tensor("blk.0.attn_output.weight", {kHidden, kHidden}, 2, o_q4_0());
  w.add_tensor("blk.0.ffn_gate.weight", {kHidden, kFfn}, 3, gate_q4_1());
  if (o.unsupported_tensor) {
    w.add_tensor("blk.0.ffn_up.weight", {kHidden, kFfn}, 16, std::vector<uint8_t>(66 * kFfn / 256 * 32));  // IQ2_XXS
  } else {
    w.add_tensor("blk.0.ffn_up.weight", {kHidden, kFfn}, 0, f32_bytes(kFfn, kHidden, expect_up));
  }
  w.add_tensor("blk.0.ffn_down.weight", {kFfn, kHidden}, 8, down_q8_0());
  for (const char* n : {"blk.0.attn_norm.weight", "blk.0.ffn_norm.weight", "output_norm.weight"}) {
    w.add_tensor(n, {kHidden}, 0, f32_bytes(1, kHidden, expect_norm));
  }
  return w.build(o.alignment);
}

void expect_matrix(const WeightSource& src, const std::string& name, int rows, int cols, float (*f)(int, int)) {
  SCOPED_TRACE(name);
  const Tensor t = src.get_f32(name, {rows, cols});
  ASSERT_EQ(t.shape(), (std::vector<int64_t>{rows, cols}));
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) ASSERT_EQ(t.ptr<float>()[r * cols + c], f(r, c)) << "at [" << r << ", " << c << "]";
  }
}

class GgufSynthetic : public ::testing::TestWithParam<uint64_t> {};

TEST_P(GgufSynthetic, ConfigVocabAndDequantizedWeights) {
  ScratchDir dir("gguf_syn");
  const std::string path = dir.file("tiny.gguf");
  write_bytes(path, build_model({.alignment = GetParam()}));
  const GgufModel m = open_gguf(path);
  const ModelConfig& c = m.config;
  EXPECT_STREQ(c.arch->hf_name, "LlamaForCausalLM");
  EXPECT_EQ(c.hidden_size, kHidden);
  EXPECT_EQ(c.num_layers, 1);
  EXPECT_EQ(c.intermediate_size, kFfn);
  EXPECT_EQ(c.num_heads, kHeads);
  EXPECT_EQ(c.num_kv_heads, kKvHeads);
  EXPECT_EQ(c.head_dim, kHeadDim);
  EXPECT_EQ(c.vocab_size, kVocab);
  EXPECT_FLOAT_EQ(static_cast<float>(c.rms_norm_eps), 1e-5f);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.max_position_embeddings, 256);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 2);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{3, 1}));  // eos, then eot
  EXPECT_EQ(m.chat_template, "{{ messages }}");
  EXPECT_EQ(m.vocab.model, "gpt2");
  EXPECT_EQ(m.vocab.pre, "test-pre");
  EXPECT_EQ(m.vocab.tokens, (std::vector<std::string>{"a", "b", "<s>", "</s>"}));
  EXPECT_EQ(m.vocab.token_types, (std::vector<int32_t>{1, 1, 3, 3}));
  EXPECT_EQ(m.vocab.merges, (std::vector<std::string>{"a b"}));
  EXPECT_EQ(m.vocab.padding_token_id, -1);  // 0xFFFFFFFF means none
  EXPECT_TRUE(m.vocab.add_bos_token);
  EXPECT_FALSE(m.vocab.add_space_prefix);

  const WeightSource& w = *m.weights;
  EXPECT_EQ(w.describe(), path);
  EXPECT_FALSE(w.has("lm_head.weight"));
  expect_matrix(w, "model.embed_tokens.weight", kVocab, kHidden, expect_embd);
  EXPECT_EQ(w.get_f32("model.embed_tokens.weight").ptr<float>()[kHidden + 0], -15.0f);  // row 1: (0-16+1)*1
  expect_matrix(w, "model.layers.0.self_attn.q_proj.weight", kHeads * kHeadDim, kHidden, expect_q);
  expect_matrix(w, "model.layers.0.self_attn.k_proj.weight", kKvHeads * kHeadDim, kHidden, expect_k);
  expect_matrix(w, "model.layers.0.self_attn.v_proj.weight", kKvHeads * kHeadDim, kHidden, expect_v);
  expect_matrix(w, "model.layers.0.self_attn.o_proj.weight", kHidden, kHidden, expect_o);
  EXPECT_EQ(w.get_f32("model.layers.0.self_attn.o_proj.weight").ptr<float>()[16], 7 * 0.25f);  // high nibble 15
  expect_matrix(w, "model.layers.0.mlp.gate_proj.weight", kFfn, kHidden, expect_gate);
  expect_matrix(w, "model.layers.0.mlp.up_proj.weight", kFfn, kHidden, expect_up);
  expect_matrix(w, "model.layers.0.mlp.down_proj.weight", kHidden, kFfn, expect_down);
  for (const char* n : {"model.layers.0.input_layernorm.weight", "model.layers.0.post_attention_layernorm.weight",
                        "model.norm.weight"}) {
    const Tensor t = w.get_f32(n, {kHidden});
    for (int i = 0; i < kHidden; ++i) ASSERT_EQ(t.ptr<float>()[i], expect_norm(0, i)) << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Alignments, GgufSynthetic, ::testing::Values(32, 64));

TEST(GgufSynthetic, AllValueTypesParsed) {
  ScratchDir dir("gguf_types");
  write_bytes(dir.file("t.gguf"), build_model());
  const GgufFile f(dir.file("t.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_int("test.u8"), 200);
  EXPECT_EQ(f.get_int("test.i8"), -5);
  EXPECT_EQ(f.get_int("test.u16"), 65000);
  EXPECT_EQ(f.get_int("test.i16"), -30000);
  EXPECT_EQ(f.get_int("test.i64"), -(int64_t{1} << 40));
  EXPECT_EQ(f.get_int("llama.context_length"), 256);
  EXPECT_DOUBLE_EQ(f.get_float("test.f64", 0), 0.125);
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token", false));
  EXPECT_EQ(f.find("test.u8s")->ints, (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(f.find("test.f64s")->floats, (std::vector<double>{0.5, -1.5}));
  const GgufValue* nested = f.find("test.nested");
  ASSERT_EQ(nested->arrays.size(), 3u);
  EXPECT_EQ(nested->arrays[0].ints, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(nested->arrays[1].ints.empty());
  EXPECT_EQ(nested->arrays[2].ints, (std::vector<int64_t>{-3}));
  expect_error_naming([&] { f.get_int("tokenizer.ggml.model"); }, {"tokenizer.ggml.model", "string"});
  expect_error_naming([&] { f.get_int("no.such.key"); }, {"no.such.key", dir.file("t.gguf")});
}

TEST(GgufSynthetic, WrongShapeNamesTensorAndFile) {
  ScratchDir dir("gguf_shape");
  write_bytes(dir.file("t.gguf"), build_model());
  const GgufModel m = open_gguf(dir.file("t.gguf"));
  expect_error_naming([&] { m.weights->get_f32("model.layers.0.self_attn.k_proj.weight", {32, 16}); },
                      {"model.layers.0.self_attn.k_proj.weight", "[32, 16]", "[16, 32]", dir.file("t.gguf")});
  expect_error_naming([&] { m.weights->get_f32("model.layers.7.mlp.up_proj.weight"); },
                      {"model.layers.7.mlp.up_proj.weight", dir.file("t.gguf")});
}

TEST(GgufSynthetic, TruncatedFileNamed) {
  ScratchDir dir("gguf_trunc");
  const std::vector<uint8_t> full = build_model();
  const std::string path = dir.file("t.gguf");
  write_bytes(path, std::vector<uint8_t>(full.begin(), full.end() - 10));  // inside the last tensor
  expect_error_naming([&] { open_gguf(path); }, {path, "truncated", "output_norm.weight"});
  write_bytes(path, std::vector<uint8_t>(full.begin(), full.begin() + 300));  // inside the metadata
  expect_error_naming([&] { open_gguf(path); }, {path, "truncated"});
  write_bytes(path, std::vector<uint8_t>(full.begin(), full.begin() + 6));
  expect_error_naming([&] { open_gguf(path); }, {path, "truncated"});
}

TEST(GgufSynthetic, UnsupportedTypeNamesTensorAndType) {
  ScratchDir dir("gguf_iq2xxs");
  const std::string path = dir.file("t.gguf");
  write_bytes(path, build_model({.unsupported_tensor = true}));
  expect_error_naming([&] { open_gguf(path); }, {path, "blk.0.ffn_up.weight", "IQ2_XXS", "Q4_K"});
  const GgufFile f(path);  // metadata-only readers (the tokenizer) still work
  EXPECT_EQ(read_gguf_vocab(f).tokens.size(), 4u);
  expect_error_naming([&] { f.get_f32(*f.find_tensor("blk.0.ffn_up.weight")); }, {"blk.0.ffn_up.weight", "IQ2_XXS"});
}

TEST(GgufSynthetic, MissingKeyAndBadMagicNamed) {
  ScratchDir dir("gguf_key");
  const std::string path = dir.file("t.gguf");
  write_bytes(path, build_model({.omit_block_count = true}));
  expect_error_naming([&] { open_gguf(path); }, {path, "llama.block_count"});
  std::vector<uint8_t> bytes = build_model();
  bytes[0] = 'X';
  write_bytes(path, bytes);
  expect_error_naming([&] { open_gguf(path); }, {path, "not a GGUF"});
  expect_error_naming([&] { open_gguf(dir.file("absent.gguf")); }, {dir.file("absent.gguf")});
}

TEST(GgufNames, HfNameMapping) {
  // Through the public model: every GGUF name of a llama block maps to its HF name.
  ScratchDir dir("gguf_names");
  write_bytes(dir.file("t.gguf"), build_model());
  const GgufModel m = open_gguf(dir.file("t.gguf"));
  EXPECT_EQ(m.weights->names(),
            (std::vector<std::string>{
                "model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
                "model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.gate_proj.weight",
                "model.layers.0.mlp.up_proj.weight", "model.layers.0.post_attention_layernorm.weight",
                "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.o_proj.weight",
                "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.v_proj.weight",
                "model.norm.weight"}));
}

// Gemma 3's GGUF metadata as llama.cpp reads it (a file of metadata alone: the config needs no
// tensor): attention.sliding_window switches sliding layers on, laid out by
// attention.sliding_window_pattern (bools, or every n-th layer global) or else by llama.cpp's
// default of 6; rope.freq_base_swa (default 10,000) for them; the 27B's 62 layers scale the
// queries by (hidden / heads)^-1/2; soft-capping refused.
struct Gemma3Meta {
  int64_t layers = 7;
  int64_t window = 8;
  std::vector<uint8_t> pattern_bools = {};
  int64_t pattern = -1;
  float swa_base = 0;
  float softcap = 0;
};

GgufModel open_gemma3(const ScratchDir& dir, const Gemma3Meta& m) {
  W w;
  w.add_string("general.architecture", "gemma3");
  w.add_scalar("gemma3.embedding_length", W::U32, uint32_t{64});
  w.add_scalar("gemma3.block_count", W::U32, static_cast<uint32_t>(m.layers));
  w.add_scalar("gemma3.feed_forward_length", W::U32, uint32_t{128});
  w.add_scalar("gemma3.attention.head_count", W::U32, uint32_t{2});
  w.add_scalar("gemma3.attention.head_count_kv", W::U32, uint32_t{1});
  w.add_scalar("gemma3.attention.key_length", W::U32, uint32_t{16});
  w.add_scalar("gemma3.attention.layer_norm_rms_epsilon", W::F32, 1e-6f);
  w.add_scalar("gemma3.rope.freq_base", W::F32, 1e6f);
  w.add_scalar("gemma3.context_length", W::U32, uint32_t{256});
  if (m.window > 0) w.add_scalar("gemma3.attention.sliding_window", W::U32, static_cast<uint32_t>(m.window));
  if (!m.pattern_bools.empty()) w.add_array("gemma3.attention.sliding_window_pattern", W::BOOL, m.pattern_bools);
  if (m.pattern >= 0) w.add_scalar("gemma3.attention.sliding_window_pattern", W::U32, static_cast<uint32_t>(m.pattern));
  if (m.swa_base > 0) w.add_scalar("gemma3.rope.freq_base_swa", W::F32, m.swa_base);
  if (m.softcap > 0) w.add_scalar("gemma3.final_logit_softcapping", W::F32, m.softcap);
  w.add_strings("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>", "a"});
  const std::string path = dir.file("gemma3.gguf");
  write_bytes(path, w.build(32));
  return open_gguf(path);
}

TEST(GgufGemma3Meta, SlidingLayersRopeBasesAndScale) {
  ScratchDir dir("gguf_gemma3");
  {
    const ModelConfig c = open_gemma3(dir, {}).config;
    EXPECT_TRUE(c.norm_weights_include_one);
    EXPECT_EQ(c.attention_scale, 0);
    EXPECT_EQ(c.layer_sliding, (std::vector<bool>{true, true, true, true, true, false, true}));
    EXPECT_EQ(c.layer_sliding_window, (std::vector<int64_t>{8, 8, 8, 8, 8, 0, 8}));
    EXPECT_DOUBLE_EQ(c.rope_theta_sliding, 1e4);
  }
  {
    const ModelConfig c = open_gemma3(dir, {.pattern_bools = {1, 0, 0, 1, 1, 0, 1}, .swa_base = 5e4f}).config;
    EXPECT_EQ(c.layer_sliding, (std::vector<bool>{true, false, false, true, true, false, true}));
    EXPECT_EQ(c.layer_sliding_window, (std::vector<int64_t>{8, 0, 0, 8, 8, 0, 8}));
    EXPECT_DOUBLE_EQ(c.rope_theta_sliding, 5e4);
  }
  {
    const ModelConfig c = open_gemma3(dir, {.window = 4096, .pattern = 2}).config;  // longer than the context
    EXPECT_EQ(c.layer_sliding, (std::vector<bool>{true, false, true, false, true, false, true}));
    EXPECT_EQ(c.layer_sliding_window, std::vector<int64_t>(7, 0));
  }
  {
    const ModelConfig c = open_gemma3(dir, {.window = 0}).config;
    EXPECT_TRUE(c.layer_sliding.empty());
    EXPECT_EQ(c.layer_sliding_window, std::vector<int64_t>(7, 0));
  }
  EXPECT_NEAR(open_gemma3(dir, {.layers = 62}).config.attention_scale, 1 / std::sqrt(32.0), 1e-12);
  expect_error_naming([&] { open_gemma3(dir, {.softcap = 30}); }, {"gemma3.final_logit_softcapping", "30"});
  expect_error_naming([&] { open_gemma3(dir, {.pattern_bools = {1, 0}}); },
                      {"gemma3.attention.sliding_window_pattern", "one bool per layer"});
}

}  // namespace
}  // namespace minivllm
