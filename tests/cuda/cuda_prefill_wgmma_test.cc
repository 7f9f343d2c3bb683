// The Hopper prefill kernel (prefill_attention_wgmma.cu) against the CPU backend, on the shapes it
// takes (prefill_policy.h): head_dim 64 and 128, groups 1, 2, 3 and more, query spans that are not
// a multiple of its 128-row tiles, cached prefixes, several sequences, every block size from 16
// up (TMA boxes of one block, or of 128 rows inside a bigger block), and no cache. Caches are
// poisoned with NaN past the stored keys, so a tile that lets stale rows into P V fails. On an
// H100 these run the wgmma kernel (WgmmaIsChosenOnHopper says so); elsewhere the mma.sync one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "attention_case.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/prefill_policy.h"

namespace minivllm::cuda_test {
namespace {

constexpr double kNmse = 2e-4;  // as cuda_attention_test.cc: bf16 inputs, outputs and P
constexpr double kAbs = 2e-2;

void check(AttentionCase c, const std::string& what, uint32_t seed) {
  c.poison_cache = true;
  Backends b;
  const std::string name = what + ", " + std::to_string(c.nq) + "/" + std::to_string(c.nkv) + " heads, hd " +
                           std::to_string(c.hd) + ", bs " + std::to_string(c.block_size);
  const AttentionOutputs o = run_attention_case(b, c, seed);
  expect_close(o.gpu, o.cpu, kNmse, kAbs, name);
  EXPECT_TRUE(o.sentinel_intact) << name << ": the row after the output was written";
}

TEST(CudaPrefillWgmma, ChoiceOfKernel) {  // host only
  using cuda::PrefillKernel;
  auto pick = [](int hd, bool cache, bool fp8, int bs, int major, bool force = false) {
    return cuda::prefill_kernel_choice({hd, cache, fp8, bs, major, force});
  };
  EXPECT_EQ(pick(128, true, false, 256, 9), PrefillKernel::kWgmma);
  EXPECT_EQ(pick(64, true, false, 16, 9), PrefillKernel::kWgmma);
  EXPECT_EQ(pick(128, false, false, 0, 9), PrefillKernel::kWgmma);  // no cache: keys from qkv
  EXPECT_EQ(pick(128, false, true, 0, 9), PrefillKernel::kWgmma);   // fp8 cache not read without a cache
  EXPECT_EQ(pick(128, true, true, 256, 9), PrefillKernel::kMmaSync);
  EXPECT_EQ(pick(96, true, false, 256, 9), PrefillKernel::kMmaSync);
  EXPECT_EQ(pick(256, true, false, 256, 9), PrefillKernel::kMmaSync);
  EXPECT_EQ(pick(128, true, false, 8, 9), PrefillKernel::kMmaSync);
  EXPECT_EQ(pick(128, true, false, 256, 8), PrefillKernel::kMmaSync);
  EXPECT_EQ(pick(128, true, false, 256, 10), PrefillKernel::kMmaSync);
  EXPECT_EQ(pick(128, true, false, 256, 9, true), PrefillKernel::kMmaSync);
  cuda::PrefillShape capped{128, true, false, 256, 9, false};
  capped.softcap = true;  // Gemma 2's scores: only the mma.sync kernel caps them
  EXPECT_EQ(cuda::prefill_kernel_choice(capped), PrefillKernel::kMmaSync);
}

TEST(CudaPrefillWgmma, WgmmaIsChosenOnHopper) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;  // makes the device current
  const int major = cuda::device_sm_major();
  std::printf("[prefill] device sm_%d0: %s kernel for bf16 head_dim 128\n", major,
              cuda::prefill_kernel_choice({128, true, false, 256, major, false}) == cuda::PrefillKernel::kWgmma
                  ? "wgmma"
                  : "mma.sync");
  if (major != 9) GTEST_SKIP() << "not a Hopper device";
}

TEST(CudaPrefillWgmma, GroupsAndHeadDims) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  uint32_t seed = 700;
  // {nq, nkv, hd}: groups 1, 2, 3, 4, 8 (Qwen3 is 16/8/128, Llama-3.2 32/8/64, SmolLM2 9/3/64).
  const int heads[][3] = {{4, 4, 128}, {16, 8, 128}, {9, 3, 128}, {8, 2, 64}, {9, 3, 64}, {16, 2, 64}, {2, 2, 64}};
  for (const auto& h : heads) {
    // Spans of 1, 127, 128, 129 and 300 rows after prefixes of 0, 5, 128, 250 and 1000 keys.
    check({h[0], h[1], h[2], 256, {1, 127, 128, 129, 300}, {1, 127 + 5, 128 + 128, 129 + 250, 300 + 1000}},
          "groups", seed++);
  }
}

TEST(CudaPrefillWgmma, EveryBlockSize) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  uint32_t seed = 720;
  for (int bs : {16, 32, 64, 128, 256, 512}) {
    check({16, 8, 128, bs, {200, 33, 513}, {200 + 77, 33 + 700, 513}}, "block sizes", seed++);
    check({9, 3, 64, bs, {131, 1}, {131 + 16, 1 + 260}}, "block sizes", seed++);
  }
}

TEST(CudaPrefillWgmma, LongSequencesAndNoCache) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  check({16, 8, 128, 256, {2100, 1000}, {2100, 1000 + 1111}}, "long", 740);
  check({6, 2, 64, 32, {1500}, {1500 + 3}}, "long", 741);
  for (int hd : {64, 128}) {
    AttentionCase c{12, 4, hd, 16, {7, 129, 1, 260}, {7, 129, 1, 260}};
    c.no_cache = true;
    check(c, "without cache", 742 + hd);
  }
}

// A mistyped kernel name stops the backend when it is made, naming the knob; it used to mean "auto".
TEST(CudaPrefillWgmma, UnknownKernelNameIsAnError) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const test::ScopedEnv env("MINIVLLM_PREFILL_KERNEL", "wgmma2");
  try {
    make_cuda_backend(0);
    ADD_FAILURE() << "MINIVLLM_PREFILL_KERNEL=wgmma2 accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("MINIVLLM_PREFILL_KERNEL=wgmma2 must be one of auto, mma"), std::string::npos)
        << e.what();
  }
}

// The fallback chosen by the environment still agrees (the same cases as the kernel-choice test).
TEST(CudaPrefillWgmma, ForcedMmaSyncFallback) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const test::ScopedEnv env("MINIVLLM_PREFILL_KERNEL", "mma");
  check({16, 8, 128, 16, {129, 7}, {129 + 100, 7}}, "forced mma.sync", 760);
  check({9, 3, 64, 256, {300}, {300 + 5}}, "forced mma.sync", 761);
}

}  // namespace
}  // namespace minivllm::cuda_test
