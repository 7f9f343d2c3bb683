// Safetensors: hand-built bytes read back, writer round trips in BF16/F16/F32 checked against
// values known from their bit patterns, sharded checkpoints, and errors that name tensor and file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "loader/safetensors.h"
#include "loader/weight_source.h"
#include "loader_test_util.h"

namespace minivllm {
namespace {

using testing::expect_error_naming;
using testing::ScratchDir;
using testing::write_bytes;
using testing::write_text;

// A host tensor of `dtype` holding raw 16-bit patterns (or floats for F32).
Tensor tensor_u16(DType dtype, const std::vector<int64_t>& shape, const std::vector<uint16_t>& bits) {
  Tensor t = host_tensor(dtype, shape);
  EXPECT_EQ(static_cast<size_t>(t.numel()), bits.size());
  std::memcpy(t.data(), bits.data(), bits.size() * 2);
  return t;
}

Tensor tensor_f32(const std::vector<int64_t>& shape, const std::vector<float>& values) {
  Tensor t = host_tensor(DType::kF32, shape);
  std::memcpy(t.data(), values.data(), values.size() * 4);
  return t;
}

std::vector<float> values_of(const Tensor& t) { return {t.ptr<float>(), t.ptr<float>() + t.numel()}; }

// Bytes of a safetensors file assembled by hand: header text, then data.
std::vector<uint8_t> handmade(const std::string& header, const std::vector<uint8_t>& data) {
  // One allocation and memcpy: GCC 12's -Warray-bounds misfires on vector::insert here.
  std::vector<uint8_t> out(8 + header.size() + data.size());
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
  return out;
}

template <typename T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

TEST(Safetensors, ReadsHandBuiltFile) {
  ScratchDir dir("st_hand");
  // Two tensors; the header lists "b" before "a" and "b"'s data comes second.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2],"data_offsets":[12,16]},)"
      R"("a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  std::vector<uint8_t> data = as_bytes(std::vector<float>{1.5f, -2.0f, 1e-3f});
  const auto bf = as_bytes(std::vector<uint16_t>{0x4049, 0xBF80});  // 3.140625, -1.0
  data.insert(data.end(), bf.begin(), bf.end());
  write_bytes(dir.file("model.safetensors"), handmade(header, data));

  SafetensorsFile f(dir.file("model.safetensors"));
  EXPECT_EQ(f.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(values_of(f.get_f32("a", {3})), (std::vector<float>{1.5f, -2.0f, 1e-3f}));
  EXPECT_EQ(values_of(f.get_f32("b")), (std::vector<float>{3.140625f, -1.0f}));
  auto src = open_safetensors_dir(dir.str());
  EXPECT_TRUE(src->has("a"));
  EXPECT_FALSE(src->has("c"));
  EXPECT_EQ(src->describe(), dir.str());
}

// A header of odd length puts 16-bit data at an odd address; it must still read right (a plain
// uint16_t load there is undefined behaviour, and UBSan in the asan preset flags it; the fuzzer
// found it).
TEST(Safetensors, SixteenBitDataAtOddAddress) {
  ScratchDir dir("st_odd");
  const std::string header =
      R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}} )";
  ASSERT_EQ(header.size() % 2, 1u);
  const auto data = as_bytes(std::vector<uint16_t>{0x3C00, 0xC000, 0x4049, 0xBF80});  // 1, -2, 3.140625, -1
  write_bytes(dir.file("model.safetensors"), handmade(header, data));
  SafetensorsFile f(dir.file("model.safetensors"));
  EXPECT_EQ(values_of(f.get_f32("h")), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(values_of(f.get_f32("b")), (std::vector<float>{3.140625f, -1.0f}));
}

TEST(Safetensors, WriterRoundTripBf16F16F32) {
  ScratchDir dir("st_round");
  // BF16 bit patterns and their exact values.
  const std::vector<uint16_t> bf_bits = {0x3F80, 0xC040, 0x3E80, 0x4049, 0x0000, 0x8000, 0x7F80, 0x3F81};
  const std::vector<float> bf_vals = {1.0f, -3.0f, 0.25f, 3.140625f, 0.0f, -0.0f,
                                      std::numeric_limits<float>::infinity(), 1.0078125f};
  // F16 bit patterns: 1, -2, 0x3555 = 1365/4096, max finite, smallest subnormal 2^-24, smallest normal 2^-14.
  const std::vector<uint16_t> h_bits = {0x3C00, 0xC000, 0x3555, 0x7BFF, 0x0001, 0x0400};
  const std::vector<float> h_vals = {1.0f, -2.0f, 0.333251953125f, 65504.0f, 5.9604644775390625e-08f,
                                     6.103515625e-05f};
  const std::vector<float> f_vals = {0.1f, -7.25f, 3e38f, -1e-40f};
  std::map<std::string, Tensor> tensors = {{"w.bf16", tensor_u16(DType::kBF16, {2, 4}, bf_bits)},
                                           {"w.f16", tensor_u16(DType::kF16, {3, 2}, h_bits)},
                                           {"w.f32", tensor_f32({4}, f_vals)}};
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, tensors, {{"format", "pt"}});

  // The file layout, checked by hand: header length multiple of 8, offsets back to back.
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  const auto header = nlohmann::json::parse(text);
  EXPECT_EQ(header["w.bf16"]["dtype"], "BF16");
  EXPECT_EQ(header["w.bf16"]["shape"], nlohmann::json({2, 4}));
  EXPECT_EQ(header["w.bf16"]["data_offsets"], nlohmann::json({0, 16}));
  EXPECT_EQ(header["w.f16"]["data_offsets"], nlohmann::json({16, 28}));
  EXPECT_EQ(header["w.f32"]["data_offsets"], nlohmann::json({28, 44}));
  EXPECT_EQ(std::filesystem::file_size(path), 8 + n + 44);

  auto src = open_safetensors_dir(dir.str());
  EXPECT_EQ(src->names(), (std::vector<std::string>{"w.bf16", "w.f16", "w.f32"}));
  const Tensor bf = src->get_f32("w.bf16", {2, 4});
  EXPECT_EQ(bf.shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(bf.dtype(), DType::kF32);
  EXPECT_EQ(values_of(bf), bf_vals);
  EXPECT_TRUE(std::signbit(bf.ptr<float>()[5]));
  EXPECT_EQ(values_of(src->get_f32("w.f16", {3, 2})), h_vals);
  EXPECT_EQ(values_of(src->get_f32("w.f32", {4})), f_vals);
}

TEST(Safetensors, LargeBf16ConversionInParallel) {
  ScratchDir dir("st_large");
  const int64_t rows = 300, cols = 1000;  // 300k elements: several conversion chunks
  std::vector<uint16_t> bits(rows * cols);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(0x3F80 + (i % 128));
  write_safetensors(dir.file("model.safetensors"), {{"big", tensor_u16(DType::kBF16, {rows, cols}, bits)}});
  const Tensor t = open_safetensors_dir(dir.str())->get_f32("big", {rows, cols});
  for (size_t i = 0; i < bits.size(); ++i) {
    // 0x3F80 + k is 1 + k/128 (k < 128 stays in the mantissa of exponent 0).
    ASSERT_EQ(t.ptr<float>()[i], 1.0f + static_cast<float>(i % 128) / 128.0f) << "element " << i;
  }
}

TEST(Safetensors, ShardedIndex) {
  ScratchDir dir("st_shard");
  write_safetensors(dir.file("model-00001-of-00002.safetensors"),
                    {{"a", tensor_f32({2}, {1, 2})}, {"b", tensor_f32({1}, {3})}});
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), {{"c", tensor_f32({2, 2}, {4, 5, 6, 7})}});
  write_text(dir.file("model.safetensors.index.json"),
             R"({"metadata":{"total_size":28},"weight_map":{"a":"model-00001-of-00002.safetensors",)"
             R"("b":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}})");
  auto src = open_safetensors_dir(dir.str());
  EXPECT_EQ(src->names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(values_of(src->get_f32("a")), (std::vector<float>{1, 2}));
  EXPECT_EQ(values_of(src->get_f32("b", {1})), (std::vector<float>{3}));
  EXPECT_EQ(values_of(src->get_f32("c", {2, 2})), (std::vector<float>{4, 5, 6, 7}));
  expect_error_naming([&] { src->get_f32("d"); }, {"'d'", dir.str()});

  // An index that sends a tensor to a shard without it, or to a missing shard.
  write_text(dir.file("model.safetensors.index.json"),
             R"({"weight_map":{"a":"model-00002-of-00002.safetensors"}})");
  expect_error_naming([&] { open_safetensors_dir(dir.str()); }, {"'a'", "model-00002-of-00002.safetensors"});
  write_text(dir.file("model.safetensors.index.json"), R"({"weight_map":{"a":"model-00009.safetensors"}})");
  expect_error_naming([&] { open_safetensors_dir(dir.str()); }, {"model-00009.safetensors", "'a'"});
}

TEST(Safetensors, MissingTensorAndWrongShape) {
  ScratchDir dir("st_err");
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, {{"model.norm.weight", tensor_f32({3, 2}, {1, 2, 3, 4, 5, 6})}});
  auto src = open_safetensors_dir(dir.str());
  expect_error_naming([&] { src->get_f32("lm_head.weight"); }, {"lm_head.weight", dir.str()});
  expect_error_naming([&] { src->get_f32("model.norm.weight", {2, 3}); },
                      {"model.norm.weight", "[2, 3]", "[3, 2]", path});
}

TEST(Safetensors, TruncatedFileNamesTensorAndFile) {
  ScratchDir dir("st_trunc");
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, {{"first", tensor_f32({4}, {1, 2, 3, 4})}, {"second", tensor_f32({4}, {5, 6, 7, 8})}});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  expect_error_naming([&] { open_safetensors_dir(dir.str()); }, {"second", path, "truncated"});
}

TEST(Safetensors, CorruptHeaders) {
  ScratchDir dir("st_corrupt");
  const std::string path = dir.file("model.safetensors");
  write_bytes(path, {1, 2, 3});
  expect_error_naming([&] { SafetensorsFile f(path); }, {path, "corrupt"});
  write_bytes(path, handmade("{\"a\": {\"dtype\": ", {}));
  expect_error_naming([&] { SafetensorsFile f(path); }, {path, "corrupt", "JSON"});
  std::vector<uint8_t> huge(16, 0);
  huge[6] = 1;  // header length 2^48
  write_bytes(path, huge);
  expect_error_naming([&] { SafetensorsFile f(path); }, {path, "header length"});
  write_bytes(path, handmade(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::vector<uint8_t>(8)));
  expect_error_naming([&] { SafetensorsFile f(path); }, {path, "'a'"});
}

TEST(Safetensors, UnsupportedDtypeNamesTensor) {
  ScratchDir dir("st_dtype");
  const std::string path = dir.file("model.safetensors");
  write_bytes(path, handmade(R"({"position_ids":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})",
                             std::vector<uint8_t>(16)));
  SafetensorsFile f(path);  // opening is fine: only converting it is not
  expect_error_naming([&] { f.get_f32("position_ids"); }, {"position_ids", "I64", path});
}

TEST(Safetensors, MissingDirectoryOrFiles) {
  expect_error_naming([] { open_safetensors_dir("/nonexistent/ckpt"); }, {"/nonexistent/ckpt"});
  ScratchDir dir("st_empty");
  expect_error_naming([&] { open_safetensors_dir(dir.str()); }, {"model.safetensors", dir.str()});
}

}  // namespace
}  // namespace minivllm

namespace minivllm {
namespace {

// transformers 5's fused experts: gate_up_proj [E, 2I, H] (gate rows first) and down_proj [E, H, I]
// read under the per-expert names of published checkpoints; GraniteMoE's published stacks
// (block_sparse_moe.input_linear / output_linear) alike, under block_sparse_moe.experts.<e>.
TEST(Safetensors, FusedExpertsReadAsPerExpertMatrices) {
  struct Layout {
    const char* gate_up;
    const char* down;
    const char* experts;  // the per-expert names' prefix
  };
  for (const Layout& l : {Layout{"model.layers.0.mlp.experts.gate_up_proj", "model.layers.0.mlp.experts.down_proj",
                                 "model.layers.0.mlp.experts."},
                          Layout{"model.layers.1.block_sparse_moe.input_linear.weight",
                                 "model.layers.1.block_sparse_moe.output_linear.weight",
                                 "model.layers.1.block_sparse_moe.experts."}}) {
    ScratchDir dir("st_fused_experts");
    std::vector<float> gate_up(3 * 4 * 2), down(3 * 2 * 2);
    for (size_t i = 0; i < gate_up.size(); ++i) gate_up[i] = static_cast<float>(i);
    for (size_t i = 0; i < down.size(); ++i) down[i] = 100.0f + static_cast<float>(i);
    write_safetensors(dir.file("model.safetensors"),
                      {{l.gate_up, tensor_f32({3, 4, 2}, gate_up)}, {l.down, tensor_f32({3, 2, 2}, down)}});
    auto src = open_safetensors_dir(dir.str());
    const std::string p = l.experts;
    EXPECT_EQ(values_of(src->get_f32(p + "1.gate_proj.weight", {2, 2})), (std::vector<float>{8, 9, 10, 11})) << p;
    EXPECT_EQ(values_of(src->get_f32(p + "1.up_proj.weight", {2, 2})), (std::vector<float>{12, 13, 14, 15})) << p;
    EXPECT_EQ(values_of(src->get_f32(p + "2.down_proj.weight", {2, 2})), (std::vector<float>{108, 109, 110, 111}))
        << p;
    EXPECT_EQ(values_of(src->get_f32_slice(p + "2.up_proj.weight", {2, 2}, 0, 1, 1)), (std::vector<float>{22, 23}))
        << p;
    EXPECT_FALSE(src->has(p + "3.gate_proj.weight")) << p;
    EXPECT_EQ(src->stored_dtype(p + "0.down_proj.weight"), DType::kF32) << p;
  }
}

// The tiny Qwen3-MoE checkpoint rewritten in transformers 5's layout reads back the same weights
// under every name the original has (what a checkpoint saved by transformers 5 gives the model).
TEST(Safetensors, Qwen3MoeTinyInTransformers5LayoutReadsTheSameWeights) {
  const std::string golden = std::string(MINIVLLM_SOURCE_DIR) + "/tests/goldens/qwen3-moe-tiny";
  auto original = open_safetensors_dir(golden);
  const nlohmann::json cfg = nlohmann::json::parse(std::ifstream(golden + "/config.json"));
  const int64_t layers = cfg.at("num_hidden_layers").get<int64_t>(), experts = cfg.value("num_experts", cfg.value("num_local_experts", int64_t{0})),
                h = cfg.at("hidden_size").get<int64_t>(), inter = cfg.at("moe_intermediate_size").get<int64_t>();
  std::map<std::string, Tensor> fused;
  for (const std::string& name : original->names()) {
    if (name.find(".mlp.experts.") == std::string::npos) {
      const Tensor t = original->get_f32(name, {});
      fused.emplace(name, t);
    }
  }
  int64_t sparse_layers = 0;
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp.experts.";
    if (!original->has(p + "0.gate_proj.weight")) continue;  // a dense layer (mlp_only_layers)
    ++sparse_layers;
    Tensor gu = host_tensor(DType::kF32, {experts, 2 * inter, h}), dn = host_tensor(DType::kF32, {experts, h, inter});
    for (int64_t e = 0; e < experts; ++e) {
      const std::string q = p + std::to_string(e) + ".";
      const Tensor g = original->get_f32(q + "gate_proj.weight", {inter, h});
      const Tensor u = original->get_f32(q + "up_proj.weight", {inter, h});
      const Tensor d = original->get_f32(q + "down_proj.weight", {h, inter});
      std::memcpy(gu.ptr<float>() + e * 2 * inter * h, g.data(), g.nbytes());
      std::memcpy(gu.ptr<float>() + (e * 2 + 1) * inter * h, u.data(), u.nbytes());
      std::memcpy(dn.ptr<float>() + e * h * inter, d.data(), d.nbytes());
    }
    fused.emplace(p + "gate_up_proj", gu);
    fused.emplace(p + "down_proj", dn);
  }
  ASSERT_GT(sparse_layers, 0);
  ScratchDir dir("st_qwen3moe_fused");
  write_safetensors(dir.file("model.safetensors"), fused);
  auto converted = open_safetensors_dir(dir.str());
  for (const std::string& name : original->names()) {
    ASSERT_TRUE(converted->has(name)) << name;
    EXPECT_EQ(values_of(converted->get_f32(name, {})), values_of(original->get_f32(name, {}))) << name;
  }
}

}  // namespace
}  // namespace minivllm

namespace minivllm {
namespace {

// A header that claims a huge number of experts of empty matrices is refused by name, not expanded
// into views one by one.
TEST(Safetensors, FusedExpertsOfEmptyMatricesAreRefused) {
  ScratchDir dir("st_fused_empty");
  write_safetensors(dir.file("model.safetensors"),
                    {{"model.layers.0.mlp.experts.down_proj", host_tensor(DType::kF32, {1000000, 0, 4})}});
  expect_error_naming([&] { open_safetensors_dir(dir.str()); }, {"down_proj", "fused experts"});
}

}  // namespace
}  // namespace minivllm
