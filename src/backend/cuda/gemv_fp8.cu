// The decode gemv on FP8 weights: out[M, N] = x[M, K] W[N, K]^T for M <= 8 tokens, W e4m3 codes
// times their scale grid, fp32 accumulation. A linear at these sizes is a stream over W, and FP8
// halves it. Three kernels: the W8A8 one at the end (x as e4m3 codes; the default where K is whole
// 64-column chunks), and two on bf16 x for the shapes it declines. (One token on K >= 2,048 with one
// scale a row: gemv_fp8_one.cu.) The FMA kernel first: a CTA of 128
// threads owns R rows, its threads split K into 16-code chunks (one 16-byte load each) and keep U
// chunks of every row in flight. A chunk never straddles two scales (block_cols % 16 == 0), so its 16
// products are summed first and scaled once. x (M x K bf16) is read through L1, which holds it because
// W bypasses L1. Epilogues as gemv.cu's: store (+ bias), the gated act(gate) * up of [W_gate; W_up],
// and the add into the fp32 residual stream.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/gemv_fp8.cuh"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/pdl_launch.h"
#include "common/tuning.h"

namespace minivllm::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kCodes = 16;  // e4m3 codes a chunk (one 16-byte load)

// MINIVLLM_FP8_GEMV_MMA=0: the FMA kernel everywhere (A/B against the tensor-core one).
bool env_mma_enabled() {
  static const bool on = knob_flag("MINIVLLM_FP8_GEMV_MMA");
  return on;
}

// Sixteen e4m3 codes to fp32 (exact, through fp16).
__device__ __forceinline__ void fp8x16_to_f32(const uint4& u, float* f) {
  const __nv_fp8x2_storage_t* p = reinterpret_cast<const __nv_fp8x2_storage_t*>(&u);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(p[i], __NV_E4M3);
    const float2 t = __half22float2(*reinterpret_cast<const __half2*>(&raw));
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

struct Args : OutArgs {
  const uint4* x;  // [M, K / 8] bf16
  Fp8Weight w;
  int64_t chunks;  // K / 16
};

template <int M, int R, int U, Fp8GemvOut E>
__global__ void __launch_bounds__(kThreads) gemv_fp8_kernel(Args g) {
  constexpr bool kGated = E == Fp8GemvOut::kActMul;
  constexpr int kRowsOut = kGated ? R / 2 : R;
  __shared__ float partial[kWarps][M * R];
  const int64_t n = g.n, chunks = g.chunks;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRowsOut;
  int64_t wrow[R];  // the W row of slot r (rows past n reread the last one and are not written)
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int rr = r % kRowsOut;
    const int64_t row = row0 + rr < n ? row0 + rr : n - 1;
    wrow[r] = kGated && r >= kRowsOut ? row + n : row;
  }
  const uint4* codes = reinterpret_cast<const uint4*>(g.w.codes);
  const float* grow[R];  // the scale-grid row of each W row
#pragma unroll
  for (int r = 0; r < R; ++r) grow[r] = g.w.grid + (wrow[r] / g.w.block_rows) * g.w.grid_cols;
  const int block_cols = static_cast<int>(g.w.block_cols);
  // W and its scales do not depend on the previous kernel: start their loads before the PDL wait.
  pdl_launch_dependents();
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t c = threadIdx.x + u * kThreads;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (c < chunks) asm volatile("prefetch.global.L2 [%0];" ::"l"(codes + wrow[r] * chunks + c));
    }
  }
  pdl_wait();

  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) acc[m][r] = 0.0f;
  }
  for (int64_t c0 = threadIdx.x; c0 < chunks; c0 += kThreads * U) {
    uint4 wv[U][R];
    float sc[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * kThreads;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (c < chunks) {
          wv[u][r] = load_streaming(codes + wrow[r] * chunks + c);
          sc[u][r] = __ldg(grow[r] + static_cast<int>(c) * kCodes / block_cols);
        } else {
          wv[u][r] = make_uint4(0, 0, 0, 0);
          sc[u][r] = 0.0f;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * kThreads;
      if (c >= chunks) break;
      float wf[R][kCodes];
#pragma unroll
      for (int r = 0; r < R; ++r) fp8x16_to_f32(wv[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[kCodes];
        bf16x8_to_f32(__ldg(g.x + (m * chunks + c) * 2), xf);
        bf16x8_to_f32(__ldg(g.x + (m * chunks + c) * 2 + 1), xf + 8);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float d = 0.0f;
#pragma unroll
          for (int i = 0; i < kCodes; ++i) d = fmaf(xf[i], wf[r][i], d);
          acc[m][r] = fmaf(d, sc[u][r], acc[m][r]);
        }
      }
    }
  }

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float v = warp_sum(acc[m][r]);
      if (lane == 0) partial[warp][m * R + r] = v;
    }
  }
  __syncthreads();
  if (threadIdx.x >= M * kRowsOut) return;
  const int m = threadIdx.x / kRowsOut, r = threadIdx.x % kRowsOut;
  const int64_t row = row0 + r;
  if (row >= n) return;
  float s = 0.0f, up = 0.0f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) {
    s += partial[i][m * R + r];
    if constexpr (kGated) up += partial[i][m * R + kRowsOut + r];
  }
  finish<E>(g, m, row, s, up);
}

template <int M, int R, Fp8GemvOut E>
void launch_mr(const Args& g, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(ceil_div(g.n, E == Fp8GemvOut::kActMul ? R / 2 : R));
  if (g.chunks <= kThreads) {
    launch_with_pdl(gemv_fp8_kernel<M, R, 1, E>, dim3(grid), dim3(kThreads), 0, stream, g);
  } else {
    launch_with_pdl(gemv_fp8_kernel<M, R, (M <= 2 ? 4 : 2), E>, dim3(grid), dim3(kThreads), 0, stream, g);
  }
  CUDA_CHECK_LAUNCH();
}

template <int M, Fp8GemvOut E>
void launch_m(const Args& g, cudaStream_t stream) {
  const int64_t rows_of_w = E == Fp8GemvOut::kActMul ? 2 * g.n : g.n;
  if (rows_of_w >= 4096) {
    launch_mr<M, 4, E>(g, stream);
  } else {
    launch_mr<M, 2, E>(g, stream);
  }
}

template <Fp8GemvOut E>
void dispatch(const Args& g, int64_t tokens, cudaStream_t stream) {
  switch (tokens) {
    case 1: return launch_m<1, E>(g, stream);
    case 2: return launch_m<2, E>(g, stream);
    case 3: return launch_m<3, E>(g, stream);
    case 4: return launch_m<4, E>(g, stream);
    case 5: return launch_m<5, E>(g, stream);
    case 6: return launch_m<6, E>(g, stream);
    case 7: return launch_m<7, E>(g, stream);
    default: return launch_m<8, E>(g, stream);
  }
}

// ---- The tensor-core variant (K a multiple of 64; scale blocks of whole 64-column chunks) ----
// Decoding e4m3 for FMAs costs about three instructions a weight byte, which leaves the kernel above
// instruction-bound, short of the bf16 gemv's bandwidth (measured: PERFORMANCE.md, "FP8 weights on
// the GPU"). Here the codes go to f16 with one cvt per pair and into mma.m16n8k16 (f16 in, fp32
// accumulation), with x as the A operand (rows = tokens, zero past M) and 8 weight rows as B, so x
// is converted once per chunk for all of a CTA's row groups. A mma's 16 k slots are a permutation
// of 16 of the chunk's 64 columns, the same for x and W: lane (g, t) owns columns 16t + 4j .. + 3 of
// chunk mma j, so it loads 16 contiguous codes of its weight row and 16 contiguous values of token
// g's x, times kX16Pre (gemv_fp8.cuh: bf16 x past 65,504 would be inf in f16 unscaled). Products are
// exact but for x below 2^-10 (f16's subnormals after the scaling), sums fp32.
// Decoding the codes with integer operations instead of cvt was slower (PERFORMANCE.md).
constexpr int kMmaWarps = 8;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kChunk = 64;  // columns a warp takes per step: 4 mmas of k16

struct MmaArgs : OutArgs {
  const __nv_bfloat16* x;  // [M, K]
  Fp8Weight w;
  int64_t k;
  int tokens;
  bool consecutive;  // a warp's chunks of a step are consecutive (MINIVLLM_FP8_GEMV_CONSECUTIVE)
};

// mma q's A operand from this lane's 16 bf16 values of x (eight 32-bit words): k pairs (4q, 4q + 1)
// and (4q + 2, 4q + 3), rows past the tokens zero.
__device__ __forceinline__ void x_fragment(const uint32_t (&xw)[8], int q, uint32_t (&a)[4]) {
  const uint32_t x01 = xw[2 * q], x23 = xw[2 * q + 1];
  a[0] = bf16x2_to_f16x2_pre(x01);
  a[1] = 0u;
  a[2] = bf16x2_to_f16x2_pre(x23);
  a[3] = 0u;
}

// One CTA: NG groups of 8 output rows (kActMul: NG groups of gate rows and their NG groups of up
// rows, G = 2 NG row groups), K split over the warps chunk by chunk, partial sums met in shared
// memory. A warp keeps U chunks of each of its G row groups in flight; the first U are loaded
// before the PDL wait, since W depends on no earlier kernel.
template <Fp8GemvOut E, int NG, int U>
__global__ void __launch_bounds__(kMmaThreads) gemv_fp8_mma_kernel(MmaArgs g) {
  constexpr bool kGated = E == Fp8GemvOut::kActMul;
  constexpr int G = kGated ? 2 * NG : NG;
  __shared__ float partial[kMmaWarps][G][8][8];  // [warp][group][token][row]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gi = lane >> 2, t = lane & 3;
  const int64_t n = g.n, k = g.k, chunks = k / kChunk;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * 8 * NG;
  const uint8_t* wrow[G];  // the weight row this lane loads in each group (past n: the last one)
  int64_t srow[G][2];      // the weight rows of this lane's two accumulators (B columns 2t, 2t + 1)
#pragma unroll
  for (int j = 0; j < G; ++j) {
    const bool up = kGated && j >= NG;
    const int64_t base = (up ? n : 0) + row0 + 8 * (up ? j - NG : j);
    const int64_t last = up ? 2 * n - 1 : n - 1;
    wrow[j] = g.w.codes + min(base + gi, last) * k + 16 * t;
    srow[j][0] = min(base + 2 * t, last);
    srow[j][1] = min(base + 2 * t + 1, last);
  }
  const bool row_scale = g.w.block_cols >= k;  // one scale per row: applied once, at the end
  // Block scales: each accumulator's scale-grid row as an offset, and the chunks a block spans,
  // found once here; the loop takes one 32-bit division a chunk (64-bit divisions in it, three per
  // row group and chunk, left the kernel instruction-bound).
  int soff[G][2];
#pragma unroll
  for (int j = 0; j < G; ++j) {
    soff[j][0] = static_cast<int>((srow[j][0] / g.w.block_rows) * g.w.grid_cols);
    soff[j][1] = static_cast<int>((srow[j][1] / g.w.block_rows) * g.w.grid_cols);
  }
  const int chunks_per_block = row_scale ? 1 : static_cast<int>(g.w.block_cols / kChunk);

  // A warp's U chunks of a step: consecutive (each row's 64 * U bytes read as whole 128-byte lines by
  // one warp), or kMmaWarps apart (each line's halves read by two warps).
  const int64_t ustep = g.consecutive ? 1 : kMmaWarps;
  const int64_t first = g.consecutive ? static_cast<int64_t>(warp) * U : warp;
  uint4 wv[U][G];
  auto load_w = [&](int64_t c0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * ustep;
#pragma unroll
      for (int j = 0; j < G; ++j) {
        wv[u][j] = c < chunks ? load_streaming(reinterpret_cast<const uint4*>(wrow[j] + c * kChunk))
                              : make_uint4(0, 0, 0, 0);
      }
    }
  };
  load_w(first);
  pdl_launch_dependents();
  pdl_wait();

  float acc[G][2] = {};
  const __nv_bfloat16* xrow = g.x + static_cast<int64_t>(gi < g.tokens ? gi : 0) * k + 16 * t;
  const bool has_token = gi < g.tokens;
  for (int64_t c0 = first; c0 < chunks; c0 += kMmaWarps * U) {
    if (c0 != first) load_w(c0);
    uint4 xv[U][2];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * ustep;
      const bool in = c < chunks && has_token;
      const uint4* xp = reinterpret_cast<const uint4*>(xrow + c * kChunk);
      xv[u][0] = in ? __ldg(xp) : make_uint4(0, 0, 0, 0);
      xv[u][1] = in ? __ldg(xp + 1) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * ustep;
      if (c >= chunks) break;
      const uint32_t xw[8] = {xv[u][0].x, xv[u][0].y, xv[u][0].z, xv[u][0].w,
                              xv[u][1].x, xv[u][1].y, xv[u][1].z, xv[u][1].w};
      float part[G][4] = {};
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // mma q: this lane's columns 16t + 4q .. + 3
        uint32_t a[4];
        x_fragment(xw, q, a);
#pragma unroll
        for (int j = 0; j < G; ++j) {
          const uint32_t word = q == 0 ? wv[u][j].x : q == 1 ? wv[u][j].y : q == 2 ? wv[u][j].z : wv[u][j].w;
          mma_f16(part[j], a, e4m3x2_to_f16x2(word), e4m3x2_to_f16x2(word >> 16));
        }
      }
      const int kb = row_scale ? 0 : static_cast<int>(c) / chunks_per_block;
#pragma unroll
      for (int j = 0; j < G; ++j) {
        if (row_scale) {
          acc[j][0] += part[j][0];
          acc[j][1] += part[j][1];
        } else {
          acc[j][0] = fmaf(part[j][0], __ldg(g.w.grid + soff[j][0] + kb), acc[j][0]);
          acc[j][1] = fmaf(part[j][1], __ldg(g.w.grid + soff[j][1] + kb), acc[j][1]);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < G; ++j) {
    if (row_scale) {
      acc[j][0] *= __ldg(g.w.grid + soff[j][0]);
      acc[j][1] *= __ldg(g.w.grid + soff[j][1]);
    }
    partial[warp][j][gi][2 * t] = acc[j][0] * kX16Post;  // c[0], c[1]: token gi, rows 2t and 2t + 1
    partial[warp][j][gi][2 * t + 1] = acc[j][1] * kX16Post;
  }
  __syncthreads();
  // Thread (m, r) of the 64 * NG finishes token m's output row row0 + r.
  if (threadIdx.x >= 64 * NG) return;
  const int m = threadIdx.x / (8 * NG), r = threadIdx.x % (8 * NG);
  const int64_t row = row0 + r;
  if (m >= g.tokens || row >= n) return;
  float s = 0.0f, up = 0.0f;
#pragma unroll
  for (int w = 0; w < kMmaWarps; ++w) {
    s += partial[w][r / 8][m][r % 8];
    if constexpr (kGated) up += partial[w][NG + r / 8][m][r % 8];
  }
  finish<E>(g, m, row, s, up);
}

// ---- W8A8: x as per-token e4m3 codes too (mma.m16n8k32.e4m3) ----
// x arrives as e4m3 codes with one scale a token (launch_quantize_e4m3_rows or the normed quantizer:
// the bytes the FP8 GEMM past 8 tokens multiplies). On sm_90 ptxas lowers this mma.sync to F2FP
// unpacks of both operands and two f16 HMMAs (Hopper's FP8 tensor cores are wgmma's alone), so the
// weight's codes are still converted, about as many instructions a byte as the kernel above; what it
// gains (PERFORMANCE.md, "Stop 64") is its CTA: 16 rows, the gated pair in one accumulator, row
// scales applied once, and no bf16 unpacking of x. W is the A operand (16 rows a group), x the B
// operand (8 tokens, zero past M). Lane (g, t) loads 16 codes of rows g and g + 8 at columns
// 64c + 16t .. + 15, and 16 of token g's x at the same columns: the first eight feed mma 0 (k slots
// 4t .. 4t + 3 and 16 + 4t .. + 3), the second eight mma 1, the same permutation of the chunk's 64
// columns for A and B. Products are exact, sums fp32. (CodesArgs and mma_chunk: gemv_fp8.cuh; one
// token on rows of at least 32 chunks: gemv_fp8_one.cu.)

// A lane's 16 bytes of its two rows lo and hi in each of chunks c0 .. c0 + U - 1 (zeros past the end).
template <int U>
__device__ __forceinline__ void load_row_pair(uint4 (&wv)[U][2], const uint8_t* lo, const uint8_t* hi, int64_t c0,
                                              int64_t chunks) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t c = c0 + u;
    const bool in = c < chunks;
    wv[u][0] = in ? load_streaming(reinterpret_cast<const uint4*>(lo + c * kChunk)) : make_uint4(0, 0, 0, 0);
    wv[u][1] = in ? load_streaming(reinterpret_cast<const uint4*>(hi + c * kChunk)) : make_uint4(0, 0, 0, 0);
  }
}

// One CTA: 16 weight rows, the mma's 16 (kStore / kAddF32: output rows 16b .. 16b + 15; kActMul: gate
// rows 8b .. 8b + 7 as mma rows 0-7 and their up rows as 8-15, so lane (g, t) holds a gate sum and
// its up sum side by side), K split over the warps U consecutive 64-column chunks at a time, partial
// sums met in shared memory. kRowScale: one scale a row, applied once at the end; else a scale per
// block of whole chunks, applied per chunk. The first U chunks of W are loaded before the PDL wait
// (W depends on no kernel; x does).
// A step loads, then computes: requesting the next step's chunks before this step's mmas (twice the
// registers for W, fewer CTAs an SM) was slower (PERFORMANCE.md, "Stop 64"); so was each CTA
// quantizing x itself instead of a quantizer kernel before it (PERFORMANCE.md, "Stop 65").
template <Fp8GemvOut E, bool kRowScale, int U>
__global__ void __launch_bounds__(kMmaThreads) gemv_fp8_codes_kernel(CodesArgs g) {
  constexpr bool kGated = E == Fp8GemvOut::kActMul;
  constexpr int kOut = kGated ? 8 : 16;  // output rows a CTA
  __shared__ float partial[kMmaWarps][16][8];  // [warp][mma row][token]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gi = lane >> 2, t = lane & 3;
  const int64_t n = g.n, k = g.k, chunks = k / kChunk;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kOut;
  // This lane's two weight rows (past the end: the last row of their half).
  int64_t rlo, rhi;
  if constexpr (kGated) {
    rlo = min(row0 + gi, n - 1);
    rhi = n + rlo;
  } else {
    rlo = min(row0 + gi, n - 1);
    rhi = min(row0 + gi + 8, n - 1);
  }
  const uint8_t* wlo = g.w.codes + rlo * k + 16 * t;
  const uint8_t* whi = g.w.codes + rhi * k + 16 * t;
  const float* slo = g.w.grid + (rlo / g.w.block_rows) * g.w.grid_cols;  // the rows' scale-grid rows
  const float* shi = g.w.grid + (rhi / g.w.block_rows) * g.w.grid_cols;
  const int chunks_per_block = kRowScale ? 1 : static_cast<int>(g.w.block_cols / kChunk);
  const int64_t first = static_cast<int64_t>(warp) * U;

  const int64_t step = kMmaWarps * U;
  uint4 wv[U][2];
  const auto load_w = [&](int64_t c0) { load_row_pair<U>(wv, wlo, whi, c0, chunks); };
  load_w(first);
  pdl_launch_dependents();
  // The tail's scales copied into shared memory now (cp.async: no register held over the products),
  // so that no load stands on the tail (PERFORMANCE.md, "Stop 73"), with one scale a row: thread r <
  // kOut the row scales of output row row0 + r ([0]; kActMul: [0] its gate row, [1] its up row),
  // before the wait; thread m < tokens x's scale of token m, after it.
  __shared__ float tail_rs[kOut][2];
  __shared__ float tail_xs[8];
  if (kRowScale && threadIdx.x < kOut) {
    const int64_t r = min(row0 + threadIdx.x, n - 1);
    cp_async4(&tail_rs[threadIdx.x][0], g.w.grid + (r / g.w.block_rows) * g.w.grid_cols);
    if (kGated) cp_async4(&tail_rs[threadIdx.x][1], g.w.grid + ((n + r) / g.w.block_rows) * g.w.grid_cols);
    cp_async_commit();
  }
  pdl_wait();
  if (kRowScale && threadIdx.x < g.tokens) {  // (scale blocks load it on the tail: staging cost them registers)
    cp_async4(&tail_xs[threadIdx.x], g.x_scale + threadIdx.x);
    cp_async_commit();
  }

  const bool has_token = gi < g.tokens;
  const uint8_t* xrow = g.x + static_cast<int64_t>(has_token ? gi : 0) * k + 16 * t;
  float acc[4] = {};
  for (int64_t c0 = first; c0 < chunks; c0 += step) {
    if (c0 != first) load_w(c0);
    uint4 xv[U];  // x (a few KB, from L1), all of the step's first: one round trip, not U
    float sa[kRowScale ? 1 : U], sb[kRowScale ? 1 : U];  // scale blocks: the chunks' scales, with x
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u;
      xv[u] = c < chunks && has_token ? __ldg(reinterpret_cast<const uint4*>(xrow + c * kChunk)) : make_uint4(0, 0, 0, 0);
      if constexpr (!kRowScale) {
        const int kb = static_cast<int>(min(c, chunks - 1)) / chunks_per_block;
        sa[u] = __ldg(slo + kb);
        sb[u] = __ldg(shi + kb);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u;
      if (c >= chunks) break;
      if constexpr (kRowScale) {
        mma_chunk(acc, wv[u][0], wv[u][1], xv[u]);
      } else {
        float part[4] = {};
        mma_chunk(part, wv[u][0], wv[u][1], xv[u]);
        const float a = sa[u], b = sb[u];
        acc[0] = fmaf(part[0], a, acc[0]);
        acc[1] = fmaf(part[1], a, acc[1]);
        acc[2] = fmaf(part[2], b, acc[2]);
        acc[3] = fmaf(part[3], b, acc[3]);
      }
    }
  }
  // c[0], c[1]: mma row g, tokens 2t and 2t + 1; c[2], c[3]: row g + 8. (kRowScale: the rows' scales
  // at the tail.)
  partial[warp][gi][2 * t] = acc[0];
  partial[warp][gi][2 * t + 1] = acc[1];
  partial[warp][gi + 8][2 * t] = acc[2];
  partial[warp][gi + 8][2 * t + 1] = acc[3];
  cp_async_wait<0>();  // this thread's copies, before the barrier shows them to the others
  __syncthreads();
  // Thread (m, r) finishes token m's output row row0 + r (kActMul: gate mma row r, up mma row r + 8).
  if (threadIdx.x >= 8 * kOut) return;
  const int m = threadIdx.x / kOut, r = threadIdx.x % kOut;
  const int64_t row = row0 + r;
  if (m >= g.tokens || row >= n) return;
  float s = 0.0f, up = 0.0f;
#pragma unroll
  for (int w = 0; w < kMmaWarps; ++w) {
    s += partial[w][r][m];
    if constexpr (kGated) up += partial[w][r + 8][m];
  }
  const float xs = kRowScale ? tail_xs[m] : __ldg(g.x_scale + m);
  if constexpr (kRowScale) {
    s *= tail_rs[r][0];
    if constexpr (kGated) up *= tail_rs[r][1];
  }
  finish<E>(g, m, row, s * xs, up * xs);
}

template <Fp8GemvOut E, bool kRowScale, int U>
int codes_ctas_per_sm() {
  static const int ctas = [] {
    int c = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&c, gemv_fp8_codes_kernel<E, kRowScale, U>,
                                                             kMmaThreads, 0));
    return c;
  }();
  return ctas;
}

// MINIVLLM_FP8_W8A8_BLOCK_GATED_64 (on; 0: the grid's choice): the gated kernel on 128 x 128 blocks
// at 64 bytes a lane.
bool env_block_gated_64() {
  static const bool on = knob_flag("MINIVLLM_FP8_W8A8_BLOCK_GATED_64");
  return on;
}

// U chunks a step (32 bytes a lane a chunk). By the grid: 128 bytes a lane, or 64 where only that
// fits the CTAs in one wave (a last wave of few CTAs leaves SMs idle: PERFORMANCE.md, "Stop 64");
// and 64 for the gated kernel on block scales (PERFORMANCE.md, "Stop 71").
template <Fp8GemvOut E, bool kRowScale>
void launch_codes(const CodesArgs& g, int num_sms, int lane_bytes, cudaStream_t stream) {
  const int64_t ctas = ceil_div(g.n, E == Fp8GemvOut::kActMul ? 8 : 16);
  int u = lane_bytes / 32;
  if (u == 0 && !kRowScale && E == Fp8GemvOut::kActMul && env_block_gated_64()) u = 2;
  if (u == 0) {
    const auto fits = [&](int ctas_per_sm) { return ctas <= static_cast<int64_t>(ctas_per_sm) * num_sms; };
    u = fits(codes_ctas_per_sm<E, kRowScale, 4>())   ? 4
        : fits(codes_ctas_per_sm<E, kRowScale, 2>()) ? 2
                                                     : 4;
  }
  const dim3 grid(static_cast<unsigned>(ctas)), block(kMmaThreads);
  if (u >= 8) {
    launch_with_pdl(gemv_fp8_codes_kernel<E, kRowScale, 8>, grid, block, 0, stream, g);
  } else if (u >= 4) {
    launch_with_pdl(gemv_fp8_codes_kernel<E, kRowScale, 4>, grid, block, 0, stream, g);
  } else if (u >= 2) {
    launch_with_pdl(gemv_fp8_codes_kernel<E, kRowScale, 2>, grid, block, 0, stream, g);
  } else {
    launch_with_pdl(gemv_fp8_codes_kernel<E, kRowScale, 1>, grid, block, 0, stream, g);
  }
  CUDA_CHECK_LAUNCH();
}

template <Fp8GemvOut E>
void launch_codes(const CodesArgs& g, int num_sms, int lane_bytes, cudaStream_t stream) {
  if (g.w.block_cols >= g.k) return launch_codes<E, true>(g, num_sms, lane_bytes, stream);
  launch_codes<E, false>(g, num_sms, lane_bytes, stream);
}

// Row groups a CTA of the register kernel takes (MINIVLLM_FP8_GEMV_GROUPS).
int env_row_groups() {
  static const int groups = static_cast<int>(knob_number("MINIVLLM_FP8_GEMV_GROUPS"));
  return groups;
}

// MINIVLLM_FP8_GEMV_CONSECUTIVE: a warp's chunks of a step side by side (whole cache lines).
bool env_consecutive() {
  static const bool on = knob_flag("MINIVLLM_FP8_GEMV_CONSECUTIVE");
  return on;
}

template <Fp8GemvOut E, int NG>
void launch_mma_ng(const MmaArgs& g, cudaStream_t stream) {
  constexpr int kG = (E == Fp8GemvOut::kActMul ? 2 : 1) * NG;
  constexpr int kU = kG >= 4 ? 2 : 4;  // 64-128 bytes of W in flight per lane
  launch_with_pdl(gemv_fp8_mma_kernel<E, NG, kU>, dim3(static_cast<unsigned>(ceil_div(g.n, 8 * NG))),
                  dim3(kMmaThreads), 0, stream, g);
  CUDA_CHECK_LAUNCH();
}

template <Fp8GemvOut E>
void launch_mma(const MmaArgs& g, cudaStream_t stream) {
  switch (env_row_groups()) {
    case 4: return launch_mma_ng<E, 4>(g, stream);
    case 2: return launch_mma_ng<E, 2>(g, stream);
    default: return launch_mma_ng<E, 1>(g, stream);
  }
}

bool mma_takes(const Fp8Weight& w, int64_t k) {
  return k % kChunk == 0 && (w.block_cols >= k || w.block_cols % kChunk == 0) && env_mma_enabled();
}

}  // namespace

void launch_gemv_fp8(const void* x, const Fp8Weight& w, const void* bias, bool bias_f32, void* out, bool out_f32,
                     Fp8GemvOut e, Activation act, int64_t tokens, int64_t n, int64_t k, cudaStream_t stream) {
  if (tokens == 0 || n == 0) return;
  MINIVLLM_CHECK(tokens >= 1 && tokens <= kGemvMaxTokens && k > 0 && k % kCodes == 0 && w.block_cols % kCodes == 0 &&
                 w.block_rows > 0)
      << "gemv_fp8: x [" << tokens << ", " << k << "] needs 1.." << kGemvMaxTokens
      << " rows, K a multiple of 16 and scale blocks of a multiple of 16 columns (got " << w.block_rows << "x"
      << w.block_cols << ")";
  if (mma_takes(w, k)) {
    MmaArgs m{};
    static_cast<OutArgs&>(m) = OutArgs{bias, bias_f32, out, out_f32, n, act};
    m.x = static_cast<const __nv_bfloat16*>(x);
    m.w = w;
    m.k = k;
    m.tokens = static_cast<int>(tokens);
    m.consecutive = env_consecutive();
    switch (e) {
      case Fp8GemvOut::kStore: return launch_mma<Fp8GemvOut::kStore>(m, stream);
      case Fp8GemvOut::kActMul: return launch_mma<Fp8GemvOut::kActMul>(m, stream);
      case Fp8GemvOut::kAddF32: return launch_mma<Fp8GemvOut::kAddF32>(m, stream);
    }
  }
  Args g{};
  static_cast<OutArgs&>(g) = OutArgs{bias, bias_f32, out, out_f32, n, act};
  g.x = static_cast<const uint4*>(x);
  g.w = w;
  g.chunks = k / kCodes;
  switch (e) {
    case Fp8GemvOut::kStore: return dispatch<Fp8GemvOut::kStore>(g, tokens, stream);
    case Fp8GemvOut::kActMul: return dispatch<Fp8GemvOut::kActMul>(g, tokens, stream);
    case Fp8GemvOut::kAddF32: return dispatch<Fp8GemvOut::kAddF32>(g, tokens, stream);
  }
}

bool gemv_fp8_codes_takes(const Fp8Weight& w, int64_t k) {
  return k % kChunk == 0 && (w.block_cols >= k || w.block_cols % kChunk == 0) && w.block_rows > 0;
}

void launch_gemv_fp8_codes(const uint8_t* x_codes, const float* x_scales, const Fp8Weight& w, const void* bias,
                           bool bias_f32, void* out, bool out_f32, Fp8GemvOut e, Activation act, int64_t tokens,
                           int64_t n, int64_t k, int num_sms, int lane_bytes, int one_pairs, cudaStream_t stream,
                           bool one_blocks) {
  if (tokens == 0 || n == 0) return;
  if (launch_gemv_fp8_one(x_codes, x_scales, w, bias, bias_f32, out, out_f32, e, act, tokens, n, k, one_pairs, stream,
                          one_blocks)) {
    return;
  }
  MINIVLLM_CHECK(tokens >= 1 && tokens <= kGemvMaxTokens && gemv_fp8_codes_takes(w, k))
      << "gemv_fp8_codes: x [" << tokens << ", " << k << "] needs 1.." << kGemvMaxTokens
      << " rows, K a multiple of 64 and scale blocks of whole 64-column chunks (got " << w.block_rows << "x"
      << w.block_cols << ")";
  const CodesArgs g = codes_args(x_codes, x_scales, w, bias, bias_f32, out, out_f32, act, n, k, tokens);
  switch (e) {
    case Fp8GemvOut::kStore: return launch_codes<Fp8GemvOut::kStore>(g, num_sms, lane_bytes, stream);
    case Fp8GemvOut::kActMul: return launch_codes<Fp8GemvOut::kActMul>(g, num_sms, lane_bytes, stream);
    case Fp8GemvOut::kAddF32: return launch_codes<Fp8GemvOut::kAddF32>(g, num_sms, lane_bytes, stream);
  }
}

}  // namespace minivllm::cuda
