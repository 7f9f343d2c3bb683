// The dequantizing WeightSource of FP8 checkpoints (loader/quantized_weights.h) on handmade
// safetensors files: values per block, channel and tensor (partial edge blocks included), slices
// on and across block boundaries, hidden scale tensors, and the errors for a weight without its
// scale, a scale without its weight, a scale of the wrong shape, and F8_E4M3 without a config.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <tuple>

#include "common/dtype.h"
#include "common/fp8.h"
#include "common/fp8_weight.h"
#include "loader/quantized_weights.h"
#include "loader/safetensors.h"
#include "loader_test_util.h"

namespace minivllm {
namespace {

using testing::expect_error_naming;
using testing::ScratchDir;

constexpr int64_t kRows = 5, kCols = 7;  // blocks of 2x4: a 3x2 grid whose last row and column are partial

// Codes that decode to distinct, exactly representable values: 0.5 * (1 + (i % 8) / 8) * 2^(i % 5), signed.
Tensor fp8_codes(int64_t rows, int64_t cols) {
  Tensor t = host_tensor(DType::kF8E4M3, {rows, cols});
  auto* q = static_cast<uint8_t*>(t.data());
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float v = std::ldexp(1.0f + static_cast<float>(i % 8) / 8.0f, static_cast<int>(i % 5) - 1);
    q[i] = f32_to_e4m3(i % 3 == 0 ? -v : v);
  }
  return t;
}

Tensor f32_tensor(const std::vector<int64_t>& shape, const std::vector<float>& values) {
  Tensor t = host_tensor(DType::kF32, shape);
  std::copy(values.begin(), values.end(), t.ptr<float>());
  return t;
}

Tensor bf16_tensor(const std::vector<int64_t>& shape, const std::vector<float>& values) {
  Tensor t = host_tensor(DType::kBF16, shape);
  auto* d = static_cast<uint16_t*>(t.data());
  for (size_t i = 0; i < values.size(); ++i) d[i] = f32_to_bf16(values[i]);
  return t;
}

WeightQuantization blocks(int64_t rows, int64_t cols, const char* suffix) {
  WeightQuantization q;
  q.method = QuantMethod::kFp8;
  q.method_name = "fp8";
  q.block_rows = rows;
  q.block_cols = cols;
  q.scale_suffix = suffix;
  return q;
}

const std::vector<float> kBlockScales = {0.5f, 2.0f, 0.25f, 4.0f, 1.5f, 0.125f};  // [3, 2]

// A checkpoint with an F8_E4M3 weight, its scales, and an ordinary bf16 norm.
std::unique_ptr<WeightSource> open_checkpoint(const ScratchDir& dir, std::map<std::string, Tensor> tensors,
                                              const WeightQuantization& q) {
  tensors.emplace("norm.weight", bf16_tensor({3}, {1.0f, 2.0f, 3.0f}));
  write_safetensors(dir.file("model.safetensors"), tensors);
  return dequantize_weights(open_safetensors_dir(dir.str()), q);
}

std::unique_ptr<WeightSource> block_checkpoint(const ScratchDir& dir) {
  return open_checkpoint(
      dir, {{"w.weight", fp8_codes(kRows, kCols)}, {"w.weight_scale_inv", f32_tensor({3, 2}, kBlockScales)}},
      blocks(2, 4, "weight_scale_inv"));
}

float code_value(int64_t r, int64_t c) {
  static const Tensor codes = fp8_codes(kRows, kCols);
  return e4m3_to_f32(static_cast<const uint8_t*>(codes.data())[r * kCols + c]);
}

TEST(QuantizedWeights, BlockScalesMultiplyEachBlock) {
  ScratchDir dir("fp8_block");
  auto src = block_checkpoint(dir);
  const Tensor w = src->get_f32("w.weight", {kRows, kCols});
  ASSERT_EQ(w.dtype(), DType::kF32);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kCols; ++c) {
      EXPECT_EQ(w.ptr<float>()[r * kCols + c], code_value(r, c) * kBlockScales[(r / 2) * 2 + c / 4]) << r << "," << c;
    }
  }
  EXPECT_EQ(src->stored_dtype("w.weight"), DType::kF8E4M3);  // codes and scales for an FP8 backend
  EXPECT_EQ(src->stored_dtype("norm.weight"), DType::kBF16);
  EXPECT_EQ(src->get_f32("norm.weight", {3}).ptr<float>()[2], 3.0f);
}

TEST(QuantizedWeights, SlicesOnBlockBoundaries) {
  ScratchDir dir("fp8_block_slices");
  auto src = block_checkpoint(dir);
  const Tensor full = src->get_f32("w.weight", {kRows, kCols});
  // Rows [2, 5): starts on a block, ends at the tensor's end (inside the partial last block).
  const Tensor rows = src->get_f32_slice("w.weight", {kRows, kCols}, 0, 2, 3);
  for (int64_t i = 0; i < 3 * kCols; ++i) EXPECT_EQ(rows.ptr<float>()[i], full.ptr<float>()[2 * kCols + i]);
  // Columns [4, 7), and rows [2, 5), in the stored format (what a backend that keeps FP8 weights
  // asks for): the codes with the blocks' part of the grid, whose values are the same.
  const Tensor cols = src->get_stored_slice("w.weight", {kRows, kCols}, 1, 4, 3);
  ASSERT_EQ(cols.dtype(), DType::kF8E4M3);
  ASSERT_NE(cols.scales(), nullptr);
  EXPECT_EQ(cols.scales()->grid.shape(), (std::vector<int64_t>{3, 1}));
  const Tensor cv = dequantize_fp8_weight(cols);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(cv.ptr<float>()[r * 3 + c], full.ptr<float>()[r * kCols + 4 + c]);
  }
  const Tensor rv = dequantize_fp8_weight(src->get_stored_slice("w.weight", {kRows, kCols}, 0, 2, 3));
  for (int64_t i = 0; i < 3 * kCols; ++i) EXPECT_EQ(rv.ptr<float>()[i], full.ptr<float>()[2 * kCols + i]);
}

// The stored slices of every scale layout decode to the values get_f32_slice serves, and stacking
// parts whose blocks do not line up (a merged projection) keeps every value.
TEST(QuantizedWeights, StoredSlicesAndStacksKeepTheValues) {
  ScratchDir dir("fp8_stored");
  const std::vector<float> scales = {0.5f, 2.0f, 0.25f, 4.0f, 1.5f};
  auto channel = open_checkpoint(
      dir, {{"w.weight", fp8_codes(kRows, kCols)}, {"w.weight_scale", f32_tensor({kRows, 1}, scales)}},
      blocks(1, 0, "weight_scale"));
  ScratchDir dir2("fp8_stored_tensor");
  auto tensor = open_checkpoint(dir2, {{"w.weight", fp8_codes(kRows, kCols)}, {"w.weight_scale", f32_tensor({1}, {0.75f})}},
                                blocks(0, 0, "weight_scale"));
  ScratchDir dir3("fp8_stored_block");
  auto block = block_checkpoint(dir3);
  for (WeightSource* src : {channel.get(), tensor.get(), block.get()}) {
    for (auto [dim, start, len] : {std::tuple<int, int64_t, int64_t>{0, 0, kRows}, {0, 2, 3}, {1, 4, 3}, {1, 0, 4}}) {
      const Tensor want = src->get_f32_slice("w.weight", {kRows, kCols}, dim, start, len);
      const Tensor got = dequantize_fp8_weight(
          canonical_fp8_weight(src->get_stored_slice("w.weight", {kRows, kCols}, dim, start, len)));
      ASSERT_EQ(got.shape(), want.shape());
      for (int64_t i = 0; i < want.numel(); ++i) ASSERT_EQ(got.ptr<float>()[i], want.ptr<float>()[i]) << dim << " " << start;
    }
  }
  // 2x4 blocks: rows [0, 5) stacked over rows [2, 5) (5 rows end mid-block: the grids are expanded
  // to one scale row per weight row first), and [0, 2) over [0, 2) (stacked as they are).
  const Tensor a = block->get_stored_slice("w.weight", {kRows, kCols}, 0, 0, kRows);
  const Tensor b = block->get_stored_slice("w.weight", {kRows, kCols}, 0, 2, 3);
  const Tensor c = block->get_stored_slice("w.weight", {kRows, kCols}, 0, 0, 2);
  for (const auto& [parts, aligned] : {std::pair<std::vector<Tensor>, bool>{{a, b}, false}, {{c, c, b}, true}}) {
    const Tensor stacked = stack_fp8_rows(parts);
    EXPECT_EQ(stacked.scales()->block_rows, aligned ? 2 : 1);
    const Tensor v = dequantize_fp8_weight(stacked);
    int64_t row = 0;
    for (const Tensor& p : parts) {
      const Tensor pv = dequantize_fp8_weight(p);
      for (int64_t i = 0; i < pv.numel(); ++i) ASSERT_EQ(v.ptr<float>()[row * kCols + i], pv.ptr<float>()[i]);
      row += p.size(0);
    }
  }
}

TEST(QuantizedWeights, SliceCuttingABlockNamesTensorAndBlockSize) {
  ScratchDir dir("fp8_block_cut");
  auto src = block_checkpoint(dir);
  expect_error_naming([&] { src->get_f32_slice("w.weight", {kRows, kCols}, 0, 1, 2); },
                      {"'w.weight'", "[1, 3) along dim 0", "2x4", "block boundaries"});
  expect_error_naming([&] { src->get_f32_slice("w.weight", {kRows, kCols}, 0, 2, 1); },
                      {"'w.weight'", "[2, 3)", "2x4"});
  expect_error_naming([&] { src->get_f32_slice("w.weight", {kRows, kCols}, 1, 0, 3); },
                      {"'w.weight'", "[0, 3) along dim 1", "columns in blocks of 4"});
}

TEST(QuantizedWeights, ScalesAreHiddenFromTheModel) {
  ScratchDir dir("fp8_hidden");
  auto src = block_checkpoint(dir);
  EXPECT_TRUE(src->has("w.weight"));
  EXPECT_FALSE(src->has("w.weight_scale_inv"));
  EXPECT_EQ(src->names(), (std::vector<std::string>{"norm.weight", "w.weight"}));
  expect_error_naming([&] { src->get_f32("w.weight_scale_inv"); }, {"'w.weight_scale_inv'", "quantization scale"});
}

TEST(QuantizedWeights, ChannelScalesInBf16AndStaticInputScale) {
  ScratchDir dir("fp8_channel");
  WeightQuantization q = blocks(1, 0, "weight_scale");
  q.method = QuantMethod::kCompressedTensors;
  q.static_input_scale = true;
  const std::vector<float> scales = {0.5f, 2.0f, 0.25f, 4.0f, 1.5f};
  auto src = open_checkpoint(dir,
                             {{"w.weight", fp8_codes(kRows, kCols)},
                              {"w.weight_scale", bf16_tensor({kRows, 1}, scales)},
                              {"w.input_scale", f32_tensor({1}, {0.02f})}},
                             q);
  EXPECT_FALSE(src->has("w.input_scale"));
  // Per channel, any row or column cut is fine: each row has its own scale.
  const Tensor s = src->get_f32_slice("w.weight", {kRows, kCols}, 1, 3, 2);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(s.ptr<float>()[r * 2 + c], code_value(r, 3 + c) * scales[r]);
  }
  EXPECT_EQ(src->get_f32_slice("w.weight", {kRows, kCols}, 0, 1, 3).ptr<float>()[0], code_value(1, 0) * scales[1]);
}

TEST(QuantizedWeights, TensorScale) {
  ScratchDir dir("fp8_tensor");
  auto src = open_checkpoint(dir, {{"w.weight", fp8_codes(kRows, kCols)}, {"w.weight_scale", f32_tensor({1}, {0.75f})}},
                             blocks(0, 0, "weight_scale"));
  const Tensor w = src->get_f32_slice("w.weight", {kRows, kCols}, 0, 3, 1);
  for (int64_t c = 0; c < kCols; ++c) EXPECT_EQ(w.ptr<float>()[c], code_value(3, c) * 0.75f);
}

TEST(QuantizedWeights, MissingOrOrphanScalesAreErrors) {
  {
    ScratchDir dir("fp8_no_scale");
    const WeightQuantization q = blocks(2, 4, "weight_scale_inv");
    expect_error_naming([&] { open_checkpoint(dir, {{"w.weight", fp8_codes(kRows, kCols)}}, q); },
                        {"'w.weight'", "no scale 'w.weight_scale_inv'", "2x4 blocks"});
  }
  {
    ScratchDir dir("fp8_orphan");
    expect_error_naming(
        [&] {
          open_checkpoint(dir,
                          {{"w.weight", fp8_codes(kRows, kCols)},
                           {"w.weight_scale_inv", f32_tensor({3, 2}, kBlockScales)},
                           {"v.weight_scale_inv", f32_tensor({1}, {1.0f})}},
                          blocks(2, 4, "weight_scale_inv"));
        },
        {"'v.weight_scale_inv'", "no F8_E4M3 weight"});
  }
  {
    ScratchDir dir("fp8_no_input_scale");
    WeightQuantization q = blocks(0, 0, "weight_scale");
    q.static_input_scale = true;
    expect_error_naming(
        [&] {
          open_checkpoint(dir, {{"w.weight", fp8_codes(kRows, kCols)}, {"w.weight_scale", f32_tensor({1}, {1.0f})}}, q);
        },
        {"'w.weight'", "w.input_scale", "static"});
  }
}

TEST(QuantizedWeights, ScaleOfTheWrongShape) {
  ScratchDir dir("fp8_bad_scale");
  auto src = open_checkpoint(
      dir, {{"w.weight", fp8_codes(kRows, kCols)}, {"w.weight_scale_inv", f32_tensor({2, 2}, {1, 1, 1, 1})}},
      blocks(2, 4, "weight_scale_inv"));
  expect_error_naming([&] { src->get_f32("w.weight", {kRows, kCols}); },
                      {"'w.weight_scale_inv'", "[2, 2]", "'w.weight'", "[3, 2]"});
}

TEST(QuantizedWeights, Fp8WithoutQuantizationConfigIsRefused) {
  ScratchDir dir("fp8_no_config");
  write_safetensors(dir.file("model.safetensors"), {{"w.weight", fp8_codes(kRows, kCols)}});
  auto src = open_safetensors_dir(dir.str());
  EXPECT_EQ(src->stored_dtype("w.weight"), DType::kF8E4M3);
  expect_error_naming([&] { src->get_f32("w.weight", {kRows, kCols}); },
                      {"'w.weight'", "F8_E4M3", "quantization_config"});
  expect_error_naming([&] { src->get_f32_slice("w.weight", {kRows, kCols}, 0, 0, 2); },
                      {"'w.weight'", "F8_E4M3", "quantization_config"});
  // The stored form is the unscaled codes.
  const Tensor codes = src->get_stored_slice("w.weight", {kRows, kCols}, 0, 0, kRows);
  EXPECT_EQ(codes.dtype(), DType::kF8E4M3);
}

}  // namespace
}  // namespace minivllm
