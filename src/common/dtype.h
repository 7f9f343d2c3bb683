// Element types and the host-side conversions between them (bf16/fp16 <-> fp32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace minivllm {

// kQ8_0, kQ4_0, kQ4_1: ggml's block-quantised weight formats (loader/gguf_dequant.h has the
// layouts), 32 elements a block along the last dimension. Only the CPU backend keeps weights in
// them; no activation ever has these types. kF8E4M3: the FP8 KV cache's element (common/fp8.h) and
// FP8 weights' codes, always with scales beside them (the cache's per-row scales, a weight's
// Tensor::scales()); converted to f32 it is the raw value, unscaled.
// kQ5_0 .. kMXFP4: more of ggml's weight formats (common/quant_blocks.h): the legacy 32-element
// blocks, the 256-element K-quant super-blocks, and MXFP4's 32-element blocks (gpt-oss's experts).
enum class DType : uint8_t {
  kF32, kF16, kBF16, kI32, kI64, kU8, kQ8_0, kQ4_0, kQ4_1, kF8E4M3,
  kQ5_0, kQ5_1, kIQ4_NL, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIQ4_XS, kMXFP4
};

// Bytes of one storage unit: an element, or a whole block for the quantised types.
size_t dtype_size(DType t);
// Elements in one storage unit: 32 for the legacy block formats, 256 for the K-quants, 1 otherwise.
int64_t dtype_block(DType t);
inline bool dtype_is_quantized(DType t) { return dtype_block(t) > 1; }
// Bytes of n elements (n a multiple of dtype_block(t); checked).
size_t dtype_nbytes(DType t, int64_t n);
const char* dtype_name(DType t);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Converts n elements of src (of type `from`) to fp32.
void convert_to_f32(const void* src, DType from, float* dst, size_t n);
// Converts n fp32 values to `to` (kF32, kF16 or kBF16).
void convert_from_f32(const float* src, DType to, void* dst, size_t n);

}  // namespace minivllm
