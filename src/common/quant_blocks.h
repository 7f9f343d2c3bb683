// ggml's block-quantised weight formats, 32 elements a block along a row (ggml-common.h):
//   Q8_0: f16 d, int8 q[32];             x[i] = q[i] * d
//   Q4_0: f16 d, uint8 qs[16];           x[j] = ((qs[j] & 15) - 8) * d, x[j+16] = ((qs[j] >> 4) - 8) * d
//   Q4_1: f16 d, f16 m, uint8 qs[16];    x[j] = (qs[j] & 15) * d + m,   x[j+16] = (qs[j] >> 4) * d + m
// and the scalar decoding of them (and of f16 / bf16) to fp32: the one definition the loader, the
// CPU backend's kernels and their tests share. Blocks are read byte-wise: in a file or a packed
// row they need not be aligned.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace minivllm {

constexpr int64_t kQuantBlock = 32;

// Decodes n elements (a multiple of dtype_block(dtype)) of `src`, stored as dtype (f32, f16, bf16,
// q8_0, q4_0 or q4_1), into dst. Serial: callers parallelise.
void dequantize_to_f32(DType dtype, const void* src, float* dst, int64_t n);

// Encodes n fp32 values (a multiple of 32) as q8_0 / q4_0 / q4_1 blocks (round to nearest; for tests
// and tools: it need not match ggml's quantiser bit for bit).
void quantize_from_f32(DType dtype, const float* src, void* dst, int64_t n);

}  // namespace minivllm
