// Skinny GEMM for decode: out[M, N] = x[M, K] w[N, K]^T (+ bias) for M <= 8 tokens, bf16 in, bf16
// or fp32 out (the logits), fp32 accumulation; its gate/up variant that writes act(g) * u; its
// residual variant that adds into the fp32 residual stream; and, for either of the first two, a
// prologue that computes x = rms_norm(residual) * w in every CTA (no norm launch of its own), or
// the same norm applied late: the products of residual * w and the row's sum of squares in one
// pass, each output scaled by 1 / rms at the end (no reduction before the first product); and
// a qkv variant whose CTAs own rotary pairs of rows and apply the rotary embedding and the cache
// store in their epilogue (no rope launch; models without q/k norms, bf16 caches).
// At these sizes a linear is a stream over W, so the kernel is built to
// keep many 16-byte loads of W in flight: a 128-thread CTA owns R rows of W, its threads split K
// into 8-element chunks and load U chunks of every row before using any. x (M x K, a few KB) is
// read through L1, which holds it because W bypasses L1. Partial sums meet in a warp
// reduce-scatter (one shuffle per value and step, not five) and then in shared memory.
#include <map>
#include <mutex>
#include <utility>

#include "backend/cuda/attention_shapes.h"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/gemv_rope.cuh"
#include "backend/cuda/pdl_launch.h"
#include "backend/cuda/rope_math.cuh"

namespace minivllm::cuda {
namespace {

constexpr int kGemvThreads = 128;
constexpr int kGemvWarps = kGemvThreads / 32;

constexpr int next_pow2(int v) { return v <= 1 ? 1 : 2 * next_pow2((v + 1) / 2); }

// Warp reduce-scatter of kCount values: at each step a lane keeps half of its values and adds the
// partner's copy of that half, so lane l ends with the warp total of value reduce_scatter_index(l)
// in v[0]. Once one value is left, the remaining steps are a plain butterfly.
template <int kCount, int kOffset, int P>
__device__ __forceinline__ void reduce_scatter(float (&v)[P], int lane) {
  if constexpr (kOffset > 0) {
    if constexpr (kCount > 1) {
      constexpr int kHalf = kCount / 2;
      const bool upper = (lane & kOffset) != 0;
#pragma unroll
      for (int i = 0; i < kHalf; ++i) {
        const float send = upper ? v[i] : v[i + kHalf];
        const float keep = upper ? v[i + kHalf] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kOffset);
      }
      reduce_scatter<kHalf, kOffset / 2>(v, lane);
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], kOffset);
      reduce_scatter<1, kOffset / 2>(v, lane);
    }
  }
}

template <int P>
__device__ __forceinline__ int reduce_scatter_index(int lane) {
  int idx = 0, count = P;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    if (count > 1) {
      count /= 2;
      if (lane & o) idx += count;
    }
  }
  return idx;
}

enum class Epilogue {
  kStore,    // out = x W^T (+ bias), bf16 or fp32
  kActMul,  // W = [W_gate; W_up]: out = act(x W_gate^T) * (x W_up^T), bf16, act = GemvArgs::act
  kAddF32,   // out (fp32, the residual stream) += x W^T
  kRope,     // W = the qkv projection, a CTA owning pairs of rows (rope_slot): out = rope(x W^T (+ bias)), k, v stored
  kAddF32Fold,  // kAddF32, and the next RMSNorm's input and one sum of squares a CTA (GemvArgs::fold_*)
};
template <Epilogue E>
constexpr bool is_add() {
  return E == Epilogue::kAddF32 || E == Epilogue::kAddF32Fold;
}

// Where the RMSNorm of GemvArgs::norm_in happens: nowhere (x is given), in a prologue that writes the
// normed row into shared memory before the first product, or late: each product takes residual * w
// as it streams and the CTA's sum of squares (the prologue's, in the same order) scales the outputs.
// kFolded: x is the folded norm's input, bf16(residual * w) that the add before wrote (kAddF32Fold),
// and the outputs are scaled by 1 / rms from the add's sums of squares.
enum class NormMode { kNone, kPrologue, kLate, kFolded };

struct GemvArgs {
  const uint4* x;  // [M, chunks] bf16 (unused with a norm: kPrologue, kLate)
  const uint4* w;
  const void* bias;
  bool bias_f32;
  void* out;
  bool out_f32;
  int64_t n;
  int64_t chunks;
  // kPrologue: x = rms_norm(norm_in) * norm_w, rounded to bf16 as the unfused norm's output would be.
  // kLate: the products take norm_in * norm_w in fp32, times 1 / rms at the end.
  const float* norm_in;  // [M, chunks * 8] fp32
  const void* norm_w;
  bool norm_w_f32;
  float eps;
  Activation act;  // kActMul's gate activation
  // kRope: positions, cos_sin, max_pos, head counts, head_dim, rotary_dim and the cache (k_cache == nullptr:
  // rotate only); no q/k norms, a bf16 cache.
  RopeArgs rope;
  int prefetch_u;  // one token: chunk steps of each row a thread pulls into L2 before the wait (0: all U)
  // One token, no prologue norm, one step of chunks: the CTA's R rows of W are bulk-copied into shared
  // memory before the PDL wait, and the products read them there. The caller allows it
  // (MINIVLLM_GEMV_STAGE); launch_for_mr decides where it pays (stage_rows) and fits.
  bool stage;
  // Staged: only CTAs below this index stage, the grid's first wave: the CTAs resident before the wait.
  // A later CTA starts after the wait, where a copy to shared memory only delays its first product.
  int64_t stage_ctas;
  // kAddF32Fold (one token): fold_x[m, row] = bf16(residual'[m, row] * fold_w[row]), and
  // fold_parts[m * gridDim.x + cta] = the sum of residual'[m, row]^2 over the CTA's rows.
  const void* fold_w;
  bool fold_w_f32;
  void* fold_x;
  float* fold_parts;
  // kFolded: those sums, parts[m * nparts + i] (x is fold_x).
  const float* parts;
  int64_t nparts;
};

// Staged rows may pay only where the kernel before is a gemv (the residual adds: the o after the
// attention, the down after the gate/up; the late norm's qkv and gate/up after the residual add): its
// loads are in flight, and the copies queue behind them. After a norm kernel (Llama's qkv and gate/up)
// they delay its short critical path (PERFORMANCE.md, "Stop 102"). On the H200 they gain nowhere
// against the loaded rows of the same code, so MINIVLLM_GEMV_STAGE is off ("Stop 103"). The fold's
// sites (kAddF32Fold, kFolded) do not stage: Llama-3.2-1B lost with them ("Stop 109"; the probe is
// tools/gpu_probes/patches/stop109-stage-fold.patch).
template <Epilogue E, NormMode NM>
constexpr bool stage_rows() {
  return NM == NormMode::kLate || E == Epilogue::kAddF32;
}
// The norm's 1 / rms scales the outputs at the end: its sums come with the products (kLate) or from
// the add before (kFolded).
template <NormMode NM>
constexpr bool scales_late() {
  return NM == NormMode::kLate || NM == NormMode::kFolded;
}

// The RMSNorm's sum of squares of each of M rows, shared by the prologue and the late norm so
// that both get the same 1 / rms: each warp's share goes to sums[warp][m] (before a barrier), and
// row m's total is taken in warp order (after it).
template <int M>
__device__ __forceinline__ void publish_sums(const float (&ss)[M], float (&sums)[kGemvWarps][M]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float v = warp_sum(ss[m]);
    if (lane == 0) sums[warp][m] = v;
  }
}
template <int M>
__device__ __forceinline__ float inv_rms(const float (&sums)[kGemvWarps][M], int m, int64_t k, float eps) {
  float tot = 0.0f;
#pragma unroll
  for (int i = 0; i < kGemvWarps; ++i) tot += sums[i][m];
  return 1.0f / sqrtf(tot / static_cast<float>(k) + eps);
}

// kNorm: every CTA normalises the M rows of the fp32 residual stream itself (they are a few KB,
// read from L2) into shared memory, so the RMSNorm costs no launch of its own. Ends in a barrier.
// w0: the norm weights of this thread's first chunk, loaded by the caller before the PDL wait, so
// that after the reduction no load stands between the sum and the normalised row.
template <int M>
__device__ __forceinline__ void normalize_rows(const GemvArgs& g, uint4* xs, const float (&w0)[8]) {
  __shared__ float red[kGemvWarps][M];
  float ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m) ss[m] = 0.0f;
  for (int64_t c = threadIdx.x; c < g.chunks; c += kGemvThreads) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v[8];
      load_f32x8(g.norm_in + (m * g.chunks + c) * 8, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) ss[m] += v[i] * v[i];
    }
  }
  publish_sums<M>(ss, red);
  __syncthreads();
  float inv[M];
#pragma unroll
  for (int m = 0; m < M; ++m) inv[m] = inv_rms<M>(red, m, g.chunks * 8, g.eps);
  for (int64_t c = threadIdx.x; c < g.chunks; c += kGemvThreads) {
    float wt[8];
    if (c == threadIdx.x) {
#pragma unroll
      for (int i = 0; i < 8; ++i) wt[i] = w0[i];
    } else {
      load_weight8(g.norm_w, g.norm_w_f32, c * 8, wt);
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v[8];
      load_f32x8(g.norm_in + (m * g.chunks + c) * 8, v);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = (v[i] * inv[m]) * wt[i];
      xs[m * g.chunks + c] = f32_to_bf16x8(v);
    }
  }
  __syncthreads();
}

// One CTA: R rows of W (rows past n reread the last one and are not written).
// kStore / kAddF32: rows [blockIdx.x * R, + R) of W. kRope: R / 2 pairs of rows, pairs
// [blockIdx.x * R/2, + R/2) (rope_pair_row), each pair's two rows side by side. kActMul: W is [W_gate; W_up] ([2n, K]); the
// CTA loads gate rows [blockIdx.x * R/2, + R/2) and the matching up rows (+ n) together and writes
// act(g) * u (bf16), so the [T, 2n] product never goes through memory.
//
// kStage: the grid's first wave stages its rows (GemvArgs::stage). A kernel of its own, so that every
// other launch runs the code it ran before staging existed (PERFORMANCE.md, "Stop 103").
template <int M, int R, int U, Epilogue E, NormMode NM, bool kStage = false>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(GemvArgs g) {
  constexpr bool kNorm = NM == NormMode::kPrologue;
  constexpr bool kLate = NM == NormMode::kLate;
  constexpr bool kScaled = scales_late<NM>();  // kLate or kFolded: 1 / rms at the end
  constexpr bool kAdd = is_add<E>();
  constexpr bool kFoldOut = E == Epilogue::kAddF32Fold;
  constexpr bool kGated = E == Epilogue::kActMul;
  constexpr int V = M * R;
  constexpr int P = next_pow2(V);
  constexpr int kRowsOut = kGated ? R / 2 : R;
  static_assert(P <= 32, "one warp reduce-scatter holds at most 32 values");
  constexpr bool kCanStage = kStage && M == 1 && stage_rows<E, NM>();
  __shared__ float partial[kGemvWarps][V];
  __shared__ float late_ss[kGemvWarps][kScaled ? M : 1];  // kLate, kFolded: each warp's sums of squares
  __shared__ __align__(8) uint64_t stage_bar[1];  // staged: the rows' copies land on it
  // kNorm: the normalised x, [M, chunks]; staged: W's rows, [R, chunks]; kFolded: the add's sums, [M, nparts] floats
  extern __shared__ uint4 xs[];
  const int64_t n = g.n, chunks = g.chunks;
  const bool staged = kCanStage && static_cast<int64_t>(blockIdx.x) < g.stage_ctas;

  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRowsOut;
  const uint4* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if constexpr (E == Epilogue::kRope) {  // slot r holds a pair's row (r even) or its partner (r odd)
      rows[r] = g.w + rope_pair_row(g.rope, static_cast<int64_t>(blockIdx.x) * (R / 2) + r / 2, r % 2, n) * chunks;
    } else {
      const int rr = r % kRowsOut;
      const int64_t row = row0 + rr < n ? row0 + rr : n - 1;
      rows[r] = g.w + (kGated && r >= kRowsOut ? row + n : row) * chunks;
    }
  }

  // W does not depend on the previous kernel: pull this thread's first chunks of it into L2 while
  // that kernel finishes (programmatic dependent launch), then wait before touching x or out. At one
  // token only the first step's chunks (MINIVLLM_GEMV_PREFETCH_U, 1): the whole rows' prefetch met
  // the previous kernel's own loads (PERFORMANCE.md, "Stop 98").
  pdl_launch_dependents();
  if (staged) {  // thread 0 asks for the rows; the barrier makes the mbarrier's init visible to all
    const uint32_t bar = smem_addr(stage_bar);
    if (threadIdx.x == 0) {
      mbar_init(bar, 1);
      mbar_init_fence();
      const auto row_bytes = static_cast<uint32_t>(chunks * sizeof(uint4));
      mbar_expect_tx(bar, R * row_bytes);
#pragma unroll
      for (int r = 0; r < R; ++r) bulk_copy_to_smem(smem_addr(xs + r * chunks), rows[r], row_bytes, bar);
    }
    __syncthreads();
  } else {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = threadIdx.x + u * kGemvThreads;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (c < chunks && (M > 1 || g.prefetch_u == 0 || u < g.prefetch_u)) {
          asm volatile("prefetch.global.L2 [%0];" ::"l"(rows[r] + c));
        }
      }
    }
  }
  float norm_w0[8];  // kNorm: the norm weights never change either
  if (kNorm && threadIdx.x < chunks) load_weight8(g.norm_w, g.norm_w_f32, threadIdx.x * 8, norm_w0);
  // kRope: the epilogue thread of token m, pair j (the first M * R/2 threads) and the pair's lower
  // row (rows[] is indexed at compile time only, so that it stays in registers).
  const int rope_m = threadIdx.x / (R / 2), rope_j = threadIdx.x % (R / 2);
  const int64_t pair_row =
      E == Epilogue::kRope ? rope_pair_row(g.rope, static_cast<int64_t>(blockIdx.x) * (R / 2) + rope_j, 0, n) : 0;
  RopeLane rl{};  // kRope: the step's position, cos / sin and slot, uploaded before the graph ran
  if constexpr (E == Epilogue::kRope) {
    if (threadIdx.x < M * (R / 2)) rl = rope_lane(g.rope, rope_m, pair_row);
  }
  // kAddF32Fold: the epilogue thread's norm weight, a constant, loaded before the wait (not on the tail).
  float fold_wv = 0.0f;
  if constexpr (kFoldOut) {
    if (threadIdx.x < M * kRowsOut && row0 + threadIdx.x % kRowsOut < n) {
      fold_wv = load_weight(g.fold_w, g.fold_w_f32, row0 + threadIdx.x % kRowsOut);
    }
  }
  pdl_wait();
  // kAddF32: the epilogue thread's residual value, copied into shared memory now (cp.async: no
  // register held over the products), so that no load stands on the tail (PERFORMANCE.md, "Stop 73").
  // kFolded: the add's sums of squares, copied into shared memory now and summed after the products,
  // so that their L2 round trip does not stand before x's loads (PERFORMANCE.md, "Stop 108").
  if constexpr (NM == NormMode::kFolded) {
    float* parts = reinterpret_cast<float*>(xs);  // [M, nparts] (launch_for_mr sizes it)
#pragma unroll
    for (int m = 0; m < M; ++m) {  // the same elements a thread as it sums below
      for (int64_t i = threadIdx.x; i < g.nparts; i += kGemvThreads) {
        cp_async4(parts + m * g.nparts + i, g.parts + m * g.nparts + i);
      }
    }
    cp_async_commit();
  }
  __shared__ float residual[kAdd ? M * kRowsOut : 1];
  if constexpr (kAdd) {
    if (threadIdx.x < M * kRowsOut && row0 + threadIdx.x % kRowsOut < n) {
      cp_async4(residual + threadIdx.x,
                static_cast<const float*>(g.out) + (threadIdx.x / kRowsOut) * n + row0 + threadIdx.x % kRowsOut);
      cp_async_commit();
    }
  }

  float acc[P];
#pragma unroll
  for (int i = 0; i < P; ++i) acc[i] = 0.0f;
  float ss[kScaled ? M : 1];  // kLate, kFolded: this thread's share of each row's sum of squares
#pragma unroll
  for (int m = 0; m < (kScaled ? M : 1); ++m) ss[m] = 0.0f;

  uint4 wv[U][R];
  auto load_w = [&](int64_t c0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * kGemvThreads;
#pragma unroll
      for (int r = 0; r < R; ++r) wv[u][r] = c < chunks ? load_streaming(rows[r] + c) : make_uint4(0, 0, 0, 0);
    }
  };
  if (staged) {  // one step: every chunk this thread uses is in shared memory once the copies land
    mbar_wait(smem_addr(stage_bar), 0);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = threadIdx.x + u * kGemvThreads;
#pragma unroll
      for (int r = 0; r < R; ++r) wv[u][r] = c < chunks ? xs[r * chunks + c] : make_uint4(0, 0, 0, 0);
    }
  } else {
    load_w(threadIdx.x);  // the first loads are in flight while kNorm normalises x
  }
  if constexpr (kNorm) normalize_rows<M>(g, xs, norm_w0);

  for (int64_t c0 = threadIdx.x; c0 < chunks; c0 += kGemvThreads * U) {
    if (c0 != threadIdx.x) load_w(c0);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * kGemvThreads;
      if (c < chunks) {
        float wf[R][8];
#pragma unroll
        for (int r = 0; r < R; ++r) bf16x8_to_f32(wv[u][r], wf[r]);
        float nw[8];  // kLate: the norm weights of chunk c (the same 2-4 KB row for every CTA: L1 / L2)
        if constexpr (kLate) load_weight8(g.norm_w, g.norm_w_f32, c * 8, nw);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          float xf[8];
          if constexpr (kLate) {
            load_f32x8(g.norm_in + (m * chunks + c) * 8, xf);
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              ss[m] = fmaf(xf[i], xf[i], ss[m]);
              xf[i] *= nw[i];
            }
          } else {
            bf16x8_to_f32(kNorm ? xs[m * chunks + c] : __ldg(g.x + m * chunks + c), xf);
          }
#pragma unroll
          for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[m * R + r] = fmaf(xf[i], wf[r][i], acc[m * R + r]);
          }
        }
      }
    }
  }

  if constexpr (NM == NormMode::kFolded) {  // this thread's own copies: no barrier
    cp_async_wait<0>();
    const float* parts = reinterpret_cast<const float*>(xs);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      for (int64_t i = threadIdx.x; i < g.nparts; i += kGemvThreads) ss[m] += parts[m * g.nparts + i];
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  reduce_scatter<P, 16>(acc, lane);
  const int idx = reduce_scatter_index<P>(lane);
  if (idx < V && (lane & (32 / P - 1)) == 0) partial[warp][idx] = acc[0];
  if constexpr (kScaled) publish_sums<M>(ss, late_ss);
  __syncthreads();
  // kLate, kFolded: token m's 1 / rms, as normalize_rows computes it.
  auto late_inv = [&](int m) { return inv_rms<kScaled ? M : 1>(late_ss, m, chunks * 8, g.eps); };
  if constexpr (E == Epilogue::kRope) {
    if (threadIdx.x < M * (R / 2)) {
      const int m = rope_m, j = rope_j;
      float lo = 0.0f, hi = 0.0f;
#pragma unroll
      for (int i = 0; i < kGemvWarps; ++i) {
        lo += partial[i][m * R + 2 * j];
        hi += partial[i][m * R + 2 * j + 1];
      }
      if constexpr (kScaled) {
        const float inv = late_inv(m);
        lo *= inv;
        hi *= inv;
      }
      // Pairs past the end reread the last pair: only the CTA that owns it writes it.
      if (static_cast<int64_t>(blockIdx.x) * (R / 2) + j < n / 2) {
        rope_store_pair(g.rope, g.bias, g.bias_f32, g.out, n, m, pair_row, lo, hi, rl);
      }
    }
    return;
  }
  float fold_sq = 0.0f;  // kAddF32Fold: this row's residual'^2
  if (threadIdx.x < M * kRowsOut) {
    const int m = threadIdx.x / kRowsOut, r = threadIdx.x % kRowsOut;
    const int64_t row = row0 + r;
    if (row < n) {
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kGemvWarps; ++i) s += partial[i][m * R + r];
      const float inv = kScaled ? late_inv(m) : 1.0f;
      if constexpr (kScaled) s *= inv;
      if constexpr (kGated) {
        float u = 0.0f;
#pragma unroll
        for (int i = 0; i < kGemvWarps; ++i) u += partial[i][m * R + kRowsOut + r];
        if constexpr (kScaled) u *= inv;
        s = gate_act(s, g.act) * u;
      } else if (g.bias != nullptr) {
        s += load_weight(g.bias, g.bias_f32, row);
      }
      if constexpr (kAdd) {
        cp_async_wait<0>();  // (this thread's own copy)
        const float v = residual[threadIdx.x] + s;
        static_cast<float*>(g.out)[m * n + row] = v;  // this CTA owns the element
        if constexpr (kFoldOut) {
          static_cast<__nv_bfloat16*>(g.fold_x)[m * n + row] = __float2bfloat16(v * fold_wv);
          fold_sq = v * v;
        }
      } else if (g.out_f32) {
        static_cast<float*>(g.out)[m * n + row] = s;
      } else {
        static_cast<__nv_bfloat16*>(g.out)[m * n + row] = __float2bfloat16(s);
      }
    }
  }
  if constexpr (kFoldOut) {
    // Token m's rows are lanes [m kRowsOut, (m + 1) kRowsOut) of warp 0 (M kRowsOut <= 32, kRowsOut a
    // power of two): a butterfly within those lanes, in a fixed order, so every run sums alike.
    static_assert(M * kRowsOut <= 32 && (kRowsOut & (kRowsOut - 1)) == 0, "one warp holds the CTA's rows");
    if (threadIdx.x < 32) {
#pragma unroll
      for (int o = kRowsOut / 2; o > 0; o >>= 1) fold_sq += __shfl_xor_sync(0xffffffffu, fold_sq, o);
      if (threadIdx.x < M * kRowsOut && threadIdx.x % kRowsOut == 0) {
        g.fold_parts[(threadIdx.x / kRowsOut) * static_cast<int64_t>(gridDim.x) + blockIdx.x] = fold_sq;
      }
    }
  }
}

// MINIVLLM_GEMV_SHORT_ROWS: batch 1 on rows of 129-256 chunks (K 1,032-2,048), where U = 4 leaves half
// of a thread's loads past the row and their registers unused: U = 2 there (PERFORMANCE.md, "Stop 61,
// second session"; twice the rows a CTA as well gained nothing and was removed).
bool env_short_rows() {
  static const bool on = knob_flag("MINIVLLM_GEMV_SHORT_ROWS");
  return on;
}

// How many CTAs of `kernel` with `smem` bytes each are resident on the device at once: the occupancy
// API's CTAs an SM times the SMs, asked once a (kernel, shared memory) pair, since eager steps launch
// the same few shapes every step.
int64_t wave_ctas(const void* kernel, size_t smem) {
  static std::mutex mu;
  static std::map<std::pair<const void*, size_t>, int64_t> waves;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(kernel, smem);
  if (const auto it = waves.find(key); it != waves.end()) return it->second;
  int dev = 0, sms = 0, per_sm = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvThreads, smem));
  return waves[key] = static_cast<int64_t>(per_sm) * sms;
}

// The most shared memory a staged gemv CTA takes (GemvArgs::stage): the launch's default limit.
constexpr int64_t kGemvStageMaxBytes = 48 * 1024;

// The kernel taking u chunks of each row a thread (launch_for_mr's choice), staged or not. U = 1 at
// K <= 1,024: one chunk per thread, so no unrolling to pay registers for; U = 2 at one token where two
// chunks cover the row (no U = 2 kernels of M = 2-4 to compile); else U chunks of every row in flight,
// fewer when x's rows take the registers.
template <int M, int R, Epilogue E, NormMode NM, bool kStage>
auto gemv_for_u(int u) -> void (*)(GemvArgs) {
  if constexpr (M == 1) {
    if (u == 2) return gemv_kernel<1, R, 2, E, NM, kStage>;
  }
  return u == 1 ? gemv_kernel<M, R, 1, E, NM, kStage> : gemv_kernel<M, R, (M <= 4 ? 4 : 2), E, NM, kStage>;
}

// Returns the grid's CTAs (kAddF32Fold: the sums of squares a token).
template <int M, int R, Epilogue E, NormMode NM>
int64_t launch_for_mr(const GemvArgs& g, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(ceil_div(g.n, E == Epilogue::kActMul ? R / 2 : R));
  size_t smem = NM == NormMode::kPrologue ? static_cast<size_t>(M) * g.chunks * sizeof(uint4) : 0;
  if (NM == NormMode::kFolded) smem = static_cast<size_t>(M * g.nparts) * sizeof(float);
  const bool short_rows = M == 1 && g.chunks > kGemvThreads && g.chunks <= 2 * kGemvThreads && env_short_rows();
  const int u = g.chunks <= kGemvThreads ? 1 : short_rows ? 2 : (M <= 4 ? 4 : 2);
  // Staged rows: the kernel's one step covers the row, and the CTA's rows fit the shared memory.
  GemvArgs a = g;
  const int64_t stage_bytes = R * g.chunks * static_cast<int64_t>(sizeof(uint4));
  a.stage = g.stage && stage_rows<E, NM>() && M == 1 && g.chunks <= u * kGemvThreads &&
            stage_bytes <= kGemvStageMaxBytes;
  if (a.stage) smem = static_cast<size_t>(stage_bytes);
  void (*kernel)(GemvArgs) = gemv_for_u<M, R, E, NM, false>(u);
  if constexpr (M == 1 && stage_rows<E, NM>()) {  // the staging kernels: only where a launch may stage
    if (a.stage) kernel = gemv_for_u<1, R, E, NM, true>(u);
  }
  a.stage_ctas = a.stage ? wave_ctas(reinterpret_cast<const void*>(kernel), smem) : 0;
  launch_with_pdl(kernel, dim3(grid), dim3(kGemvThreads), smem, stream, a);
  CUDA_CHECK_LAUNCH();
  return grid;
}

// MINIVLLM_GEMV_TWO_ROWS_K: one-token gemvs on rows of at least this many values (every linear of the
// 8B models but the rope-fused qkv) take two rows a CTA, not four: twice the CTAs, each half the
// registers, for the GPU to balance (PERFORMANCE.md, "Stop 64").
int64_t env_two_rows_k() {
  static const int64_t k = knob_number("MINIVLLM_GEMV_TWO_ROWS_K");
  return k;
}

// MINIVLLM_GEMV_FOUR_ROWS: the rows of W (2n for the gate/up pair) from which a CTA takes four rows
// (1,024). Two rows a CTA left the 1-4K-row projections (Llama-3.2-1B's qkv and o, Qwen3-0.6B's o and
// down) in a wave or more of small CTAs; four rows halve the CTAs and double each thread's loads in
// flight (PERFORMANCE.md, "Stop 100").
int64_t env_four_rows() {
  static const int64_t rows = knob_number("MINIVLLM_GEMV_FOUR_ROWS");
  return rows;
}

// Rows of W streamed (n, or 2n for the gate/up pair) pick R: four rows a CTA from
// MINIVLLM_GEMV_FOUR_ROWS on; two below it, and at one token on long rows.
template <int M, Epilogue E, NormMode NM>
int64_t launch_for_m(const GemvArgs& g, cudaStream_t stream) {
  const int64_t rows_of_w = E == Epilogue::kActMul ? 2 * g.n : g.n;
  if (M == 1 && E != Epilogue::kRope && env_two_rows_k() > 0 && g.chunks * 8 >= env_two_rows_k()) {
    return launch_for_mr<M, 2, E, NM>(g, stream);
  }
  if (rows_of_w >= env_four_rows()) return launch_for_mr<M, 4, E, NM>(g, stream);
  return launch_for_mr<M, 2, E, NM>(g, stream);
}

template <Epilogue E, NormMode NM>
void dispatch_tokens(const GemvArgs& g, int64_t tokens, cudaStream_t stream) {
  switch (tokens) {
    case 1: launch_for_m<1, E, NM>(g, stream); return;
    case 2: launch_for_m<2, E, NM>(g, stream); return;
    case 3: launch_for_m<3, E, NM>(g, stream); return;
    case 4: launch_for_m<4, E, NM>(g, stream); return;
    case 5: launch_for_m<5, E, NM>(g, stream); return;
    case 6: launch_for_m<6, E, NM>(g, stream); return;
    case 7: launch_for_m<7, E, NM>(g, stream); return;
    default: launch_for_m<8, E, NM>(g, stream); return;
  }
}

void check_shape(const char* op, int64_t tokens, int64_t k) {
  MINIVLLM_CHECK(tokens >= 1 && tokens <= kGemvMaxTokens && k > 0 && k % 8 == 0)
      << op << ": x [" << tokens << ", " << k << "] needs 1.." << kGemvMaxTokens << " rows and K a multiple of 8";
}

GemvArgs plain_args(const void* x, const void* w, void* out, int64_t n, int64_t k) {
  static const int prefetch_u = static_cast<int>(knob_number("MINIVLLM_GEMV_PREFETCH_U"));
  GemvArgs g{};
  g.prefetch_u = prefetch_u;
  g.x = static_cast<const uint4*>(x);
  g.w = static_cast<const uint4*>(w);
  g.out = out;
  g.n = n;
  g.chunks = k / 8;
  return g;
}

GemvArgs norm_args(const GemvNorm& norm, const void* w, void* out, int64_t n, int64_t k) {
  GemvArgs g = plain_args(norm.folded_x, w, out, n, k);
  g.norm_in = norm.residual;
  g.norm_w = norm.weight;
  g.norm_w_f32 = norm.weight_f32;
  g.eps = norm.eps;
  g.stage = norm.stage;
  g.parts = norm.parts;
  g.nparts = norm.nparts;
  return g;
}

// The normed gemvs: the prologue (x in shared memory) or the late norm (GemvNorm::late: 1 or 2
// tokens, any K).
template <Epilogue E>
void dispatch_normed(const GemvArgs& g, const GemvNorm& norm, int64_t tokens, const char* op, cudaStream_t stream) {
  const int64_t k = g.chunks * 8;
  if (norm.parts != nullptr) {
    MINIVLLM_CHECK(tokens <= kGemvFoldMaxTokens && norm.folded_x != nullptr && norm.nparts > 0)
        << op << ": the folded norm takes at most " << kGemvFoldMaxTokens << " token and its input, not " << tokens;
    launch_for_m<1, E, NormMode::kFolded>(g, stream);
    return;
  }
  if (!norm.late) {
    MINIVLLM_CHECK(gemv_norm_fits(tokens, k)) << op << ": x [" << tokens << ", " << k << "] exceeds shared memory";
    return dispatch_tokens<E, NormMode::kPrologue>(g, tokens, stream);
  }
  MINIVLLM_CHECK(tokens <= kGemvNormLateMaxTokens)
      << op << ": the late norm takes 1.." << kGemvNormLateMaxTokens << " tokens, not " << tokens;
  if (tokens == 1) {
    launch_for_m<1, E, NormMode::kLate>(g, stream);
  } else {
    launch_for_m<2, E, NormMode::kLate>(g, stream);
  }
}

}  // namespace

bool gemv_norm_fits(int64_t tokens, int64_t k) { return tokens * k * 2 <= kGemvNormMaxSmemBytes; }

void launch_gemv(const void* x, const void* w, const void* bias, bool bias_f32, void* out, bool out_f32,
                 int64_t tokens, int64_t n, int64_t k, cudaStream_t stream) {
  if (tokens == 0 || n == 0) return;
  check_shape("gemv", tokens, k);
  GemvArgs g = plain_args(x, w, out, n, k);
  g.bias = bias;
  g.bias_f32 = bias_f32;
  g.out_f32 = out_f32;
  dispatch_tokens<Epilogue::kStore, NormMode::kNone>(g, tokens, stream);
}

void launch_gemv_act_mul(const void* x, const void* gate_up_w, void* out, int64_t tokens, int64_t inter, int64_t k,
                         Activation act, cudaStream_t stream) {
  if (tokens == 0 || inter == 0) return;
  check_shape("gemv_act_mul", tokens, k);
  GemvArgs g = plain_args(x, gate_up_w, out, inter, k);
  g.act = act;
  dispatch_tokens<Epilogue::kActMul, NormMode::kNone>(g, tokens, stream);
}

int64_t launch_gemv_add_f32(const void* x, const void* w, float* residual, int64_t tokens, int64_t n, int64_t k,
                            cudaStream_t stream, int prefetch_u, bool stage, const GemvFoldOut* fold) {
  if (tokens == 0 || n == 0) return 0;
  check_shape("gemv_add_f32", tokens, k);
  GemvArgs g = plain_args(x, w, residual, n, k);
  if (prefetch_u >= 0) g.prefetch_u = prefetch_u;
  g.stage = stage;
  if (fold == nullptr) {
    dispatch_tokens<Epilogue::kAddF32, NormMode::kNone>(g, tokens, stream);
    return 0;
  }
  MINIVLLM_CHECK(tokens <= kGemvFoldMaxTokens && fold->w != nullptr && fold->x != nullptr && fold->parts != nullptr)
      << "gemv_add_f32: the folded norm's input takes at most " << kGemvFoldMaxTokens << " token, not " << tokens;
  g.fold_w = fold->w;
  g.fold_w_f32 = fold->w_f32;
  g.fold_x = fold->x;
  g.fold_parts = fold->parts;
  return launch_for_m<1, Epilogue::kAddF32Fold, NormMode::kNone>(g, stream);
}

bool gemv_rope_fits(int64_t n, int head_dim) { return head_dim > 0 && head_dim % 2 == 0 && n % head_dim == 0; }

void launch_gemv_rope(const GemvNorm* norm, const void* x, const void* w, const void* bias, bool bias_f32,
                      const RopeArgs& rope, int64_t tokens, int64_t n, int64_t k, cudaStream_t stream) {
  if (tokens == 0 || n == 0) return;
  check_shape("gemv_rope", tokens, k);
  MINIVLLM_CHECK(gemv_rope_fits(n, rope.head_dim) && !rope.kv_fp8 && rope.q_norm == nullptr && rope.k_norm == nullptr &&
                 n == static_cast<int64_t>(rope.num_q_heads + 2 * rope.num_kv_heads) * rope.head_dim &&
                 rope.tokens == tokens && rope_rotary_dim_supported(rope.head_dim, rope.rotary_dim))
      << "gemv_rope: qkv of " << n << " rows for " << rope.num_q_heads << "/" << rope.num_kv_heads << " heads of "
      << rope.head_dim << ", " << rope.rotary_dim << " of them rotary (no q/k norms, a bf16 cache)";
  GemvArgs g = norm != nullptr ? norm_args(*norm, w, rope.qkv, n, k) : plain_args(x, w, rope.qkv, n, k);
  g.bias = bias;
  g.bias_f32 = bias_f32;
  g.rope = rope;
  if (norm != nullptr) {
    dispatch_normed<Epilogue::kRope>(g, *norm, tokens, "gemv_rope", stream);
  } else {
    dispatch_tokens<Epilogue::kRope, NormMode::kNone>(g, tokens, stream);
  }
}

void launch_gemv_norm(const GemvNorm& norm, const void* w, const void* bias, bool bias_f32, void* out, bool out_f32,
                      int64_t tokens, int64_t n, int64_t k, cudaStream_t stream) {
  if (tokens == 0 || n == 0) return;
  check_shape("gemv_norm", tokens, k);
  GemvArgs g = norm_args(norm, w, out, n, k);
  g.bias = bias;
  g.bias_f32 = bias_f32;
  g.out_f32 = out_f32;
  dispatch_normed<Epilogue::kStore>(g, norm, tokens, "gemv_norm", stream);
}

void launch_gemv_norm_act_mul(const GemvNorm& norm, const void* gate_up_w, void* out, int64_t tokens, int64_t inter,
                              int64_t k, Activation act, cudaStream_t stream) {
  if (tokens == 0 || inter == 0) return;
  check_shape("gemv_norm_act_mul", tokens, k);
  GemvArgs g = norm_args(norm, gate_up_w, out, inter, k);
  g.act = act;
  dispatch_normed<Epilogue::kActMul>(g, norm, tokens, "gemv_norm_act_mul", stream);
}

}  // namespace minivllm::cuda
