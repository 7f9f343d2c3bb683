// ggml's block-quantised weight formats, 32 elements a block along a row (ggml-common.h):
//   Q8_0: f16 d, int8 q[32];             x[i] = q[i] * d
//   Q4_0: f16 d, uint8 qs[16];           x[j] = ((qs[j] & 15) - 8) * d, x[j+16] = ((qs[j] >> 4) - 8) * d
//   Q4_1: f16 d, f16 m, uint8 qs[16];    x[j] = (qs[j] & 15) * d + m,   x[j+16] = (qs[j] >> 4) * d + m
// and, with 32-element blocks too, Q5_0, Q5_1 and IQ4_NL; with 256-element super-blocks the
// K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS (layouts in quant_blocks_k.cc);
// and the scalar decoding of them (and of f16 / bf16) to fp32: the one definition the loader, the
// CPU backend's kernels and their tests share. Blocks are read byte-wise: in a file or a packed
// row they need not be aligned.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/dtype.h"

namespace minivllm {

constexpr int64_t kQuantBlock = 32;

// Decodes n elements (a multiple of dtype_block(dtype)) of `src`, stored as dtype (f32, f16, bf16,
// q8_0, q4_0 or q4_1), into dst. Serial: callers parallelise.
void dequantize_to_f32(DType dtype, const void* src, float* dst, int64_t n);

// A block of the formats above other than Q8_0 / Q4_0 / Q4_1, decoded to integers: element e is
// d[e / sub] * q[e] + c[e / sub]. sub is 32, or 16 for Q2_K, Q3_K and Q6_K (whose scales change
// every 16 elements); the integer part of a sub-block's scale stays in d, not in q, so that
// |q| <= 127 and an int16 activation dot product of 32 elements cannot overflow int32.
// dequantize_to_f32 is d * q + c in fp32, the same products as ggml's dequantize_row_*.
struct BlockCodes {
  int n;    // elements: dtype_block(dtype)
  int sub;  // elements per scale
  int16_t q[256];
  float d[16], c[16];
};
// True for the dtypes decode_block reads.
bool has_block_codes(DType dtype);
void decode_block(DType dtype, const uint8_t* block, BlockCodes* out);

// The 16 values of IQ4_NL's and IQ4_XS's 4-bit codes (ggml's kvalues_iq4nl).
extern const int8_t kIq4NlValues[16];
// MXFP4's: twice the FP4 E2M1 values (ggml's kvalues_mxfp4), so that they are integers.
extern const int8_t kMxfp4Values[16];
// An MXFP4 block's scale for those codes: 2^(e - 128), its E8M0 exponent e halved (exact in fp32 for
// every e, e = 0 and 1 as denormals: ggml's GGML_E8M0_TO_FP32_HALF).
inline float mxfp4_scale(uint8_t e) {
  uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Whether widen_to_q8_0 takes dtype: the formats whose every value is an int8 times the block's f16
// d (Q8_0, Q4_0, Q5_0, IQ4_NL), so that Q8_0 holds them exactly.
bool widens_to_q8_0(DType dtype);
// Re-encodes n elements (a multiple of 32) of such a format as Q8_0 blocks, value for value: the
// fused q/k/v of a llama-quantize file whose parts have different types (Q5_0 q and k, Q8_0 v) stays
// one block-quantized weight instead of being decoded to floats.
void widen_to_q8_0(DType dtype, const void* src, void* dst, int64_t n);

// Encodes n fp32 values (a multiple of 32) as q8_0 / q4_0 / q4_1 blocks (round to nearest; for tests
// and tools: it need not match ggml's quantiser bit for bit).
void quantize_from_f32(DType dtype, const float* src, void* dst, int64_t n);

}  // namespace minivllm
