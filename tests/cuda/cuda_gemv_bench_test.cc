// Decode linear timings (prints, never asserts speed): cuBLASLt (LtGemm) against launch_gemv on
// the Qwen3-0.6B and Llama-3.2-1B projections at 1 token and at the small graphs' 2, 4 and 8. Each timed graph replays many calls that rotate
// through enough weight copies (>= 256 MB) that L2 (50 MB) cannot serve them; median of 9 replays.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
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

// One token through the gate/up (act_mul) and residual-add (o, down) gemvs as the decode layers call
// them, on the same rotated weights as above: what the plain rows do not show.
TEST(CudaGemvBench, GatedAndResidualAtOneToken) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (const auto* shapes : {&kQwen3Linears, &kLlamaLinears}) {
    for (const LinearShape& sh : *shapes) {
      const bool gated = std::string(sh.name) == "gate_up";
      if (!gated && !sh.adds_to_residual) continue;
      const RotatedWeights weights(sh.n, sh.k);
      const int calls = weights.copies() * std::max(1, (40 + weights.copies() - 1) / weights.copies());
      void *x = nullptr, *out = nullptr;
      CUDA_CHECK(cudaMalloc(&x, static_cast<size_t>(sh.k) * 2));
      CUDA_CHECK(cudaMalloc(&out, static_cast<size_t>(sh.n) * 4));
      CUDA_CHECK(cudaMemset(x, 0x3C, static_cast<size_t>(sh.k) * 2));
      CUDA_CHECK(cudaMemset(out, 0, static_cast<size_t>(sh.n) * 4));
      const double us = graph_median_us_per_call(s, calls, [&] {
        for (int c = 0; c < calls; ++c) {
          if (gated) {
            cuda::launch_gemv_act_mul(x, weights.at(c), out, 1, sh.n / 2, sh.k, Activation::kSilu, s);
          } else {
            cuda::launch_gemv_add_f32(x, weights.at(c), static_cast<float*>(out), 1, sh.n, sh.k, s);
          }
        }
      });
      std::printf("[bench] %s %-7s M=1 [%lld x %lld] %s: %.2f us (%.0f GB/s)\n", shapes == &kQwen3Linears ? "Qwen3" : "Llama",
                  sh.name, static_cast<long long>(sh.n), static_cast<long long>(sh.k),
                  gated ? "act_mul" : "add_f32", us, weights.bytes() / us / 1e3);
      CUDA_CHECK(cudaFree(x));
      CUDA_CHECK(cudaFree(out));
    }
  }
  CUDA_CHECK(cudaStreamDestroy(s));
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
