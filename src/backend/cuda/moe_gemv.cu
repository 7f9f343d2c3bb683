// Mixture of experts at decode sizes (T <= kMoeGemvMaxTokens): the experts' MLPs as gemvs over
// the (token, slot) pairs, with no grouping. Like gemv.cu, a stream over the weights: lanes split a
// row's reduction into 16-byte chunks, several in flight a lane, the weights read through
// load_streaming and the activations through L1 (gate/up: a warp an output; down: a warp a slot of
// two output rows). Only the chosen experts' rows are read; a pair routed to another rank's expert
// costs nothing (moe.h). Programmatic dependent launches, as the dense gemvs.
#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/moe.h"
#include "backend/cuda/moe_route.cuh"
#include "backend/cuda/pdl_launch.h"

namespace minivllm::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

struct MoeGemvArgs {
  const uint4* in;  // act_mul: x [T, H]; down: act [T k, I]
  const int32_t* ids;
  const float* weights;
  void* out;
  bool out_f32;
  int k;
  int first_expert;
  int num_local;
  int64_t hidden, inter;
  Activation act;
  MoeGateRoute route;  // kRoute: where the gate/up gemv routes from and writes the ids and weights
};

// Grid (ceil(I / kWarps), T k): CTA (x, p) serves pair p; warp w its column i = x kWarps + w, the
// dot products of x[t] with gate row i and up row I + i of the pair's expert. kUnroll chunks of each
// row in flight a lane (MINIVLLM_MOE_GATE_CHUNKS, 2): the whole row's registers left fewer CTAs an SM,
// and batch 1's grid (8 experts' columns) ran in one more wave (PERFORMANCE.md, "Stop 68"); at 2, 40
// registers hold 12 CTAs an SM, batch 1's 1,536 CTAs in one wave on 132 SMs ("Stop 74").
// kRoute: warp 0 routes the pair's token itself (warp_route_pick) and column block 0 writes the pair's
// id and weight, so no route kernel stands between the router gemv and these loads.
template <int kUnroll, bool kRoute>
__global__ void __launch_bounds__(kThreads, kUnroll == 2 ? 12 : 1)
    moe_gemv_act_mul_kernel(const __grid_constant__ MoeGemvArgs a, const __grid_constant__ MoeExpertTable table) {
  pdl_launch_dependents();  // the down gemv may launch and wait
  pdl_wait();               // the ids (or the logits) are the kernel before's output
  const int64_t pair = blockIdx.y;
  int id;
  if constexpr (kRoute) {
    // Warp 0 routes, the others wait: every warp routing for itself cost the SM's issue slots more
    // than the barrier (PERFORMANCE.md, "Stop 97"). Column block 0 takes every round for the weight.
    __shared__ int s_id;
    if (threadIdx.x < 32) {
      const int64_t t = pair / a.k;
      const bool writer = blockIdx.x == 0;
      const WarpRouteChoice c = warp_route_pick(a.route.logits + t * a.route.experts, a.route.experts, a.k,
                                                a.route.renormalize, static_cast<int>(pair - t * a.k), writer);
      if (threadIdx.x == 0) {
        s_id = c.id;
        if (writer) {
          a.route.ids[pair] = c.id;
          a.route.weights[pair] = c.weight;
        }
      }
    }
    __syncthreads();
    id = s_id;
  } else {
    id = a.ids[pair];
  }
  const int e = id - a.first_expert;
  if (e < 0 || e >= a.num_local) return;  // another rank's expert (the row stays unwritten, and unread)
  const int lane = threadIdx.x & 31;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (col >= a.inter) return;
  const int64_t chunks = a.hidden / 8;
  const uint4* gate = static_cast<const uint4*>(table.w[e]) + col * chunks;
  const uint4* up = gate + a.inter * chunks;
  const uint4* x = a.in + (pair / a.k) * chunks;
  float g = 0.0f, u = 0.0f;
  for (int64_t c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
    uint4 wg[kUnroll], wu[kUnroll];
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {  // every load issued before any is used
      const int64_t c = c0 + i * 32;
      wg[i] = c < chunks ? load_streaming(gate + c) : make_uint4(0, 0, 0, 0);
      wu[i] = c < chunks ? load_streaming(up + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < kUnroll; ++i) {
      const int64_t c = c0 + i * 32;
      if (c < chunks) {
        const uint4 xv = __ldg(x + c);
        g += dot8(xv, wg[i]);
        u += dot8(xv, wu[i]);
      }
    }
  }
  g = warp_sum(g);
  u = warp_sum(u);
  if (lane == 0) static_cast<__nv_bfloat16*>(a.out)[pair * a.inter + col] = __float2bfloat16(gate_act(g, a.act) * u);
}

// The down projection, the weighted sum over a token's slots added into out: grid (ceil(H /
// kDownRows), T), 8 warps a CTA. CTA (x, t) serves token t's rows x kDownRows ..; warp w takes the
// token's slots w, w + 8, ..., and its lanes 16-byte chunks of the slot's expert rows, every chunk of
// a step loaded before any is used (at I = 768, one step holds the whole row), so a warp waits on
// memory once per slot it takes. (A warp per output row over all k slots waited k I / 256 times a
// lane, and was slower: PERFORMANCE.md.) Each warp's slots are summed in slot order, the warps'
// sums in warp order: deterministic.
// kDownRows rows a CTA (MINIVLLM_MOE_DOWN_ROWS, 4): a warp's slot then has 4 x 1.5 KB in flight
// per wait at I = 768 instead of 2 x (PERFORMANCE.md, "Stop 67"); at one token 8 rows, below.
// kDownSteps chunks of each row a lane.
constexpr int kDownWarps = 8;
constexpr int kDownThreads = kDownWarps * 32;
// Chunks of each row a lane loads a step, by rows a CTA (2, 4 or 8).
constexpr int down_steps(int rows) { return rows == 2 ? 4 : 3; }

// At 8 rows (MINIVLLM_MOE_DOWN_ROWS_ONE, one token) two CTAs an SM of 120 registers: every chunk of a
// warp's slot in flight at once, where at 4 rows ptxas issues them in three waits. (Without the minimum
// of 2, ptxas keeps 4 rows at 64 registers; with a minimum of 1 it takes 114, too many for one wave.)
template <int kDownRows, int kDownSteps>
__global__ void __launch_bounds__(kDownThreads, kDownRows == 8 ? 2 : 0)
    moe_gemv_down_add_kernel(const __grid_constant__ MoeGemvArgs a, const __grid_constant__ MoeExpertTable table) {
  __shared__ float part[kDownWarps][kDownRows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t = blockIdx.y;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kDownRows;
  const int chunks = static_cast<int>(a.inter / 8);
  pdl_launch_dependents();
  pdl_wait();  // act is the gate/up gemv's output; out is read and written
  // Thread r < kDownRows's value of out, loaded now, not on the tail (PERFORMANCE.md, "Stop 73").
  float base = 0.0f;
  if (threadIdx.x < kDownRows && row0 + threadIdx.x < a.hidden) {
    const int64_t o = t * a.hidden + row0 + threadIdx.x;
    base = a.out_f32 ? static_cast<const float*>(a.out)[o]
                     : __bfloat162float(static_cast<const __nv_bfloat16*>(a.out)[o]);
  }
  float acc[kDownRows] = {};
  for (int j = warp; j < a.k; j += kDownWarps) {
    const int e = a.ids[t * a.k + j] - a.first_expert;
    if (e < 0 || e >= a.num_local) continue;  // another rank's expert: it adds nothing here
    const float gw = a.weights[t * a.k + j];
    const uint4* w = static_cast<const uint4*>(table.w[e]);
    const uint4* act = a.in + (t * a.k + j) * static_cast<int64_t>(chunks);
    float s[kDownRows] = {};
    for (int c0 = lane; c0 < chunks; c0 += 32 * kDownSteps) {
      uint4 wv[kDownSteps][kDownRows], av[kDownSteps];
#pragma unroll
      for (int u = 0; u < kDownSteps; ++u) {
        const int c = c0 + 32 * u;
#pragma unroll
        for (int r = 0; r < kDownRows; ++r) {
          const int64_t row = min(row0 + r, a.hidden - 1);
          wv[u][r] = c < chunks ? load_streaming(w + row * chunks + c) : make_uint4(0, 0, 0, 0);
        }
        av[u] = c < chunks ? __ldg(act + c) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kDownSteps; ++u) {
#pragma unroll
        for (int r = 0; r < kDownRows; ++r) s[r] += dot8(av[u], wv[u][r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) acc[r] = fmaf(gw, s[r], acc[r]);
  }
#pragma unroll
  for (int r = 0; r < kDownRows; ++r) {
    const float v = warp_sum(acc[r]);
    if (lane == 0) part[warp][r] = v;
  }
  __syncthreads();
  if (threadIdx.x >= kDownRows) return;
  const int64_t row = row0 + threadIdx.x;
  if (row >= a.hidden) return;
  float sum = 0.0f;
#pragma unroll
  for (int w = 0; w < kDownWarps; ++w) sum += part[w][threadIdx.x];
  if (a.out_f32) {
    static_cast<float*>(a.out)[t * a.hidden + row] = base + sum;
  } else {
    static_cast<__nv_bfloat16*>(a.out)[t * a.hidden + row] = __float2bfloat16(base + sum);
  }
}

void check_shape(const char* op, const MoeShape& s) {
  MINIVLLM_CHECK(s.tokens >= 0 && s.tokens <= 65535 && s.k >= 1 && s.hidden > 0 && s.hidden % 8 == 0 &&
                 s.inter > 0 && s.inter % 8 == 0 && s.tokens * s.k * (s.inter / 8) < (int64_t{1} << 31) &&
                 s.num_local >= 1 && s.num_local <= kMoeMaxLocalExperts)
      << op << ": " << s.tokens << " tokens x top-" << s.k << ", hidden " << s.hidden << ", inter " << s.inter
      << ", " << s.num_local << " local experts (widths multiples of 8)";
}

MoeGemvArgs args(const void* in, const int32_t* ids, const MoeShape& s) {
  MoeGemvArgs a{};
  a.in = static_cast<const uint4*>(in);
  a.ids = ids;
  a.k = s.k;
  a.first_expert = s.first_expert;
  a.num_local = s.num_local;
  a.hidden = s.hidden;
  a.inter = s.inter;
  return a;
}

}  // namespace

void launch_moe_gemv_act_mul(const void* x, const int32_t* ids, const MoeExpertTable& gate_up, const MoeShape& s,
                             Activation act, void* act_out, cudaStream_t stream, const MoeGateRoute* route) {
  if (s.tokens == 0) return;
  check_shape("moe_gemv_act_mul", s);
  MINIVLLM_CHECK(s.tokens * s.k <= 65535) << "moe_gemv_act_mul: " << s.tokens * s.k << " pairs (a grid row each)";
  MoeGemvArgs a = args(x, ids, s);
  a.out = act_out;
  a.act = act;
  if (route != nullptr) {
    MINIVLLM_CHECK(route->experts >= s.k && route->experts <= kMoeWarpRouteMaxExperts &&
                   reinterpret_cast<uintptr_t>(route->logits) % 16 == 0)
        << "moe_gemv_act_mul: routing top-" << s.k << " of " << route->experts << " experts in the gemv (it takes "
        << kMoeWarpRouteMaxExperts << " at most, logits 16-byte aligned)";
    a.route = *route;
  }
  const dim3 grid(static_cast<unsigned>(ceil_div(s.inter, kWarps)), static_cast<unsigned>(s.tokens * s.k));
  const bool two = s.gate_chunks == 2;
  if (route != nullptr) {
    launch_with_pdl(two ? moe_gemv_act_mul_kernel<2, true> : moe_gemv_act_mul_kernel<4, true>, grid, dim3(kThreads), 0,
                    stream, a, gate_up);
  } else {
    launch_with_pdl(two ? moe_gemv_act_mul_kernel<2, false> : moe_gemv_act_mul_kernel<4, false>, grid, dim3(kThreads),
                    0, stream, a, gate_up);
  }
  CUDA_CHECK_LAUNCH();
}

void launch_moe_gemv_down_add(const void* act, const int32_t* ids, const float* weights, const MoeExpertTable& down,
                              const MoeShape& s, void* out, bool out_f32, cudaStream_t stream) {
  if (s.tokens == 0) return;
  check_shape("moe_gemv_down_add", s);
  MoeGemvArgs a = args(act, ids, s);
  a.weights = weights;
  a.out = out;
  a.out_f32 = out_f32;
  const dim3 grid(static_cast<unsigned>(ceil_div(s.hidden, s.down_rows)), static_cast<unsigned>(s.tokens));
  auto* kernel = s.down_rows == 8   ? moe_gemv_down_add_kernel<8, down_steps(8)>
                 : s.down_rows == 4 ? moe_gemv_down_add_kernel<4, down_steps(4)>
                                    : moe_gemv_down_add_kernel<2, down_steps(2)>;
  launch_with_pdl(kernel, grid, dim3(kDownThreads), 0, stream, a, down);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
