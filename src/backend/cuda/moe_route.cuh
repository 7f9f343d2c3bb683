// One token's routing by one CTA (softmax over the experts, top-k, renormalisation): moe_route_row
// for the route kernel (moe.cu, a CTA a token), bit for bit the CPU's; moe_route_row_fast for the
// fused norm-router-route kernel (moe_norm_route.cu), whose critical path it is.
// moe_route_row: thread i takes experts i, i + kThreads, ...: one double exp each, block sums, and
// each expert's place among the chosen ones by counting the experts ahead of it (the larger logit,
// the lower id on equal logits: the CPU's order; a NaN logit counts as -inf so that the places stay
// distinct). The chosen probabilities are summed in choice order, as the CPU sums them: given the
// same logits the ids and weights are the CPU's bit for bit (cpu_moe.cc).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/moe.h"

namespace minivllm::cuda {

template <int kThreads>
struct MoeRouteSmem {
  alignas(16) float v[kMoeRouteMaxExperts];  // the logits, NaN as -inf
  float p[kMoeRouteMaxExperts];  // the chosen ones' probabilities, in choice order
  float scratch[32];             // block_max's
  double sum[kThreads / 32];
  int ahead[kThreads];  // the fast route's second halves' counts
};

// Keys j in float4s [lo, hi) of v4 ahead of `key` (expert e's): j < e when >= key, j > e when > key
// (the larger logit, the lower id on equal ones). Four counters: no chain through one register.
// Loops not unrolled: this code runs once a layer on one SM, cold (unrolled by 8 it was no faster:
// PERFORMANCE.md, "Stop 92").
__device__ __forceinline__ int count_ahead(const float4* v4, int lo, int hi, float key, int e) {
  const int m = e >> 2;  // the float4 holding e
  int c0 = 0, c1 = 0, c2 = 0, c3 = 0;
  const int below = min(hi, m);
#pragma unroll 1
  for (int j4 = lo; j4 < below; ++j4) {
    const float4 o = v4[j4];
    c0 += o.x >= key ? 1 : 0;
    c1 += o.y >= key ? 1 : 0;
    c2 += o.z >= key ? 1 : 0;
    c3 += o.w >= key ? 1 : 0;
  }
  if (m >= lo && m < hi) {
    const float4 o = v4[m];
    const int j = 4 * m;
    c0 += (o.x > key || (o.x == key && j < e)) ? 1 : 0;
    c1 += (o.y > key || (o.y == key && j + 1 < e)) ? 1 : 0;
    c2 += (o.z > key || (o.z == key && j + 2 < e)) ? 1 : 0;
    c3 += (o.w > key || (o.w == key && j + 3 < e)) ? 1 : 0;
  }
#pragma unroll 1
  for (int j4 = max(lo, m + 1); j4 < hi; ++j4) {
    const float4 o = v4[j4];
    c0 += o.x > key ? 1 : 0;
    c1 += o.y > key ? 1 : 0;
    c2 += o.z > key ? 1 : 0;
    c3 += o.w > key ? 1 : 0;
  }
  return c0 + c1 + c2 + c3;
}

// Thread t's logits t, t + kThreads, ... into v (-inf past the experts), every key into sm.v (NaN as
// -inf; -inf from `experts` up to `padded`: never ahead of a key, their ids being past every
// expert's), and the row's max over the CTA (whose barriers publish sm.v).
template <int kThreads>
__device__ __forceinline__ float load_route_keys(const float* row, int experts, int padded,
                                                 float (&v)[kMoeRouteMaxExperts / kThreads],
                                                 MoeRouteSmem<kThreads>& sm) {
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kMoeRouteMaxExperts / kThreads; ++i) {
    const int e = threadIdx.x + i * kThreads;
    v[i] = e < experts ? row[e] : -INFINITY;
    if (e < experts) {
      sm.v[e] = isnan(v[i]) ? -INFINITY : v[i];
      mx = fmaxf(mx, v[i]);
    } else if (e < padded) {
      sm.v[e] = -INFINITY;
    }
  }
  return block_max(mx, sm.scratch);
}

// Thread j < k writes the token's weight j: its probability sm.p[j], divided where renormalize by the
// chosen ones' sum, taken in choice order in Acc (double: the CPU's bits; float: the fast route's).
template <typename Acc, int kThreads>
__device__ __forceinline__ void write_route_weights(const MoeRouteSmem<kThreads>& sm, int k, bool renormalize,
                                                    float* weights) {
  for (int j = threadIdx.x; j < k; j += kThreads) {
    float p = sm.p[j];
    if (renormalize) {
      Acc chosen = 0;
      for (int i = 0; i < k; ++i) chosen += sm.p[i];
      p = static_cast<float>(p / chosen);
    }
    weights[j] = p;
  }
}

// Every thread of the CTA (blockDim.x == kThreads) calls it. row: the token's experts logits (global
// or shared memory); ids i32[k], weights f32[k]: the token's outputs.
template <int kThreads>
__device__ __forceinline__ void moe_route_row(const float* row, int experts, int k, bool renormalize, int32_t* ids,
                                              float* weights, MoeRouteSmem<kThreads>& sm) {
  constexpr int kPer = kMoeRouteMaxExperts / kThreads;
  static_assert(kMoeRouteMaxExperts % kThreads == 0, "experts a thread");
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float v[kPer];
  const float mx = load_route_keys<kThreads>(row, experts, experts, v, sm);
  double ex[kPer];
  double sum = 0.0;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    ex[i] = tid + i * kThreads < experts ? exp(static_cast<double>(v[i] - mx)) : 0.0;
    sum += ex[i];
  }
  sum = warp_sum(sum);
  if (lane == 0) sm.sum[warp] = sum;
  __syncthreads();
  sum = 0.0;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) sum += sm.sum[w];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = tid + i * kThreads;
    if (e >= experts) break;
    const float key = sm.v[e];
    int place = 0;  // experts ahead of e
#pragma unroll 8
    for (int j = 0; j < experts; ++j) {
      const float o = sm.v[j];
      place += (o > key || (o == key && j < e)) ? 1 : 0;
    }
    if (place < k) {
      ids[place] = e;
      sm.p[place] = static_cast<float>(ex[i] / sum);
    }
  }
  __syncthreads();
  write_route_weights<double>(sm, k, renormalize, weights);
}

// The same choice (ids exactly the CPU's), the probabilities in float: the softmax denominator only
// where the weights are not renormalised (there it cancels), the places counted four keys a
// shared-memory load, and by two threads an expert where the CTA has them. Weights within 1e-6 of
// the CPU's (CudaMoeNormRoute).
template <int kThreads>
__device__ __forceinline__ void moe_route_row_fast(const float* row, int experts, int k, bool renormalize,
                                                   int32_t* ids, float* weights, MoeRouteSmem<kThreads>& sm) {
  constexpr int kPer = kMoeRouteMaxExperts / kThreads;
  static_assert(kMoeRouteMaxExperts % kThreads == 0, "experts a thread");
  const int tid = threadIdx.x;
  const int experts4 = (experts + 3) / 4;
  float v[kPer];
  const float mx = load_route_keys<kThreads>(row, experts, experts4 * 4, v, sm);
  float ex[kPer];
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    ex[i] = tid + i * kThreads < experts ? expf(v[i] - mx) : 0.0f;
    sum += ex[i];
  }
  if (!renormalize) sum = block_sum(sum, sm.scratch);
  const float4* v4 = reinterpret_cast<const float4*>(sm.v);
  if (2 * experts <= kThreads) {  // two threads an expert, half the keys each
    const int e = tid % (kThreads / 2), part = tid / (kThreads / 2);
    const int half4 = (experts4 + 1) / 2;
    const int lo = part * half4, hi = min(experts4, lo + half4);
    const int n = e < experts ? count_ahead(v4, lo, hi, sm.v[e], e) : 0;
    if (part == 1) sm.ahead[e] = n;
    __syncthreads();
    if (part == 0 && e < experts) {
      const int place = n + sm.ahead[e];
      if (place < k) {
        ids[place] = e;
        sm.p[place] = renormalize ? ex[0] : ex[0] / sum;
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int e = tid + i * kThreads;
      if (e >= experts) break;
      const int place = count_ahead(v4, 0, experts4, sm.v[e], e);
      if (place < k) {
        ids[place] = e;
        sm.p[place] = renormalize ? ex[i] : ex[i] / sum;
      }
    }
  }
  __syncthreads();
  write_route_weights<float>(sm, k, renormalize, weights);
}

}  // namespace minivllm::cuda
