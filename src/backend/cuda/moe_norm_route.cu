// A sparse layer's entry at decode sizes in one launch (Backend::rms_norm_moe_route): the RMSNorm
// of the residual row, the router gemv and the routing. They were three kernels, so at batch 1 the
// layer paid two more PDL boundaries (each a wait for a whole grid, then a round trip for the
// predecessor's output) on its critical path, and the router gemv's tail (PERFORMANCE.md, "Stop 92").
//
// A cluster of kCtas CTAs a token, no grid-wide dependency: every CTA norms the whole row itself
// (load_row_inv_rms: the norm kernel's order, so the normed row has the norm kernel's bits) into
// shared memory and writes its share of it for the experts; warp w of CTA r takes experts
// r * 8 + w, + 64, ... (their router rows loaded before the PDL wait) and puts each logit into CTA
// 0's shared memory; after the cluster barrier CTA 0 routes (moe_route_row_fast: the CPU's ids,
// weights in float). A global counter and a last CTA routing, tried before, put a serial tail after
// the gemv (PERFORMANCE.md, "The fused MoE router"). The route is the chain's longest part after the
// barrier: in double with one thread's count of every key it took 2.9 us at Qwen3-30B-A3B's shape,
// in float with two threads an expert 1.8 us. Where the experts' gate/up gemv routes for itself
// (MoeGateRoute), the launch stops at the logits: no cluster barrier, no route (still launched as
// clusters, so that its CTAs are placed as before).
#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/moe.h"
#include "backend/cuda/moe_route.cuh"
#include "backend/cuda/norm_row.cuh"
#include "backend/cuda/pdl_launch.h"

namespace minivllm::cuda {
namespace {

constexpr int kCtas = 8;  // a token's cluster (the portable size; 4 was slower, 16 no faster)
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

struct NormRouteArgs {
  const float* residual;  // f32 [T, H]
  const void* norm_w;     // [H], f32 or bf16
  bool norm_f32;
  float eps;
  const uint4* router;  // bf16 [E, H]
  uint4* normed;        // bf16 [T, H]
  float* logits;        // f32 [T, E]
  int32_t* ids;         // i32 [T, k]
  float* weights;       // f32 [T, k]
  int chunks;           // H / 8
  int experts, k;
  bool renormalize;
};

// kLaneChunks: a row's 16-byte chunks a lane (H <= kLaneChunks * 256); kRowsAhead: router rows a
// warp holds in registers at once (the first ones loaded before the wait). kRoute false: the normed
// rows and the logits only, no cluster barrier (the experts' gate/up gemv routes: MoeGateRoute).
template <int kLaneChunks, int kRowsAhead, bool kRoute>
__global__ void __launch_bounds__(kThreads, 1) moe_norm_route_kernel(const __grid_constant__ NormRouteArgs a) {
  constexpr int kNormChunks = kLaneChunks * 32 / kThreads;  // a thread's chunks of the row in the norm
  __shared__ uint4 s_x[kLaneChunks * 32];                   // the normed row, bf16
  __shared__ float s_logits[kMoeRouteMaxExperts];           // CTA 0's: every CTA's logits
  __shared__ MoeRouteSmem<kThreads> route_sm;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int rank = static_cast<int>(blockIdx.x % kCtas);
  const int64_t t = blockIdx.x / kCtas;
  const int chunks = a.chunks;
  const int first = rank * kWarps + warp, stride = kCtas * kWarps;
  pdl_launch_dependents();  // the experts' gate/up gemv may launch and wait for the ids
  if constexpr (kRoute) cluster_arrive_relaxed();  // this CTA has started (waited on before the first write into CTA 0)

  uint4 w[kRowsAhead][kLaneChunks];
  auto load_rows = [&](int r0) {
#pragma unroll
    for (int r = 0; r < kRowsAhead; ++r) {
      const int e = first + (r0 + r) * stride;
#pragma unroll
      for (int i = 0; i < kLaneChunks; ++i) {
        const int c = lane + 32 * i;
        w[r][i] = e < a.experts && c < chunks ? load_streaming(a.router + static_cast<int64_t>(e) * chunks + c)
                                              : make_uint4(0, 0, 0, 0);
      }
    }
  };
  load_rows(0);  // weights: no earlier kernel writes them
  float nw[kNormChunks][8];
#pragma unroll
  for (int i = 0; i < kNormChunks; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < chunks) load_weight8(a.norm_w, a.norm_f32, static_cast<int64_t>(c) * 8, nw[i]);
  }
  pdl_wait();  // the residual is the attention's o projection's output

  float v[kNormChunks][8];
  const float inv = load_row_inv_rms<kNormChunks>(a.residual + t * chunks * 8, chunks, a.eps, v,
                                                   route_sm.scratch);  // the route's, free until after the cluster barriers
#pragma unroll
  for (int i = 0; i < kNormChunks; ++i) {
    const int c = threadIdx.x + i * kThreads;
    if (c < chunks) {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[i][j] = (v[i][j] * inv) * nw[i][j];
      const uint4 packed = f32_to_bf16x8(v[i]);
      s_x[c] = packed;
      if (c % kCtas == rank) a.normed[t * chunks + c] = packed;  // the experts' input, a share a CTA
    }
  }
  __syncthreads();

  float* logits0 = nullptr;
  if constexpr (kRoute) {
    logits0 = static_cast<float*>(__cluster_map_shared_rank(static_cast<void*>(s_logits), 0));
    cluster_wait();  // CTA 0 is resident: its shared memory may be written
  }
  for (int r0 = 0; first + r0 * stride < a.experts; r0 += kRowsAhead) {  // warp-uniform
    if (r0 > 0) load_rows(r0);
#pragma unroll
    for (int r = 0; r < kRowsAhead; ++r) {
      const int e = first + (r0 + r) * stride;
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kLaneChunks; ++i) {
        const int c = lane + 32 * i;
        if (c < chunks) s += dot8(s_x[c], w[r][i]);
      }
      s = warp_sum(s);
      if (lane == 0 && e < a.experts) {
        if constexpr (kRoute) logits0[e] = s;
        a.logits[t * a.experts + e] = s;
      }
    }
  }
  if constexpr (!kRoute) return;
  cluster_sync();  // CTA 0 holds every logit; the others are done
  if (rank != 0) return;
  moe_route_row_fast<kThreads>(s_logits, a.experts, a.k, a.renormalize, a.ids + t * a.k, a.weights + t * a.k,
                               route_sm);
}

}  // namespace

bool moe_norm_route_fits(int64_t tokens, int64_t hidden, int experts) {
  return tokens >= 1 && tokens * kCtas <= 65535 && hidden % 8 == 0 && hidden <= 16 * 256 && experts >= 1 &&
         experts <= kMoeRouteMaxExperts;
}

void launch_moe_norm_route(const float* residual, const void* norm_w, bool norm_f32, float eps, const void* router,
                           int64_t tokens, int64_t hidden, int experts, int k, bool renormalize, void* normed,
                           float* logits, int32_t* ids, float* weights, cudaStream_t stream, bool route) {
  if (tokens == 0) return;
  MINIVLLM_CHECK(moe_norm_route_fits(tokens, hidden, experts) && k >= 1 && k <= experts)
      << "moe_norm_route: " << tokens << " tokens, hidden " << hidden << ", top-" << k << " of " << experts
      << " experts (the kernel takes hidden <= 4,096 in multiples of 8, experts <= " << kMoeRouteMaxExperts << ")";
  NormRouteArgs a{};
  a.residual = residual;
  a.norm_w = norm_w;
  a.norm_f32 = norm_f32;
  a.eps = eps;
  a.router = static_cast<const uint4*>(router);
  a.normed = static_cast<uint4*>(normed);
  a.logits = logits;
  a.ids = ids;
  a.weights = weights;
  a.chunks = static_cast<int>(hidden / 8);
  a.experts = experts;
  a.k = k;
  a.renormalize = renormalize;
  const dim3 grid(static_cast<unsigned>(tokens * kCtas));
  const bool narrow = hidden <= 8 * 256;
  // A cluster launch either way: without the route its CTAs are still placed as the routing launch's.
  auto* kernel = route ? (narrow ? moe_norm_route_kernel<8, 2, true> : moe_norm_route_kernel<16, 1, true>)
                       : (narrow ? moe_norm_route_kernel<8, 2, false> : moe_norm_route_kernel<16, 1, false>);
  launch_cluster_with_pdl(kernel, grid, dim3(kThreads), kCtas, 0, stream, a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
