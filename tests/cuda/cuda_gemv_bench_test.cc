// Decode linear timings (prints, never asserts speed): cuBLASLt (LtGemm) against launch_gemv on
// the Qwen3-0.6B and Llama-3.2-1B projections at 1 token and at the small graphs' 2, 4 and 8. Each timed graph replays many calls that rotate
// through enough weight copies (>= 256 MB) that L2 (50 MB) cannot serve them; median of 9 replays.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_gemm.h"
#include "backend/cuda/cuda_kernels.h"
#include "cuda_test_util.h"
#include "decode_linear_shapes.h"
#include "graph_timing.h"

namespace minivllm::cuda_test {
namespace {

using LinearCall = std::function<void(const void* w, cudaStream_t)>;

void bench_tokens(int64_t tokens, const std::vector<LinearShape>& shapes = kQwen3Linears,
                  const char* model = "Qwen3-0.6B") {
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cuda::LtGemm lt;
  double step_us[2] = {0.0, 0.0};
  for (const LinearShape& sh : shapes) {
    const RotatedWeights weights(sh.n, sh.k);
    const size_t bytes = weights.bytes();
    const int copies = weights.copies();
    const int calls = copies * std::max(1, (40 + copies - 1) / copies);
    void *x = nullptr, *out = nullptr;
    CUDA_CHECK(cudaMalloc(&x, static_cast<size_t>(tokens * sh.k) * 2));
    CUDA_CHECK(cudaMalloc(&out, static_cast<size_t>(tokens * sh.n) * 2));
    CUDA_CHECK(cudaMemset(x, 0x3C, static_cast<size_t>(tokens * sh.k) * 2));
    const LinearCall impls[2] = {
        [&](const void* w, cudaStream_t st) { lt.run(x, w, nullptr, out, false, tokens, sh.n, sh.k, st); },
        [&](const void* w, cudaStream_t st) { cuda::launch_gemv(x, w, nullptr, false, out, false, tokens, sh.n, sh.k, st); }};
    double us[2];
    for (int i = 0; i < 2; ++i) {
      us[i] = graph_median_us_per_call(s, calls, [&] {
        for (int c = 0; c < calls; ++c) impls[i](weights.at(c), s);
      });
      step_us[i] += us[i] * sh.per_step;
    }
    std::printf("[bench] linear %-7s M=%lld [%lld x %lld] %.1f MB: cuBLASLt %.2f us (%.0f GB/s), gemv %.2f us "
                "(%.0f GB/s), %d weight copies\n",
                sh.name, static_cast<long long>(tokens), static_cast<long long>(sh.n), static_cast<long long>(sh.k),
                bytes / 1e6, us[0], bytes / us[0] / 1e3, us[1], bytes / us[1] / 1e3, copies);
    ::testing::Test::RecordProperty(std::string("gemv_") + sh.name + "_M" + std::to_string(tokens) + "_GBps",
                                    std::to_string(bytes / us[1] / 1e3));
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(out));
  }
  std::printf("[bench] linears of one %s decode step, M=%lld: cuBLASLt %.0f us, gemv %.0f us\n", model,
              static_cast<long long>(tokens), step_us[0], step_us[1]);
  CUDA_CHECK(cudaStreamDestroy(s));
}

TEST(CudaGemvBench, QwenShapesVsCublasLt) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  bench_tokens(1);
  bench_tokens(8);
}

TEST(CudaGemvBench, LlamaShapesVsCublasLt) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  bench_tokens(1, kLlamaLinears, "Llama-3.2-1B");
}

// The batch sizes of the small decode graphs (2, 4, 8): the routing in use_gemv reads these rows.
TEST(CudaGemvBench, SmallBatches) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  for (int64_t m : {2, 4, 8}) {
    bench_tokens(m);
    bench_tokens(m, kLlamaLinears, "Llama-3.2-1B");
  }
}

}  // namespace
}  // namespace minivllm::cuda_test
