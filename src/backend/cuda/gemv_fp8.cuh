// Pieces the FP8 decode gemvs share (gemv_fp8.cu, gemv_fp8_one.cu): the output epilogue, the W8A8
// tensor-core step on 64-column chunks, and bf16 x into the W8A16 kernels' f16 operands.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/fp8_kv.cuh"

namespace minivllm::cuda {
namespace {

// The W8A16 kernels take bf16 x into f16 times kX16Pre and their sums times kX16Post: f16's range
// then holds |x| up to 2^20 (65,504 unscaled), and x keeps f16's 11 bits down to 2^-10.
constexpr float kX16Pre = 1.0f / 16.0f;
constexpr float kX16Post = 16.0f;

// Two bf16 values (one 32-bit word, the first in the low half) as f16x2, times kX16Pre.
__device__ __forceinline__ uint32_t bf16x2_to_f16x2_pre(uint32_t w) {
  const __half2 h = __floats2half2_rn(__uint_as_float(w << 16) * kX16Pre, __uint_as_float(w & 0xffff0000u) * kX16Pre);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// The output fields every kernel's arguments share (finish reads them).
struct OutArgs {
  const void* bias;
  bool bias_f32;
  void* out;
  bool out_f32;
  int64_t n;  // output rows (kActMul: the gate's rows; W has 2n)
  Activation act;
};

// Token m's output `row` from its sum s (kActMul: the gate's, and up the up row's), as the
// epilogue says.
template <Fp8GemvOut E>
__device__ __forceinline__ void finish(const OutArgs& g, int m, int64_t row, float s, float up) {
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

// The W8A8 kernels' arguments: x as e4m3 codes with one scale a token.
struct CodesArgs : OutArgs {
  const uint8_t* x;      // [M, K] e4m3
  const float* x_scale;  // [M]
  Fp8Weight w;
  int64_t k;
  int tokens;
};

// x: e4m3 codes with x_scale, or (gemv_fp8_one.cu's kX16) bf16 values with none.
inline CodesArgs codes_args(const void* x, const float* x_scale, const Fp8Weight& w, const void* bias, bool bias_f32,
                            void* out, bool out_f32, Activation act, int64_t n, int64_t k, int64_t tokens) {
  CodesArgs g{};
  static_cast<OutArgs&>(g) = OutArgs{bias, bias_f32, out, out_f32, n, act};
  g.x = static_cast<const uint8_t*>(x);
  g.x_scale = x_scale;
  g.w = w;
  g.k = k;
  g.tokens = static_cast<int>(tokens);
  return g;
}

__device__ __forceinline__ void mma_e4m3(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Rows lo (g) and hi (g + 8) of a group, 16 codes each, against this lane's 16 codes of x.
__device__ __forceinline__ void mma_chunk(float (&c)[4], const uint4& lo, const uint4& hi, const uint4& xv) {
  mma_e4m3(c, lo.x, hi.x, lo.y, hi.y, xv.x, xv.y);
  mma_e4m3(c, lo.z, hi.z, lo.w, hi.w, xv.z, xv.w);
}

}  // namespace
}  // namespace minivllm::cuda
