// The W8A8 gemv at one token: K's slices as the mma's rows.
//
// At one token the tensor-core W8A8 gemv (gemv_fp8.cu) needs 16 weight rows a CTA, the mma's M,
// while 7 of its 8 x columns are zeros. Its CTAs are big (64 KB of W at K = 4,096) and few an SM,
// and it streamed well below the bf16 gemv, whose small CTAs (two rows, one round trip) run near
// copy speed (PERFORMANCE.md, "Stop 70"). Here the 8 x columns hold 8 slices of the one
// token's x instead, and the mma's rows are 2 weight rows x the same 8 slices: lane (g, t) loads 16
// codes of rows lo and hi and 16 of x, all at slice g's chunk, so C[g][g] (row lo) and C[g + 8][g]
// (row hi) are the two rows' sums over slice g; the other 7 columns of C mix slices and go unused.
// A CTA of 4 warps takes NP such row pairs (kActMul: gate row j and its up row n + j) and 32 slices
// (warp w's group g: slice 8w + g), slice s holding chunks s, s + 32, s + 64, ... of 64 columns, so
// a warp's load of a chunk covers 512 consecutive bytes of a row. Same mma permutation of a chunk's
// columns as gemv_fp8.cu (mma_chunk), so the products are the same exact e4m3 products. Weights with
// one scale a row, or (MINIVLLM_FP8_GEMV_ONE_BLOCKS) 128 x 128 blocks, a scale a chunk, staged in
// shared memory (loaded from global memory in the loop, they made it slower than the 16-row kernel:
// PERFORMANCE.md, "Stop 70", "Stop 74").
//
// kX16 (W8A16): x in bf16 as it is, no per-token quantizer kernel before it: the o and down
// projections' x (attention's output, act(gate) * up) then needs no kernel of its own, which stood on
// the step's critical path (PERFORMANCE.md, "Stop 70"). The codes go to f16 (exact) and x to f16
// times 2^-4, into mma.m16n8k16.f16 with fp32 sums, scaled back by 2^4 at the end: f16's range then
// holds |x| up to 2^20, and x keeps f16's 11 bits down to 2^-10 (e4m3 codes of x keep 4).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/gemv_fp8.cuh"
#include "backend/cuda/mma_sync.cuh"
#include "backend/cuda/pdl_launch.h"

namespace minivllm::cuda {
namespace {

constexpr int kOneWarps = 4;
constexpr int kOneThreads = kOneWarps * 32;
constexpr int kSlices = kOneWarps * 8;  // one per lane group; also one per lane of the final warp
constexpr int kOneChunk = 64;           // columns of one mma_chunk
constexpr int kOneMaxGridCols = 256;    // kBlock: scale blocks a row the CTA stages (K up to 32,768 at 128)

// Chunks a slice holds at K (the loop's steps of one chunk).
__host__ __device__ constexpr int64_t slice_chunks(int64_t k) { return (k / kOneChunk + kSlices - 1) / kSlices; }

// kX16: a lane's 16 bf16 values of x (two 16-byte loads) as 8 f16x2 words, values 2i and 2i + 1 in
// word i, times kX16Pre (gemv_fp8.cuh).
__device__ __forceinline__ void x16_words(const uint4& a, const uint4& b, uint32_t (&w)[8]) {
  const uint32_t in[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
  for (int i = 0; i < 8; ++i) w[i] = bf16x2_to_f16x2_pre(in[i]);
}

// kX16: rows lo and hi's 16 codes against this lane's 16 values of x, as four m16n8k16 mmas: mma q
// takes codes (and values) 4q .. 4q + 3, k slots 2t, 2t + 1 and 2t + 8, 2t + 9 for A and B alike.
__device__ __forceinline__ void mma_chunk_x16(float (&c)[4], const uint4& lo, const uint4& hi, const uint32_t (&xw)[8]) {
  const uint32_t l[4] = {lo.x, lo.y, lo.z, lo.w}, h[4] = {hi.x, hi.y, hi.z, hi.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const uint32_t a[4] = {e4m3x2_to_f16x2(l[q]), e4m3x2_to_f16x2(h[q]), e4m3x2_to_f16x2(l[q] >> 16),
                           e4m3x2_to_f16x2(h[q] >> 16)};
    mma_f16(c, a, xw[2 * q], xw[2 * q + 1]);
  }
}

// One CTA: NP row pairs, U chunks of each slice a step (the first U before the PDL wait: W depends
// on no kernel); the rows' scales applied at the end.
// kBlock (checkpoints with 128 x 128 scale blocks): a CTA's 2 NP rows lie in one block row (kActMul:
// its NP gate rows in one, their up rows in one), and each chunk's product is scaled by its block's
// scale as it is added: a lane's diagonal sums are its own slice's chunk, so the lane scales by that
// chunk's block (the other elements of C go unused). W8A16 (the o and down projections) stores and
// adds; W8A8 (gate/up, and qkv behind the normed quantizer) stores and gates.
// kOneStep: the launcher found that one step of U chunks a slice covers K, so the loop's later loads
// are dead code and the rows' addresses die after the first. The registers decide how many CTAs an SM
// holds, so how many bytes are in flight: with block_row's 32-bit division, two pairs on scale blocks
// fit 8 CTAs an SM where the multi-step kernel fit 5-6 (PERFORMANCE.md, "Stop 76").
template <Fp8GemvOut E, int NP, int U, bool kX16, bool kBlock = false, bool kBlockEarly = false,
          bool kOneStep = false>
__global__ void __launch_bounds__(kOneThreads) gemv_fp8_one_kernel(CodesArgs g) {
  static_assert(!kBlock || (kX16 ? E != Fp8GemvOut::kActMul : E != Fp8GemvOut::kAddF32),
                "block scales: the W8A16 store and add kernels, the W8A8 store and gated ones");
  constexpr bool kGated = E == Fp8GemvOut::kActMul;
  constexpr int kOut = kGated ? NP : 2 * NP;  // output rows a CTA
  __shared__ float partial[kSlices][2 * NP];  // [slice][pair p's lo, hi]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gi = lane >> 2, t = lane & 3;
  const int slice = warp * 8 + gi;
  const int64_t n = g.n, k = g.k, chunks = k / kOneChunk;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kOut;
  // Pair `pair`'s two weight rows: gate row `pair` and its up row (kActMul), or rows 2 pair and
  // 2 pair + 1. Past the end, the last rows: reread, not written.
  const auto pair_rows = [&](int64_t pair, int64_t& lo, int64_t& hi) {
    if constexpr (kGated) {
      lo = min(pair, n - 1);
      hi = n + lo;
    } else {
      lo = min(2 * pair, n - 1);
      hi = min(2 * pair + 1, n - 1);
    }
  };
  const uint8_t* wlo[NP];
  const uint8_t* whi[NP];
#pragma unroll
  for (int p = 0; p < NP; ++p) {
    int64_t rlo, rhi;
    pair_rows(static_cast<int64_t>(blockIdx.x) * NP + p, rlo, rhi);
    wlo[p] = g.w.codes + rlo * k + 16 * t;
    whi[p] = g.w.codes + rhi * k + 16 * t;
  }
  const int64_t steps = slice_chunks(k);

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
  // kActMul: lane p < NP of warp 0 finishes the CTA's pair p.
  const int64_t out_pair = static_cast<int64_t>(blockIdx.x) * NP + lane;
  // The tail's row scales (one a row: not kBlock), and after the wait x's scale (W8A8), copied into
  // shared memory by warp 0 now (cp.async: no register held over the products), so that no load
  // stands on the kernel's tail (PERFORMANCE.md, "Stop 73"). kActMul: [p] pair p's gate row, [NP +
  // p] its up row; else [v] row row0 + v.
  __shared__ float tail_scale[2 * NP];
  __shared__ float tail_x_scale;
  // A row's row of scale blocks, in 32 bits: a 64-bit division is a subroutine whose registers, beside
  // the W loads in flight, count in the kernel's total. one_shape takes fewer than 2^30 rows.
  const auto block_row = [&](int64_t row) -> int64_t {
    return static_cast<uint32_t>(row) / static_cast<uint32_t>(g.w.block_rows);
  };
  if (!kBlock && warp == 0) {
    if constexpr (kGated) {
      if (lane < NP) {
        int64_t lo, hi;
        pair_rows(out_pair, lo, hi);
        cp_async4(tail_scale + lane, g.w.grid + block_row(lo));
        cp_async4(tail_scale + NP + lane, g.w.grid + block_row(hi));
      }
    } else if (lane < kOut) {
      cp_async4(tail_scale + lane, g.w.grid + block_row(min(row0 + lane, n - 1)));
    }
    cp_async_commit();
  }
  // kBlock: this CTA's row of scale blocks (its rows share it: block_rows a multiple of 2 NP), and
  // kActMul's: its gate rows' (block_rows a multiple of NP) and its up rows' (n a multiple of block_rows),
  // copied into shared memory before the PDL wait (they depend on no kernel): the loop then reads
  // each chunk's scale where it uses it, with no global load and no register held over the products.
  __shared__ float block_scale[kBlock ? (kGated ? 2 : 1) * kOneMaxGridCols : 1];
  // kBlock: step u's chunk's column of scale blocks (lanes past the end read the last: their products
  // are zeros). The launcher takes blocks of a power of two of chunks: a 64-bit division here, a long
  // subroutine, once cost a kernel a fifth of its speed (PERFORMANCE.md, "Stop 66").
  const int block_shift = kBlock ? __ffsll(g.w.block_cols / kOneChunk) - 1 : 0;
  const auto block_col = [&](int64_t step) {
    return static_cast<int>(min(step * kSlices + slice, chunks - 1)) >> block_shift;
  };
  if constexpr (kBlock) {
    const int64_t first_lo = kGated ? static_cast<int64_t>(blockIdx.x) * NP : row0;
    const float* lo_row = g.w.grid + block_row(first_lo) * g.w.grid_cols;
    const float* hi_row = kGated ? g.w.grid + block_row(n + first_lo) * g.w.grid_cols : lo_row;
    const int cols = static_cast<int>(g.w.grid_cols);
    for (int i = threadIdx.x; i < cols; i += kOneThreads) cp_async4(block_scale + i, lo_row + i);
    if constexpr (kGated) {
      for (int i = threadIdx.x; i < cols; i += kOneThreads) cp_async4(block_scale + kOneMaxGridCols + i, hi_row + i);
    }
    cp_async_commit();
  }
  pdl_wait();
  if (!kX16 && warp == 0 && lane == 0) {
    cp_async4(&tail_x_scale, g.x_scale);
    cp_async_commit();
  }
  // kAddF32: lane v < kOut of warp 0 adds into row row0 + v. Its residual value is copied into
  // shared memory now (cp.async: no register held over the products), so that no load stands on
  // the kernel's tail after them (PERFORMANCE.md, "Stop 73"). Scale blocks too where kBlockEarly
  // (MINIVLLM_FP8_BLOCK_EARLY_RESIDUAL, on: "Stop 75").
  constexpr bool kEarlyResidual = E == Fp8GemvOut::kAddF32 && (!kBlock || kBlockEarly);
  __shared__ float residual[kEarlyResidual ? kOut : 1];
  if constexpr (kEarlyResidual) {
    if (warp == 0 && lane < kOut && row0 + lane < n) {
      cp_async4(residual + lane, static_cast<const float*>(g.out) + row0 + lane);
      cp_async_commit();
    }
  }

  constexpr int kXBytes = kX16 ? 2 : 1;  // x's bytes a value
  const uint8_t* xrow = g.x + 16 * t * kXBytes;
  float acc[NP][4] = {};
  const int64_t loop_steps = kOneStep ? 1 : steps;
  for (int64_t u0 = 0; u0 < loop_steps; u0 += U) {
    if (u0 != 0) load_w(u0);
    uint4 xv[U][kXBytes];  // x (a few KB, from L1), all of the step's first
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = (u0 + u) * kSlices + slice;
#pragma unroll
      for (int i = 0; i < kXBytes; ++i) {
        xv[u][i] = c < chunks ? __ldg(reinterpret_cast<const uint4*>(xrow + c * kOneChunk * kXBytes) + i)
                              : make_uint4(0, 0, 0, 0);
      }
    }
    // kBlock: the staged scale blocks visible to every warp before the first products, waited for
    // only now, with the first x loads in flight (waited before them, each CTA's x round trip came
    // after the scales' one; the later waves' CTAs then ran the two in a row).
    if constexpr (kBlock) {
      if (u0 == 0) {
        cp_async_wait<0>();
        __syncthreads();
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      // mma.sync wants the whole warp: stop only where every lane's chunk is past the end (the
      // lanes past it multiply zeros).
      if ((u0 + u) * kSlices + warp * 8 >= chunks) break;
      if constexpr (kX16) {
        uint32_t xw[8];
        x16_words(xv[u][0], xv[u][kXBytes - 1], xw);
        if constexpr (kBlock) {
          const float s = block_scale[block_col(u0 + u)];
#pragma unroll
          for (int p = 0; p < NP; ++p) {
            float part[4] = {};
            mma_chunk_x16(part, wv[u][p][0], wv[u][p][1], xw);
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[p][i] = fmaf(part[i], s, acc[p][i]);
          }
        } else {
#pragma unroll
          for (int p = 0; p < NP; ++p) mma_chunk_x16(acc[p], wv[u][p][0], wv[u][p][1], xw);
        }
      } else if constexpr (kBlock) {
        // c[0], c[1] are row lo's (the gate's), c[2], c[3] row hi's (the up row's)
        const int col = block_col(u0 + u);
        const float s_lo = block_scale[col];
        const float s_hi = block_scale[kGated ? kOneMaxGridCols + col : col];
#pragma unroll
        for (int p = 0; p < NP; ++p) {
          float part[4] = {};
          mma_chunk(part, wv[u][p][0], wv[u][p][1], xv[u][0]);
          acc[p][0] = fmaf(part[0], s_lo, acc[p][0]);
          acc[p][1] = fmaf(part[1], s_lo, acc[p][1]);
          acc[p][2] = fmaf(part[2], s_hi, acc[p][2]);
          acc[p][3] = fmaf(part[3], s_hi, acc[p][3]);
        }
      } else {
#pragma unroll
        for (int p = 0; p < NP; ++p) mma_chunk(acc[p], wv[u][p][0], wv[u][p][1], xv[u][0]);
      }
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
  cp_async_wait<0>();  // the tail's scales and residual values (warp 0's copies)
  __syncwarp();
  const float xs = kX16 ? kX16Post : tail_x_scale;
  // (kBlock: the chunks' scales are in the sums already.)
  const auto row_scale = [&](int i) { return kBlock ? 1.0f : tail_scale[i]; };
  if constexpr (kGated) {
    const float lo = __shfl_sync(0xffffffffu, mine, (2 * lane) & 31);
    const float hi = __shfl_sync(0xffffffffu, mine, (2 * lane + 1) & 31);
    const int64_t pair = static_cast<int64_t>(blockIdx.x) * NP + lane;  // (recomputed: no register held)
    if (lane >= NP || pair >= n) return;  // pairs past the end reread the last one
    finish<E>(g, 0, pair, lo * row_scale(lane) * xs, hi * row_scale(NP + lane) * xs);  // gate row, up n + it
  } else {
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kOut + lane;
    if (lane >= kOut || row >= n) return;
    if constexpr (kEarlyResidual) {
      float v = mine * row_scale(lane) * xs;
      if (g.bias != nullptr) v += load_weight(g.bias, g.bias_f32, row);
      static_cast<float*>(g.out)[row] = residual[lane] + v;  // this CTA owns the element: no race
    } else {
      finish<E>(g, 0, row, mine * row_scale(lane) * xs, 0.0f);
    }
  }
}

template <Fp8GemvOut E, int NP, bool kX16, bool kBlock = false, bool kBlockEarly = false>
void launch_np(const CodesArgs& g, cudaStream_t stream) {
  const int64_t steps = slice_chunks(g.k);
  const dim3 grid(static_cast<unsigned>(ceil_div(g.n, E == Fp8GemvOut::kActMul ? NP : 2 * NP))), block(kOneThreads);
  // Two chunks a step where a slice holds at most two (then one step: kOneStep), or x is bf16 (two
  // 16-byte loads a chunk: four chunks a step would take 150 registers at two pairs, three CTAs an SM);
  // else four, one step where a slice holds at most four (K up to 8,192: the 32B and 70B shapes).
  if (steps <= 2) {
    launch_with_pdl(gemv_fp8_one_kernel<E, NP, 2, kX16, kBlock, kBlockEarly, true>, grid, block, 0, stream, g);
  } else if constexpr (kX16) {
    launch_with_pdl(gemv_fp8_one_kernel<E, NP, 2, kX16, kBlock, kBlockEarly>, grid, block, 0, stream, g);
  } else if (steps <= 4) {
    launch_with_pdl(gemv_fp8_one_kernel<E, NP, 4, kX16, kBlock, false, true>, grid, block, 0, stream, g);
  } else {
    launch_with_pdl(gemv_fp8_one_kernel<E, NP, 4, kX16, kBlock>, grid, block, 0, stream, g);
  }
  CUDA_CHECK_LAUNCH();
}

template <Fp8GemvOut E, bool kX16, bool kBlock = false>
void launch_one(const CodesArgs& g, int pairs, cudaStream_t stream) {
  switch (pairs) {
    case 1: return launch_np<E, 1, kX16, kBlock>(g, stream);
    case 4: return launch_np<E, 4, kX16, kBlock>(g, stream);
    default: return launch_np<E, 2, kX16, kBlock>(g, stream);
  }
}

template <bool kX16>
void launch_epilogue(const CodesArgs& g, Fp8GemvOut e, int pairs, cudaStream_t stream) {
  switch (e) {
    case Fp8GemvOut::kStore: return launch_one<Fp8GemvOut::kStore, kX16>(g, pairs, stream);
    case Fp8GemvOut::kActMul: return launch_one<Fp8GemvOut::kActMul, kX16>(g, pairs, stream);
    case Fp8GemvOut::kAddF32: return launch_one<Fp8GemvOut::kAddF32, kX16>(g, pairs, stream);
  }
}

// One token, K of at least a chunk a slice, in whole chunks; rows (gate and up) that fit 32 bits.
bool one_shape(int64_t tokens, int64_t n, int64_t k, int pairs) {
  return tokens == 1 && pairs > 0 && k >= kSlices * kOneChunk && k % kOneChunk == 0 && 2 * n < (int64_t{1} << 31);
}

// Scale blocks of a power of two of whole chunks wide (the kernel shifts a chunk's index to its block),
// at most kOneMaxGridCols of them a row (the CTA stages its rows of scales in shared memory).
bool block_cols_take(const Fp8Weight& w) {
  const int64_t c = w.block_cols / kOneChunk;
  return w.block_cols % kOneChunk == 0 && c > 0 && (c & (c - 1)) == 0 && w.grid_cols <= kOneMaxGridCols;
}

// ... with one scale a row.
bool one_takes(const Fp8Weight& w, int64_t tokens, int64_t n, int64_t k, int pairs) {
  return one_shape(tokens, n, k, pairs) && w.block_cols >= k;
}

}  // namespace

bool launch_gemv_fp8_one(const uint8_t* x_codes, const float* x_scales, const Fp8Weight& w, const void* bias,
                         bool bias_f32, void* out, bool out_f32, Fp8GemvOut e, Activation act, int64_t tokens,
                         int64_t n, int64_t k, int pairs, cudaStream_t stream, bool blocks) {
  const CodesArgs g = codes_args(x_codes, x_scales, w, bias, bias_f32, out, out_f32, act, n, k, 1);
  if (one_takes(w, tokens, n, k, pairs)) {
    launch_epilogue<false>(g, e, pairs, stream);
    return true;
  }
  // Scale blocks: a power of two of whole chunks wide, block rows holding whole CTAs (kActMul: NP gate
  // rows, and the up rows starting on a block row).
  const bool gated = e == Fp8GemvOut::kActMul;
  if (!blocks || !one_shape(tokens, n, k, pairs) || e == Fp8GemvOut::kAddF32 || !block_cols_take(w) ||
      w.block_rows % (gated ? pairs : 2 * pairs) != 0 || (gated && n % w.block_rows != 0)) {
    return false;
  }
  if (gated) {
    launch_one<Fp8GemvOut::kActMul, false, true>(g, pairs, stream);
  } else {
    launch_one<Fp8GemvOut::kStore, false, true>(g, pairs, stream);
  }
  return true;
}

bool launch_gemv_fp8_one_x16(const void* x, const Fp8Weight& w, const void* bias, bool bias_f32, void* out,
                             bool out_f32, Fp8GemvOut e, Activation act, int64_t tokens, int64_t n, int64_t k, int pairs,
                             cudaStream_t stream, bool blocks, bool block_early_residual) {
  const CodesArgs g = codes_args(x, nullptr, w, bias, bias_f32, out, out_f32, act, n, k, 1);
  if (one_takes(w, tokens, n, k, pairs)) {
    launch_epilogue<true>(g, e, pairs, stream);
    return true;
  }
  // Scale blocks: a power of two of whole chunks wide, block rows holding whole CTAs (four pairs: 8 rows).
  if (!blocks || !one_shape(tokens, n, k, pairs) || pairs != 4 || e == Fp8GemvOut::kActMul || !block_cols_take(w) ||
      w.block_rows % (2 * pairs) != 0) {
    return false;
  }
  if (e == Fp8GemvOut::kStore) {
    launch_np<Fp8GemvOut::kStore, 4, true, true>(g, stream);
  } else if (block_early_residual) {
    launch_np<Fp8GemvOut::kAddF32, 4, true, true, true>(g, stream);
  } else {
    launch_np<Fp8GemvOut::kAddF32, 4, true, true>(g, stream);
  }
  return true;
}

}  // namespace minivllm::cuda
