// backend/cuda/quant_gemv.h against the CPU backend's linear on the same stored blocks (Q4_K, Q6_K,
// Q5_0), batch 1, odd row counts and K of 1 to 16 blocks, the output poisoned before the call.
// Weights are random bytes with sane f16 scales (every code is valid); x is bf16-rounded, so both
// backends see the same values. The CPU quantises x to int16 per 32 elements and the GPU sums in
// fp32: both lie within 1e-4 of sum |w x| of the float64 result, so they agree to twice that.
#include <gtest/gtest.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/quant_gemv.h"
#include "common/quant_blocks.h"

namespace minivllm {
namespace {

#define SKIP_WITHOUT_CUDA() \
  if (!::minivllm::cuda_device_available()) GTEST_SKIP() << "no CUDA device"

void check_cuda(cudaError_t e, const char* what) { ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e); }

// n x k random blocks of `t`: random code bytes, f16 scales of a size that keeps the weights near 1.
Tensor random_blocks(DType t, int64_t n, int64_t k, uint32_t seed) {
  Tensor w = host_tensor(t, {n, k});
  std::mt19937 gen(seed);
  auto* bytes = static_cast<uint8_t*>(w.data());
  const size_t total = dtype_nbytes(t, n * k), block = dtype_size(t);
  for (size_t i = 0; i < total; ++i) bytes[i] = static_cast<uint8_t>(gen());
  std::vector<size_t> at = t == DType::kQ4_K ? std::vector<size_t>{0, 2} : t == DType::kQ6_K ? std::vector<size_t>{208}
                                                                                             : std::vector<size_t>{0};
  const float scale = t == DType::kQ4_K ? 0.005f : t == DType::kQ6_K ? 0.0005f : 0.06f;
  std::uniform_real_distribution<float> dist(0.2f, 1.0f);
  for (size_t b = 0; b < total / block; ++b) {
    for (size_t off : at) {
      const uint16_t h = f32_to_f16((gen() & 1 ? -1.0f : 1.0f) * dist(gen) * scale);
      std::memcpy(bytes + b * block + off, &h, 2);
    }
  }
  return w;
}

TEST(CudaQuantGemv, MatchesCpuBackend) {
  SKIP_WITHOUT_CUDA();
  auto cpu = make_cpu_backend();
  for (DType t : {DType::kQ4_K, DType::kQ6_K, DType::kQ5_0}) {
    const int64_t blk = dtype_block(t);
    for (const auto& [n, blocks] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {37, 3}, {129, 9}, {301, 16}}) {
      const int64_t k = blocks * blk;
      SCOPED_TRACE(std::string(dtype_name(t)) + " n " + std::to_string(n) + " k " + std::to_string(k));
      const Tensor w = random_blocks(t, n, k, static_cast<uint32_t>(n + k));
      std::mt19937 gen(7);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      std::vector<uint16_t> xb(static_cast<size_t>(k));
      std::vector<float> xf(static_cast<size_t>(k));
      for (int64_t i = 0; i < k; ++i) {
        xb[i] = f32_to_bf16(nd(gen));
        xf[i] = bf16_to_f32(xb[i]);
      }
      // CPU reference, and the tolerance's scale sum |w x| from the decoded weights.
      const Tensor wc = cpu->upload_stored_weight(w);
      Tensor xc = cpu->empty(DType::kF32, {1, k}), yc = cpu->empty(DType::kF32, {1, n});
      cpu->copy_from_host(xc, xf.data());
      cpu->linear(xc, wc, nullptr, yc);
      std::vector<float> want(static_cast<size_t>(n)), decoded(static_cast<size_t>(n * k));
      cpu->copy_to_host(want.data(), yc);
      dequantize_to_f32(t, w.data(), decoded.data(), n * k);
      // GPU
      const size_t wbytes = dtype_nbytes(t, n * k);
      void* dw = nullptr;
      __nv_bfloat16* dx = nullptr;
      float* dy = nullptr;
      check_cuda(cudaMalloc(&dw, wbytes), "cudaMalloc w");
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&dx), k * 2), "cudaMalloc x");
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&dy), n * 4), "cudaMalloc y");
      check_cuda(cudaMemcpy(dw, w.data(), wbytes, cudaMemcpyHostToDevice), "copy w");
      check_cuda(cudaMemcpy(dx, xb.data(), k * 2, cudaMemcpyHostToDevice), "copy x");
      check_cuda(cudaMemset(dy, 0xff, n * 4), "poison y");
      cuda::quant_gemv(t, dw, dtype_nbytes(t, k), dx, dy, n, k, nullptr);
      std::vector<float> got(static_cast<size_t>(n));
      check_cuda(cudaMemcpy(got.data(), dy, n * 4, cudaMemcpyDeviceToHost), "copy y");
      cudaFree(dw);
      cudaFree(dx);
      cudaFree(dy);
      for (int64_t j = 0; j < n; ++j) {
        double mag = 0;
        for (int64_t i = 0; i < k; ++i) mag += std::abs(static_cast<double>(decoded[j * k + i]) * xf[i]);
        ASSERT_NEAR(got[j], want[j], 2e-4 * mag + 1e-5) << "row " << j;
      }
    }
  }
}

TEST(CudaQuantGemv, RefusesOtherTypesByName) {
  EXPECT_FALSE(cuda::quant_gemv_supports(DType::kQ4_1));
  try {
    cuda::quant_gemv(DType::kQ4_1, nullptr, 20, nullptr, nullptr, 1, 32, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("q4_1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace minivllm
