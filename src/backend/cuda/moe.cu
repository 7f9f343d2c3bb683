// Mixture of experts, the kernels around the experts' MLPs: routing, grouping the (token, slot)
// pairs by expert, and the weighted sum of the experts' outputs into the residual (moe.h).
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/moe.h"
#include "backend/cuda/moe_route.cuh"
#include "backend/cuda/pdl_launch.h"

namespace minivllm::cuda {
namespace {

constexpr unsigned kFull = 0xffffffffu;

// ---- routing: a warp per token ----

constexpr int kRouteThreads = 128;
constexpr int kRouteWarps = kRouteThreads / 32;

// Lane l holds experts l, l + 32, ... (kPer of them). The selection is the CPU's (cpu_moe.cc): k
// passes, each taking the largest logit not yet taken, the lower id on equal logits; the
// probabilities are exp(l - max) / sum over every expert in double, as the CPU computes them.
template <int kPer>
__global__ void __launch_bounds__(kRouteThreads) moe_route_kernel(const float* logits, int64_t tokens, int experts,
                                                                  int k, bool renormalize, int32_t* ids,
                                                                  float* weights) {
  pdl_launch_dependents();  // the experts' gate/up gemv may launch and wait for these ids
  pdl_wait();               // the logits are the router gemv's output
  const int lane = threadIdx.x & 31;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + (threadIdx.x >> 5);
  if (t >= tokens) return;  // the whole warp: t is the warp's
  const float* row = logits + t * experts;
  float v[kPer];
  float max = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int e = i * 32 + lane;
    v[i] = e < experts ? row[e] : -INFINITY;
    if (e < experts) max = fmaxf(max, v[i]);
  }
  max = warp_max(max);
  double sum = 0.0;  // the softmax's denominator over every expert (HF's softmax before top-k)
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    if (i * 32 + lane < experts) sum += exp(static_cast<double>(v[i] - max));
  }
  sum = warp_sum(sum);

  int32_t* id_out = ids + t * k;
  float* w_out = weights + t * k;
  uint32_t taken = 0;  // bit i: expert i * 32 + lane was chosen
  double chosen_sum = 0.0;
  float sel = 0.0f;  // lane j & 31 keeps choice j of the current round of 32
  int sel_id = 0;
  for (int j = 0; j < k; ++j) {
    float best = 0.0f;
    int best_id = -1;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {  // ascending ids: strict > keeps the lower id on ties
      const int e = i * 32 + lane;
      if (e < experts && !((taken >> i) & 1u) && (best_id < 0 || v[i] > best)) {
        best = v[i];
        best_id = e;
      }
    }
    // Warp arg-max: the larger logit, the lower id on ties; a lane with none left loses. A total
    // order, so every lane ends with the same winner.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float other = __shfl_xor_sync(kFull, best, o);
      const int other_id = __shfl_xor_sync(kFull, best_id, o);
      if (other_id >= 0 && (best_id < 0 || other > best || (other == best && other_id < best_id))) {
        best = other;
        best_id = other_id;
      }
    }
    if (lane == (best_id & 31)) taken |= 1u << (best_id >> 5);
    if (lane == (j & 31)) {
      sel = best;
      sel_id = best_id;
    }
    // A round's probabilities at once, a lane each (one double exp of latency instead of one per
    // choice), summed in choice order as the CPU sums them; the values are the CPU's bit for bit.
    if ((j & 31) == 31 || j == k - 1) {
      const int j0 = j & ~31, n = j - j0 + 1;
      const float p = lane < n ? static_cast<float>(exp(static_cast<double>(sel - max)) / sum) : 0.0f;
      for (int i = 0; i < n; ++i) chosen_sum += __shfl_sync(kFull, p, i);
      if (lane < n) {
        id_out[j0 + lane] = sel_id;
        // One round holds every choice (k <= 32): its sum is complete, so normalize here.
        w_out[j0 + lane] = renormalize && k <= 32 ? static_cast<float>(p / chosen_sum) : p;
      }
    }
  }
  if (renormalize && k > 32) {  // each lane rereads only its own writes
    for (int j = lane; j < k; j += 32) w_out[j] = static_cast<float>(w_out[j] / chosen_sum);
  }
}

// ---- routing: a CTA per token (MINIVLLM_MOE_ROUTE_CTA) ----

// The warp kernel's arithmetic is one dependent chain of ~1,400 instructions (k selection rounds
// of shuffles, the double exps and divisions) on one warp: at decode it sits on the critical path
// between the router gemv and the experts' gemv (PERFORMANCE.md, "Stop 68"). Here a CTA spreads it
// over its threads (moe_route.cuh).
constexpr int kRouteCtaThreads = 128;

__global__ void __launch_bounds__(kRouteCtaThreads) moe_route_cta_kernel(const float* logits, int experts, int k,
                                                                         bool renormalize, int32_t* ids,
                                                                         float* weights) {
  __shared__ MoeRouteSmem<kRouteCtaThreads> sm;
  pdl_launch_dependents();  // the experts' gate/up gemv may launch and wait for these ids
  pdl_wait();               // the logits are the router gemv's output
  const int64_t t = blockIdx.x;
  moe_route_row<kRouteCtaThreads>(logits + t * experts, experts, k, renormalize, ids + t * k, weights + t * k, sm);
}

// ---- routing by a score bias (Backend::moe_route_biased): a CTA per token ----

constexpr int kBiasedRouteThreads = 128;
constexpr int kBiasedRouteMaxGroups = 64;

// (value, index) of the better of two candidates: the larger value, the lower index on equal values
// (the CPU's order, cpu_moe.cc); index -1 is no candidate.
__device__ __forceinline__ void better_of(float& v, int& i, float v2, int i2) {
  if (i2 >= 0 && (i < 0 || v2 > v || (v2 == v && i2 < i))) v = v2, i = i2;
}

__device__ __forceinline__ void warp_best(float& v, int& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) better_of(v, i, __shfl_xor_sync(kFull, v, o), __shfl_xor_sync(kFull, i, o));
}

// The CPU's moe_topk_biased step by step: scores and choice values in shared memory (the softmax's
// denominator in double, as the CPU's), each group's value by one thread, the groups and then the k
// experts by rounds of a CTA-wide arg-max; the weights summed in double by thread 0 as the CPU sums them.
__global__ void __launch_bounds__(kBiasedRouteThreads) moe_route_biased_kernel(
    const float* logits, const float* bias, bool sigmoid, int experts, int k, int groups, int topk_groups,
    bool renormalize, float scale, int32_t* ids, float* weights) {
  __shared__ float score[kMoeRouteMaxExperts], choice[kMoeRouteMaxExperts];
  __shared__ unsigned char avail[kMoeRouteMaxExperts];  // eligible and not yet taken
  __shared__ float group_value[kBiasedRouteMaxGroups];
  __shared__ float warp_v[kBiasedRouteThreads / 32];
  __shared__ int warp_i[kBiasedRouteThreads / 32];
  __shared__ double warp_sum_exp[kBiasedRouteThreads / 32];
  __shared__ int picked;
  pdl_wait();  // the logits are the router's output
  const int64_t t = blockIdx.x;
  const float* row = logits + t * experts;
  const int per_group = experts / groups, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float max = -INFINITY;
  double sum_exp = 0;
  if (!sigmoid) {  // the softmax's max and denominator over every expert
    for (int e = threadIdx.x; e < experts; e += blockDim.x) max = fmaxf(max, row[e]);
    max = block_max(max, warp_v);
    for (int e = threadIdx.x; e < experts; e += blockDim.x) sum_exp += exp(static_cast<double>(row[e] - max));
    sum_exp = warp_sum(sum_exp);
    if (lane == 0) warp_sum_exp[warp] = sum_exp;
    __syncthreads();
    sum_exp = 0;
    for (int w = 0; w < kBiasedRouteThreads / 32; ++w) sum_exp += warp_sum_exp[w];
  }
  for (int e = threadIdx.x; e < experts; e += blockDim.x) {
    const float sc = sigmoid ? 1.0f / (1.0f + expf(-row[e]))
                             : static_cast<float>(exp(static_cast<double>(row[e] - max)) / sum_exp);
    score[e] = sc;
    choice[e] = sc + bias[e];
    avail[e] = groups == 1 ? 1 : 0;
  }
  __syncthreads();
  // One CTA-wide arg-max over n candidates, value(c) for c < n where eligible(c); the winner in `picked`.
  auto argmax = [&](int n, auto value, auto eligible) {
    float v = 0.0f;
    int i = -1;
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
      if (eligible(c)) better_of(v, i, value(c), c);
    }
    warp_best(v, i);
    if (lane == 0) warp_v[warp] = v, warp_i[warp] = i;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kBiasedRouteThreads / 32; ++w) better_of(v, i, warp_v[w], warp_i[w]);
      picked = i;
    }
    __syncthreads();
  };
  if (groups > 1) {
    for (int g = threadIdx.x; g < groups; g += blockDim.x) {  // the best two of its members
      float a = -INFINITY, b = -INFINITY;
      for (int m = 0; m < per_group; ++m) {
        const float c = choice[g * per_group + m];
        if (c > a) {
          b = a, a = c;
        } else if (c > b) {
          b = c;
        }
      }
      group_value[g] = a + b;
    }
    __syncthreads();
    for (int r = 0; r < topk_groups; ++r) {
      argmax(groups, [&](int g) { return group_value[g]; }, [&](int g) { return avail[g * per_group] == 0; });
      for (int m = threadIdx.x; m < per_group; m += blockDim.x) avail[picked * per_group + m] = 1;
      __syncthreads();
    }
  }
  for (int j = 0; j < k; ++j) {
    argmax(experts, [&](int e) { return choice[e]; }, [&](int e) { return avail[e] != 0; });
    if (threadIdx.x == 0) {
      ids[t * k + j] = picked;
      avail[picked] = 0;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += score[ids[t * k + j]];
    for (int j = 0; j < k; ++j) {
      const double w = score[ids[t * k + j]];
      weights[t * k + j] = static_cast<float>((renormalize ? w / (sum + 1e-20) : w) * scale);
    }
  }
}

// ---- grouping: one CTA, a counting sort stable in pair order ----

constexpr int kGroupThreads = 1024;
constexpr int kGroupWarps = kGroupThreads / 32;

// Warp w owns the pairs [w * seg, (w + 1) * seg). (1) Each warp counts its pairs per expert; (2)
// each expert's count over the warps becomes, by prefix sums over warps and then experts, the
// position where warp w's first pair of that expert goes; (3) each warp walks its pairs in order,
// 32 at a time, a pair's rank among the equal experts of its 32 (match_any) added to that position.
// Pairs whose expert is not local (another rank's, or an id out of range) are left out.
__global__ void __launch_bounds__(kGroupThreads) moe_group_kernel(const int32_t* ids, int pairs, int first,
                                                                  int num_local, int tile_rows, int32_t* offsets,
                                                                  int32_t* entries, int32_t* tiles) {
  __shared__ int base[kGroupWarps][kMoeMaxLocalExperts];  // 32 KB: counts, then positions
  __shared__ int expert_rows[kMoeMaxLocalExperts];
  __shared__ int expert_start[kMoeMaxLocalExperts];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int i = threadIdx.x; i < kGroupWarps * num_local; i += kGroupThreads) base[i / num_local][i % num_local] = 0;
  __syncthreads();
  const int seg = (pairs + kGroupWarps - 1) / kGroupWarps;
  const int begin = warp * seg, end = min(pairs, begin + seg);
  auto local_expert = [&](int p) {
    if (p >= end) return -1;
    const int e = ids[p] - first;
    return e >= 0 && e < num_local ? e : -1;
  };
#pragma unroll 4
  for (int p0 = begin; p0 < end; p0 += 32) {
    const int e = local_expert(p0 + lane);
    if (e >= 0) atomicAdd(&base[warp][e], 1);
  }
  __syncthreads();
  for (int e = threadIdx.x; e < num_local; e += kGroupThreads) {  // counts -> each warp's start within e
    int run = 0;
    for (int w = 0; w < kGroupWarps; ++w) {
      const int c = base[w][e];
      base[w][e] = run;
      run += c;
    }
    expert_rows[e] = run;
  }
  __syncthreads();
  if (warp == 0) {  // prefix sums over the experts: lane l scans a run of `per` consecutive experts
    const int per = (num_local + 31) / 32;
    const int e0 = lane * per;
    int rows = 0, row_tiles = 0;
    for (int i = 0; i < per; ++i) {
      if (e0 + i < num_local) {
        rows += expert_rows[e0 + i];
        row_tiles += (expert_rows[e0 + i] + tile_rows - 1) / tile_rows;
      }
    }
    int rows_incl = rows, tiles_incl = row_tiles;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int r = __shfl_up_sync(kFull, rows_incl, o), q = __shfl_up_sync(kFull, tiles_incl, o);
      if (lane >= o) {
        rows_incl += r;
        tiles_incl += q;
      }
    }
    int r0 = rows_incl - rows, q0 = tiles_incl - row_tiles;
    for (int i = 0; i < per; ++i) {
      const int e = e0 + i;
      if (e < num_local) {
        expert_start[e] = r0;
        offsets[e] = r0;
        tiles[e] = q0;
        r0 += expert_rows[e];
        q0 += (expert_rows[e] + tile_rows - 1) / tile_rows;
      }
    }
    if (lane == 31) {
      offsets[num_local] = rows_incl;
      tiles[num_local] = tiles_incl;
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < num_local; e += kGroupThreads) {
    for (int w = 0; w < kGroupWarps; ++w) base[w][e] += expert_start[e];
  }
  __syncthreads();
  const unsigned below = (1u << lane) - 1u;
  for (int p0 = begin; p0 < end; p0 += 32) {  // warp-uniform bounds
    const int p = p0 + lane;
    const int e = local_expert(p);
    const unsigned same = __match_any_sync(kFull, e);
    const int rank = __popc(same & below);
    if (e >= 0) entries[base[warp][e] + rank] = p;
    __syncwarp();  // every lane has read base[warp][e] before its leader moves it on
    if (e >= 0 && rank == 0) base[warp][e] += __popc(same);
    __syncwarp();
  }
}

// ---- the weighted sum: a CTA per token, 8 columns a thread ----

constexpr int kCombineThreads = 128;

__device__ __forceinline__ bool local_slot(const int32_t* ids, int64_t pair, int first, int num_local, int* e) {
  *e = ids[pair] - first;
  return *e >= 0 && *e < num_local;
}

// out[t] += sum_j w[t, j] y[t k + j], slots in order, summed in fp32 before the one add into out.
__global__ void __launch_bounds__(kCombineThreads) moe_combine_kernel(const __nv_bfloat16* y, const int32_t* ids,
                                                                      const float* weights, int k, int first,
                                                                      int num_local, int64_t hidden, void* out,
                                                                      bool out_f32) {
  const int64_t t = blockIdx.x;
  const int64_t chunks = hidden / 8;
  for (int64_t c = threadIdx.x; c < chunks; c += kCombineThreads) {
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int j = 0; j < k; ++j) {
      const int64_t pair = t * k + j;
      int e;
      if (!local_slot(ids, pair, first, num_local, &e)) continue;  // another rank's expert: its y row is unwritten
      const float g = weights[pair];
      float v[8];
      bf16x8_to_f32(*reinterpret_cast<const uint4*>(y + pair * hidden + c * 8), v);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] = fmaf(g, v[i], acc[i]);
    }
    if (out_f32) {
      add_f32x8(static_cast<float*>(out) + t * hidden + c * 8, acc);
    } else {
      uint4* o = reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(out) + t * hidden + c * 8);
      float cur[8];
      bf16x8_to_f32(*o, cur);
#pragma unroll
      for (int i = 0; i < 8; ++i) cur[i] += acc[i];
      *o = f32_to_bf16x8(cur);
    }
  }
}

}  // namespace

void launch_moe_route(const float* logits, int64_t tokens, int experts, int k, bool renormalize, int32_t* ids,
                      float* weights, bool cta_per_token, cudaStream_t stream) {
  if (tokens == 0) return;
  MINIVLLM_CHECK(experts >= 1 && experts <= kMoeRouteMaxExperts && k >= 1 && k <= experts)
      << "moe_route: top-" << k << " of " << experts << " experts (the CUDA kernel takes up to "
      << kMoeRouteMaxExperts << ")";
  if (cta_per_token && tokens <= kMoeRouteCtaMaxTokens) {
    launch_with_pdl(moe_route_cta_kernel, dim3(static_cast<unsigned>(tokens)), dim3(kRouteCtaThreads), 0, stream,
                    logits, experts, k, renormalize, ids, weights);
    CUDA_CHECK_LAUNCH();
    return;
  }
  const dim3 grid(static_cast<unsigned>(ceil_div(tokens, kRouteWarps)));
  auto launch = [&](auto kernel) {
    launch_with_pdl(kernel, grid, dim3(kRouteThreads), 0, stream, logits, tokens, experts, k, renormalize, ids,
                    weights);
  };
  if (experts <= 32) {
    launch(moe_route_kernel<1>);
  } else if (experts <= 64) {
    launch(moe_route_kernel<2>);
  } else if (experts <= 128) {
    launch(moe_route_kernel<4>);
  } else if (experts <= 256) {
    launch(moe_route_kernel<8>);
  } else {
    launch(moe_route_kernel<16>);
  }
  CUDA_CHECK_LAUNCH();
}

void launch_moe_route_biased(const float* logits, const float* bias, bool sigmoid, int64_t tokens, int experts, int k,
                             int groups, int topk_groups, bool renormalize, float scale, int32_t* ids, float* weights,
                             cudaStream_t stream) {
  if (tokens == 0) return;
  MINIVLLM_CHECK(experts >= 1 && experts <= kMoeRouteMaxExperts && groups >= 1 && groups <= kBiasedRouteMaxGroups &&
                 experts % groups == 0 && topk_groups >= 1 && topk_groups <= groups)
      << "moe_route_biased: " << topk_groups << " of " << groups << " groups of " << experts
      << " experts (the CUDA kernel takes up to " << kMoeRouteMaxExperts << " experts, " << kBiasedRouteMaxGroups
      << " groups)";
  MINIVLLM_CHECK(k >= 1 && k <= topk_groups * (experts / groups) && (groups == 1 || experts / groups >= 2))
      << "moe_route_biased: top-" << k << " of " << topk_groups << " groups of " << experts / groups << " experts";
  launch_with_pdl(moe_route_biased_kernel, dim3(static_cast<unsigned>(tokens)), dim3(kBiasedRouteThreads), 0,
                  stream, logits, bias, sigmoid, experts, k, groups, topk_groups, renormalize, scale, ids, weights);
  CUDA_CHECK_LAUNCH();
}

void launch_moe_group(const int32_t* ids, const MoeShape& s, int32_t* offsets, int32_t* entries, int32_t* tiles,
                      cudaStream_t stream) {
  const int64_t pairs = s.tokens * s.k;
  MINIVLLM_CHECK(s.num_local >= 1 && s.num_local <= kMoeMaxLocalExperts && pairs >= 0 && pairs < (int64_t{1} << 30))
      << "moe_group: " << s.num_local << " local experts (1.." << kMoeMaxLocalExperts << "), " << pairs << " pairs";
  moe_group_kernel<<<1, kGroupThreads, 0, stream>>>(ids, static_cast<int>(pairs), s.first_expert, s.num_local,
                                                    s.tile_rows, offsets, entries, tiles);
  CUDA_CHECK_LAUNCH();
}

int64_t moe_max_row_tiles(int64_t pairs, int num_local, int tile_rows) {
  // Each non-empty expert wastes less than one tile: at most ceil(pairs / rows) + the non-empty experts.
  return ceil_div(pairs, tile_rows) + std::min<int64_t>(num_local, pairs);
}

void launch_moe_combine(const void* y, const int32_t* ids, const float* weights, const MoeShape& s, void* out,
                        bool out_f32, cudaStream_t stream) {
  if (s.tokens == 0) return;
  MINIVLLM_CHECK(s.hidden % 8 == 0) << "moe_combine: hidden " << s.hidden << " must be a multiple of 8";
  moe_combine_kernel<<<static_cast<unsigned>(s.tokens), kCombineThreads, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(y), ids, weights, s.k, s.first_expert, s.num_local, s.hidden, out, out_f32);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
