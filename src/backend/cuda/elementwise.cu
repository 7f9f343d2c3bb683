// Row-wise and element-wise kernels: embedding lookup (vocab-parallel), RMSNorm and the fused
// residual-add RMSNorm, SiLU-and-multiply, row gathering, bf16 -> fp32 and the bias add of linear.
// All move 16 bytes (8 bf16) per thread access; the ops in cuda_ops.cc check the alignment.
#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/fp8_kv.cuh"
#include "backend/cuda/pdl_launch.h"

namespace minivllm::cuda {
namespace {

constexpr int kRowThreads = 256;

// kF32Out: the row goes out as fp32 (straight into the residual stream: no conversion kernel).
template <bool kF32Out>
__global__ void embedding_kernel(const int32_t* ids, const uint4* weight, int64_t rows, int64_t chunks,
                                 int64_t vocab_start, void* out) {
  const int64_t t = blockIdx.x;
  const int64_t local = static_cast<int64_t>(ids[t]) - vocab_start;
  const bool inside = local >= 0 && local < rows;  // another shard's id gives a zero row
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    const uint4 v = inside ? weight[local * chunks + c] : make_uint4(0, 0, 0, 0);
    if constexpr (kF32Out) {
      float f[8];
      bf16x8_to_f32(v, f);
      store_f32x8(static_cast<float*>(out) + (t * chunks + c) * 8, f);
    } else {
      static_cast<uint4*>(out)[t * chunks + c] = v;
    }
  }
}

// One CTA per row. With a residual: residual += x, then the norm of the new residual goes to x
// (out == x). A bf16 residual is rounded after the add; an fp32 residual (kResidualF32) keeps the
// stream in fp32 across layers, which is what keeps a bf16 engine close to an fp32 reference.
// Each thread rereads only the chunks it wrote itself. kXF32 (no residual): x is fp32 (the
// residual stream itself), out bf16. A thread's first chunk (its only one up to blockDim.x * 8
// values, i.e. every row of the target models) stays in registers between the two passes, and its
// weights are loaded before the wait: after the reduction only the arithmetic and the store remain.
template <bool kResidual, bool kResidualF32, bool kXF32 = false>
__global__ void rms_norm_kernel(const uint4* x, void* residual_ptr, const void* w, bool w_f32, float eps,
                                int64_t chunks, uint4* out) {
  pdl_launch_dependents();  // the next gemv may start streaming its weights now
  const int64_t c0 = threadIdx.x;
  float v0[8], w0[8];
  if (c0 < chunks) load_weight8(w, w_f32, c0 * 8, w0);  // weights: no earlier kernel writes them
  // Launched with programmatic dependent launch: resident while the kernel before it (the
  // residual-adding projection) drains, and waiting here for its writes.
  pdl_wait();
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * chunks;
  uint4* residual = static_cast<uint4*>(residual_ptr);
  float* residual_f32 = static_cast<float*>(residual_ptr);
  const float* x_f32 = reinterpret_cast<const float*>(x);
  float sum_sq = 0.0f;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float v[8];
    if constexpr (kXF32) {
      load_f32x8(x_f32 + (base + c) * 8, v);
    } else {
      bf16x8_to_f32(x[base + c], v);
    }
    if (kResidual && kResidualF32) {
      float r[8];
      load_f32x8(residual_f32 + (base + c) * 8, r);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] += r[i];
      store_f32x8(residual_f32 + (base + c) * 8, v);
    } else if (kResidual) {
      float r[8];
      bf16x8_to_f32(residual[base + c], r);
#pragma unroll
      for (int i = 0; i < 8; ++i) r[i] += v[i];
      const uint4 packed = f32_to_bf16x8(r);
      residual[base + c] = packed;
      bf16x8_to_f32(packed, v);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) sum_sq += v[i] * v[i];
    if (c == c0) {
#pragma unroll
      for (int i = 0; i < 8; ++i) v0[i] = v[i];
    }
  }
  sum_sq = block_sum(sum_sq, scratch);
  const float inv = 1.0f / sqrtf(sum_sq / static_cast<float>(chunks * 8) + eps);
  if (c0 < chunks) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v0[i] = (v0[i] * inv) * w0[i];
    out[base + c0] = f32_to_bf16x8(v0);
  }
  for (int64_t c = threadIdx.x + blockDim.x; c < chunks; c += blockDim.x) {
    float v[8], wt[8];
    if (kResidual && kResidualF32) {
      load_f32x8(residual_f32 + (base + c) * 8, v);
    } else if constexpr (kXF32) {
      load_f32x8(x_f32 + (base + c) * 8, v);
    } else {
      bf16x8_to_f32((kResidual ? residual : x)[base + c], v);
    }
    load_weight8(w, w_f32, c * 8, wt);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = (v[i] * inv) * wt[i];
    out[base + c] = f32_to_bf16x8(v);
  }
}

// Sandwich norms' join (Backend::norm_add_norm), one CTA a row: x' = rms_norm(x) * w_out rounded to
// bf16 (as rms_norm_kernel rounds it), residual (fp32) += x', then x = rms_norm(residual) * w_next
// (kNextNorm) or the residual rounded to bf16. The sums run in rms_norm_kernel's order (the same
// thread count, each thread's chunks in turn), and each thread rereads only the chunks it wrote.
template <bool kNextNorm>
__global__ void norm_add_norm_kernel(uint4* x, float* residual, const void* w_out, bool out_f32, float out_eps,
                                     const void* w_next, bool next_f32, float next_eps, int64_t chunks) {
  pdl_launch_dependents();
  pdl_wait();  // x is the projection's output, the residual the stream it adds to
  __shared__ float scratch[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * chunks;
  const float n = static_cast<float>(chunks * 8);
  float sum_sq = 0.0f;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float v[8];
    bf16x8_to_f32(x[base + c], v);
#pragma unroll
    for (int i = 0; i < 8; ++i) sum_sq += v[i] * v[i];
  }
  const float inv = 1.0f / sqrtf(block_sum(sum_sq, scratch) / n + out_eps);
  float next_sq = 0.0f;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float v[8], wt[8], r[8];
    bf16x8_to_f32(x[base + c], v);
    load_weight8(w_out, out_f32, c * 8, wt);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = (v[i] * inv) * wt[i];
    bf16x8_to_f32(f32_to_bf16x8(v), v);  // the output norm's bf16, as the unfused path adds it
    load_f32x8(residual + (base + c) * 8, r);
#pragma unroll
    for (int i = 0; i < 8; ++i) r[i] = v[i] + r[i];
    store_f32x8(residual + (base + c) * 8, r);
    if constexpr (kNextNorm) {
#pragma unroll
      for (int i = 0; i < 8; ++i) next_sq += r[i] * r[i];
    } else {
      x[base + c] = f32_to_bf16x8(r);
    }
  }
  if constexpr (kNextNorm) {
    const float inv_next = 1.0f / sqrtf(block_sum(next_sq, scratch) / n + next_eps);
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
      float r[8], wt[8];
      load_f32x8(residual + (base + c) * 8, r);
      load_weight8(w_next, next_f32, c * 8, wt);
#pragma unroll
      for (int i = 0; i < 8; ++i) r[i] = (r[i] * inv_next) * wt[i];
      x[base + c] = f32_to_bf16x8(r);
    }
  }
}

// residual (fp32) += x (bf16 or fp32), 8 values per thread.
__global__ void add_to_f32_kernel(const void* x, bool x_f32, int64_t chunks, float* residual) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= chunks) return;
  float v[8];
  if (x_f32) {
    load_f32x8(static_cast<const float*>(x) + c * 8, v);
  } else {
    bf16x8_to_f32(static_cast<const uint4*>(x)[c], v);
  }
  add_f32x8(residual + c * 8, v);
}

__global__ void scale_f32_kernel(float* x, int64_t n, float factor) {
  pdl_wait();  // x is the previous kernel's output (the embedding)
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= factor;
}

__global__ void softcap_f32_kernel(float* x, int64_t n, float cap) {
  pdl_wait();  // x is the previous kernel's output (the LM head's logits)
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = cap * tanhf(x[i] / cap);  // tanhf, not tanh.approx: the CPU's std::tanh to an ulp or two
}

// One CTA per row: s = sigmoid(x[t] . gate) (f32 products summed per thread, then over the CTA),
// then out[t, :] *= s, each value rounded once to bf16 (Backend::sigmoid_gate_rows: Qwen2-MoE's
// shared expert gate). expf, not __expf: the CPU's std::exp to an ulp or two.
__global__ void sigmoid_gate_rows_kernel(const uint4* x, const float* gate, uint4* out, int64_t x_chunks,
                                         int64_t out_chunks) {
  __shared__ float scratch[32];
  pdl_wait();  // x and out are the previous kernels' outputs
  const int64_t t = blockIdx.x;
  float dot = 0.0f;
  for (int64_t c = threadIdx.x; c < x_chunks; c += blockDim.x) {
    float xv[8], gv[8];
    bf16x8_to_f32(x[t * x_chunks + c], xv);
    load_f32x8(gate + c * 8, gv);
#pragma unroll
    for (int i = 0; i < 8; ++i) dot = fmaf(xv[i], gv[i], dot);
  }
  dot = block_sum(dot, scratch);
  const float s = 1.0f / (1.0f + expf(-dot));
  for (int64_t c = threadIdx.x; c < out_chunks; c += blockDim.x) {
    float v[8];
    bf16x8_to_f32(out[t * out_chunks + c], v);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] *= s;
    out[t * out_chunks + c] = f32_to_bf16x8(v);
  }
}

// One thread per element, grid-stride: a load-time kernel, run once per weight. The value is stored
// as f32, bf16 (rounded to nearest) or, with scale > 0, as the e4m3 code of value / scale: an IEEE
// division (__fdiv_rn, whatever the compiler's flags) and cvt.rn.satfinite, the host's
// f32_to_e4m3(value / scale) bit for bit.
enum class HashedOut { kF32, kBf16, kE4m3 };

template <HashedOut O>
__global__ void fill_hashed_kernel(void* out, int64_t rows, int64_t cols, HashedUniform h, float scale, int64_t base,
                                   int64_t row_stride) {
  const int64_t total = rows * cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i - r * cols;
    const float v = hashed_uniform_value(h, static_cast<uint64_t>(base + r * row_stride + c));
    if constexpr (O == HashedOut::kBf16) {
      static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
    } else if constexpr (O == HashedOut::kE4m3) {
      static_cast<uint8_t*>(out)[i] = f32_to_e4m3_device(__fdiv_rn(v, scale));
    } else {
      static_cast<float*>(out)[i] = v;
    }
  }
}

__global__ void act_mul_kernel(const uint4* gate_up, int64_t tokens, int64_t chunks, Activation act, uint4* out) {
  pdl_launch_dependents();  // the down projection may start streaming its weights now
  pdl_wait();               // gate_up is the previous kernel's output (programmatic dependent launch)
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= tokens * chunks) return;
  const int64_t t = idx / chunks;
  const int64_t c = idx - t * chunks;
  float g[8], u[8];
  bf16x8_to_f32(gate_up[t * 2 * chunks + c], g);
  bf16x8_to_f32(gate_up[t * 2 * chunks + chunks + c], u);
#pragma unroll
  for (int i = 0; i < 8; ++i) g[i] = gate_act(g[i], act) * u[i];
  out[idx] = f32_to_bf16x8(g);
}

__global__ void gather_rows16_kernel(const uint4* x, int64_t chunks, const int32_t* indices, uint4* out) {
  const int64_t r = blockIdx.x;
  const int64_t src = indices[r];
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) out[r * chunks + c] = x[src * chunks + c];
}

__global__ void gather_rows_bytes_kernel(const uint8_t* x, int64_t row_bytes, const int32_t* indices, uint8_t* out) {
  const int64_t r = blockIdx.x;
  const int64_t src = indices[r];
  for (int64_t c = threadIdx.x; c < row_bytes; c += blockDim.x) out[r * row_bytes + c] = x[src * row_bytes + c];
}

__global__ void bf16_to_f32_kernel(const __nv_bfloat16* x, int64_t n, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __bfloat162float(x[i]);
}

__global__ void f32_to_bf16_kernel(const float* x, int64_t chunks, uint4* out) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= chunks) return;
  float v[8];
  load_f32x8(x + c * 8, v);
  out[c] = f32_to_bf16x8(v);
}

__global__ void bias_add_kernel(void* out, bool out_f32, const void* bias, bool bias_f32, int64_t rows, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * n) return;
  const float b = load_weight(bias, bias_f32, i % n);
  if (out_f32) {
    static_cast<float*>(out)[i] += b;
  } else {
    auto* o = static_cast<__nv_bfloat16*>(out);
    o[i] = __float2bfloat16(__bfloat162float(o[i]) + b);
  }
}

unsigned grid_for(int64_t n, int threads) { return static_cast<unsigned>(ceil_div(n, threads)); }

}  // namespace

void launch_embedding(const int32_t* ids, int64_t tokens, const void* weight, int64_t rows, int64_t hidden,
                      int64_t vocab_start, void* out, bool out_f32, cudaStream_t stream) {
  if (tokens == 0) return;
  const auto* w = static_cast<const uint4*>(weight);
  if (out_f32) {
    embedding_kernel<true><<<static_cast<unsigned>(tokens), 128, 0, stream>>>(ids, w, rows, hidden / 8, vocab_start, out);
  } else {
    embedding_kernel<false><<<static_cast<unsigned>(tokens), 128, 0, stream>>>(ids, w, rows, hidden / 8, vocab_start, out);
  }
  CUDA_CHECK_LAUNCH();
}

void launch_rms_norm_f32_in(const float* x, const void* w, bool w_f32, float eps, int64_t rows, int64_t n, void* out,
                            cudaStream_t stream) {
  if (rows == 0) return;
  const int64_t chunks = n / 8;
  const int threads = static_cast<int>(std::min<int64_t>(kRowThreads, ceil_div(chunks, 32) * 32));
  launch_with_pdl(rms_norm_kernel<false, false, true>, dim3(static_cast<unsigned>(rows)), dim3(threads), 0, stream,
                  reinterpret_cast<const uint4*>(x), nullptr, w, w_f32, eps, chunks, static_cast<uint4*>(out));
  CUDA_CHECK_LAUNCH();
}

void launch_add_to_f32(const void* x, bool x_f32, int64_t n, float* residual, cudaStream_t stream) {
  const int64_t chunks = n / 8;
  if (chunks == 0) return;
  add_to_f32_kernel<<<grid_for(chunks, 256), 256, 0, stream>>>(x, x_f32, chunks, residual);
  CUDA_CHECK_LAUNCH();
}

void launch_rms_norm(void* x, void* residual, bool residual_f32, const void* w, bool w_f32, float eps, int64_t rows,
                     int64_t n, void* out, cudaStream_t stream) {
  if (rows == 0) return;
  const int64_t chunks = n / 8;
  const int threads = static_cast<int>(std::min<int64_t>(kRowThreads, ceil_div(chunks, 32) * 32));
  const auto* xin = static_cast<const uint4*>(x);
  if (residual != nullptr && residual_f32) {
    launch_with_pdl(rms_norm_kernel<true, true>, dim3(static_cast<unsigned>(rows)), dim3(threads), 0, stream, xin,
                    residual, w, w_f32, eps, chunks, static_cast<uint4*>(x));
  } else if (residual != nullptr) {
    launch_with_pdl(rms_norm_kernel<true, false>, dim3(static_cast<unsigned>(rows)), dim3(threads), 0, stream, xin,
                    residual, w, w_f32, eps, chunks, static_cast<uint4*>(x));
  } else {
    launch_with_pdl(rms_norm_kernel<false, false>, dim3(static_cast<unsigned>(rows)), dim3(threads), 0, stream, xin,
                    nullptr, w, w_f32, eps, chunks, static_cast<uint4*>(out));
  }
  CUDA_CHECK_LAUNCH();
}

void launch_scale_f32(float* x, int64_t n, float factor, cudaStream_t stream) {
  if (n == 0) return;
  launch_with_pdl(scale_f32_kernel, dim3(grid_for(n, 256)), dim3(256), 0, stream, x, n, factor);
  CUDA_CHECK_LAUNCH();
}

void launch_sigmoid_gate_rows(const void* x, const float* gate, void* out, int64_t tokens, int64_t hidden, int64_t n,
                              cudaStream_t stream) {
  if (tokens == 0) return;
  launch_with_pdl(sigmoid_gate_rows_kernel, dim3(static_cast<unsigned>(tokens)), dim3(kRowThreads), 0, stream,
                  static_cast<const uint4*>(x), gate, static_cast<uint4*>(out), hidden / 8, n / 8);
  CUDA_CHECK_LAUNCH();
}

void launch_softcap_f32(float* x, int64_t n, float cap, cudaStream_t stream) {
  if (n == 0) return;
  launch_with_pdl(softcap_f32_kernel, dim3(grid_for(n, 256)), dim3(256), 0, stream, x, n, cap);
  CUDA_CHECK_LAUNCH();
}

namespace {

template <HashedOut O>
void launch_fill_hashed(void* out, int64_t rows, int64_t cols, const HashedUniform& h, float scale, int64_t base,
                        int64_t row_stride, cudaStream_t stream) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  const int blocks = static_cast<int>(std::min<int64_t>(grid_for(total, 256), 65535));
  fill_hashed_kernel<O><<<blocks, 256, 0, stream>>>(out, rows, cols, h, scale, base, row_stride);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_fill_hashed_e4m3(uint8_t* out, int64_t rows, int64_t cols, const HashedUniform& h, float scale,
                             int64_t base, int64_t row_stride, cudaStream_t stream) {
  launch_fill_hashed<HashedOut::kE4m3>(out, rows, cols, h, scale, base, row_stride, stream);
}

void launch_fill_hashed_uniform(void* out, bool bf16, int64_t rows, int64_t cols, const HashedUniform& h, int64_t base,
                                int64_t row_stride, cudaStream_t stream) {
  if (bf16) return launch_fill_hashed<HashedOut::kBf16>(out, rows, cols, h, 0.0f, base, row_stride, stream);
  launch_fill_hashed<HashedOut::kF32>(out, rows, cols, h, 0.0f, base, row_stride, stream);
}

void launch_act_mul(const void* gate_up, int64_t tokens, int64_t inter, Activation act, void* out,
                    cudaStream_t stream) {
  const int64_t total = tokens * (inter / 8);
  if (total == 0) return;
  launch_with_pdl(act_mul_kernel, dim3(grid_for(total, 256)), dim3(256), 0, stream,
                  static_cast<const uint4*>(gate_up), tokens, inter / 8, act, static_cast<uint4*>(out));
  CUDA_CHECK_LAUNCH();
}

void launch_gather_rows(const void* x, int64_t row_bytes, const int32_t* indices, int64_t n, void* out,
                        cudaStream_t stream) {
  if (n == 0 || row_bytes == 0) return;
  const bool aligned = row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(out) % 16 == 0;
  if (aligned) {
    gather_rows16_kernel<<<static_cast<unsigned>(n), 256, 0, stream>>>(static_cast<const uint4*>(x), row_bytes / 16,
                                                                        indices, static_cast<uint4*>(out));
  } else {
    gather_rows_bytes_kernel<<<static_cast<unsigned>(n), 256, 0, stream>>>(static_cast<const uint8_t*>(x), row_bytes,
                                                                            indices, static_cast<uint8_t*>(out));
  }
  CUDA_CHECK_LAUNCH();
}

void launch_bf16_to_f32(const void* x, int64_t n, float* out, cudaStream_t stream) {
  if (n == 0) return;
  bf16_to_f32_kernel<<<grid_for(n, 256), 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(x), n, out);
  CUDA_CHECK_LAUNCH();
}

void launch_norm_add_norm(void* x, float* residual, const void* w_out, bool out_f32, float out_eps, const void* w_next,
                          bool next_f32, float next_eps, int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows == 0) return;
  const int64_t chunks = n / 8;
  const int threads = static_cast<int>(std::min<int64_t>(kRowThreads, ceil_div(chunks, 32) * 32));
  auto* kernel = w_next != nullptr ? norm_add_norm_kernel<true> : norm_add_norm_kernel<false>;
  launch_with_pdl(kernel, dim3(static_cast<unsigned>(rows)), dim3(threads), 0, stream, static_cast<uint4*>(x),
                  residual, w_out, out_f32, out_eps, w_next, next_f32, next_eps, chunks);
  CUDA_CHECK_LAUNCH();
}

void launch_f32_to_bf16(const float* x, int64_t n, void* out, cudaStream_t stream) {
  const int64_t chunks = n / 8;
  if (chunks == 0) return;
  f32_to_bf16_kernel<<<grid_for(chunks, 256), 256, 0, stream>>>(x, chunks, static_cast<uint4*>(out));
  CUDA_CHECK_LAUNCH();
}

void launch_bias_add(void* out, bool out_f32, const void* bias, bool bias_f32, int64_t rows, int64_t n,
                     cudaStream_t stream) {
  if (rows * n == 0) return;
  bias_add_kernel<<<grid_for(rows * n, 256), 256, 0, stream>>>(out, out_f32, bias, bias_f32, rows, n);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
