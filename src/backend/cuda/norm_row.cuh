// An RMSNorm row held in registers, for the kernels that turn the normed row straight into codes
// (fp8_quant.cu's e4m3 rows, quant_gemv.cu's int8 units) without writing it: the same threads a row,
// order of the sum of squares and 1 / rms as rms_norm_kernel (elementwise.cu), so that their codes
// are those of the norm's bf16 output.
#pragma once

#include <cstdint>

#include "backend/cuda/device_utils.cuh"

namespace minivllm::cuda {

// Thread t's chunks of eight t, t + blockDim.x, ... (kChunks of them) of the fp32 row xr into v, and
// the row's 1 / rms. Every thread of the CTA calls it (a block reduction through scratch[32]).
template <int kChunks>
__device__ __forceinline__ float load_row_inv_rms(const float* xr, int64_t chunks, float eps, float (&v)[kChunks][8],
                                                  float* scratch) {
  float sum_sq = 0.0f;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (c < chunks) {
      load_f32x8(xr + c * 8, v[i]);
#pragma unroll
      for (int j = 0; j < 8; ++j) sum_sq += v[i][j] * v[i][j];
    }
  }
  sum_sq = block_sum(sum_sq, scratch);
  return 1.0f / sqrtf(sum_sq / static_cast<float>(chunks * 8) + eps);
}

}  // namespace minivllm::cuda
