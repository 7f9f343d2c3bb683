// Device side of the FP8 KV cache (common/fp8.h is the host side and the reference): e4m3 loads
// of 8 elements as one 8-byte word, and the per-row quantisation the cache writes use. The
// quantisation is the host's formula step for step (amax, 448 / amax, x * that, round to nearest
// even with saturation), so the CPU backend's fp8 cache holds the same bytes for the same inputs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/device_utils.cuh"

namespace minivllm::cuda {

constexpr float kE4M3MaxDevice = 448.0f;

// Two e4m3 codes (the low 16 bits, the lower byte first) as f16x2, exactly: the tensor-core kernels'
// operand (decode_attention_mma.cu, the FP8 gemvs).
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t u) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(u & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// Eight e4m3 values (the first in the low byte) to fp32, unscaled; exact (through fp16).
__device__ __forceinline__ void fp8x8_to_f32(const uint2& u, float* f) {
  const __nv_fp8x2_storage_t* p = reinterpret_cast<const __nv_fp8x2_storage_t*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(p[i], __NV_E4M3);
    const float2 t = __half22float2(*reinterpret_cast<const __half2*>(&raw));
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

__device__ __forceinline__ uint8_t f32_to_e4m3_device(float x) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

// 448 / amax (0 for an all-zero row), and the scale amax / 448 the row is read back with; IEEE
// divisions, as on the host.
__device__ __forceinline__ float e4m3_multiplier_device(float amax) {
  return amax > 0.0f ? __fdiv_rn(kE4M3MaxDevice, amax) : 0.0f;
}
__device__ __forceinline__ float e4m3_scale_device(float amax) { return __fdiv_rn(amax, kE4M3MaxDevice); }

// One warp quantises one row of n (<= 256, a multiple of 32) fp32 values it holds, lane l elements
// l + 32 k in x[k]. All 32 lanes must call it (the amax is a warp reduction).
__device__ __forceinline__ void quantize_regs_e4m3_warp(const float (&x)[8], int n, uint8_t* dst, float* scale,
                                                        int lane) {
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    if (lane + 32 * k < n) amax = fmaxf(amax, fabsf(x[k]));
  }
  amax = warp_max(amax);
  const float mul = e4m3_multiplier_device(amax);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int i = lane + 32 * k;
    if (i < n) dst[i] = f32_to_e4m3_device(__fmul_rn(x[k], mul));
  }
  if (lane == 0) *scale = e4m3_scale_device(amax);
}

// The bf16 row at src into x as quantize_regs_e4m3_warp holds it (zeros past n).
__device__ __forceinline__ void load_row_warp(const __nv_bfloat16* src, int n, float (&x)[8], int lane) {
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int i = lane + 32 * k;
    x[k] = i < n ? __bfloat162float(src[i]) : 0.0f;
  }
}

// The same from a bf16 row.
__device__ __forceinline__ void quantize_row_e4m3_warp(const __nv_bfloat16* src, int n, uint8_t* dst, float* scale,
                                                       int lane) {
  float x[8];
  load_row_warp(src, n, x, lane);
  quantize_regs_e4m3_warp(x, n, dst, scale, lane);
}

// x <- H x over one head of n values held as above: common/fp8.h's kv_rotate_row (blocks of
// p = n & -n), its butterflies in its order (index bits 0-4 across lanes, then 5.. within a lane)
// and its final multiply by `norm` (kv_rotation_norm(n), from the host), so the floats are the
// host's. All 32 lanes must call it.
__device__ __forceinline__ void kv_rotate_warp(float (&x)[8], int n, float norm, int lane) {
  const int p = n & -n;
#pragma unroll
  for (int bit = 1; bit < 32; bit <<= 1) {
    if (bit < p) {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float o = __shfl_xor_sync(0xffffffffu, x[k], bit);
        x[k] = (lane & bit) != 0 ? o - x[k] : x[k] + o;
      }
    }
  }
#pragma unroll
  for (int bit = 1; bit < 8; bit <<= 1) {
    if (32 * bit < p) {
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        if ((k & bit) == 0) {
          const float a = x[k], b = x[k | bit];
          x[k] = a + b;
          x[k | bit] = a - b;
        }
      }
    }
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) x[k] *= norm;
}

// Rotates the bf16 head at x in place (kv_rotate_warp, then rounded to bf16); returns the rotated
// fp32 values in r.
__device__ __forceinline__ void kv_rotate_head_warp(__nv_bfloat16* x, int n, float norm, float (&r)[8], int lane) {
  load_row_warp(x, n, r, lane);
  kv_rotate_warp(r, n, norm, lane);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    if (lane + 32 * k < n) x[lane + 32 * k] = __float2bfloat16(r[k]);
  }
}

}  // namespace minivllm::cuda
