// OLMo 2's q/k norms over every head of a token's q and of its k at once (Backend::qk_sum_squares,
// Backend::qk_norm_full_width): the sums of squares apart from the scaling, so that tensor
// parallelism can all-reduce them in between. One CTA a (token, q or k): a row of a few thousand
// values, read 8 at a time. Plain launches (no PDL): the projection before and the rope after are
// ordinary stream neighbours.
#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_utils.cuh"

namespace minivllm::cuda {
namespace {

constexpr int kThreads = 256;

// Row (token t, part p) of qkv: q (p 0) at column 0, k (p 1) at column q_cols; in 8-value chunks.
__device__ __forceinline__ uint4* qk_row(void* qkv, int64_t stride_chunks, int64_t q_chunks) {
  return static_cast<uint4*>(qkv) + blockIdx.x * stride_chunks + (blockIdx.y == 0 ? 0 : q_chunks);
}

// The sum of the squares of a row's `chunks` 8-value chunks, over the CTA (every thread gets it).
__device__ float row_sum_squares(const uint4* row, int64_t chunks, float* scratch) {
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
    float v[8];
    bf16x8_to_f32(row[c], v);
#pragma unroll
    for (int i = 0; i < 8; ++i) s = fmaf(v[i], v[i], s);
  }
  return block_sum(s, scratch);
}

__global__ void qk_sum_squares_kernel(const void* qkv, int64_t stride_chunks, int64_t q_chunks, int64_t k_chunks,
                                      float* sums) {
  __shared__ float scratch[32];
  const uint4* row = qk_row(const_cast<void*>(qkv), stride_chunks, q_chunks);
  const float s = row_sum_squares(row, blockIdx.y == 0 ? q_chunks : k_chunks, scratch);
  if (threadIdx.x == 0) sums[blockIdx.x * 2 + blockIdx.y] = s;
}

// sums nullptr (one rank): the CTA sums its own row first.
__global__ void qk_norm_full_width_kernel(void* qkv, int64_t stride_chunks, int64_t q_chunks, int64_t k_chunks,
                                          const float* sums, float q_width, float k_width, const float* q_norm,
                                          const float* k_norm, float eps) {
  __shared__ float scratch[32];
  uint4* row = qk_row(qkv, stride_chunks, q_chunks);
  const bool q = blockIdx.y == 0;
  const int64_t chunks = q ? q_chunks : k_chunks;
  const float* w = q ? q_norm : k_norm;
  const float s = sums != nullptr ? sums[blockIdx.x * 2 + blockIdx.y] : row_sum_squares(row, chunks, scratch);
  const float inv = rsqrtf(s / (q ? q_width : k_width) + eps);
  for (int64_t c = threadIdx.x; c < chunks; c += kThreads) {
    float v[8];
    bf16x8_to_f32(row[c], v);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = (v[i] * inv) * w[c * 8 + i];
    row[c] = f32_to_bf16x8(v);
  }
}

}  // namespace

void launch_qk_sum_squares(const void* qkv, int64_t tokens, int64_t q_cols, int64_t k_cols, int64_t stride,
                           float* sums, cudaStream_t stream) {
  if (tokens == 0) return;
  qk_sum_squares_kernel<<<dim3(static_cast<unsigned>(tokens), 2), kThreads, 0, stream>>>(qkv, stride / 8, q_cols / 8,
                                                                                        k_cols / 8, sums);
  CUDA_CHECK_LAUNCH();
}

void launch_qk_norm_full_width(void* qkv, int64_t tokens, int64_t q_cols, int64_t k_cols, int64_t stride,
                               const float* sums, int64_t q_width, int64_t k_width, const float* q_norm,
                               const float* k_norm, float eps, cudaStream_t stream) {
  if (tokens == 0) return;
  qk_norm_full_width_kernel<<<dim3(static_cast<unsigned>(tokens), 2), kThreads, 0, stream>>>(
      qkv, stride / 8, q_cols / 8, k_cols / 8, sums, static_cast<float>(q_width), static_cast<float>(k_width), q_norm,
      k_norm, eps);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
