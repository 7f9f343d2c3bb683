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

// ---- one warp, one choice ----

// A logit as a key whose unsigned order is the CPU's order of logits: NaN as -inf, -0 as +0 (equal
// logits tie, and the lower id wins a tie). Every key is at least -inf's, 0x007fffff > 0.
__device__ __forceinline__ uint32_t route_key(float v) {
  if (isnan(v)) v = -INFINITY;
  if (v == 0.0f) v = 0.0f;
  const uint32_t b = __float_as_uint(v);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

struct WarpRouteChoice {
  int id;        // choice `want`'s expert
  float weight;  // its weight, moe_route_row_fast's bits where renormalized (within 1e-6 otherwise)
};

// Choice `want` (0 <= want < k) of the token whose logits are `row` (E <= kMoeWarpRouteMaxExperts, in
// global memory), by the whole warp: lane l holds experts 4l .. 4l + 3, and each round takes the
// largest key not yet taken (one redux for the maximum, a ballot for its lowest lane, that lane's
// lowest such expert: the lower id on ties). Only with_weight: all k rounds and the weight, the
// probabilities as moe_route_row_fast computes them: exp(l - max) (max: the first choice's logit, the
// row's max as fmaxf takes it), summed over the choices in choice order where renormalized, else over
// every expert; otherwise want + 1 rounds and no weight. Every lane returns the same.
__device__ __forceinline__ WarpRouteChoice warp_route_pick(const float* row, int experts, int k, bool renormalize,
                                                           int want, bool with_weight) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  float v[4];
  if ((experts & 3) == 0 && 4 * lane < experts) {
    const float4 f = *reinterpret_cast<const float4*>(row + 4 * lane);
    v[0] = f.x;
    v[1] = f.y;
    v[2] = f.z;
    v[3] = f.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = 4 * lane + i < experts ? row[4 * lane + i] : -INFINITY;
  }
  uint32_t key[4];
  unsigned open = 0;  // bit i: expert 4 lane + i exists and is not yet taken
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    key[i] = route_key(v[i]);
    if (4 * lane + i < experts) open |= 1u << i;
  }
  float mx = 0.0f, chosen = 0.0f, pick_ex = 0.0f;
  int pick = 0;
  const int rounds = with_weight ? k : want + 1;
  for (int j = 0; j < rounds; ++j) {
    uint32_t best = 0;  // below every key: a lane with none open never wins
    int bi = 0;
    float bv = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // ascending ids: strict > keeps the lower one
      if (((open >> i) & 1u) != 0 && key[i] > best) {
        best = key[i];
        bi = i;
        bv = v[i];
      }
    }
    // A round's chain: redux, ballot, the winner's bit; its id and logit cross lanes only where needed.
    const uint32_t top = __reduce_max_sync(kAll, best);
    const int win = __ffs(__ballot_sync(kAll, best == top)) - 1;
    if (lane == win) open &= ~(1u << bi);
    if (j == want) pick = 4 * win + __shfl_sync(kAll, bi, win);
    if (with_weight) {
      const float wv = __shfl_sync(kAll, bv, win);
      if (j == 0) mx = wv;
      const float ex = expf(wv - mx);
      chosen += ex;
      if (j == want) pick_ex = ex;
    }
  }
  if (!with_weight) return {pick, 0.0f};
  if (renormalize) return {pick, pick_ex / chosen};
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) sum += 4 * lane + i < experts ? expf(v[i] - mx) : 0.0f;
  return {pick, pick_ex / warp_sum(sum)};
}

}  // namespace minivllm::cuda
