// Skinny GEMM for decode: out[M, N] = x[M, K] w[N, K]^T (+ bias) for M <= 8 tokens, bf16 in, bf16
// or fp32 out (the logits), fp32 accumulation; and its gate/up variant that writes silu(g) * u. At these sizes a linear is a stream over W, so the kernel is built to
// keep many 16-byte loads of W in flight: a 128-thread CTA owns R rows of W, its threads split K
// into 8-element chunks and load U chunks of every row before using any. x (M x K, a few KB) is
// read through L1, which holds it because W bypasses L1. Partial sums meet in a warp
// reduce-scatter (one shuffle per value and step, not five) and then in shared memory.
#include <cstdlib>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"

namespace minivllm::cuda {
namespace {

constexpr int kGemvThreads = 128;
constexpr int kGemvWarps = kGemvThreads / 32;

// W is read once per step: keep it out of L1 so that x stays there.
__device__ __forceinline__ uint4 load_streaming(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

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

// One CTA: R rows of W (rows past n reread the last one and are not written).
// kSilu == false: rows [blockIdx.x * R, + R) of W, out = x W^T (+ bias), bf16 or fp32 (out_f32).
// kSilu == true: W is [W_gate; W_up] ([2n, K]); the CTA loads gate rows [blockIdx.x * R/2, + R/2)
// and the matching up rows (+ n) together and writes silu(g) * u (bf16), so the [T, 2n] product
// never goes through memory.
template <int M, int R, int U, bool kSilu>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const uint4* __restrict__ x, const uint4* __restrict__ w,
                                                            const void* bias, bool bias_f32, void* __restrict__ out,
                                                            bool out_f32, int64_t n, int64_t chunks) {
  constexpr int V = M * R;
  constexpr int P = next_pow2(V);
  constexpr int kRowsOut = kSilu ? R / 2 : R;
  static_assert(P <= 32, "one warp reduce-scatter holds at most 32 values");
  __shared__ float partial[kGemvWarps][V];

  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRowsOut;
  const uint4* rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int rr = r % kRowsOut;
    const int64_t row = row0 + rr < n ? row0 + rr : n - 1;
    rows[r] = w + (kSilu && r >= kRowsOut ? row + n : row) * chunks;
  }

  // W does not depend on the previous kernel: pull this thread's first chunks of it into L2 while
  // that kernel finishes (programmatic dependent launch), then wait before touching x or out.
  pdl_launch_dependents();
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t c = threadIdx.x + u * kGemvThreads;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (c < chunks) asm volatile("prefetch.global.L2 [%0];" ::"l"(rows[r] + c));
    }
  }
  pdl_wait();

  float acc[P];
#pragma unroll
  for (int i = 0; i < P; ++i) acc[i] = 0.0f;

  for (int64_t c0 = threadIdx.x; c0 < chunks; c0 += kGemvThreads * U) {
    uint4 wv[U][R];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * kGemvThreads;
#pragma unroll
      for (int r = 0; r < R; ++r) wv[u][r] = c < chunks ? load_streaming(rows[r] + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t c = c0 + u * kGemvThreads;
      if (c < chunks) {
        float wf[R][8];
#pragma unroll
        for (int r = 0; r < R; ++r) bf16x8_to_f32(wv[u][r], wf[r]);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          float xf[8];
          bf16x8_to_f32(__ldg(x + m * chunks + c), xf);
#pragma unroll
          for (int r = 0; r < R; ++r) {
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[m * R + r] = fmaf(xf[i], wf[r][i], acc[m * R + r]);
          }
        }
      }
    }
  }

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  reduce_scatter<P, 16>(acc, lane);
  const int idx = reduce_scatter_index<P>(lane);
  if (idx < V && (lane & (32 / P - 1)) == 0) partial[warp][idx] = acc[0];
  __syncthreads();
  if (threadIdx.x < M * kRowsOut) {
    const int m = threadIdx.x / kRowsOut, r = threadIdx.x % kRowsOut;
    const int64_t row = row0 + r;
    if (row < n) {
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kGemvWarps; ++i) s += partial[i][m * R + r];
      if constexpr (kSilu) {
        float u = 0.0f;
#pragma unroll
        for (int i = 0; i < kGemvWarps; ++i) u += partial[i][m * R + kRowsOut + r];
        s = s / (1.0f + __expf(-s)) * u;
      } else if (bias != nullptr) {
        s += load_weight(bias, bias_f32, row);
      }
      if (out_f32) {
        static_cast<float*>(out)[m * n + row] = s;
      } else {
        static_cast<__nv_bfloat16*>(out)[m * n + row] = __float2bfloat16(s);
      }
    }
  }
}

// MINIVLLM_NO_PDL=1 turns programmatic dependent launch off (plain stream order).
bool pdl_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("MINIVLLM_NO_PDL");
    return v == nullptr || v[0] == '\0' || v[0] == '0';
  }();
  return enabled;
}

template <typename Kernel, typename... Args>
void launch_pdl(Kernel kernel, unsigned grid, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(kGemvThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

template <int M, int R, bool kSilu>
void launch_for_mr(const uint4* x, const uint4* w, const void* bias, bool bias_f32, void* out, bool out_f32,
                   int64_t n, int64_t chunks, cudaStream_t stream) {
  const auto grid = static_cast<unsigned>(ceil_div(n, kSilu ? R / 2 : R));
  if (chunks <= kGemvThreads) {  // K <= 1024: one chunk per thread, so no unrolling to pay registers for
    launch_pdl(gemv_kernel<M, R, 1, kSilu>, grid, stream, x, w, bias, bias_f32, out, out_f32, n, chunks);
  } else {  // U chunks of every row in flight; fewer when x's rows take the registers
    launch_pdl(gemv_kernel<M, R, (M <= 4 ? 4 : 2), kSilu>, grid, stream, x, w, bias, bias_f32, out, out_f32, n,
               chunks);
  }
  CUDA_CHECK_LAUNCH();
}

// rows_of_w: rows of W streamed (n, or 2n for the gate/up pair) picks R.
template <int M, bool kSilu>
void launch_for_m(const void* x, const void* w, const void* bias, bool bias_f32, void* out, bool out_f32, int64_t n,
                  int64_t k, cudaStream_t stream) {
  const auto* xv = static_cast<const uint4*>(x);
  const auto* wv = static_cast<const uint4*>(w);
  const int64_t rows_of_w = kSilu ? 2 * n : n;
  // Four rows a CTA where that still gives several CTAs per SM; two for the 1-2K-row projections.
  if (rows_of_w >= 4096) {
    launch_for_mr<M, 4, kSilu>(xv, wv, bias, bias_f32, out, out_f32, n, k / 8, stream);
  } else {
    launch_for_mr<M, 2, kSilu>(xv, wv, bias, bias_f32, out, out_f32, n, k / 8, stream);
  }
}

template <bool kSilu>
void dispatch_tokens(const void* x, const void* w, const void* bias, bool bias_f32, void* out, bool out_f32,
                     int64_t tokens, int64_t n, int64_t k, cudaStream_t stream) {
  switch (tokens) {
    case 1: launch_for_m<1, kSilu>(x, w, bias, bias_f32, out, out_f32, n, k, stream); break;
    case 2: launch_for_m<2, kSilu>(x, w, bias, bias_f32, out, out_f32, n, k, stream); break;
    case 3: launch_for_m<3, kSilu>(x, w, bias, bias_f32, out, out_f32, n, k, stream); break;
    case 4: launch_for_m<4, kSilu>(x, w, bias, bias_f32, out, out_f32, n, k, stream); break;
    case 5: launch_for_m<5, kSilu>(x, w, bias, bias_f32, out, out_f32, n, k, stream); break;
    case 6: launch_for_m<6, kSilu>(x, w, bias, bias_f32, out, out_f32, n, k, stream); break;
    case 7: launch_for_m<7, kSilu>(x, w, bias, bias_f32, out, out_f32, n, k, stream); break;
    default: launch_for_m<8, kSilu>(x, w, bias, bias_f32, out, out_f32, n, k, stream); break;
  }
}

}  // namespace

void launch_gemv(const void* x, const void* w, const void* bias, bool bias_f32, void* out, bool out_f32,
                 int64_t tokens, int64_t n, int64_t k, cudaStream_t stream) {
  if (tokens == 0 || n == 0) return;
  MINIVLLM_CHECK(tokens >= 1 && tokens <= kGemvMaxTokens && k > 0 && k % 8 == 0)
      << "gemv: x [" << tokens << ", " << k << "] needs 1.." << kGemvMaxTokens << " rows and K a multiple of 8";
  dispatch_tokens<false>(x, w, bias, bias_f32, out, out_f32, tokens, n, k, stream);
}

void launch_gemv_silu_mul(const void* x, const void* gate_up_w, void* out, int64_t tokens, int64_t inter, int64_t k,
                          cudaStream_t stream) {
  if (tokens == 0 || inter == 0) return;
  MINIVLLM_CHECK(tokens >= 1 && tokens <= kGemvMaxTokens && k > 0 && k % 8 == 0)
      << "gemv_silu_mul: x [" << tokens << ", " << k << "] needs 1.." << kGemvMaxTokens
      << " rows and K a multiple of 8";
  dispatch_tokens<true>(x, gate_up_w, nullptr, false, out, false, tokens, inter, k, stream);
}

}  // namespace minivllm::cuda
