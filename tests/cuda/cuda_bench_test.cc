// Kernel timings (not pass/fail beyond sanity): decode attention bandwidth at the workload the
// engine is built for (256 sequences x 1024 keys, Qwen3-0.6B and Llama-3.2-1B heads) and one
// long prefill. Times are medians of graph replays (10 calls each), synchronised host clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace minivllm::cuda_test {
namespace {

double median_seconds_per_call(Backend& gpu, const std::function<void()>& call, int calls_per_graph = 10) {
  call();
  gpu.synchronize();
  const int graph = gpu.capture_graph([&] {
    for (int i = 0; i < calls_per_graph; ++i) call();
  });
  gpu.replay_graph(graph);
  gpu.synchronize();
  std::vector<double> t;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    gpu.replay_graph(graph);
    gpu.synchronize();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls_per_graph);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// capacity: keys the block table can hold per sequence (0: just ctx), which sets the split plan.
// kv: the cache's element type (bf16, or fp8 e4m3 with an fp32 scale per token and kv head).
// contexts: per-sequence lengths (empty: every sequence has ctx).
void bench_decode(int nq, int nkv, int hd, int seqs, int ctx, int block_size, const char* name, int capacity = 0,
                  DType kv = DType::kBF16, const std::vector<int32_t>& contexts = {}) {
  auto gpu = make_cuda_backend(0);
  std::mt19937 rng(61);
  const int blocks_per_seq = (std::max(ctx, capacity) + block_size - 1) / block_size;
  const int num_blocks = seqs * blocks_per_seq;
  KVCache cache = gpu->allocate_kv_cache(num_blocks, block_size, nkv, hd, kv);
  const int64_t width = static_cast<int64_t>(nq + 2 * nkv) * hd;
  {
    // Random keys and values in every slot, stored in chunks from one random qkv.
    const int64_t chunk = 4096, slots = static_cast<int64_t>(num_blocks) * block_size;
    Tensor src = upload(*gpu, random_values({chunk, width}, rng));
    std::vector<int32_t> map(chunk);
    AttentionMetadata store;
    store.slot_mapping = gpu->empty(DType::kI32, {chunk});
    for (int64_t s0 = 0; s0 < slots; s0 += chunk) {
      for (int64_t i = 0; i < chunk; ++i) map[i] = static_cast<int32_t>(s0 + i < slots ? s0 + i : -1);
      gpu->copy_from_host(store.slot_mapping, map.data());
      gpu->store_kvcache(src, nq, cache, store);
      gpu->synchronize();
    }
  }
  std::vector<int32_t> tables(static_cast<size_t>(seqs) * blocks_per_seq);
  std::vector<int32_t> perm(num_blocks);
  for (int i = 0; i < num_blocks; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::copy(perm.begin(), perm.end(), tables.begin());
  AttentionMetadata meta;
  meta.is_prefill = false;
  meta.num_seqs = seqs;
  meta.num_tokens = seqs;
  meta.block_size = block_size;
  meta.max_num_blocks = blocks_per_seq;
  meta.block_tables = upload_i32(*gpu, tables, {seqs, blocks_per_seq});
  const std::vector<int32_t> lens = contexts.empty() ? std::vector<int32_t>(seqs, ctx) : contexts;
  meta.context_lens = upload_i32(*gpu, lens);
  double keys = 0.0;
  for (int32_t c : lens) keys += c;
  Tensor qkv = upload(*gpu, random_values({seqs, width}, rng));
  Tensor out = gpu->empty(DType::kBF16, {seqs, static_cast<int64_t>(nq) * hd});
  gpu->fill_bytes(out, 0xFF);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const double sec =
      median_seconds_per_call(*gpu, [&] { gpu->attention(qkv, nq, cache, meta, scale, 0, out, nullptr); });
  const std::vector<float> o = download(*gpu, out);
  EXPECT_EQ(diff(o, std::vector<float>(o.size(), 0.0f)).nonfinite, 0) << name << ": unwritten outputs";
  // k and v read once: bf16 elements, or e4m3 ones plus their rows' fp32 scales
  const double bytes = kv == DType::kBF16 ? 2.0 * keys * nkv * hd * 2 : 2.0 * keys * nkv * (hd + 4.0);
  std::printf("[bench] %s: %d seqs x %d ctx, block %d: %.1f us, %.0f GB/s (KV %.2f GB)\n", name, seqs, ctx,
              block_size, sec * 1e6, bytes / sec / 1e9, bytes / 1e9);
  ::testing::Test::RecordProperty(std::string(name) + "_us", std::to_string(sec * 1e6));
  ::testing::Test::RecordProperty(std::string(name) + "_GBps", std::to_string(bytes / sec / 1e9));
}

// The non-empty items of a comma list in the environment (tuning selections of the benches below).
std::vector<std::string> env_list(const char* name) {
  std::vector<std::string> items;
  const char* v = std::getenv(name);
  if (v == nullptr) return items;
  const std::string list = v;
  for (size_t pos = 0; pos <= list.size();) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    if (comma > pos) items.push_back(list.substr(pos, comma - pos));
    pos = comma + 1;
  }
  return items;
}

// The workload's decode contexts as the benches draw them: 256 lengths of 100..2,048 keys (prompts
// of 100..1,024 plus up to 1,024 generated).
std::vector<int32_t> workload_contexts() {
  std::mt19937 rng(65);
  std::uniform_int_distribution<int32_t> len(100, 2048);
  std::vector<int32_t> contexts(256);
  for (int32_t& c : contexts) c = len(rng);
  return contexts;
}

TEST(CudaBench, DecodeAttentionBandwidth) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  bench_decode(16, 8, 128, 256, 1024, 256, "decode_qwen3");
  bench_decode(16, 8, 128, 256, 1024, 16, "decode_qwen3_bs16");
  bench_decode(32, 8, 64, 256, 1024, 256, "decode_llama");
  bench_decode(16, 8, 128, 4, 2048, 256, "decode_qwen3_4seqs");
  // Small batches past the wide-CTA threshold (4 sequences of 8 kv heads), engine-sized tables.
  for (int seqs : {8, 16, 32}) {
    bench_decode(16, 8, 128, seqs, 700, 256, ("decode_qwen3_" + std::to_string(seqs) + "seqs_ctx700").c_str(), 4096);
    bench_decode(32, 8, 64, seqs, 700, 256, ("decode_llama_" + std::to_string(seqs) + "seqs_ctx700").c_str(), 4096);
  }
  // Group 1 (8 q heads of 8 kv heads): 16 key elements a lane at small batches only (decode_policy.h).
  bench_decode(8, 8, 128, 256, 1024, 256, "decode_group1_hd128");
  bench_decode(8, 8, 128, 16, 700, 256, "decode_group1_hd128_16seqs_ctx700", 4096);
  // Batch-1 decode as the engine runs it: a short context in a 4096-key block table.
  bench_decode(16, 8, 128, 1, 300, 256, "decode_qwen3_batch1_ctx300", 4096);
  bench_decode(16, 8, 128, 1, 4000, 256, "decode_qwen3_batch1_ctx4000", 4096);
  // Shapes on the tiled kernels: SmolLM2-135M (group 3), Qwen2.5-1.5B's heads (12 / 2, group 6),
  // group 16 (two CTAs per kv head), head_dim 96 (Phi-3-mini's 32 / 32) and 256 (8 / 1).
  bench_decode(9, 3, 64, 256, 1024, 256, "decode_smollm2_group3");
  bench_decode(12, 2, 128, 256, 1024, 256, "decode_group6");
  bench_decode(32, 2, 128, 256, 1024, 256, "decode_group16");
  bench_decode(32, 32, 96, 64, 1024, 256, "decode_hd96");
  bench_decode(8, 1, 256, 256, 1024, 256, "decode_hd256_group8");
  // The fp8 cache (--kv-cache-dtype fp8) on the engine's shapes.
  bench_decode(16, 8, 128, 256, 1024, 256, "decode_qwen3_fp8", 0, DType::kF8E4M3);
  bench_decode(32, 8, 64, 256, 1024, 256, "decode_llama_fp8", 0, DType::kF8E4M3);
  bench_decode(16, 8, 128, 1, 300, 256, "decode_qwen3_batch1_ctx300_fp8", 4096, DType::kF8E4M3);
}

// The seeds' workload as decode sees it: 256 sequences of mixed lengths (a draw of 100..2048, the
// prompts of 100..1024 plus up to 1024 generated) in block tables of max_model_len 4096 keys, the
// split plan the engine gets. MINIVLLM_BENCH_DECODE_PARTITIONS (comma list) adds the same runs
// under other MINIVLLM_DECODE_MAX_PARTITION values (tuning).
TEST(CudaBench, DecodeAttentionMixedContexts) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const std::vector<int32_t> contexts = workload_contexts();
  std::vector<std::string> partitions = {""};
  for (const std::string& p : env_list("MINIVLLM_BENCH_DECODE_PARTITIONS")) partitions.push_back(p);
  for (const std::string& p : partitions) {
    const test::ScopedEnv env(p.empty() ? test::EnvVars{}
                                        : test::EnvVars{{"MINIVLLM_DECODE_MAX_PARTITION", p.c_str()}});
    const std::string tag = p.empty() ? std::string("default") : "max_partition_" + p;
    bench_decode(16, 8, 128, 256, 0, 256, ("decode_qwen3_mixed_" + tag).c_str(), 4096, DType::kBF16, contexts);
    bench_decode(32, 8, 64, 256, 0, 256, ("decode_llama_mixed_" + tag).c_str(), 4096, DType::kBF16, contexts);
  }
  // The fp8 cache on the same contexts.
  bench_decode(16, 8, 128, 256, 0, 256, "decode_qwen3_mixed_fp8", 4096, DType::kF8E4M3, contexts);
  bench_decode(32, 8, 64, 256, 0, 256, "decode_llama_mixed_fp8", 4096, DType::kF8E4M3, contexts);
  // The same contexts in tables of 2048 keys: half the splits, so half the CTAs that find no keys.
  bench_decode(16, 8, 128, 256, 0, 256, "decode_qwen3_mixed_capacity2048", 2048, DType::kBF16, contexts);
  bench_decode(32, 8, 64, 256, 0, 256, "decode_llama_mixed_capacity2048", 2048, DType::kBF16, contexts);
  // One rank's heads at world_size 2 (half the q and kv heads, the same group): ideally half the
  // time of the whole-model rows above. The traced workload at world_size 2 had Llama's decode
  // attention at 53.3 us a call against 92.7 at world_size 1 (1.74x, not 2x).
  bench_decode(8, 4, 128, 256, 0, 256, "decode_qwen3_mixed_ws2_rank", 4096, DType::kBF16, contexts);
  bench_decode(16, 4, 64, 256, 0, 256, "decode_llama_mixed_ws2_rank", 4096, DType::kBF16, contexts);
}

// The workload's decode batches shrink as sequences finish: the decode kernels on the mixed
// contexts at 16..256 sequences, under each kernel choice and split bound (tuning the policy of
// decode_policy.h for the batch sizes the workload spends its time in).
TEST(CudaBench, DecodeAttentionBatchSweep) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const std::vector<int32_t> contexts = workload_contexts();
  struct Variant {
    const char* tag;
    const char* mma;        // MINIVLLM_DECODE_MMA, nullptr: the policy's
    const char* partition;  // MINIVLLM_DECODE_MAX_PARTITION, nullptr: the defaults
    const char* ring = nullptr;  // MINIVLLM_DECODE_RING, nullptr: the policy's
  };
  const Variant variants[] = {{"default", nullptr, nullptr}, {"simt", "0", nullptr},   {"mma", "1", nullptr},
                              {"simt_p1024", "0", "1024"},    {"simt_p2048", "0", "2048"}, {"mma_p1024", "1", "1024"},
                              {"mma_p4096", "1", "4096"},     {"simt_p256", "0", "256"},
                              {"simt_ring0", "0", nullptr, "0"}, {"simt_ring1", "0", nullptr, "1"},
                              {"simt_ring1_p1024", "0", "1024", "1"}, {"simt_ring1_p2048", "0", "2048", "1"}};
  // MINIVLLM_BENCH_SWEEP_VARIANTS (comma list of tags) runs only those variants.
  const std::vector<std::string> wanted = env_list("MINIVLLM_BENCH_SWEEP_VARIANTS");
  for (int seqs : {16, 32, 64, 128, 192, 256}) {
    const std::vector<int32_t> ctx(contexts.begin(), contexts.begin() + seqs);
    for (const Variant& v : variants) {
      if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), v.tag) == wanted.end()) continue;
      // A variant's unnamed knobs are unset (each runs at its defaults otherwise), and all come back after it.
      const test::ScopedEnv env({{"MINIVLLM_DECODE_MMA", v.mma},
                                 {"MINIVLLM_DECODE_MAX_PARTITION", v.partition},
                                 {"MINIVLLM_DECODE_RING", v.ring}});
      const std::string n = std::to_string(seqs) + "seqs_" + v.tag;
      bench_decode(16, 8, 128, seqs, 0, 256, ("sweep_qwen3_" + n).c_str(), 4096, DType::kBF16, ctx);
      bench_decode(16, 8, 128, seqs, 0, 256, ("sweep_qwen3_fp8_" + n).c_str(), 4096, DType::kF8E4M3, ctx);
      bench_decode(32, 8, 64, seqs, 0, 256, ("sweep_llama_" + n).c_str(), 4096, DType::kBF16, ctx);
    }
  }
}

// Batch 1: one sequence's decode attention, the latency each layer of a batch-1 token pays, for the
// shapes batch-1 decode runs (Qwen3-0.6B, Llama-3.2-1B, the 8B models, Qwen3-30B-A3B's group 8) at
// short and long contexts, under the split and kernel settings that decide it. In the engine it is
// 10-15 us a layer for a few hundred keys (PERFORMANCE.md, stop 59), far above its bytes; this is
// the bench to find why (stop 60: "Batch-1 decode attention, and the split merge in one round
// trip"). The held variants lengthen the tensor-core kernels' splits with the context. Graphs of 10 calls: run the binary once more with MINIVLLM_NO_PDL=1 to see
// each call alone, not overlapping the one before. MINIVLLM_BENCH_B1_VARIANTS (comma list of tags)
// runs only those variants.
TEST(CudaBench, DecodeAttentionBatchOne) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  struct Shape {
    const char* name;
    int nq, nkv, hd;
  };
  struct Variant {
    const char* tag;
    const char* knob;  // nullptr: the defaults
    const char* value;
  };
  const Variant variants[] = {{"default", nullptr, nullptr},
                              {"simt", "MINIVLLM_DECODE_MMA", "0"},
                              {"minpart16", "MINIVLLM_DECODE_MIN_PARTITION", "16"},
                              {"minpart256", "MINIVLLM_DECODE_MIN_PARTITION", "256"},
                              {"narrow", "MINIVLLM_DECODE_WIDE", "0"},
                              {"onesplit0", "MINIVLLM_DECODE_ONE_SPLIT_KEYS", "0"},
                              {"noprefetch", "MINIVLLM_DECODE_PREFETCH_SPLIT", "0"},
                              {"held1", "MINIVLLM_DECODE_HELD_SPLITS", "1"},
                              {"held2", "MINIVLLM_DECODE_HELD_SPLITS", "2"},
                              {"held4", "MINIVLLM_DECODE_HELD_SPLITS", "4"},
                              {"held8", "MINIVLLM_DECODE_HELD_SPLITS", "8"},
                              {"held16", "MINIVLLM_DECODE_HELD_SPLITS", "16"},
                              {"nopairs", "MINIVLLM_DECODE_WIDE_PAIRS", "0"}};
  const std::vector<std::string> wanted = env_list("MINIVLLM_BENCH_B1_VARIANTS");
  for (const Shape& sh : {Shape{"qwen3_0_6b", 16, 8, 128}, Shape{"llama_1b", 32, 8, 64}, Shape{"llama_8b", 32, 8, 128},
                          Shape{"qwen3_30b_a3b", 32, 4, 128}}) {
    for (int ctx : {64, 300, 1024, 4096}) {
      for (const Variant& v : variants) {
        if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), v.tag) == wanted.end()) continue;
        const test::ScopedEnv env(v.knob != nullptr ? test::EnvVars{{v.knob, v.value}} : test::EnvVars{});
        const std::string name = std::string("b1_") + sh.name + "_" + std::to_string(ctx) + "_" + v.tag;
        bench_decode(sh.nq, sh.nkv, sh.hd, 1, ctx, 256, name.c_str());
      }
    }
  }
}

// The tensor-core decode kernel against the CUDA-core ones (MINIVLLM_DECODE_MMA=1 / 0), in one run:
// the engine's shapes at 256 x 1,024 keys and on the workload's mixed contexts, bf16 and fp8, and
// 16 / 32 sequences of 700 keys.
TEST(CudaBench, DecodeAttentionTensorCores) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const std::vector<int32_t> contexts = workload_contexts();
  for (const char* mma : {"0", "1", "0", "1"}) {
    const test::ScopedEnv env("MINIVLLM_DECODE_MMA", mma);
    const std::string tag = std::string("_mma") + mma;
    for (const DType kv : {DType::kBF16, DType::kF8E4M3}) {
      const std::string t = tag + (kv == DType::kBF16 ? "" : "_fp8");
      bench_decode(16, 8, 128, 256, 1024, 256, ("decode_qwen3" + t).c_str(), 0, kv);
      bench_decode(32, 8, 64, 256, 1024, 256, ("decode_llama" + t).c_str(), 0, kv);
      bench_decode(16, 8, 128, 256, 0, 256, ("decode_qwen3_mixed" + t).c_str(), 4096, kv, contexts);
      bench_decode(32, 8, 64, 256, 0, 256, ("decode_llama_mixed" + t).c_str(), 4096, kv, contexts);
      for (int seqs : {16, 32}) {
        bench_decode(16, 8, 128, seqs, 700, 256, ("decode_qwen3_" + std::to_string(seqs) + "seqs" + t).c_str(), 4096, kv);
        bench_decode(32, 8, 64, seqs, 700, 256, ("decode_llama_" + std::to_string(seqs) + "seqs" + t).c_str(), 4096, kv);
      }
    }
  }
}

// `seqs` sequences x `len` causal tokens from a paged bf16 cache (block 256). `kernel`: empty for the
// default choice (the wgmma kernel on Hopper), "mma" for the mma.sync fallback.
void bench_prefill(int nq, int nkv, int hd, const char* name, const char* kernel = "", int len = 4096, int seqs = 4) {
  auto gpu = make_cuda_backend(0);
  std::mt19937 rng(62);
  const int bs = 256;
  const int blocks_per_seq = len / bs;
  KVCache cache = gpu->allocate_kv_cache(seqs * blocks_per_seq, bs, nkv, hd);
  const int64_t width = static_cast<int64_t>(nq + 2 * nkv) * hd;
  const int64_t tokens = static_cast<int64_t>(seqs) * len;
  Tensor qkv = upload(*gpu, random_values({tokens, width}, rng));
  std::vector<int32_t> slots(tokens), tables(seqs * blocks_per_seq), cu{0};
  for (int64_t i = 0; i < tokens; ++i) slots[i] = static_cast<int32_t>(i);
  for (int i = 0; i < seqs * blocks_per_seq; ++i) tables[i] = i;
  for (int s = 0; s < seqs; ++s) cu.push_back(cu.back() + len);
  AttentionMetadata meta;
  meta.is_prefill = true;
  meta.num_seqs = seqs;
  meta.num_tokens = static_cast<int>(tokens);
  meta.block_size = bs;
  meta.max_seqlen_q = meta.max_seqlen_k = len;
  meta.max_num_blocks = blocks_per_seq;
  meta.slot_mapping = upload_i32(*gpu, slots);
  meta.block_tables = upload_i32(*gpu, tables, {seqs, blocks_per_seq});
  meta.cu_seqlens_q = meta.cu_seqlens_k = upload_i32(*gpu, cu);
  gpu->store_kvcache(qkv, nq, cache, meta);
  Tensor out = gpu->empty(DType::kBF16, {tokens, nq * hd});
  const test::EnvVars knob =
      kernel[0] != '\0' ? test::EnvVars{{"MINIVLLM_PREFILL_KERNEL", kernel}} : test::EnvVars{};
  const double sec = test::with_env(knob, [&] {
    return median_seconds_per_call(*gpu, [&] { gpu->attention(qkv, nq, cache, meta, 0.088f, 0, out, nullptr); }, 3);
  });
  const double flops = 4.0 * seqs * nq * hd * (static_cast<double>(len) * len / 2);
  std::printf("[bench] %s: %d seqs x %d tokens, %d/%d heads, hd %d: %.1f us, %.1f TFLOP/s (causal)\n", name, seqs, len,
              nq, nkv, hd, sec * 1e6, flops / sec / 1e12);
  ::testing::Test::RecordProperty(std::string(name).append("_TFLOPs"), std::to_string(flops / sec / 1e12));
}

TEST(CudaBench, PrefillAttentionThroughput) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  bench_prefill(16, 8, 128, "prefill_qwen3");
  bench_prefill(32, 8, 64, "prefill_llama_hd64");
  // The 8B models' heads at the FP8 prefill's 8,192-token prompts (in the engine: ~455 TFLOP/s).
  bench_prefill(32, 8, 128, "prefill_8b_8k", "", 8192, 2);
  bench_prefill(16, 8, 128, "prefill_qwen3_mma_sync", "mma");
  bench_prefill(32, 8, 64, "prefill_llama_hd64_mma_sync", "mma");
}

// The vocabulary-parallel sampler's stats stage at world_size 2 on Llama-3.2-1B's half vocabulary,
// 256 rows: greedy rows read the slice once (the argmax); temperature rows read it once too since
// the argmax rides the mass pass (it was a second pass). Both should run at about copy bandwidth.
// The pick stage is timed as one rank that holds every row's draw (its worst case): it reads the
// stats kernel's piece masses and then only the 1/32 of each row that holds the draw.
TEST(CudaBench, ShardSampleStats) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  auto gpu = make_cuda_backend(0);
  const int64_t rows = 256, n = 128256 / 2;
  std::vector<float> host(rows * n);
  for (int64_t i = 0; i < rows * n; ++i) host[i] = static_cast<float>((i * 2654435761u) % 1000) * 0.01f;
  Tensor logits = gpu->empty(DType::kF32, {rows, n});
  gpu->copy_from_host(logits, host.data());
  Tensor stats = gpu->empty(DType::kF32, {rows * 4});
  Tensor pieces = gpu->empty(DType::kF32, {rows * Backend::kShardPieceFloats});
  for (float temperature : {0.0f, 0.7f}) {
    std::vector<float> params;
    for (int64_t r = 0; r < rows; ++r) params.insert(params.end(), {temperature, 0.5f});
    Tensor p = gpu->empty(DType::kF32, {rows * 2});
    gpu->copy_from_host(p, params.data());
    const double sec = median_seconds_per_call(*gpu, [&] { gpu->shard_sample_stats(logits, p, n, stats, pieces); });
    const double gbs = rows * n * 4.0 / sec / 1e9;
    std::printf("[bench] shard_sample_stats %lld x %lld, temperature %.1f: %.1f us, %.0f GB/s of logits\n",
                static_cast<long long>(rows), static_cast<long long>(n), temperature, sec * 1e6, gbs);
    EXPECT_GT(gbs, 100.0);
    if (temperature == 0.0f) continue;
    Tensor picks = gpu->empty(DType::kI32, {rows});
    const double pick =
        median_seconds_per_call(*gpu, [&] { gpu->shard_sample_pick(logits, p, n, 0, stats, pieces, picks); });
    std::printf("[bench] shard_sample_pick %lld x %lld, every row's draw on this rank: %.1f us\n",
                static_cast<long long>(rows), static_cast<long long>(n), pick * 1e6);
  }
}

}  // namespace
}  // namespace minivllm::cuda_test
