// One token's routing by one CTA (softmax over the experts, top-k, renormalisation), shared by the
// route kernel (moe.cu, a CTA a token) and the fused norm-router-route kernel (moe_norm_route.cu).
// Thread i takes experts i, i + kThreads, ...: one double exp each, block sums, and each expert's
// place among the chosen ones by counting the experts ahead of it (the larger logit, the lower id on
// equal logits: the CPU's order; a NaN logit counts as -inf so that the places stay distinct). The
// chosen probabilities are summed in choice order, as the CPU sums them: given the same logits the
// ids and weights are the CPU's bit for bit (cpu_moe.cc).
#pragma once

#include <cmath>
#include <cstdint>

#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/moe.h"

namespace minivllm::cuda {

template <int kThreads>
struct MoeRouteSmem {
  float v[kMoeRouteMaxExperts];  // the logits, NaN as -inf
  float p[kMoeRouteMaxExperts];  // the chosen ones' probabilities, in choice order
  float scratch[32];             // block_max's
  double sum[kThreads / 32];
};

// Every thread of the CTA (blockDim.x == kThreads) calls it. row: the token's experts logits (global
// or shared memory); ids i32[k], weights f32[k]: the token's outputs.
template <int kThreads>
__device__ __forceinline__ void moe_route_row(const float* row, int experts, int k, bool renormalize, int32_t* ids,
                                              float* weights, MoeRouteSmem<kThreads>& sm) {
  constexpr int kPer = kMoeRouteMaxExperts / kThreads;
  static_assert(kMoeRouteMaxExperts % kThreads == 0, "experts a thread");
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  float v[kPer];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = tid + i * kThreads;
    v[i] = e < experts ? row[e] : -INFINITY;
    if (e < experts) {
      sm.v[e] = isnan(v[i]) ? -INFINITY : v[i];
      mx = fmaxf(mx, v[i]);
    }
  }
  mx = block_max(mx, sm.scratch);  // its barriers also publish sm.v
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
  for (int j = tid; j < k; j += kThreads) {
    float p = sm.p[j];
    if (renormalize) {
      double chosen = 0.0;
      for (int i = 0; i < k; ++i) chosen += sm.p[i];
      p = static_cast<float>(p / chosen);
    }
    weights[j] = p;
  }
}

}  // namespace minivllm::cuda
