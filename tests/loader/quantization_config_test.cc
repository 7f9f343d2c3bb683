// config.json's quantization_config: the published Qwen3-8B-FP8 config, llm-compressor's FP8
// schemes, and the refusals of everything else (each error names the key, its value and the file).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "loader/model_config.h"
#include "loader/quantization_config.h"
#include "loader_test_util.h"

namespace minivllm {
namespace {

using nlohmann::json;
using testing::expect_error_naming;
using testing::ScratchDir;
using testing::write_text;

json ct_args(const std::string& strategy, bool dynamic) {
  return {{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", strategy}, {"dynamic", dynamic}};
}

// llm-compressor's layout: one config group over every Linear, lm_head ignored.
json compressed_tensors(const json& weights, const json& inputs) {
  return {{"quant_method", "compressed-tensors"},
          {"format", "float-quantized"},
          {"quantization_status", "compressed"},
          {"kv_cache_scheme", nullptr},
          {"ignore", {"lm_head"}},
          {"config_groups",
           {{"group_0",
             {{"targets", {"Linear"}},
              {"weights", weights},
              {"input_activations", inputs},
              {"output_activations", nullptr}}}}}};
}

TEST(QuantizationConfig, Qwen3_8B_Fp8PublishedConfig) {
  ScratchDir dir("qwen3_8b_fp8");
  std::filesystem::copy_file(std::string(MINIVLLM_SHARED_DIR) + "/models/configs/qwen3-8b-fp8.json",
                             dir.file("config.json"));
  const ModelConfig c = load_hf_model_config(dir.str());
  const WeightQuantization& q = c.quantization;
  EXPECT_EQ(q.method, QuantMethod::kFp8);
  EXPECT_EQ(q.method_name, "fp8");
  EXPECT_EQ(q.block_rows, 128);
  EXPECT_EQ(q.block_cols, 128);
  EXPECT_EQ(q.scale_suffix, "weight_scale_inv");
  EXPECT_FALSE(q.static_input_scale);
  EXPECT_EQ(q.describe(), "fp8 (e4m3 weights, 128x128 blocks, dynamic activations)");
}

TEST(QuantizationConfig, NoneWithoutTheKey) {
  const ModelConfig c = load_hf_model_config(std::string(MINIVLLM_SHARED_DIR) + "/models/qwen3-0.6b");
  EXPECT_FALSE(c.quantization.quantized());
}

TEST(QuantizationConfig, Fp8PerTensorStatic) {
  const WeightQuantization q =
      parse_quantization_config({{"quant_method", "fp8"}, {"activation_scheme", "static"}}, "c.json");
  EXPECT_EQ(q.block_rows, 0);
  EXPECT_EQ(q.block_cols, 0);
  EXPECT_EQ(q.scale_suffix, "weight_scale");
  EXPECT_TRUE(q.static_input_scale);
}

TEST(QuantizationConfig, CompressedTensorsSchemes) {
  // FP8_DYNAMIC: per channel, dynamic per-token activations.
  WeightQuantization q = parse_quantization_config(
      compressed_tensors(ct_args("channel", false), ct_args("token", true)), "c.json");
  EXPECT_EQ(q.method, QuantMethod::kCompressedTensors);
  EXPECT_EQ(q.block_rows, 1);
  EXPECT_EQ(q.block_cols, 0);
  EXPECT_EQ(q.scale_suffix, "weight_scale");
  EXPECT_FALSE(q.static_input_scale);
  EXPECT_EQ(q.ignore, std::vector<std::string>{"lm_head"});
  // FP8: per tensor, static activations.
  q = parse_quantization_config(compressed_tensors(ct_args("tensor", false), ct_args("tensor", false)), "c.json");
  EXPECT_EQ(q.block_rows, 0);
  EXPECT_TRUE(q.static_input_scale);
  // FP8_BLOCK, and weights only (no input_activations).
  json block = ct_args("block", false);
  block["block_structure"] = {128, 64};
  q = parse_quantization_config(compressed_tensors(block, nullptr), "c.json");
  EXPECT_EQ(q.block_rows, 128);
  EXPECT_EQ(q.block_cols, 64);
  EXPECT_FALSE(q.static_input_scale);
}

TEST(QuantizationConfig, OtherMethodsAreRefusedByName) {
  for (const char* method : {"awq", "gptq", "bitsandbytes", "gguf"}) {
    expect_error_naming([&] { parse_quantization_config({{"quant_method", method}, {"bits", 4}}, "/m/config.json"); },
                        {"/m/config.json", "quant_method", std::string("\"") + method + "\""});
  }
  expect_error_naming([] { parse_quantization_config({{"bits", 4}}, "/m/config.json"); }, {"quant_method", "\"\""});
  expect_error_naming([] { parse_quantization_config(json::array(), "/m/config.json"); },
                      {"/m/config.json", "quantization_config must be an object"});
}

TEST(QuantizationConfig, UnsupportedFp8VariantsAreRefused) {
  expect_error_naming([] { parse_quantization_config({{"quant_method", "fp8"}, {"fmt", "e5m2"}}, "c.json"); },
                      {"c.json", "fmt", "e5m2"});
  expect_error_naming(
      [] {
        parse_quantization_config(
            {{"quant_method", "fp8"}, {"activation_scheme", "static"}, {"weight_block_size", {128, 128}}}, "c.json");
      },
      {"activation_scheme", "static", "weight_block_size"});
  expect_error_naming(
      [] { parse_quantization_config({{"quant_method", "fp8"}, {"weight_block_size", {128}}}, "c.json"); },
      {"weight_block_size", "[128]"});
  // compressed-tensors that is not FP8: int4 packed weights (GPTQ-style W4A16), int8 weights.
  json int4 =
      compressed_tensors({{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 128}}, nullptr);
  int4["format"] = "pack-quantized";
  expect_error_naming([&] { parse_quantization_config(int4, "c.json"); }, {"c.json", "format", "pack-quantized"});
  json int8 = compressed_tensors({{"num_bits", 8}, {"type", "int"}, {"strategy", "channel"}}, nullptr);
  expect_error_naming([&] { parse_quantization_config(int8, "c.json"); },
                      {"config_groups.group_0", "weights", "\"int\""});
  json kv = compressed_tensors(ct_args("channel", false), nullptr);
  kv["kv_cache_scheme"] = ct_args("tensor", false);
  expect_error_naming([&] { parse_quantization_config(kv, "c.json"); }, {"kv_cache_scheme"});
  expect_error_naming(
      [] { parse_quantization_config(compressed_tensors(ct_args("group", false), nullptr), "c.json"); },
      {"weights strategy", "\"group\""});
}

TEST(QuantizationConfig, RefusalNamesTheConfigFile) {
  ScratchDir dir("awq_config");
  std::ifstream in(std::string(MINIVLLM_SHARED_DIR) + "/models/configs/qwen3-8b.json");
  json j = json::parse(in);
  j["quantization_config"] = {{"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}};
  write_text(dir.file("config.json"), j.dump());
  expect_error_naming([&] { load_hf_model_config(dir.str()); }, {dir.file("config.json"), "quant_method", "\"awq\""});
}

}  // namespace
}  // namespace minivllm
