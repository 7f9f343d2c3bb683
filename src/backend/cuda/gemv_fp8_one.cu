// The W8A8 gemv at one token: K's slices as the mma's rows.
//
// At one token the tensor-core W8A8 gemv (gemv_fp8.cu) needs 16 weight rows a CTA, the mma's M,
// while 7 of its 8 x columns are zeros. Its CTAs are big (64 KB of W at K = 4,096) and few an SM,
// and the shorter linears ran at 2.9-3.0 TB/s where the bf16 gemv's small CTAs (two rows, one round
// trip) stream 3.4-4.3 (PERFORMANCE.md, "Stop 70"). Here the 8 x columns hold 8 slices of the one
// token's x instead, and the mma's rows are 2 weight rows x the same 8 slices: lane (g, t) loads 16
// codes of rows lo and hi and 16 of x, all at slice g's chunk, so C[g][g] (row lo) and C[g + 8][g]
// (row hi) are the two rows' sums over slice g; the other 7 columns of C mix slices and go unused.
// A CTA of 4 warps takes NP such row pairs (kActMul: gate row j and its up row n + j) and 32 slices
// (warp w's group g: slice 8w + g), slice s holding chunks s, s + 32, s + 64, ... of 64 columns, so
// a warp's load of a chunk covers 512 consecutive bytes of a row. Same mma permutation of a chunk's
// columns as gemv_fp8.cu (mma_chunk), so the products are the same exact e4m3 products. Weights with
// one scale a row only: with 128 x 128 blocks (a scale a chunk) it ran slower than the 16-row kernel
// (PERFORMANCE.md, "Stop 70").
#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/gemv_fp8.cuh"
#include "backend/cuda/pdl_launch.h"

namespace minivllm::cuda {
namespace {

constexpr int kOneWarps = 4;
constexpr int kOneThreads = kOneWarps * 32;
constexpr int kSlices = kOneWarps * 8;  // one per lane group; also one per lane of the final warp
constexpr int kOneChunk = 64;           // columns of one mma_chunk

// One CTA: NP row pairs, U chunks of each slice a step (the first U before the PDL wait: W depends
// on no kernel); the rows' scales applied at the end.
template <Fp8GemvOut E, int NP, int U>
__global__ void __launch_bounds__(kOneThreads) gemv_fp8_one_kernel(CodesArgs g) {
  constexpr bool kGated = E == Fp8GemvOut::kActMul;
  constexpr int kOut = kGated ? NP : 2 * NP;  // output rows a CTA
  __shared__ float partial[kSlices][2 * NP];  // [slice][pair p's lo, hi]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gi = lane >> 2, t = lane & 3;
  const int slice = warp * 8 + gi;
  const int64_t n = g.n, k = g.k, chunks = k / kOneChunk;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kOut;
  const uint8_t* wlo[NP];
  const uint8_t* whi[NP];
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    // Rows past the end reread the last one and are not written.
    const int64_t rlo = kGated ? min(row0 + p, n - 1) : min(row0 + 2 * p, n - 1);
    const int64_t rhi = kGated ? n + rlo : min(row0 + 2 * p + 1, n - 1);
    wlo[p] = g.w.codes + rlo * k + 16 * t;
    whi[p] = g.w.codes + rhi * k + 16 * t;
  }
  const int64_t steps = (chunks + kSlices - 1) / kSlices;  // chunks a slice holds

  uint4 wv[U][NP][2];
  const auto load_w = [&](int64_t u0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = (u0 + u) * kSlices + slice;
#pragma unroll
      for (int p = 0; p < NP; ++p) {
        wv[u][p][0] = c < chunks ? load_streaming(reinterpret_cast<const uint4*>(wlo[p] + c * kOneChunk))
                                 : make_uint4(0, 0, 0, 0);
        wv[u][p][1] = c < chunks ? load_streaming(reinterpret_cast<const uint4*>(whi[p] + c * kOneChunk))
                                 : make_uint4(0, 0, 0, 0);
      }
    }
  };
  load_w(0);
  pdl_launch_dependents();
  pdl_wait();

  const uint8_t* xrow = g.x + 16 * t;
  float acc[NP][4] = {};
  for (int64_t u0 = 0; u0 < steps; u0 += U) {
    if (u0 != 0) load_w(u0);
    uint4 xv[U];  // x (a few KB, from L1), all of the step's first
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = (u0 + u) * kSlices + slice;
      xv[u] = c < chunks ? __ldg(reinterpret_cast<const uint4*>(xrow + c * kOneChunk)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      // mma.sync wants the whole warp: stop only where every lane's chunk is past the end (the
      // lanes past it multiply zeros).
      if ((u0 + u) * kSlices + warp * 8 >= chunks) break;
#pragma unroll
      for (int p = 0; p < NP; ++p) mma_chunk(acc[p], wv[u][p][0], wv[u][p][1], xv[u]);
    }
  }
  // c[0], c[1]: mma row g (lo), columns 2t, 2t + 1; c[2], c[3]: row g + 8 (hi). Column g is the lane
  // with t = g / 2, its element g % 2.
  if (t == (gi >> 1)) {
    const bool odd = gi & 1;  // (a select, not acc[p][gi & 1]: a runtime index would put acc in local memory)
#pragma unroll
    for (int p = 0; p < NP; ++p) {
      partial[slice][2 * p] = odd ? acc[p][1] : acc[p][0];
      partial[slice][2 * p + 1] = odd ? acc[p][3] : acc[p][2];
    }
  }
  __syncthreads();
  if (warp != 0) return;
  // Lane v ends with value v's sum over the 32 slices (v < 2 NP: pair v / 2's lo or hi row).
  float mine = 0.0f;
#pragma unroll
  for (int v = 0; v < 2 * NP; ++v) {
    float s = partial[lane][v];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == v) mine = s;
  }
  const float xs = __ldg(g.x_scale);
  if constexpr (kGated) {
    const float s = __shfl_sync(0xffffffffu, mine, (2 * lane) & 31);
    const float up = __shfl_sync(0xffffffffu, mine, (2 * lane + 1) & 31);
    const int64_t row = row0 + lane;
    if (lane >= NP || row >= n) return;
    const float a = __ldg(g.w.grid + row / g.w.block_rows), b = __ldg(g.w.grid + (n + row) / g.w.block_rows);
    finish<E>(g, 0, row, s * a * xs, up * b * xs);
  } else {
    const int64_t row = row0 + lane;
    if (lane >= kOut || row >= n) return;
    const float a = __ldg(g.w.grid + row / g.w.block_rows);
    finish<E>(g, 0, row, mine * a * xs, 0.0f);
  }
}

template <Fp8GemvOut E, int NP>
void launch_np(const CodesArgs& g, cudaStream_t stream) {
  const int64_t steps = (g.k / kOneChunk + kSlices - 1) / kSlices;
  const dim3 grid(static_cast<unsigned>(ceil_div(g.n, E == Fp8GemvOut::kActMul ? NP : 2 * NP))), block(kOneThreads);
  if (steps <= 2) {
    launch_with_pdl(gemv_fp8_one_kernel<E, NP, 2>, grid, block, 0, stream, g);
  } else {
    launch_with_pdl(gemv_fp8_one_kernel<E, NP, 4>, grid, block, 0, stream, g);
  }
  CUDA_CHECK_LAUNCH();
}

template <Fp8GemvOut E>
void launch_one(const CodesArgs& g, int pairs, cudaStream_t stream) {
  switch (pairs) {
    case 1: return launch_np<E, 1>(g, stream);
    case 4: return launch_np<E, 4>(g, stream);
    default: return launch_np<E, 2>(g, stream);
  }
}

}  // namespace

bool launch_gemv_fp8_one(const uint8_t* x_codes, const float* x_scales, const Fp8Weight& w, const void* bias,
                         bool bias_f32, void* out, bool out_f32, Fp8GemvOut e, Activation act, int64_t tokens,
                         int64_t n, int64_t k, int pairs, cudaStream_t stream) {
  if (tokens != 1 || pairs <= 0 || k < kSlices * kOneChunk || k % kOneChunk != 0 || w.block_cols < k) return false;
  CodesArgs g{};
  static_cast<OutArgs&>(g) = OutArgs{bias, bias_f32, out, out_f32, n, act};
  g.x = x_codes;
  g.x_scale = x_scales;
  g.w = w;
  g.k = k;
  g.tokens = 1;
  switch (e) {
    case Fp8GemvOut::kStore: launch_one<Fp8GemvOut::kStore>(g, pairs, stream); break;
    case Fp8GemvOut::kActMul: launch_one<Fp8GemvOut::kActMul>(g, pairs, stream); break;
    case Fp8GemvOut::kAddF32: launch_one<Fp8GemvOut::kAddF32>(g, pairs, stream); break;
  }
  return true;
}

}  // namespace minivllm::cuda
