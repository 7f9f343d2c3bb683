// Backend::prefetch_weights (MINIVLLM_L2_PREFETCH_MB): the decode attention kernels pull the layer's
// next weights into L2 before their PDL wait. A hint only, so every decode kernel must give the same
// bits with it as without it; and a bench of what it buys a gemv that follows a latency-bound kernel.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "attention_case.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "graph_timing.h"

namespace minivllm::cuda_test {
namespace {

constexpr const char* kForms[] = {"bulk", "bulk-last", "lines"};

// Every decode kernel a switch reaches, each prefetch form, ranges that end off 16 bytes and a
// budget that stops inside the second range: the outputs equal those without the hint, bit for bit.
TEST(CudaL2Prefetch, DecodeAttentionIsUnchanged) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  AttentionCase llama{32, 8, 64, 16, {}, {1, 300, 2999}};
  llama.decode = true;
  AttentionCase qwen{16, 8, 128, 256, {}, {300}};
  qwen.decode = true;
  for (const AttentionCase& base_case : {llama, qwen}) {
    for (const DecodeSwitch& sw : kDecodeSwitches) {
      with_decode_switch(sw, [&](const std::string& tag) {
        Backends plain;
        const AttentionOutputs base = run_attention_case(plain, base_case, 61);
        for (const char* form : kForms) {
          setenv("MINIVLLM_L2_PREFETCH_MB", "1", 1);  // read when the backend is made
          setenv("MINIVLLM_L2_PREFETCH_FORM", form, 1);
          Backends b;
          unsetenv("MINIVLLM_L2_PREFETCH_MB");
          unsetenv("MINIVLLM_L2_PREFETCH_FORM");
          const Tensor odd = b.gpu->empty(DType::kBF16, {3, 7});         // 42 bytes: 32 fetched
          const Tensor big = b.gpu->empty(DType::kBF16, {1000, 1024});   // past the 1 MB budget
          const Tensor never = b.gpu->empty(DType::kBF16, {64, 64});     // after the budget
          AttentionCase c = base_case;
          c.prefetch = {&odd, &big, &never};
          const AttentionOutputs o = run_attention_case(b, c, 61);
          EXPECT_EQ(o.gpu, base.gpu) << tag << ", form " << form << ", " << base_case.nq << " q heads";
          EXPECT_TRUE(o.sentinel_intact) << tag << ", form " << form;
        }
      });
    }
  }
}

// A latency-bound kernel of `spin` ns (the probe) then a one-token gemv over weights L2 does not
// hold (each call streams another copy): the pair's time with the probe fetching that gemv's
// weights, each form, against without. Prints; never asserts speed.
TEST(CudaL2PrefetchBench, GemvAfterALatencyKernel) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  struct Shape {
    const char* name;
    int64_t n, k;
  };
  // Llama-3.2-1B's o and gate/up; Qwen3-0.6B's gate/up.
  for (const Shape& sh : {Shape{"llama o", 2048, 2048}, Shape{"llama gate/up", 16384, 2048},
                          Shape{"qwen3 gate/up", 6144, 1024}}) {
    const RotatedWeights weights(sh.n, sh.k);
    const int calls = weights.copies() * std::max(1, (24 + weights.copies() - 1) / weights.copies());
    void *x = nullptr, *out = nullptr;
    CUDA_CHECK(cudaMalloc(&x, static_cast<size_t>(sh.k) * 2));
    CUDA_CHECK(cudaMalloc(&out, static_cast<size_t>(sh.n) * 2));
    CUDA_CHECK(cudaMemset(x, 0x3C, static_cast<size_t>(sh.k) * 2));
    for (int64_t spin : {3000, 6000}) {
      for (int ctas : {8, 32}) {
        for (uint64_t mb : {uint64_t{8}, uint64_t{24}, uint64_t{64}}) {
          std::string line;
          for (int form = -1; form < 3; ++form) {
            const double us = graph_median_us_per_call(s, calls, [&] {
              for (int c = 0; c < calls; ++c) {
                cuda::L2Prefetch pf{};
                if (form >= 0) {
                  pf.count = 1;
                  pf.ptr[0] = static_cast<const char*>(weights.at(c));
                  pf.bytes[0] = std::min<uint64_t>(weights.bytes(), mb << 20) & ~uint64_t{15};
                  pf.form = static_cast<cuda::L2PrefetchForm>(form);
                }
                cuda::launch_l2_prefetch_probe(pf, ctas, spin, s);
                cuda::launch_gemv(x, weights.at(c), nullptr, false, out, false, 1, sh.n, sh.k, s);
              }
            });
            char buf[64];
            std::snprintf(buf, sizeof(buf), " %s %.2f", form < 0 ? "none" : kForms[form], us);
            line += buf;
          }
          std::printf("[bench] l2 prefetch, %s %.1f MB, probe %lld ns on %d CTAs, up to %llu MB: us a pair:%s\n",
                      sh.name, weights.bytes() / 1e6, static_cast<long long>(spin), ctas,
                      static_cast<unsigned long long>(mb), line.c_str());
          if (mb << 20 >= weights.bytes()) break;  // larger budgets fetch the same
        }
      }
    }
    CUDA_CHECK(cudaFree(x));
    CUDA_CHECK(cudaFree(out));
  }
  CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace
}  // namespace minivllm::cuda_test
