// What the FP8 gemv kernels share (gemv_fp8.cu): the tensor-core kernel's arguments and operand
// layout, the conversions of its operands, and the epilogue that writes a finished output element.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"

namespace minivllm::cuda {

struct Fp8MmaArgs {
  const __nv_bfloat16* x;  // [M, K]
  Fp8Weight w;
  const void* bias;
  bool bias_f32;
  void* out;
  bool out_f32;
  int64_t n;  // output rows (kActMul: the gate's; W has 2n)
  int64_t k;
  int tokens;
  Activation act;
  bool consecutive;  // a warp's chunks of a step are consecutive (MINIVLLM_FP8_GEMV_CONSECUTIVE)
};

// The tensor-core kernels' step: 64 columns, four mma.m16n8k16 whose 16 k slots are a permutation
// of 16 of them, the same for x and W. Lane (g, t) owns columns 16t + 4j .. + 3 of mma j, so it
// loads 16 contiguous codes of its weight row and 16 contiguous values of token g's x.
constexpr int kFp8MmaChunk = 64;

// Two bf16 (the high halves of lo and hi, or their low halves) as f16x2.
__device__ __forceinline__ uint32_t bf16_pair_to_f16x2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Two e4m3 codes (the low 16 bits) as f16x2.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t u) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(u & 0xffffu), __NV_E4M3);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// mma q's A operand from this lane's 16 bf16 values of x (eight 32-bit words): k pairs (4q, 4q + 1)
// and (4q + 2, 4q + 3), rows past the tokens zero.
__device__ __forceinline__ void x_fragment(const uint32_t (&xw)[8], int q, uint32_t (&a)[4]) {
  const uint32_t x01 = xw[2 * q], x23 = xw[2 * q + 1];
  a[0] = bf16_pair_to_f16x2(__uint_as_float(x01 << 16), __uint_as_float(x01 & 0xffff0000u));
  a[1] = 0u;
  a[2] = bf16_pair_to_f16x2(__uint_as_float(x23 << 16), __uint_as_float(x23 & 0xffff0000u));
  a[3] = 0u;
}

// Token m's output `row` from its sum s (kActMul: the gate's, and up the up row's), as the
// epilogue says; both kernels' argument structs name the output fields alike.
template <Fp8GemvOut E, typename A>
__device__ __forceinline__ void fp8_gemv_finish(const A& g, int m, int64_t row, float s, float up) {
  if constexpr (E == Fp8GemvOut::kActMul) {
    s = gate_act(s, g.act) * up;
  } else if (g.bias != nullptr) {
    s += load_weight(g.bias, g.bias_f32, row);
  }
  if constexpr (E == Fp8GemvOut::kAddF32) {
    static_cast<float*>(g.out)[m * g.n + row] += s;  // this CTA owns the element: no race
  } else if (g.out_f32) {
    static_cast<float*>(g.out)[m * g.n + row] = s;
  } else {
    static_cast<__nv_bfloat16*>(g.out)[m * g.n + row] = __float2bfloat16(s);
  }
}

}  // namespace minivllm::cuda
