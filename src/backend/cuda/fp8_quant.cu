// FP8 on the device around the GEMM: quantization to e4m3 in groups of columns with one scale each
// (the FP8 GEMM's activations, per token; the online FP8 quantization of dummy weights, per row),
// the GEMM's scaling epilogue, and the decoding of a weight to bf16 (for grids the FP8 GEMM does not
// take). The quantization is common/fp8.h's formula step for step (amax, 448 / amax, x * that
// rounded to nearest even with saturation; scale amax / 448), so a row quantized here has the
// bytes quantize_e4m3_row gives on the host.
#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/norm_row.cuh"
#include "backend/cuda/pdl_launch.h"
#include "backend/cuda/fp8_kv.cuh"
#include "common/tuning.h"

namespace minivllm::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kNormThreads = 256;  // rms_norm_kernel's threads a row (elementwise.cu kRowThreads)

__device__ __forceinline__ float fp8_to_f32(uint8_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(code, __NV_E4M3);
  return __half2float(*reinterpret_cast<const __half*>(&h));
}

__device__ __forceinline__ float load_x(const void* x, bool x_f32, int64_t i) {
  return x_f32 ? static_cast<const float*>(x)[i] : __bfloat162float(static_cast<const __nv_bfloat16*>(x)[i]);
}

// One CTA per (row, group): blockIdx.x = row * groups + group.
__global__ void __launch_bounds__(kThreads) quantize_groups_kernel(const void* x, bool x_f32, int64_t cols,
                                                                   int64_t group, int64_t col_begin, int64_t col_end,
                                                                   uint8_t* codes, float* scales) {
  __shared__ float red[32];
  const int64_t groups = cols / group;
  const int64_t row = blockIdx.x / groups, gi = blockIdx.x % groups;
  const int64_t c0 = gi * group;
  const int64_t base = row * cols + c0;
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < group; i += kThreads) amax = fmaxf(amax, fabsf(load_x(x, x_f32, base + i)));
  amax = block_max(amax, red);
  const float mul = e4m3_multiplier_device(amax);
  const int64_t out_cols = col_end - col_begin;
  const int64_t lo = c0 > col_begin ? c0 : col_begin, hi = c0 + group < col_end ? c0 + group : col_end;
  for (int64_t c = lo + threadIdx.x; c < hi; c += kThreads) {
    codes[row * out_cols + (c - col_begin)] = f32_to_e4m3_device(__fmul_rn(load_x(x, x_f32, row * cols + c), mul));
  }
  if (threadIdx.x == 0) scales[row * groups + gi] = e4m3_scale_device(amax);
}

// out[t, n] = out[t, n] * row_scale[t] * col_scale[n * col_stride] (+ bias[n]), in place.
__global__ void scale_outer_kernel(void* out, bool out_f32, int64_t n, int64_t total, const float* row_scale,
                                   const float* col_scale, int64_t col_stride, const void* bias, bool bias_f32) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / n, c = i - t * n;
    float v = load_x(out, out_f32, i) * (row_scale[t] * col_scale[c * col_stride]);
    if (bias != nullptr) v += load_weight(bias, bias_f32, c);
    if (out_f32) {
      static_cast<float*>(out)[i] = v;
    } else {
      static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16(v);
    }
  }
}

// Eight values' e4m3 codes at multiplier mul (the row's 448 / amax), packed little-endian.
__device__ __forceinline__ uint2 e4m3x8(const float (&f)[8], float mul) {
  uint32_t q[2] = {0u, 0u};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    q[j / 4] |= static_cast<uint32_t>(f32_to_e4m3_device(__fmul_rn(f[j], mul))) << (8 * (j % 4));
  }
  return make_uint2(q[0], q[1]);
}

// Eight values of a row's codes at chunk c. lo (nullptr: none) gets the second term's codes at the
// same scale: e4m3(x * mul - hi) for hi the first term's value, so that x ~ scale * (hi + lo) to
// about bf16's precision (the e4m3 block GEMM's two-term activations, decode_gemm.cu).
__device__ __forceinline__ void store_row_chunk(uint8_t* codes, int64_t row, int64_t cols, int64_t c, const uint4& v,
                                                float mul, uint8_t* lo) {
  float f[8];
  bf16x8_to_f32(v, f);
  const uint2 hi = e4m3x8(f, mul);
  reinterpret_cast<uint2*>(codes + row * cols)[c] = hi;
  if (lo == nullptr) return;
  const uint32_t h[2] = {hi.x, hi.y};
  uint32_t q[2] = {0u, 0u};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float rest = __fsub_rn(__fmul_rn(f[j], mul), fp8_to_f32(static_cast<uint8_t>(h[j / 4] >> (8 * (j % 4)))));
    q[j / 4] |= static_cast<uint32_t>(f32_to_e4m3_device(rest)) << (8 * (j % 4));
  }
  reinterpret_cast<uint2*>(lo + row * cols)[c] = make_uint2(q[0], q[1]);
}

// act(gate) * up of eight columns of the bare [gate | up] product, g and u, scaled by the token's
// row scale rs and the columns' scales cs (gate) and cu (up), rounded to bf16 (the act_mul epilogue's
// arithmetic).
__device__ __forceinline__ uint4 fp8_act_mul8(const uint4& g, const uint4& u, float rs, const float (&cs)[8],
                                              const float (&cu)[8], Activation act) {
  float v[8], w[8];
  bf16x8_to_f32(g, v);
  bf16x8_to_f32(u, w);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    v[j] *= rs * cs[j];
    v[j] = gate_act(v[j], act) * (w[j] * (rs * cu[j]));
  }
  return f32_to_bf16x8(v);
}

// launch_quantize_e4m3_rows: a CTA of kT threads a row, each thread's kChunks x 8 values read once
// into registers (quantize_groups_kernel reads them twice, one element a thread), then the codes
// eight at a time. At decode batches (a few rows, each CTA's chain on the step's critical path) 512
// threads a row, so that a thread's chain of loads, maxima and codes is short (PERFORMANCE.md,
// "Stop 70").
template <int kChunks, int kT = kThreads>
__global__ void __launch_bounds__(kT) quantize_rows_kernel(const __nv_bfloat16* x, int64_t cols, uint8_t* codes,
                                                           float* scales, uint8_t* lo) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x, chunks = cols / 8;
  const uint4* xr = reinterpret_cast<const uint4*>(x + row * cols);
  // At decode batches the W8A8 gemv follows (PDL): let its CTAs start their weight loads now.
  pdl_launch_dependents();
  pdl_wait();
  uint4 v[kChunks];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * kT;
    v[i] = c < chunks ? xr[c] : make_uint4(0, 0, 0, 0);
    float f[8];
    bf16x8_to_f32(v[i], f);
#pragma unroll
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(f[j]));
  }
  amax = block_max(amax, red);
  const float mul = e4m3_multiplier_device(amax);
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * kT;
    if (c >= chunks) break;
    store_row_chunk(codes, row, cols, c, v[i], mul, lo);
  }
  if (threadIdx.x == 0) scales[row] = e4m3_scale_device(amax);
}

// launch_rms_norm_e4m3_rows: rms_norm_kernel's row (elementwise.cu: the same threads a row, the same
// order of the sum of squares, the same bf16 rounding of the normed values), then quantize_rows_kernel's
// codes of those bf16 values, without the normed row ever going to memory: a thread holds its
// kChunks chunks of the fp32 residual from the load to the codes.
// kAdd (launch_fp8_add_norm_e4m3): first residual += the FP8 product's row scaled as the kAddF32
// epilogue scales it (y * (row_scale * col_scale), unfused, then the add), the new row kept in
// registers for the norm: the add epilogue and the norm's read of the residual in one pass.
struct Fp8AddRow {
  float* residual;         // the rows the kernel reads, written back with the product added
  const __nv_bfloat16* y;  // the bare product [rows, ny]
  int64_t ny;
  const float* row_scale;  // read before scales (which may be the same buffer) is written
  const float* col_scale;
  int64_t col_stride;
};

template <int kChunks, bool kAdd>
__global__ void __launch_bounds__(kNormThreads) rms_norm_e4m3_kernel(const float* residual, const void* w, bool w_f32,
                                                                      float eps, int64_t chunks, uint8_t* codes,
                                                                      float* scales, Fp8AddRow add, uint8_t* lo) {
  __shared__ float scratch[32];  // block_sum's, then block_max's
  const int64_t row = blockIdx.x;
  pdl_launch_dependents();  // as quantize_rows_kernel
  // The norm weights depend on no kernel: loaded before the wait, they are not a second round trip
  // after the residual's (PERFORMANCE.md, "Stop 70").
  float wt[kChunks][8];
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (c < chunks) load_weight8(w, w_f32, c * 8, wt[i]);
  }
  pdl_wait();
  const float* xr = residual + row * chunks * 8;
  float v[kChunks][8];
  float inv;
  if constexpr (kAdd) {
    float* xw = add.residual + row * chunks * 8;
    const float rs = add.row_scale[row];
    float sum_sq = 0.0f;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
      if (c < chunks) {
        float y[8];
        bf16x8_to_f32(*reinterpret_cast<const uint4*>(add.y + row * add.ny + c * 8), y);
        load_f32x8(xw + c * 8, v[i]);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          v[i][j] = __fadd_rn(v[i][j], __fmul_rn(y[j], __fmul_rn(rs, add.col_scale[(c * 8 + j) * add.col_stride])));
        }
        store_f32x8(xw + c * 8, v[i]);
#pragma unroll
        for (int j = 0; j < 8; ++j) sum_sq += v[i][j] * v[i][j];  // load_row_inv_rms's order
      }
    }
    sum_sq = block_sum(sum_sq, scratch);
    inv = 1.0f / sqrtf(sum_sq / static_cast<float>(chunks * 8) + eps);
  } else {
    inv = load_row_inv_rms<kChunks>(xr, chunks, eps, v, scratch);
  }
  uint4 packed[kChunks];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    packed[i] = make_uint4(0, 0, 0, 0);
    if (c < chunks) {
      float f[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) v[i][j] = (v[i][j] * inv) * wt[i][j];
      packed[i] = f32_to_bf16x8(v[i]);
      bf16x8_to_f32(packed[i], f);
#pragma unroll
      for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(f[j]));
    }
  }
  amax = block_max(amax, scratch);
  const float mul = e4m3_multiplier_device(amax);
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (c >= chunks) break;
    store_row_chunk(codes, row, chunks * 8, c, packed[i], mul, lo);
  }
  if (threadIdx.x == 0) scales[row] = e4m3_scale_device(amax);
}

// Each row kernel holds a row of kE4m3RowMaxCols in its largest instantiation (16 and 8 chunks of
// eight a thread).
static_assert(kThreads * 16 * 8 == kE4m3RowMaxCols && kNormThreads * 8 * 8 == kE4m3RowMaxCols);

// launch_fp8_epilogue's per-thread pieces: a token's eight columns c0 .. c0 + 7 are loaded (and, for
// act_mul, the up half's eight at n + c0), then scaled and stored. The loads come apart from the
// math so that a thread can have two tokens' loads in flight before either's stores.
struct Fp8EpilogueLoad {
  uint4 g, u;  // u: act_mul's up half only
};

template <Fp8Epilogue E>
__device__ __forceinline__ Fp8EpilogueLoad fp8_epilogue_load(const __nv_bfloat16* y, int64_t ny, int64_t t,
                                                             int64_t c0, int64_t n) {
  Fp8EpilogueLoad l;
  l.g = *reinterpret_cast<const uint4*>(y + t * ny + c0);
  if constexpr (E == Fp8Epilogue::kActMul) l.u = *reinterpret_cast<const uint4*>(y + t * ny + n + c0);
  return l;
}

// cs / cu: the columns' scales (cu: the up half's), b: the bias (zeros where there is none), all
// loaded once for every token the thread takes.
template <Fp8Epilogue E>
__device__ __forceinline__ void fp8_epilogue_finish(const Fp8EpilogueLoad& l, float rs, const float (&cs)[8],
                                                    const float (&cu)[8], const float (&b)[8], bool has_bias,
                                                    void* out, int64_t t, int64_t c0, int64_t n, Activation act) {
  if constexpr (E == Fp8Epilogue::kActMul) {
    *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(out) + t * n + c0) = fp8_act_mul8(l.g, l.u, rs, cs, cu, act);
  } else {
    float v[8];
    bf16x8_to_f32(l.g, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= rs * cs[i];
    if (has_bias) {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] += b[i];
    }
    if constexpr (E == Fp8Epilogue::kAddF32) {
      add_f32x8(static_cast<float*>(out) + t * n + c0, v);
    } else {
      *reinterpret_cast<uint4*>(static_cast<__nv_bfloat16*>(out) + t * n + c0) = f32_to_bf16x8(v);
    }
  }
}

// launch_fp8_epilogue: eight columns a thread; grid row y takes tokens y, y + gridDim.y, ..., two at
// a time. The grid has fewer rows than there are tokens (MINIVLLM_FP8_EPILOGUE_ROWS), so the column
// scales and bias a thread loads serve many tokens and the GPU runs thousands of CTAs, not one a
// token and 1,024 columns (PERFORMANCE.md, "The FP8 prefill, kernel by kernel").
template <Fp8Epilogue E>
__global__ void __launch_bounds__(kThreads) fp8_epilogue_kernel(const __nv_bfloat16* y, int64_t ny,
                                                                const float* row_scale, const float* col_scale,
                                                                int64_t col_stride, const void* bias, bool bias_f32,
                                                                void* out, int64_t tokens, int64_t n, Activation act) {
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) * 8;
  if (c0 >= n) return;
  float cs[8], cu[8], b[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    cs[i] = col_scale[(c0 + i) * col_stride];
    cu[i] = E == Fp8Epilogue::kActMul ? col_scale[(n + c0 + i) * col_stride] : 0.0f;
    b[i] = 0.0f;
  }
  if (bias != nullptr) load_weight8(bias, bias_f32, c0, b);
  const bool has_bias = bias != nullptr;
  const int64_t step = gridDim.y;
  int64_t t = blockIdx.y;
  for (; t + step < tokens; t += 2 * step) {  // rows t and t + step are distinct: in place is safe
    const Fp8EpilogueLoad l0 = fp8_epilogue_load<E>(y, ny, t, c0, n);
    const Fp8EpilogueLoad l1 = fp8_epilogue_load<E>(y, ny, t + step, c0, n);
    const float r0 = row_scale[t], r1 = row_scale[t + step];
    fp8_epilogue_finish<E>(l0, r0, cs, cu, b, has_bias, out, t, c0, n, act);
    fp8_epilogue_finish<E>(l1, r1, cs, cu, b, has_bias, out, t + step, c0, n, act);
  }
  if (t < tokens) {
    const Fp8EpilogueLoad l0 = fp8_epilogue_load<E>(y, ny, t, c0, n);
    fp8_epilogue_finish<E>(l0, row_scale[t], cs, cu, b, has_bias, out, t, c0, n, act);
  }
}

__global__ void dequantize_kernel(Fp8Weight w, int64_t k, int64_t total, __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / k, c = i - r * k;
    const float s = w.grid[(r / w.block_rows) * w.grid_cols + c / w.block_cols];
    out[i] = __float2bfloat16(fp8_to_f32(w.codes[i]) * s);
  }
}

unsigned grid_for(int64_t total) {
  const int64_t blocks = (total + 255) / 256;
  return static_cast<unsigned>(blocks < 65536 ? blocks : 65536);
}

}  // namespace

void launch_quantize_e4m3_groups(const void* x, bool x_f32, int64_t rows, int64_t cols, int64_t group,
                                 int64_t col_begin, int64_t col_end, uint8_t* codes, float* scales,
                                 cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  MINIVLLM_CHECK(group > 0 && cols % group == 0 && col_begin >= 0 && col_begin < col_end && col_end <= cols)
      << "quantize_e4m3_groups: " << cols << " columns in groups of " << group << ", columns [" << col_begin << ", "
      << col_end << ")";
  const int64_t blocks = rows * (cols / group);
  MINIVLLM_CHECK(blocks < (int64_t{1} << 31)) << "quantize_e4m3_groups: " << blocks << " groups";
  quantize_groups_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(x, x_f32, cols, group, col_begin,
                                                                                 col_end, codes, scales);
  CUDA_CHECK_LAUNCH();
}

void launch_scale_outer(void* out, bool out_f32, int64_t tokens, int64_t n, const float* row_scale,
                        const float* col_scale, int64_t col_stride, const void* bias, bool bias_f32,
                        cudaStream_t stream) {
  const int64_t total = tokens * n;
  if (total == 0) return;
  scale_outer_kernel<<<grid_for(total), 256, 0, stream>>>(out, out_f32, n, total, row_scale, col_scale, col_stride,
                                                          bias, bias_f32);
  CUDA_CHECK_LAUNCH();
}

namespace {

// MINIVLLM_FP8_QUANTIZE_WIDE: decode batches' row quantizer at 512 threads a row (0: 128).
bool env_quantize_wide() {
  static const bool on = knob_flag("MINIVLLM_FP8_QUANTIZE_WIDE");
  return on;
}

void quantize_rows(const __nv_bfloat16* xb, int64_t rows, int64_t cols, uint8_t* out, float* scales, uint8_t* lo,
                   cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(rows));
  constexpr int kWide = 512;
  if (rows <= kGemvMaxTokens && env_quantize_wide()) {  // (kE4m3RowMaxCols = kWide * 4 * 8)
    if (cols <= kWide * 8) {
      launch_with_pdl(quantize_rows_kernel<1, kWide>, grid, dim3(kWide), 0, stream, xb, cols, out, scales, lo);
    } else if (cols <= kWide * 2 * 8) {
      launch_with_pdl(quantize_rows_kernel<2, kWide>, grid, dim3(kWide), 0, stream, xb, cols, out, scales, lo);
    } else {
      launch_with_pdl(quantize_rows_kernel<4, kWide>, grid, dim3(kWide), 0, stream, xb, cols, out, scales, lo);
    }
  } else if (cols <= kThreads * 8 * 8) {
    launch_with_pdl(quantize_rows_kernel<8>, grid, dim3(kThreads), 0, stream, xb, cols, out, scales, lo);
  } else {
    launch_with_pdl(quantize_rows_kernel<16>, grid, dim3(kThreads), 0, stream, xb, cols, out, scales, lo);
  }
}

template <bool kAdd>
void rms_norm_rows(const float* residual, const void* w, bool w_f32, float eps, int64_t rows, int64_t cols, uint8_t* out,
                   float* scales, const Fp8AddRow& add, uint8_t* lo, cudaStream_t stream) {
  const int64_t chunks = cols / 8;
  // rms_norm_kernel's launch: min(256, chunks rounded up to warps) threads, the sum's order with them.
  const int threads = static_cast<int>(std::min<int64_t>(kNormThreads, ceil_div(chunks, 32) * 32));
  const int per_thread = static_cast<int>(ceil_div(chunks, threads));
  const dim3 grid(static_cast<unsigned>(rows)), block(threads);
  const auto launch = [&](auto kernel) {
    launch_with_pdl(kernel, grid, block, 0, stream, residual, w, w_f32, eps, chunks, out, scales, add, lo);
  };
  if (per_thread <= 2) {
    launch(rms_norm_e4m3_kernel<2, kAdd>);
  } else if (per_thread <= 4) {
    launch(rms_norm_e4m3_kernel<4, kAdd>);
  } else {
    launch(rms_norm_e4m3_kernel<8, kAdd>);
  }
}

}  // namespace

bool launch_quantize_e4m3_rows(const void* x, int64_t rows, int64_t cols, uint8_t* codes, float* scales,
                               cudaStream_t stream, uint8_t* lo_codes) {
  if (cols % 8 != 0 || cols > kE4m3RowMaxCols || rows >= (int64_t{1} << 31)) return false;
  if (rows == 0) return true;
  quantize_rows(static_cast<const __nv_bfloat16*>(x), rows, cols, codes, scales, lo_codes, stream);
  CUDA_CHECK_LAUNCH();
  return true;
}

bool launch_rms_norm_e4m3_rows(const float* residual, const void* w, bool w_f32, float eps, int64_t rows,
                               int64_t cols, uint8_t* codes, float* scales, cudaStream_t stream, uint8_t* lo_codes) {
  if (cols % 8 != 0 || cols > kE4m3RowMaxCols || rows >= (int64_t{1} << 31)) return false;
  if (rows == 0) return true;
  rms_norm_rows<false>(residual, w, w_f32, eps, rows, cols, codes, scales, Fp8AddRow{}, lo_codes, stream);
  CUDA_CHECK_LAUNCH();
  return true;
}

bool launch_fp8_add_norm_e4m3(const void* y, int64_t ny, const float* row_scale, const float* col_scale,
                              int64_t col_stride, float* residual, const void* w, bool w_f32, float eps, int64_t rows,
                              int64_t cols, uint8_t* codes, float* scales, cudaStream_t stream) {
  if (cols % 8 != 0 || cols > kE4m3RowMaxCols || rows >= (int64_t{1} << 31) || ny < cols || ny % 8 != 0) return false;
  if (rows == 0) return true;
  const Fp8AddRow add{residual, static_cast<const __nv_bfloat16*>(y), ny, row_scale, col_scale, col_stride};
  rms_norm_rows<true>(residual, w, w_f32, eps, rows, cols, codes, scales, add, nullptr, stream);
  CUDA_CHECK_LAUNCH();
  return true;
}

void launch_fp8_epilogue(const void* y, int64_t ny, const float* row_scale, const float* col_scale,
                         int64_t col_stride, const void* bias, bool bias_f32, Fp8Epilogue e, Activation act, void* out,
                         int64_t tokens, int64_t n, cudaStream_t stream) {
  if (tokens == 0 || n == 0) return;
  MINIVLLM_CHECK(n % 8 == 0 && ny % 8 == 0 && ny >= (e == Fp8Epilogue::kActMul ? 2 * n : n) &&
                 (e != Fp8Epilogue::kActMul || bias == nullptr))
      << "fp8_epilogue: " << n << " columns of rows of " << ny
      << " (multiples of 8; [gate | up] for act_mul, which takes no bias)";
  static const int64_t max_rows = knob_number("MINIVLLM_FP8_EPILOGUE_ROWS");
  const int64_t rows = tokens < max_rows ? tokens : max_rows;
  const dim3 grid(static_cast<unsigned>((n / 8 + kThreads - 1) / kThreads), static_cast<unsigned>(rows));
  auto launch = [&](auto kernel) {
    kernel<<<grid, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(y), ny, row_scale, col_scale, col_stride,
                                          bias, bias_f32, out, tokens, n, act);
  };
  switch (e) {
    case Fp8Epilogue::kStore: launch(fp8_epilogue_kernel<Fp8Epilogue::kStore>); break;
    case Fp8Epilogue::kAddF32: launch(fp8_epilogue_kernel<Fp8Epilogue::kAddF32>); break;
    case Fp8Epilogue::kActMul: launch(fp8_epilogue_kernel<Fp8Epilogue::kActMul>); break;
  }
  CUDA_CHECK_LAUNCH();
}

void launch_dequantize_fp8(const Fp8Weight& w, int64_t n, int64_t k, void* out_bf16, cudaStream_t stream) {
  const int64_t total = n * k;
  if (total == 0) return;
  dequantize_kernel<<<grid_for(total), 256, 0, stream>>>(w, k, total, static_cast<__nv_bfloat16*>(out_bf16));
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
