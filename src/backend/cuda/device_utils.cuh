// Device helpers shared by the kernels: bf16 packing (8 values in one 16-byte word), warp
// reductions, and weight loads that accept fp32 or bf16 weights.
#pragma once

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "common/activation.h"

namespace minivllm::cuda {

__device__ __forceinline__ void bf16x8_to_f32(const uint4& u, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

__device__ __forceinline__ uint4 f32_to_bf16x8(const float* f) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return u;
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum (kMax: max) over the block; `scratch` holds 32 floats. Every thread gets the result.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
  return kMax ? warp_max(v) : warp_sum(v);
}
__device__ __forceinline__ float block_sum(float v, float* scratch) { return block_reduce<false>(v, scratch); }
__device__ __forceinline__ float block_max(float v, float* scratch) { return block_reduce<true>(v, scratch); }

// Eight fp32 values at p (32-byte aligned run, 16-byte aligned p) as two 16-byte accesses.
__device__ __forceinline__ void load_f32x8(const float* p, float* out) {
  const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
  out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}

__device__ __forceinline__ void store_f32x8(float* p, const float* v) {
  reinterpret_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

// p[i] += v[i] for eight fp32 values at p (aligned as load_f32x8's).
__device__ __forceinline__ void add_f32x8(float* p, const float* v) {
  float r[8];
  load_f32x8(p, r);
#pragma unroll
  for (int i = 0; i < 8; ++i) r[i] += v[i];
  store_f32x8(p, r);
}

// The dot product of eight bf16 pairs, in fp32, in order.
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
  float af[8], bf[8];
  bf16x8_to_f32(a, af);
  bf16x8_to_f32(b, bf);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) s = fmaf(af[i], bf[i], s);
  return s;
}

// Eight consecutive weights from index i (a multiple of 8), fp32 or bf16.
__device__ __forceinline__ void load_weight8(const void* w, bool f32, int64_t i, float* out) {
  if (f32) {
    load_f32x8(static_cast<const float*>(w) + i, out);
  } else {
    bf16x8_to_f32(*reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(w) + i), out);
  }
}

// 16 bytes of a weight read once per step (the gemvs): kept out of L1, so that the activations the
// same CTA rereads stay there.
__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ float load_weight(const void* w, bool f32, int64_t i) {
  return f32 ? static_cast<const float*>(w)[i] : __bfloat162float(static_cast<const __nv_bfloat16*>(w)[i]);
}

// Programmatic dependent launch (sm_90): a kernel launched with the programmatic-serialization
// attribute may start while its predecessor still runs; pdl_wait() blocks until the predecessor
// has completed and its writes are visible (a no-op for a kernel launched without the attribute).
// pdl_launch_dependents() lets the successor start early (a no-op when it is launched plainly).
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// Every thread of every CTA of the cluster: the cluster's shared-memory writes before it are seen by
// every thread after it (release, acquire).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// The same barrier in two halves, for "every CTA of the cluster has started" (before the first write
// into another CTA's shared memory, which must be resident): arrive early, wait where it matters.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }

// silu(g) = g * sigmoid(g), as g / (1 + e^-g): the SwiGLU gate of every silu-mul path (the
// elementwise kernel, the gate/up gemv and the decode GEMM), so all of them round alike.
__device__ __forceinline__ float silu(float g) { return g / (1.0f + __expf(-g)); }
// GELU, tanh approximation (Gemma's gelu_pytorch_tanh): 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
__device__ __forceinline__ float gelu_tanh(float g) {
  return 0.5f * g * (1.0f + tanhf(0.7978845608028654f * (g + 0.044715f * g * g * g)));
}
// The gated MLP's act(gate), for the model's Activation (common/activation.h); every gated path
// (the elementwise kernel, the gate/up gemv and the decode GEMM) goes through it.
__device__ __forceinline__ float gate_act(float g, Activation a) {
  return a == Activation::kGeluTanh ? gelu_tanh(g) : silu(g);
}

// Named barriers (bar.sync / bar.arrive on barrier `id` for `threads` threads, a multiple of 32):
// warp-specialised kernels synchronise a subset of their warps with these.
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace minivllm::cuda
