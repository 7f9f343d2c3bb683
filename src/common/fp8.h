// FP8 E4M3 ("e4m3fn": 4 exponent bits, bias 7, 3 mantissa bits, no infinity, 0x7f / 0xff NaN,
// largest finite 448) on the host, and the per-row scaling the FP8 KV cache uses: a row (one
// token's k or v of one kv head) is stored as e4m3(x * 448 / amax) with the fp32 scale amax / 448
// beside it, so that x ~ e4m3 * scale. The CUDA kernels (backend/cuda/fp8_kv.cuh) compute the
// same bytes with the same formula; the CPU backend uses these functions and is their reference.
#pragma once

#include <cstdint>

#include "common/hashed_uniform.h"

namespace minivllm {

inline constexpr float kE4M3Max = 448.0f;

float e4m3_to_f32(uint8_t code);
// Round to nearest even; |f| > 448 and infinities saturate to +-448 (CUDA's __NV_SATFINITE);
// NaN stays NaN (0x7f with f's sign).
uint8_t f32_to_e4m3(float f);

// The multiplier a row of largest magnitude `amax` is quantised with (0 for an all-zero row), and
// the scale it is dequantised with: amax / 448.
inline float e4m3_quant_multiplier(float amax) { return amax > 0.0f ? kE4M3Max / amax : 0.0f; }
inline float e4m3_row_scale(float amax) { return amax / kE4M3Max; }

// out[i] = e4m3(x[i] * 448 / amax), *scale = amax / 448 over the n values of one row.
void quantize_e4m3_row(const float* x, int64_t n, uint8_t* out, float* scale);
// out[i] = e4m3_to_f32(q[i]) * scale.
void dequantize_e4m3_row(const uint8_t* q, int64_t n, float scale, float* out);

// Keys are stored in an fp8 KV cache rotated: k' = H k, H orthogonal, and the queries that attend
// over them likewise, so q'.k' = q.k. e4m3 keeps 3 mantissa bits of each element, so a key's error
// is largest in its largest channels; trained models' keys carry a few large channels that their
// queries also weight most (the score's error is then most of it). H spreads every channel over the
// whole block, so no element dominates (docs/PERFORMANCE.md, "Stop 89"). H is block-diagonal: the Sylvester Walsh-Hadamard matrix of order P (entries +-1 / sqrt(P)) on each
// run of P elements, P the largest power of two dividing n (head_dim 64, 128, 256: all of it; 96:
// runs of 32).
inline int64_t kv_rotation_block(int64_t n) { return n & -n; }
// 1 / sqrt(P) for a head of n values, as both backends multiply by it (one constant, not each
// side's sqrt).
float kv_rotation_norm(int64_t n);
// x <- H x over the n values of one head (the butterflies over index bit 0, 1, ... in that order;
// the CUDA kernels use the same order, so both give the same floats).
void kv_rotate_row(float* x, int64_t n);

// Dummy FP8 weights: element `index`'s code, e4m3(value / scale) (HashedFp8; the CUDA kernel
// computes the same bytes).
inline uint8_t hashed_e4m3_code(const HashedUniform& h, float scale, uint64_t index) {
  return f32_to_e4m3(hashed_uniform_value(h, index) / scale);
}

}  // namespace minivllm
