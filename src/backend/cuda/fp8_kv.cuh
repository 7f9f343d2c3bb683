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

// One warp quantises one row of n (<= 256, a multiple of 32) bf16 values: lane l owns elements
// l + 32 k. All 32 lanes must call it (the amax is a warp reduction).
__device__ __forceinline__ void quantize_row_e4m3_warp(const __nv_bfloat16* src, int n, uint8_t* dst, float* scale,
                                                       int lane) {
  constexpr int kMaxPerLane = 8;
  float x[kMaxPerLane];
  float amax = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int i = lane + 32 * k;
    x[k] = i < n ? __bfloat162float(src[i]) : 0.0f;
    amax = fmaxf(amax, fabsf(x[k]));
  }
  amax = warp_max(amax);
  const float mul = e4m3_multiplier_device(amax);
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int i = lane + 32 * k;
    if (i < n) dst[i] = f32_to_e4m3_device(__fmul_rn(x[k], mul));
  }
  if (lane == 0) *scale = e4m3_scale_device(amax);
}

}  // namespace minivllm::cuda
