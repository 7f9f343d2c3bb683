// FP8 weights on the host: e4m3 codes [rows, cols] carrying their scale grid (Tensor::scales(),
// WeightScales), as the loader hands them to a backend that computes on FP8
// (Backend::keeps_weight_dtype(kF8E4M3)), and the conversions around them: dequantization (the CPU
// reference computes on these values), online quantization of whole rows, and stacking the parts
// of a merged projection (q / k / v, gate / up) into one weight.
#pragma once

#include <cstdint>
#include <vector>

#include "common/tensor.h"

namespace minivllm {

// codes (host kF8E4M3 [rows, cols]) with grid (host f32 [ceil(rows / block_rows), ceil(cols /
// block_cols)]; checked) attached.
Tensor make_fp8_weight(Tensor codes, Tensor grid, int64_t block_rows, int64_t block_cols);

// The values code * scale, f32 [rows, cols]; serial (callers parallelise: dequantize_fp8_rows).
Tensor dequantize_fp8_weight(const Tensor& w);
// Rows [row_begin, row_end) of those values into out ([row_end - row_begin, cols]).
void dequantize_fp8_rows(const Tensor& w, int64_t row_begin, int64_t row_end, float* out);

// Each row of f32 x [rows, cols] through e4m3 with its own scale over all its columns
// (quantize_e4m3_row), keeping columns [col_begin, col_end): per-row scales.
Tensor quantize_fp8_rows(const Tensor& x, int64_t col_begin, int64_t col_end);
// Rows [row_begin, row_end) of it: codes into codes (rows of col_end - col_begin), scales into
// scales (one a row). Callers parallelise over row ranges.
void quantize_fp8_row_range(const Tensor& x, int64_t row_begin, int64_t row_end, int64_t col_begin, int64_t col_end,
                            uint8_t* codes, float* scales);

// The same weight with the grid the GPU's kernels prefer: a scale that spans whole rows (per
// channel or per tensor) becomes one scale per row (block_rows 1, one grid column), and a block
// taller than the weight is cut to its rows. Values unchanged.
Tensor canonical_fp8_weight(const Tensor& w);

// The parts (host FP8 weights of equal cols) stacked along rows. Their grids are stacked as they are
// when every part but the last ends on a block (and all share the block shape); otherwise each is
// first expanded to one scale per row and block_cols (which must then agree). Values unchanged.
Tensor stack_fp8_rows(const std::vector<Tensor>& parts);

}  // namespace minivllm
