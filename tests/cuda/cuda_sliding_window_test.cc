// Sliding-window attention (Backend::attention's window) of the CUDA backend against the CPU
// backend: prefill (the mma.sync kernel takes every windowed prefill) and each decode kernel the
// policy or the MINIVLLM_DECODE_* switches can pick, on windows shorter than a block, ending
// mid-block and longer than several splits. The block-table entries before every query's window
// point at a never-written NaN block (attention_case.h), so a kernel reading one fails.
#include <gtest/gtest.h>

#include "attention_case.h"

namespace minivllm::cuda_test {
namespace {

constexpr double kNmse = 2e-4;  // as cuda_attention_test.cc
constexpr double kAbs = 2e-2;

void check(AttentionCase c, int window, const std::string& name, uint32_t seed) {
  Backends b;
  c.window = window;
  c.poison_cache = true;
  const AttentionOutputs o = run_attention_case(b, c, seed);
  expect_close(o.gpu, o.cpu, kNmse, kAbs, name + ", window " + std::to_string(window));
  EXPECT_TRUE(o.sentinel_intact) << name << ": the row after the output was written";
}

// Contexts around the window: shorter, equal, one past, and several blocks and splits past it.
std::vector<int> contexts_around(int window) {
  return {1, window - 1, window, window + 1, window + 17, 3 * window + 5, 2000, 4097};
}

TEST(CudaSlidingWindow, Prefill) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  for (int window : {8, 37, 100}) {
    // Without a prefix, after one (ending mid-block), and a long one: 1, 7, 129 and 1000 query rows.
    check({16, 8, 128, 16, {40, 7, 129, 1}, {40, 7 + 300, 129 + 17, 1 + 1000}}, window, "prefill hd 128 bs 16", 61);
    check({32, 8, 64, 256, {129, 1000}, {129 + 5, 1000}}, window, "prefill hd 64 bs 256", 62);
  }
  check({4, 1, 256, 16, {40, 300}, {40 + 100, 300}}, 10, "prefill hd 256 (Gemma 3)", 63);
  check({12, 4, 96, 16, {65}, {65 + 64}}, 30, "prefill hd 96, group 3", 64);
  check({16, 8, 128, 16, {40, 7}, {40, 7 + 30}}, 5000, "prefill, window past every context", 65);
  AttentionCase no_cache{16, 8, 128, 256, {7, 129, 1}, {7, 129, 1}};
  no_cache.no_cache = true;
  check(no_cache, 16, "prefill without cache", 66);
}

TEST(CudaSlidingWindow, DecodeEveryKernel) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  for (const DecodeSwitch& s : kDecodeSwitches) {
    with_decode_switch(s, [](const std::string& tag) {
      for (int window : {8, 100, 1000}) {
        AttentionCase qwen{16, 8, 128, 16, {}, contexts_around(window)};
        qwen.decode = true;
        check(qwen, window, "decode qwen3 shapes bs 16, " + tag, 71);
        AttentionCase llama{32, 8, 64, 256, {}, contexts_around(window)};
        llama.decode = true;
        llama.extra_table_cols = 3;
        check(llama, window, "decode llama shapes bs 256, " + tag, 72);
        AttentionCase one{16, 8, 128, 16, {}, {4097}};  // batch 1: many splits, one of them partial
        one.decode = true;
        check(one, window, "decode batch 1, " + tag, 73);
      }
    });
  }
}

TEST(CudaSlidingWindow, DecodeOtherShapesAndFp8) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  AttentionCase gemma{4, 1, 256, 16, {}, contexts_around(10)};
  gemma.decode = true;
  check(gemma, 10, "decode hd 256 (Gemma 3), group 4", 81);
  AttentionCase tiled{12, 4, 96, 16, {}, contexts_around(37)};
  tiled.decode = true;
  check(tiled, 37, "decode hd 96, group 3 (tiled)", 82);
  for (int window : {8, 100, 1000}) {
    AttentionCase fp8{16, 8, 128, 16, {}, contexts_around(window)};
    fp8.decode = true;
    fp8.fp8 = true;
    check(fp8, window, "decode fp8 cache", 83);
    AttentionCase fp8_prefill{32, 8, 64, 16, {40, 129}, {40 + 100, 129}};
    fp8_prefill.fp8 = true;
    check(fp8_prefill, window, "prefill fp8 cache", 84);
  }
}

}  // namespace
}  // namespace minivllm::cuda_test
