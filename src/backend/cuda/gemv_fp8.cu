// The decode gemv on FP8 weights: out[M, N] = x[M, K] W[N, K]^T for M <= 8 tokens, W e4m3 codes
// times their scale grid, x bf16, fp32 accumulation. A linear at these sizes is a stream over W,
// and FP8 halves it: a CTA of 128 threads owns R rows, its threads split K into 16-code chunks (one
// 16-byte load each) and keep U chunks of every row in flight. A chunk never straddles two scales
// (block_cols % 16 == 0), so its 16 products are summed first and scaled once. x (M x K bf16) is
// read through L1, which holds it because W bypasses L1. Epilogues as gemv.cu's: store (+ bias),
// the gated act(gate) * up of [W_gate; W_up], and the add into the fp32 residual stream.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/pdl_launch.h"

namespace minivllm::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kCodes = 16;  // e4m3 codes a chunk (one 16-byte load)

__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
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

struct Args {
  const uint4* x;  // [M, K / 8] bf16
  Fp8Weight w;
  const void* bias;
  bool bias_f32;
  void* out;
  bool out_f32;
  int64_t n;       // output rows (kActMul: the gate's rows; W has 2n)
  int64_t chunks;  // K / 16
  Activation act;
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
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kWarps; ++i) s += partial[i][m * R + r];
  if constexpr (kGated) {
    float up = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) up += partial[i][m * R + kRowsOut + r];
    s = gate_act(s, g.act) * up;
  } else if (g.bias != nullptr) {
    s += load_weight(g.bias, g.bias_f32, row);
  }
  if constexpr (E == Fp8GemvOut::kAddF32) {
    static_cast<float*>(g.out)[m * n + row] += s;  // this CTA owns the element: no race
  } else if (g.out_f32) {
    static_cast<float*>(g.out)[m * n + row] = s;
  } else {
    static_cast<__nv_bfloat16*>(g.out)[m * n + row] = __float2bfloat16(s);
  }
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

}  // namespace

void launch_gemv_fp8(const void* x, const Fp8Weight& w, const void* bias, bool bias_f32, void* out, bool out_f32,
                     Fp8GemvOut e, Activation act, int64_t tokens, int64_t n, int64_t k, cudaStream_t stream) {
  if (tokens == 0 || n == 0) return;
  MINIVLLM_CHECK(tokens >= 1 && tokens <= kGemvMaxTokens && k > 0 && k % kCodes == 0 && w.block_cols % kCodes == 0 &&
                 w.block_rows > 0)
      << "gemv_fp8: x [" << tokens << ", " << k << "] needs 1.." << kGemvMaxTokens
      << " rows, K a multiple of 16 and scale blocks of a multiple of 16 columns (got " << w.block_rows << "x"
      << w.block_cols << ")";
  Args g{};
  g.x = static_cast<const uint4*>(x);
  g.w = w;
  g.bias = bias;
  g.bias_f32 = bias_f32;
  g.out = out;
  g.out_f32 = out_f32;
  g.n = n;
  g.chunks = k / kCodes;
  g.act = act;
  switch (e) {
    case Fp8GemvOut::kStore: return dispatch<Fp8GemvOut::kStore>(g, tokens, stream);
    case Fp8GemvOut::kActMul: return dispatch<Fp8GemvOut::kActMul>(g, tokens, stream);
    case Fp8GemvOut::kAddF32: return dispatch<Fp8GemvOut::kAddF32>(g, tokens, stream);
  }
}

}  // namespace minivllm::cuda
