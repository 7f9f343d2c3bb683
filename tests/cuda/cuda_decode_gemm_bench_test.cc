// Decode-batch linear timings (prints, never asserts speed): cuBLASLt (LtGemm, plus the separate
// act_mul kernel after gate/up) against decode_gemm.cu with the matching epilogue, on the
// Qwen3-0.6B and Llama-3.2-1B projections at the decode graphs' 16, 32, 48, 64, 128 and 256 tokens. Each
// timed graph replays calls that rotate through >= 256 MB of weight copies (L2 cannot serve them);
// median of 9 replays.
#include <gtest/gtest.h>

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

void bench_model(int64_t tokens, const std::vector<LinearShape>& shapes, const char* model) {
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cuda::LtGemm lt;
  double step_us[2] = {0.0, 0.0};
  for (const LinearShape& sh : shapes) {
    const bool gate_up = std::string(sh.name) == "gate_up";
    const RotatedWeights weights(sh.n, sh.k);
    const size_t bytes = weights.bytes();
    const int copies = weights.copies();
    const int calls = copies * std::max(1, (40 + copies - 1) / copies);
    void *x = nullptr, *out = nullptr, *act = nullptr;
    CUDA_CHECK(cudaMalloc(&x, static_cast<size_t>(tokens * sh.k) * 2));
    CUDA_CHECK(cudaMalloc(&out, static_cast<size_t>(tokens * sh.n) * 4));
    CUDA_CHECK(cudaMalloc(&act, static_cast<size_t>(tokens * sh.n) * 2));
    CUDA_CHECK(cudaMemset(x, 0x3C, static_cast<size_t>(tokens * sh.k) * 2));
    CUDA_CHECK(cudaMemset(out, 0, static_cast<size_t>(tokens * sh.n) * 4));
    const cuda::DecodeGemmEpilogue e = gate_up                ? cuda::DecodeGemmEpilogue::kActMul
                                       : sh.adds_to_residual ? cuda::DecodeGemmEpilogue::kAddF32
                                                             : cuda::DecodeGemmEpilogue::kStore;
    const int64_t n_out = gate_up ? sh.n / 2 : sh.n;
    const LinearCall impls[2] = {
        [&](const void* w, cudaStream_t st) {
          lt.run(x, w, nullptr, out, sh.adds_to_residual, tokens, sh.n, sh.k, st, sh.adds_to_residual);
          if (gate_up) cuda::launch_act_mul(out, tokens, sh.n / 2, Activation::kSilu, act, st);
        },
        [&](const void* w, cudaStream_t st) {
          cuda::launch_decode_gemm(cuda::DecodeGemmArgs{x, w, nullptr, false, gate_up ? act : out,
                                                        sh.adds_to_residual, tokens, n_out, sh.k, e, 0},
                                   st);
        }};
    double us[2];
    for (int i = 0; i < 2; ++i) {
      us[i] = graph_median_us_per_call(s, calls, [&] {
        for (int c = 0; c < calls; ++c) impls[i](weights.at(c), s);
      });
      step_us[i] += us[i] * sh.per_step;
    }
    std::printf("[bench] %s %-7s M=%lld [%lld x %lld] %.1f MB: cuBLASLt%s %.2f us (%.0f GB/s), decode_gemm %.2f us "
                "(%.0f GB/s), %.2fx\n",
                model, sh.name, static_cast<long long>(tokens), static_cast<long long>(sh.n),
                static_cast<long long>(sh.k), bytes / 1e6, gate_up ? "+silu" : "", us[0], bytes / us[0] / 1e3, us[1],
                bytes / us[1] / 1e3, us[0] / us[1]);
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(out));
    CUDA_CHECK(cudaFree(act));
  }
  std::printf("[bench] linears of one %s decode step, M=%lld: cuBLASLt %.0f us, decode_gemm %.0f us\n", model,
              static_cast<long long>(tokens), step_us[0], step_us[1]);
  CUDA_CHECK(cudaStreamDestroy(s));
}

TEST(CudaDecodeGemmBench, ModelShapesVsCublasLt) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9 || prop.minor != 0) GTEST_SKIP() << "decode_gemm needs an sm_90 GPU";
  for (int64_t m : {16, 32, 48, 64, 128, 256}) {
    bench_model(m, kQwen3Linears, "Qwen3-0.6B");
    bench_model(m, kLlamaLinears, "Llama-3.2-1B");
  }
}

}  // namespace
}  // namespace minivllm::cuda_test
