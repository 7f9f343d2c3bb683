// Gemma 2's soft-capping on the CUDA backend against the CPU backend: the attention scores (every
// decode kernel a capped model can reach, whatever MINIVLLM_DECODE_* asks; the mma.sync prefill,
// which takes every capped prefill) and the final logits. Gemma 2's shapes: head_dim 256 at groups
// of 2 (2B, 9B), head_dim 128 (27B); sliding windows and an fp8 cache too. q is scaled up so that
// the scores reach past the cap, and each case first checks that the cap moves the CPU's output
// (normalised squared error over 1e-3, against the backends' 2e-4 bound; measured 2e-5), so a
// kernel that ignored it would fail.
#include <gtest/gtest.h>

#include <cmath>

#include "attention_case.h"
#include "common/check.h"

namespace minivllm::cuda_test {
namespace {

constexpr double kNmse = 2e-4;  // as cuda_attention_test.cc
constexpr double kAbs = 2e-2;

void check(AttentionCase c, float cap, const std::string& name, uint32_t seed, double abs_tol = kAbs) {
  c.poison_cache = !c.no_cache;
  {  // the same case uncapped, on the CPU: the cap must change the reference
    Backends plain;
    AttentionCase u = c;
    u.softcap = 0.0f;
    const std::vector<float> uncapped = run_attention_case(plain, u, seed).cpu;
    c.softcap = cap;
    Backends capped;
    const AttentionOutputs o = run_attention_case(capped, c, seed);
    EXPECT_GT(diff(uncapped, o.cpu).nmse, 1e-3) << name << ": the cap " << cap << " does not move the CPU's output";
    expect_close(o.gpu, o.cpu, kNmse, abs_tol, name + ", cap " + std::to_string(cap));
    EXPECT_TRUE(o.sentinel_intact) << name << ": the row after the output was written";
  }
}

TEST(CudaSoftcap, Prefill) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  for (float cap : {5.0f, 50.0f}) {
    const float gain = cap / 4;  // scores of std ~cap / 4: a good part of them near or past the cap
    AttentionCase nine{16, 8, 256, 16, {40, 7, 129}, {40, 7 + 300, 129 + 17}};  // Gemma-2-9B's heads
    nine.q_gain = gain;
    check(nine, cap, "prefill hd 256 group 2, after a prefix", 91);
    AttentionCase big{32, 16, 128, 256, {65, 1}, {65 + 64, 1 + 1000}};  // Gemma-2-27B's
    big.q_gain = gain;
    check(big, cap, "prefill hd 128 group 2 (the wgmma kernel's shape otherwise)", 92);
    AttentionCase window = nine;
    window.window = 37;
    check(window, cap, "prefill hd 256, window 37", 93);
    AttentionCase no_cache{8, 4, 256, 16, {7, 129, 1}, {7, 129, 1}};
    no_cache.no_cache = true;
    no_cache.q_gain = gain;
    check(no_cache, cap, "prefill without cache", 94);
    AttentionCase fp8{32, 16, 128, 16, {40, 129}, {40 + 100, 129}};
    fp8.fp8 = true;
    fp8.q_gain = gain;
    // The fp8 prefill kernel rounds each dequantised key to bf16 for its mma (prefill_attention.cu),
    // the CPU keeps f32: at scores near 50 that is ~0.1 of a score, and a nearly one-hot softmax
    // moved one output by 0.088 (nmse 2.7e-5). The nmse bound is the kernels' as elsewhere.
    check(fp8, cap, "prefill fp8 cache", 95, cap > 10 ? 0.15 : kAbs);
  }
}

TEST(CudaSoftcap, DecodeEveryKernel) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  // Whatever a switch asks (MINIVLLM_DECODE_MMA=1: the tensor-core kernel wherever it fits; WIDE=force),
  // a capped model takes decode_attention.cu's tiled kernels.
  for (const DecodeSwitch& s : kDecodeSwitches) {
    with_decode_switch(s, [](const std::string& tag) {
      const float cap = 50.0f, gain = cap / 4;
      AttentionCase nine{16, 8, 256, 16, {}, {1, 17, 300, 2000, 4097}};
      nine.decode = true;
      nine.q_gain = gain;
      check(nine, cap, "decode hd 256 group 2, " + tag, 101);
      AttentionCase big{32, 16, 128, 256, {}, {1, 255, 1000, 4097}};
      big.decode = true;
      big.q_gain = gain;
      big.extra_table_cols = 3;
      check(big, cap, "decode hd 128 group 2, " + tag, 102);
      AttentionCase one{16, 8, 256, 16, {}, {4097}};  // batch 1: many splits, one of them partial
      one.decode = true;
      one.q_gain = gain;
      check(one, cap, "decode batch 1, " + tag, 103);
      AttentionCase window = nine;
      window.window = 100;
      check(window, cap, "decode window 100, " + tag, 104);
    });
  }
}

TEST(CudaSoftcap, DecodeFp8CacheAndSmallCap) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  AttentionCase fp8{16, 8, 256, 16, {}, {1, 17, 300, 2000}};
  fp8.decode = true;
  fp8.fp8 = true;
  fp8.q_gain = 12.5f;
  check(fp8, 50.0f, "decode fp8 cache", 111);
  AttentionCase small{8, 4, 256, 16, {}, {3, 64, 999}};
  small.decode = true;
  small.q_gain = 1.25f;
  check(small, 5.0f, "decode cap 5", 112);
}

TEST(CudaSoftcap, FinalLogits) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(121);
  const Tensor x = random_values({3, 256001}, rng, 40.0f);  // Gemma's vocabulary, plus one: an odd count
  for (float cap : {30.0f, 0.5f}) {
    Tensor cpu = b.cpu->empty(DType::kF32, x.shape());
    b.cpu->copy_from_host(cpu, x.data());
    b.cpu->softcap(cpu, cap);
    Tensor gpu = b.gpu->empty(DType::kF32, x.shape());
    b.gpu->copy_from_host(gpu, x.data());
    b.gpu->softcap(gpu, cap);
    const std::vector<float> got = download(*b.gpu, gpu), want = download(*b.cpu, cpu);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
    EXPECT_LE(worst, 4e-6 * cap) << "cap " << cap;
    EXPECT_LE(std::fabs(want[0]), cap);
  }
  Tensor t = b.gpu->empty(DType::kF32, {4});
  EXPECT_THROW(b.gpu->softcap(t, 0.0f), Error);
  EXPECT_THROW(b.gpu->set_attention_softcap(-1.0f), Error);
}

}  // namespace
}  // namespace minivllm::cuda_test
