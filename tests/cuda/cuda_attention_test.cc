// Prefill and decode attention of the CUDA backend against the CPU backend's paged attention.
#include <gtest/gtest.h>

#include <cstdlib>

#include "attention_case.h"

namespace minivllm::cuda_test {
namespace {

constexpr double kNmse = 2e-4;  // bf16 inputs and outputs, bf16 P in the prefill's P V product
constexpr double kAbs = 2e-2;

void check(const AttentionCase& c, const std::string& name, uint32_t seed) {
  Backends b;
  const AttentionOutputs o = run_attention_case(b, c, seed);
  expect_close(o.gpu, o.cpu, kNmse, kAbs, name);
  EXPECT_TRUE(o.sentinel_intact) << name << ": the row after the output was written";
}

TEST(CudaAttention, PrefillWithoutPrefix) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  check({16, 8, 128, 256, {1, 7, 129}, {1, 7, 129}}, "prefill qwen3 shapes, bs 256", 21);
  check({32, 8, 64, 16, {129, 7, 1}, {129, 7, 1}}, "prefill llama shapes, bs 16", 22);
}

TEST(CudaAttention, PrefillReadsCachedPrefix) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  // Contexts end mid-block; prefixes of 0, 17, 300 and 1000 keys.
  check({16, 8, 128, 16, {7, 129, 1, 65}, {7 + 300, 129 + 17, 1 + 1000, 65}}, "prefix, group 2, bs 16", 23);
  check({32, 8, 64, 256, {7, 129, 1}, {7 + 300, 129 + 17, 1 + 1000}}, "prefix, group 4, bs 256", 24);
  check({8, 8, 128, 16, {33, 100}, {33 + 250, 100 + 513}}, "prefix, group 1", 25);
}

TEST(CudaAttention, PrefillLongSequence) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  check({4, 4, 128, 256, {4097}, {4097}}, "prefill 4097 tokens, group 1", 26);
  check({4, 2, 64, 16, {4097}, {4097 + 100}}, "prefill 4097 tokens after 100 cached, group 2", 27);
}

TEST(CudaAttention, PrefillWithoutCacheReadsQkv) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  AttentionCase c{16, 8, 128, 256, {7, 129, 1}, {7, 129, 1}};
  c.no_cache = true;
  check(c, "prefill without cache", 28);
}

std::vector<int> mixed_contexts(int n, int max_len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(1, max_len);
  std::vector<int> v = {1, 255, 256, 257, max_len};
  while (static_cast<int>(v.size()) < n) v.push_back(d(rng));
  return v;
}

TEST(CudaAttention, DecodeMixedContexts) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  AttentionCase qwen{16, 8, 128, 256, {}, mixed_contexts(37, 3000, 31)};
  qwen.decode = true;
  check(qwen, "decode qwen3 shapes, 37 seqs (split-KV)", 32);
  AttentionCase llama{32, 8, 64, 16, {}, mixed_contexts(19, 3000, 33)};
  llama.decode = true;
  check(llama, "decode llama shapes, 19 seqs (split-KV)", 34);
  AttentionCase g1{8, 8, 128, 16, {}, {2999, 5}};
  g1.decode = true;
  g1.extra_table_cols = 40;  // capacity beyond the contexts: splits past the end exit early
  check(g1, "decode group 1, 2 seqs", 35);
  AttentionCase many{32, 8, 64, 256, {}, mixed_contexts(80, 1500, 36)};
  many.decode = true;
  check(many, "decode llama shapes, 80 seqs (partitions of at most kDefaultMaxDecodePartition)", 37);
  {
    const test::ScopedEnv one_split("MINIVLLM_DECODE_MAX_PARTITION", "0");  // read when the backend is made
    check(many, "decode llama shapes, 80 seqs (one split)", 37);
  }
  // A large batch (768 CTAs, past the occupancy target) over long contexts: splits only because
  // of the partition bound, several per sequence, merged by the last CTA.
  AttentionCase large{16, 8, 128, 256, {}, mixed_contexts(96, 3000, 39)};
  large.decode = true;
  large.extra_table_cols = 4;
  check(large, "decode qwen3 shapes, 96 seqs up to 3000 keys (bounded partitions)", 40);
  AttentionCase single{16, 8, 128, 16, {}, {1}};
  single.decode = true;
  check(single, "decode one key", 38);
}

}  // namespace
}  // namespace minivllm::cuda_test
