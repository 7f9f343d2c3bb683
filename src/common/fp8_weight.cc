#include "common/fp8_weight.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "common/check.h"
#include "common/fp8.h"

namespace minivllm {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

const WeightScales& scales_of(const Tensor& w, const char* op) {
  MINIVLLM_CHECK(w.dtype() == DType::kF8E4M3 && w.ndim() == 2 && w.scales() != nullptr &&
                 w.device() == DeviceKind::kCpu)
      << op << ": " << w.describe() << " is not a host FP8 weight with its scales";
  return *w.scales();
}

// The same values with one grid row per weight row.
Tensor expand_to_rows(const Tensor& w) {
  const WeightScales& s = scales_of(w, "stack_fp8_rows");
  if (s.block_rows == 1) return w;
  const int64_t rows = w.size(0), gc = s.grid.size(1);
  Tensor grid = host_tensor(DType::kF32, {rows, gc});
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(grid.ptr<float>() + r * gc, s.grid.ptr<float>() + (r / s.block_rows) * gc,
                static_cast<size_t>(gc) * sizeof(float));
  }
  return make_fp8_weight(w, grid, 1, s.block_cols);
}

}  // namespace

Tensor make_fp8_weight(Tensor codes, Tensor grid, int64_t block_rows, int64_t block_cols) {
  MINIVLLM_CHECK(codes.dtype() == DType::kF8E4M3 && codes.ndim() == 2 && grid.dtype() == DType::kF32 &&
                 grid.ndim() == 2 && block_rows > 0 && block_cols > 0)
      << "make_fp8_weight: codes " << codes.describe() << ", grid " << grid.describe() << ", blocks " << block_rows
      << "x" << block_cols;
  MINIVLLM_CHECK(grid.size(0) == ceil_div(codes.size(0), block_rows) && grid.size(1) == ceil_div(codes.size(1), block_cols))
      << "make_fp8_weight: grid " << grid.describe() << " does not fit codes " << codes.describe() << " in blocks of "
      << block_rows << "x" << block_cols;
  auto s = std::make_shared<WeightScales>();
  s->grid = std::move(grid);
  s->block_rows = block_rows;
  s->block_cols = block_cols;
  return codes.with_scales(std::move(s));
}

void dequantize_fp8_rows(const Tensor& w, int64_t row_begin, int64_t row_end, float* out) {
  const WeightScales& s = scales_of(w, "dequantize_fp8_rows");
  const int64_t cols = w.size(1), gc = s.grid.size(1);
  MINIVLLM_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= w.size(0))
      << "dequantize_fp8_rows: rows [" << row_begin << ", " << row_end << ") of " << w.describe();
  std::array<float, 256> lut;
  for (int c = 0; c < 256; ++c) lut[static_cast<size_t>(c)] = e4m3_to_f32(static_cast<uint8_t>(c));
  const auto* q = static_cast<const uint8_t*>(w.data());
  const float* g = s.grid.ptr<float>();
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* grow = g + (r / s.block_rows) * gc;
    float* o = out + (r - row_begin) * cols;
    for (int64_t c = 0; c < cols; ++c) o[c] = lut[q[r * cols + c]] * grow[c / s.block_cols];
  }
}

Tensor dequantize_fp8_weight(const Tensor& w) {
  scales_of(w, "dequantize_fp8_weight");
  Tensor out = host_tensor(DType::kF32, {w.size(0), w.size(1)});
  dequantize_fp8_rows(w, 0, w.size(0), out.ptr<float>());
  return out;
}

void quantize_fp8_row_range(const Tensor& x, int64_t row_begin, int64_t row_end, int64_t col_begin, int64_t col_end,
                            uint8_t* codes, float* scales) {
  const int64_t cols = x.size(1), out_cols = col_end - col_begin;
  std::vector<uint8_t> row(static_cast<size_t>(cols));
  for (int64_t r = row_begin; r < row_end; ++r) {
    quantize_e4m3_row(x.ptr<float>() + r * cols, cols, row.data(), scales + (r - row_begin));
    std::memcpy(codes + (r - row_begin) * out_cols, row.data() + col_begin, static_cast<size_t>(out_cols));
  }
}

Tensor quantize_fp8_rows(const Tensor& x, int64_t col_begin, int64_t col_end) {
  MINIVLLM_CHECK(x.dtype() == DType::kF32 && x.ndim() == 2 && x.device() == DeviceKind::kCpu && col_begin >= 0 &&
                 col_begin < col_end && col_end <= x.size(1))
      << "quantize_fp8_rows: " << x.describe() << " columns [" << col_begin << ", " << col_end << ")";
  const int64_t rows = x.size(0), out_cols = col_end - col_begin;
  Tensor codes = host_tensor(DType::kF8E4M3, {rows, out_cols});
  Tensor grid = host_tensor(DType::kF32, {rows, 1});
  quantize_fp8_row_range(x, 0, rows, col_begin, col_end, static_cast<uint8_t*>(codes.data()), grid.ptr<float>());
  return make_fp8_weight(codes, grid, 1, out_cols);
}

Tensor canonical_fp8_weight(const Tensor& w) {
  const WeightScales& s = scales_of(w, "canonical_fp8_weight");
  const int64_t rows = w.size(0), cols = w.size(1);
  if (s.block_cols >= cols && s.block_rows > 1) return make_fp8_weight(w, expand_to_rows(w).scales()->grid, 1, cols);
  if (s.block_cols >= cols && s.block_cols != cols) return make_fp8_weight(w, s.grid, s.block_rows, cols);
  if (s.block_rows > rows) return make_fp8_weight(w, s.grid, rows, s.block_cols);
  return w;
}

Tensor stack_fp8_rows(const std::vector<Tensor>& parts) {
  MINIVLLM_CHECK(!parts.empty()) << "stack_fp8_rows: no parts";
  const int64_t cols = parts.front().size(1);
  const WeightScales& first = scales_of(parts.front(), "stack_fp8_rows");
  bool as_is = true;
  int64_t rows = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const WeightScales& s = scales_of(parts[i], "stack_fp8_rows");
    MINIVLLM_CHECK_EQ(parts[i].size(1), cols) << "stack_fp8_rows: part " << parts[i].describe() << " vs "
                                              << parts.front().describe();
    if (s.block_rows != first.block_rows || s.block_cols != first.block_cols) as_is = false;
    if (i + 1 < parts.size() && parts[i].size(0) % s.block_rows != 0) as_is = false;
    rows += parts[i].size(0);
  }
  std::vector<Tensor> ps = parts;
  if (!as_is) {
    for (Tensor& p : ps) p = expand_to_rows(canonical_fp8_weight(p));
    for (const Tensor& p : ps) {
      MINIVLLM_CHECK_EQ(p.scales()->block_cols, ps.front().scales()->block_cols)
          << "stack_fp8_rows: parts with scale blocks of " << p.scales()->block_cols << " and "
          << ps.front().scales()->block_cols << " columns do not stack";
    }
  }
  const int64_t gc = ps.front().scales()->grid.size(1);
  int64_t grid_rows = 0;
  for (const Tensor& p : ps) grid_rows += p.scales()->grid.size(0);
  Tensor codes = host_tensor(DType::kF8E4M3, {rows, cols});
  Tensor grid = host_tensor(DType::kF32, {grid_rows, gc});
  char* c = static_cast<char*>(codes.data());
  float* g = grid.ptr<float>();
  for (const Tensor& p : ps) {
    std::memcpy(c, p.data(), p.nbytes());
    c += p.nbytes();
    std::memcpy(g, p.scales()->grid.data(), p.scales()->grid.nbytes());
    g += p.scales()->grid.numel();
  }
  return make_fp8_weight(codes, grid, ps.front().scales()->block_rows, ps.front().scales()->block_cols);
}

}  // namespace minivllm
