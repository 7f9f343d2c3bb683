// x's e4m3 codes in groups of 128 columns with their scales laid out as cuBLASLt's VEC128_32F mode
// reads them for the A operand: [cols / 128][scales_ld], the rows contiguous (the layout was found on the
// H200 by tools/gpu_probes/cublaslt_block_scales.cu; the row-major [rows][cols / 128] gives wrong sums).
// The arithmetic is launch_quantize_e4m3_groups's (common/fp8.h's formula: amax, 448 / amax, round to
// nearest even with saturation; scale amax / 448), so a group's bytes equal the host's.
#include <cuda_bf16.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/fp8_kv.cuh"

namespace minivllm::cuda {
namespace {

constexpr int kGroup = 128;
constexpr int kWarps = 8;  // groups a CTA, one warp each

// Warp w of CTA b: group g = b * kWarps + w of the rows x groups in row-major order; each lane reads
// four bf16 values (8 bytes) of it. Group gi's scales are a row of scales_ld.
__global__ void __launch_bounds__(kWarps * 32) quantize_vec128_kernel(const __nv_bfloat16* x, int64_t rows,
                                                                      int64_t groups, uint8_t* codes, float* scales,
                                                                      int64_t scales_ld) {
  const int lane = threadIdx.x & 31;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (g >= rows * groups) return;
  const int64_t row = g / groups, gi = g - row * groups;
  const int64_t base = row * groups * kGroup + gi * kGroup + lane * 4;
  const uint2 raw = *reinterpret_cast<const uint2*>(x + base);
  const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&raw);
  float v[4];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float2 f = __bfloat1622float2(p[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) amax = fmaxf(amax, fabsf(v[i]));
  amax = warp_max(amax);
  const float mul = e4m3_multiplier_device(amax);
  uint32_t packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) packed |= static_cast<uint32_t>(f32_to_e4m3_device(__fmul_rn(v[i], mul))) << (8 * i);
  *reinterpret_cast<uint32_t*>(codes + base) = packed;
  if (lane == 0) scales[gi * scales_ld + row] = e4m3_scale_device(amax);
}

}  // namespace

void launch_quantize_e4m3_vec128(const void* x, int64_t rows, int64_t cols, uint8_t* codes, float* scales,
                                 int64_t scales_ld, cudaStream_t stream) {
  if (rows == 0) return;
  MINIVLLM_CHECK(cols > 0 && cols % kGroup == 0) << "quantize_e4m3_vec128: " << cols << " columns, not groups of 128";
  MINIVLLM_CHECK(scales_ld >= rows) << "quantize_e4m3_vec128: scale rows of " << scales_ld << " for " << rows << " rows";
  const int64_t groups = cols / kGroup;
  const int64_t ctas = (rows * groups + kWarps - 1) / kWarps;
  MINIVLLM_CHECK(ctas < (int64_t{1} << 31)) << "quantize_e4m3_vec128: " << rows << " rows of " << cols;
  quantize_vec128_kernel<<<static_cast<unsigned>(ctas), kWarps * 32, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(x), rows, groups, codes, scales, scales_ld);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minivllm::cuda
