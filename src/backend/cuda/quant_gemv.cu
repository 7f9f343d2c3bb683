// quant_gemv.h's kernel. Each lane decodes whole 32-element units of its warp's row (a Q4_K
// sub-block with its 6-bit scale and min, half of a Q6_K 128-element group with its two int8
// scales, one Q5_0 block) to fp32 in registers, multiplies them with x and accumulates in fp32;
// the warp then sums its lanes. The formulas are common/quant_blocks_k.cc's, element for element.
#include <cuda_fp16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/quant_gemv.h"
#include "common/check.h"

namespace minivllm::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ float half_at(const uint8_t* p) {
  const unsigned short bits = static_cast<unsigned short>(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(bits));
}

__device__ __forceinline__ float x_at(const __nv_bfloat16* x, int64_t i) { return __bfloat162float(x[i]); }

// Unit j (0..7) of a Q4_K super-block: elements 32 j .. 32 j + 31.
__device__ float dot_q4_k(const uint8_t* b, int j, const __nv_bfloat16* x) {
  const uint8_t* s = b + 4;
  int sc, m;
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
  const float d = half_at(b) * static_cast<float>(sc), c = -(half_at(b + 2) * static_cast<float>(m));
  const uint8_t* qs = b + 16 + 32 * (j / 2);
  float qx = 0, xs = 0;
#pragma unroll 8
  for (int l = 0; l < 32; ++l) {
    const int q = (j & 1) ? qs[l] >> 4 : qs[l] & 15;
    const float xv = x_at(x, l);
    qx = fmaf(static_cast<float>(q), xv, qx);
    xs += xv;
  }
  return d * qx + c * xs;
}

// Unit u (0..7) of a Q6_K super-block: elements 32 u .. 32 u + 31, i.e. n = u / 4, k = u % 4.
__device__ float dot_q6_k(const uint8_t* b, int u, const __nv_bfloat16* x) {
  const int n = u / 4, k = u % 4;
  const uint8_t* ql = b + 64 * n + 32 * (k & 1);
  const uint8_t* qh = b + 128 + 32 * n;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * n + 2 * k;
  const float d = half_at(b + 208);
  float acc[2] = {0, 0};
#pragma unroll
  for (int half = 0; half < 2; ++half) {
#pragma unroll 8
    for (int i = 0; i < 16; ++i) {
      const int l = 16 * half + i;
      const int low = k >= 2 ? ql[l] >> 4 : ql[l] & 15;
      const int q = (low | (((qh[l] >> (2 * k)) & 3) << 4)) - 32;
      acc[half] = fmaf(static_cast<float>(q), x_at(x, l), acc[half]);
    }
  }
  return d * static_cast<float>(sc[0]) * acc[0] + d * static_cast<float>(sc[1]) * acc[1];
}

__device__ float dot_q5_0(const uint8_t* b, const __nv_bfloat16* x) {
  const uint32_t qh = b[2] | (b[3] << 8) | (b[4] << 16) | (static_cast<uint32_t>(b[5]) << 24);
  const uint8_t* qs = b + 6;
  float acc = 0;
#pragma unroll 8
  for (int j = 0; j < 16; ++j) {
    const int lo = ((qs[j] & 15) | (((qh >> j) & 1) << 4)) - 16;
    const int hi = ((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
    acc = fmaf(static_cast<float>(lo), x_at(x, j), acc);
    acc = fmaf(static_cast<float>(hi), x_at(x, j + 16), acc);
  }
  return half_at(b) * acc;
}

template <DType T>
__global__ void quant_gemv_kernel(const uint8_t* __restrict__ w, size_t row_bytes, const __nv_bfloat16* __restrict__ x,
                                  float* __restrict__ y, int64_t n, int64_t k) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= n) return;
  const uint8_t* wr = w + static_cast<size_t>(row) * row_bytes;
  float acc = 0;
  for (int64_t u = lane; u < k / 32; u += 32) {
    const __nv_bfloat16* xu = x + 32 * u;
    if constexpr (T == DType::kQ4_K) {
      acc += dot_q4_k(wr + (u / 8) * 144, static_cast<int>(u % 8), xu);
    } else if constexpr (T == DType::kQ6_K) {
      acc += dot_q6_k(wr + (u / 8) * 210, static_cast<int>(u % 8), xu);
    } else {
      acc += dot_q5_0(wr + u * 22, xu);
    }
  }
  acc = warp_sum(acc);
  if (lane == 0) y[row] = acc;
}

}  // namespace

bool quant_gemv_supports(DType wtype) {
  return wtype == DType::kQ4_K || wtype == DType::kQ6_K || wtype == DType::kQ5_0;
}

void quant_gemv(DType wtype, const void* w, size_t row_bytes, const __nv_bfloat16* x, float* y, int64_t n, int64_t k,
                cudaStream_t stream) {
  MINIVLLM_CHECK(quant_gemv_supports(wtype)) << "quant_gemv: no kernel for " << dtype_name(wtype);
  MINIVLLM_CHECK(k > 0 && k % dtype_block(wtype) == 0 && n > 0 && row_bytes >= dtype_nbytes(wtype, k))
      << "quant_gemv: " << n << " x " << k << " " << dtype_name(wtype) << " rows of " << row_bytes << " bytes";
  const dim3 grid(static_cast<unsigned>((n + kWarpsPerBlock - 1) / kWarpsPerBlock));
  const auto* wb = static_cast<const uint8_t*>(w);
  switch (wtype) {
    case DType::kQ4_K:
      quant_gemv_kernel<DType::kQ4_K><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(wb, row_bytes, x, y, n, k);
      break;
    case DType::kQ6_K:
      quant_gemv_kernel<DType::kQ6_K><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(wb, row_bytes, x, y, n, k);
      break;
    default:
      quant_gemv_kernel<DType::kQ5_0><<<grid, 32 * kWarpsPerBlock, 0, stream>>>(wb, row_bytes, x, y, n, k);
      break;
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
