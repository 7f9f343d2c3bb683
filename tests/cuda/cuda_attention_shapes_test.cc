// The attention kernels on shapes beyond the target models' (issue 10): GQA groups 3, 5, 6, 7, 12
// and 16 (tiled decode CTAs, padded heads), head_dim 96 (idle lanes, padded smem rows) and 256
// (a warp per key, 32-key prefill tiles), against the CPU backend; decode with and without
// splits, prefill over prefix-cached spans, odd lengths, block sizes 16 to 256. Then the errors:
// unsupported shapes and block sizes fail when the backend is asked at start-up.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <utility>

#include "attention_case.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/decode_policy.h"
#include "scoped_env.h"

namespace minivllm::cuda_test {
namespace {

constexpr double kNmse = 2e-4;  // as cuda_attention_test.cc: bf16 inputs, outputs and P
constexpr double kAbs = 2e-2;

std::string shape_name(const AttentionCase& c) {
  return std::to_string(c.nq) + "/" + std::to_string(c.nkv) + " heads (group " + std::to_string(c.nq / c.nkv) +
         "), hd " + std::to_string(c.hd) + ", bs " + std::to_string(c.block_size);
}

// MINIVLLM_* knobs set for one scope: the backends read them when they are made.
using test::EnvVars;
using test::ScopedEnv;

// Both backends, made while `vars` are set.
Backends make_backends(const EnvVars& vars) {
  const ScopedEnv env(vars);
  return Backends{};
}

// one_split: MINIVLLM_DECODE_MIN_PARTITION set so high that every decode runs unsplit (read when
// the backend is made).
void check(const AttentionCase& c, const std::string& what, uint32_t seed, bool one_split = false) {
  Backends b = make_backends(one_split ? EnvVars{{"MINIVLLM_DECODE_MIN_PARTITION", "1000000"}} : EnvVars{});
  const std::string name = what + ", " + shape_name(c);
  const AttentionOutputs o = run_attention_case(b, c, seed);
  expect_close(o.gpu, o.cpu, kNmse, kAbs, name);
  EXPECT_TRUE(o.sentinel_intact) << name << ": the row after the output was written";
}

AttentionCase decode_case(int nq, int nkv, int hd, int block_size, std::vector<int> contexts, int extra_cols = 0) {
  AttentionCase c{nq, nkv, hd, block_size, {}, std::move(contexts)};
  c.decode = true;
  c.extra_table_cols = extra_cols;
  return c;
}

// {nq, nkv, hd}: groups 3, 5, 6, 7, 12, 16 at the target head dims; every tile size at 96 and 256.
struct Heads {
  int nq, nkv, hd;
};

// Each (knob setting, head shape) pair on the same contexts in 4,096-key tables, NaN-poisoned rows
// past them: split and unsplit in turn (two of every three settings meet a shape both ways), the
// block size from block_size(case index).
struct KnobSetting {
  std::string label;
  EnvVars vars;
};
void check_knob_settings(const std::vector<KnobSetting>& settings, const std::vector<Heads>& heads,
                         const std::vector<int>& ctx, int (*block_size)(int), uint32_t seed, bool fp8 = false) {
  int i = 0;
  const int n = static_cast<int>(heads.size());
  for (const KnobSetting& k : settings) {
    for (const Heads& h : heads) {
      const bool one_split = (i + i / n) % 2 == 1;
      const int bs = block_size(i++);
      AttentionCase c = decode_case(h.nq, h.nkv, h.hd, bs, ctx, (4096 - 2047) / bs);
      c.poison_cache = true;
      c.fp8 = fp8;
      const ScopedEnv env(k.vars);
      check(c, "decode, " + k.label + (fp8 ? ", fp8" : "") + (one_split ? ", one split" : ", split"), seed++, one_split);
    }
  }
}
const Heads kDecodeHeads[] = {
    {9, 3, 64},    {10, 2, 128}, {12, 2, 64},  {14, 2, 128}, {24, 2, 64}, {32, 2, 128}, {16, 1, 64},
    {4, 4, 96},    {8, 4, 96},   {6, 2, 96},   {14, 2, 96},  {16, 1, 96}, {2, 2, 256},  {4, 2, 256},
    {12, 4, 256},  {10, 2, 256}, {8, 1, 256},  {16, 1, 256},
};

// The tensor-core tests' 20 decode contexts: one key, a split short of the 4,096-key tables,
// contexts ending inside a 16-key tile, at its edges and around the 64-key partition granule.
const std::vector<int> kTensorCoreContexts = {1,  2047, 300,  64,  65, 1500, 17,  900, 256, 257,
                                              3,  1024, 129, 700, 33, 2000, 5,   511, 513, 15};

TEST(CudaAttentionShapes, DecodeSplitKv) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  uint32_t seed = 100;
  for (const Heads& h : kDecodeHeads) {
    // Few sequences: many splits, contexts ending mid-block, table capacity past the contexts.
    check(decode_case(h.nq, h.nkv, h.hd, 16, {1500, 5, 701}, 7), "decode, split", seed++);
  }
}

TEST(CudaAttentionShapes, DecodeOneSplit) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  uint32_t seed = 200;
  const int block_sizes[] = {32, 64, 128, 256};
  int i = 0;
  for (const Heads& h : kDecodeHeads) {
    check(decode_case(h.nq, h.nkv, h.hd, block_sizes[i++ % 4], {1, 33, 1027, 300, 64, 257, 129}),
          "decode, one split", seed++, /*one_split=*/true);
  }
}

// Decode cases of the wide kernels: every head shape with every context set, in the engine's
// 4096-key tables, NaN-poisoned cache rows past the contexts. Each case builds both backends, so the
// (block size, cache type) pairs rotate over the cases rather than multiplying them: each pair meets
// every head shape and most contexts; `first` shifts the rotation. knobs(i) gives case i's
// MINIVLLM_* settings (i from first + 1) and their tag in the case's name.
using CaseKnobs = std::function<std::pair<EnvVars, std::string>(int)>;
void check_wide_cases(const std::string& what, const std::vector<Heads>& heads,
                      const std::vector<std::vector<int>>& contexts, uint32_t seed, const CaseKnobs& knobs,
                      int first = 0) {
  int i = first;
  for (const Heads& h : heads) {
    for (const std::vector<int>& ctx : contexts) {
      const int bs = i % 2 == 0 ? 16 : 256;
      const bool fp8 = (i / 2) % 2 == 1;
      ++i;
      AttentionCase c = decode_case(h.nq, h.nkv, h.hd, bs, ctx);
      const int longest = *std::max_element(ctx.begin(), ctx.end());
      c.extra_table_cols = (4096 - longest) / bs;
      c.fp8 = fp8;
      c.poison_cache = true;
      const auto [vars, tag] = knobs(i);
      const ScopedEnv env(vars);
      check(c, "decode, " + what + ", " + std::to_string(ctx.size()) + " seqs from " + std::to_string(ctx[0]) +
                   ", bs " + std::to_string(bs) + (fp8 ? ", fp8" : "") + tag, seed++);
    }
  }
}

// Small batches take 16-warp CTAs (decode_wide_fits: the exact kernels with group x head_dim <=
// 256) whose warps merge their lane groups by shuffles: one sequence (a context inside one wide
// step, one a key past it, one split short of a 4096-key table, and 4000 keys: 16 splits merged
// in registers and shared memory), four sequences, and two short ones; bf16 and fp8 caches,
// block sizes 16 and 256, NaN-poisoned cache rows past the contexts. bf16 cases run with the keys
// staged in shared memory (the default where the split fits) and, every third, without
// (MINIVLLM_DECODE_STAGED=0); a one-key context and a split holding only the newest key stage nothing.
TEST(CudaAttentionShapes, DecodeWideCtasAtSmallBatch) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  check_wide_cases("wide CTAs", {{16, 8, 128}, {32, 8, 64}, {8, 8, 128}, {8, 8, 64}, {16, 8, 64}},
                   {{5}, {256}, {257}, {3999}, {4000}, {300, 1, 2500, 129}, {64, 77}, {1}}, 400, [](int i) {
                     const bool unstaged = i % 3 == 0;
                     return std::pair(unstaged ? EnvVars{{"MINIVLLM_DECODE_STAGED", "0"}} : EnvVars{},
                                      std::string(unstaged ? ", unstaged" : ""));
                   });
}

// Groups too large for one wide CTA (group x head_dim > 256) in wide CTAs of two q heads each
// (MINIVLLM_DECODE_WIDE_PAIRS): the 8B models' group 4 and Qwen3-30B-A3B's 8 at head_dim 128, 8 and
// 12 at 64 and 128, against the CPU backend, forced (MINIVLLM_DECODE_WIDE=force: the engine takes
// them at one sequence only, kDecodeWidePairsMaxSeqs) at one and four sequences, bf16 and fp8
// caches, block sizes 16 and 256, NaN-poisoned rows past the contexts, under two settings:
// - the defaults: 256-key staged splits (MINIVLLM_DECODE_WIDE_STAGED_SPLITS), where 3,999 keys and
//   the 2,500 of four sequences take more staged CTAs than a wave, so those sequences take
//   twice-long unstaged splits while 300 keys beside them stay staged;
// - the plan's 512-key splits, unstaged, and every third case no staging at all.
TEST(CudaAttentionShapes, DecodeWidePairs) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const std::vector<Heads> heads = {{32, 8, 128}, {32, 4, 128}, {64, 8, 64}, {48, 4, 128}};
  const std::vector<std::vector<int>> contexts = {{5}, {256}, {300}, {3999}, {300, 1, 2500, 129}, {1}};
  const auto with = [](EnvVars more) {
    EnvVars vars = {{"MINIVLLM_DECODE_WIDE_PAIRS", "1"}, {"MINIVLLM_DECODE_WIDE", "force"}};
    vars.insert(vars.end(), more.begin(), more.end());
    return vars;
  };
  check_wide_cases("wide pairs", heads, contexts, 1700,
                   [&](int) { return std::pair(with({}), std::string(", staged splits")); });
  check_wide_cases(
      "wide pairs", heads, contexts, 1900,
      [&](int i) {
        const bool unstaged = i % 3 == 0;
        return std::pair(with({{"MINIVLLM_DECODE_WIDE_STAGED_SPLITS", "0"},
                               {"MINIVLLM_DECODE_STAGED", unstaged ? "0" : "1"}}),
                         std::string(", 512-key splits") + (unstaged ? ", unstaged" : ""));
      },
      1);
}

// The wide CTAs' small batches on the tensor cores (MINIVLLM_DECODE_WIDE_MMA: 8-warp CTAs of 1, 2,
// 4 or 8 q heads in turn, each split's tiles brought into shared memory by TMA boxes before the
// wait, the newest key's rows after it; past a wave of CTAs, splits of several staged rounds:
// 3,999 keys) against the CPU backend, at every batch size of the test
// and forced (MINIVLLM_DECODE_WIDE=force): groups 1, 2, 4 and 8 at head_dim 64 and 128, one to four
// sequences, contexts of one key, inside and at the edges of a 16-key tile and of the 256- and
// 640-key splits, the longest past a wave of CTAs; block sizes 16 and 256, NaN-poisoned rows past the
// contexts (fp8 caches keep the CUDA-core kernels: the rotation runs them too). Every other case
// caps the splits at 128 keys (MINIVLLM_DECODE_MAX_PARTITION), so that most contexts merge splits.
TEST(CudaAttentionShapes, DecodeWideOnTheTensorCores) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const std::vector<Heads> heads = {{16, 8, 128}, {32, 8, 64}, {32, 4, 128}, {8, 8, 128}, {16, 2, 64}};
  const std::vector<std::vector<int>> contexts = {{1},   {5},    {16},   {17},   {255}, {256},
                                                  {257}, {641},  {3999}, {300, 1, 2500, 129}, {64, 77}};
  check_wide_cases("wide, tensor cores", heads, contexts, 2300, [](int i) {
    const bool short_splits = i % 2 == 0;
    static constexpr const char* kHeads[] = {"1", "2", "4", "8"};
    const char* heads = kHeads[i / 4 % 4];  // both block sizes each
    EnvVars vars = {{"MINIVLLM_DECODE_WIDE_MMA", "64"},
                    {"MINIVLLM_DECODE_WIDE_MMA_HEADS", heads},
                    {"MINIVLLM_DECODE_WIDE", "force"}};
    if (short_splits) vars.push_back({"MINIVLLM_DECODE_MAX_PARTITION", "128"});
    return std::pair(vars, std::string(", ") + heads + " heads a CTA" + (short_splits ? ", 128-key splits" : ""));
  });
}

// The exact 4-warp kernels of groups 1, 2 and 4 over a bf16 cache may give each lane 16 elements
// of a key instead of 8 (the kernel's "Lane width"; decode_use_lane16). Both, forced by
// MINIVLLM_DECODE_LANE_ELEMS, against the CPU backend: past the wide-CTA bound (20 sequences),
// split and unsplit, block sizes 16 and 256, NaN-poisoned rows past the contexts. (fp8 caches keep
// 8 elements a lane whatever the setting: their tests run at it.)
TEST(CudaAttentionShapes, DecodeLaneWidths) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  // 16 elements: every shape split and unsplit; 8 (the older kernels): one of the two each. Groups
  // 2 and 4 take the tensor cores by default, hence MINIVLLM_DECODE_MMA=0.
  std::vector<KnobSetting> settings;
  for (const char* elems : {"16", "16", "8"}) {
    settings.push_back({std::string(elems) + " elements a lane",
                        {{"MINIVLLM_DECODE_LANE_ELEMS", elems}, {"MINIVLLM_DECODE_MMA", "0"}}});
  }
  check_knob_settings(settings, {{8, 8, 128}, {8, 8, 64}, {16, 8, 64}, {16, 8, 128}, {32, 8, 128}, {32, 8, 64}},
                      {1, 2047, 300, 64, 65, 1500, 17, 900, 256, 257, 3, 1024, 129, 700, 33, 2000, 5, 511, 513, 96},
                      [](int i) { return i % 3 == 0 ? 256 : 16; }, 600);
}

// The ring kernels (the exact 4-warp CTAs of groups 1, 2 and 4 over a bf16 cache streaming their
// keys through shared-memory stages filled by bulk copies; decode_use_ring), forced by
// MINIVLLM_DECODE_RING=1 with the tensor-core kernels off, against the CPU backend, next to the
// register-loading kernels (MINIVLLM_DECODE_RING=0) on the same cases: 8 and 16 elements a lane,
// split and unsplit (an unsplit 2,047-key context turns the ring's stages over ~16 times, so every
// barrier phase is reused), block sizes 16, 32 and 256 (a stage's keys from up to four blocks),
// contexts ending inside a stage, at its edges and at one key (nothing staged), NaN-poisoned
// rows past the contexts.
TEST(CudaAttentionShapes, DecodeRingStages) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  std::vector<KnobSetting> settings;
  for (const char* ring : {"1", "0"}) {
    for (const char* elems : {"16", "8"}) {
      settings.push_back({std::string("ring ") + ring + ", " + elems + " elements a lane",
                          {{"MINIVLLM_DECODE_RING", ring}, {"MINIVLLM_DECODE_MMA", "0"},
                           {"MINIVLLM_DECODE_LANE_ELEMS", elems}}});
    }
  }
  check_knob_settings(settings, {{8, 8, 128}, {16, 8, 128}, {32, 8, 128}, {8, 8, 64}, {16, 8, 64}, {32, 8, 64}},
                      {1, 2047, 33, 32, 31, 64, 65, 63, 2, 1500, 511, 512, 513, 96, 97, 129, 700, 17, 1024, 300},
                      [](int i) { return i % 3 == 0 ? 256 : i % 3 == 1 ? 16 : 32; }, 900);
}

// The tensor-core decode kernels (decode_attention_mma.cu), forced by MINIVLLM_DECODE_MMA=1 on
// every shape they take (groups 1, 2, 4, 8 at head_dim 64 and 128), bf16 and fp8 caches, against
// the CPU backend: past the wide-CTA bound, 20 sequences (fp8: the shared-memory ring) and 12 (fp8:
// fragments in registers; decode_mma_ring) in turn, split and unsplit, block sizes 16 and 256,
// NaN-poisoned rows past the contexts, contexts ending inside a 16-key tile and at its edges.
TEST(CudaAttentionShapes, DecodeTensorCores) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const Heads heads[] = {{8, 8, 128}, {8, 8, 64}, {16, 8, 128}, {16, 8, 64},
                         {32, 8, 128}, {32, 8, 64}, {64, 8, 128}, {64, 8, 64}};
  const std::vector<int>& ctx = kTensorCoreContexts;
  uint32_t seed = 700;
  int i = 0;
  for (const bool fp8 : {false, true}) {
    for (const Heads& h : heads) {
      for (const bool one_split : {false, true}) {
        const int bs = i % 3 == 0 ? 256 : 16;
        const size_t seqs = i % 2 == 0 ? 20 : 12;  // x 8 kv heads: past 132 SMs, and not
        ++i;
        AttentionCase c = decode_case(h.nq, h.nkv, h.hd, bs, std::vector<int>(ctx.begin(), ctx.begin() + seqs),
                                      (4096 - 2047) / bs);
        c.poison_cache = true;
        c.fp8 = fp8;
        const ScopedEnv env(EnvVars{{"MINIVLLM_DECODE_MMA", "1"}});
        check(c,
              std::string("decode, tensor cores, ") + std::to_string(seqs) + " seqs" + (fp8 ? ", fp8" : "") +
                  (one_split ? ", one split" : ", split"),
              seed++, one_split);
      }
    }
  }
}

// MINIVLLM_DECODE_HELD_SPLITS: the tensor-core kernels lengthen the plan's splits with each
// sequence's context, so that at most that many hold its keys (1, 2 and 8 held splits; 0, off: the
// plan's 64-key splits, up to 64 of them, since the default of 8 keeps other tests' splits few), against the
// CPU backend: groups 2, 4 and 8 at head_dim 64 and 128, in the engine's 4,096-key tables (a plan of
// 64-key splits at these batches: the CTAs past the held ones have no keys), one sequence of the
// whole table, one short one, and four mixed (a split ending mid-block, one key, one mid-tile),
// bf16 and fp8 caches in turn (fp8 in registers and in the ring), block sizes 16 and 256,
// NaN-poisoned rows past the contexts. The one-key case checks the floor: a split never shrinks
// below the plan's length. One sequence of at most MINIVLLM_DECODE_ONE_SPLIT_KEYS keys (384 but with
// 0 held splits, where it is 0) is one split: 384 and 385 keys are either side of it; one sequence's
// CTAs also pull their whole split into L2 first (MINIVLLM_DECODE_PREFETCH_SPLIT), off every other
// case.
TEST(CudaAttentionShapes, DecodeSplitsFollowTheContext) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const Heads heads[] = {{16, 8, 128}, {32, 8, 128}, {32, 4, 128}, {16, 8, 64}, {32, 4, 64}};
  const std::vector<std::vector<int>> contexts = {{4096}, {300}, {384}, {385}, {1500, 1, 701, 4001}};
  uint32_t seed = 1100;
  int i = 0;
  for (const char* held : {"0", "1", "2", "8"}) {
    for (const Heads& h : heads) {
      for (const std::vector<int>& ctx : contexts) {
        const int bs = i % 2 == 0 ? 16 : 256;
        const bool fp8 = (i / 2) % 2 == 1;
        ++i;
        const int longest = *std::max_element(ctx.begin(), ctx.end());
        AttentionCase c = decode_case(h.nq, h.nkv, h.hd, bs, ctx, (4096 - longest) / bs + 1);
        c.poison_cache = true;
        c.fp8 = fp8;
        // fp8 caches: the shared-memory ring kernel every other time (small batches take registers).
        const bool ring = fp8 && i % 4 == 0;
        const ScopedEnv env(EnvVars{{"MINIVLLM_DECODE_MMA", "1"},
                                    {"MINIVLLM_DECODE_WIDE", "0"},
                                    {"MINIVLLM_DECODE_MMA_RING", ring ? "1" : "0"},
                                    {"MINIVLLM_DECODE_HELD_SPLITS", held},
                                    {"MINIVLLM_DECODE_ONE_SPLIT_KEYS", held[0] == '0' ? "0" : "384"},
                                    {"MINIVLLM_DECODE_PREFETCH_SPLIT", i % 3 == 0 ? "0" : "1"}});
        check(c,
              std::string("decode, ") + held + " held splits, " + std::to_string(ctx.size()) + " seqs from " +
                  std::to_string(ctx[0]) + (fp8 ? ring ? ", fp8, ring" : ", fp8" : ""),
              seed++);
      }
    }
  }
}

// How the tensor-core register kernel loads its tiles (groups 2 and 4): MINIVLLM_DECODE_MMA_TILES
// tiles a warp per step, MINIVLLM_DECODE_MMA_PIPE the next step's loads issued before this step's
// math, every setting the registers allow at each head_dim and cache type (fp8 with the ring off),
// against the CPU backend: 20 and 12 sequences, split and unsplit, block sizes 16 and 256, contexts
// ending inside a tile, at its edges and at one key (a pipelined CTA whose second register set is
// all past the end), NaN-poisoned rows past the contexts.
TEST(CudaAttentionShapes, DecodeTensorCoreLoads) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const std::vector<int>& ctx = kTensorCoreContexts;
  const auto settings = [](std::vector<std::pair<const char*, const char*>> loads) {
    std::vector<KnobSetting> s;
    for (const auto& [tiles, pipe] : loads) {
      s.push_back({std::string(tiles) + " tiles a step" + (pipe[0] == '1' ? ", pipelined" : ""),
                   {{"MINIVLLM_DECODE_MMA", "1"}, {"MINIVLLM_DECODE_MMA_RING", "0"},
                    {"MINIVLLM_DECODE_MMA_TILES", tiles}, {"MINIVLLM_DECODE_MMA_PIPE", pipe}}});
    }
    return s;
  };
  const auto block_size = [](int i) { return i % 3 == 0 ? 256 : 16; };
  check_knob_settings(settings({{"1", "1"}, {"2", "0"}, {"1", "0"}}), {{16, 8, 128}, {32, 8, 128}}, ctx, block_size,
                      1200);
  check_knob_settings(settings({{"1", "1"}, {"2", "1"}, {"4", "0"}, {"1", "0"}, {"2", "0"}}), {{16, 8, 64}, {32, 8, 64}},
                      ctx, block_size, 1300);
  const std::vector<int> few(ctx.begin(), ctx.begin() + 12);
  check_knob_settings(settings({{"1", "1"}, {"2", "0"}}), {{16, 8, 128}}, few, block_size, 1400);
  check_knob_settings(settings({{"1", "1"}, {"2", "1"}}), {{32, 8, 64}}, few, block_size, 1500);
  check_knob_settings(settings({{"1", "1"}, {"1", "0"}, {"2", "0"}}), {{16, 8, 128}, {32, 8, 128}}, ctx, block_size,
                      1600, /*fp8=*/true);
  check_knob_settings(settings({{"1", "1"}, {"2", "1"}, {"1", "0"}, {"2", "0"}, {"4", "0"}}),
                      {{16, 8, 64}, {32, 8, 64}}, ctx, block_size, 1700, /*fp8=*/true);
}

// The shared-memory ring over bf16 caches (MINIVLLM_DECODE_MMA_RING=1; the policy takes it over bf16
// at group 4 past a wave: decode_mma_ring), against the CPU backend:
// groups 1, 2, 4 and 8 at head_dim 128 and 64, the contexts above (split and unsplit, ending inside
// a tile, at its edges and at one key), block sizes 16 and 256, NaN-poisoned rows past the contexts.
TEST(CudaAttentionShapes, DecodeRingOverBf16) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const std::vector<KnobSetting> s = {
      {"ring over bf16", {{"MINIVLLM_DECODE_MMA", "1"}, {"MINIVLLM_DECODE_MMA_RING", "1"}}}};
  const auto block_size = [](int i) { return i % 3 == 0 ? 256 : 16; };
  check_knob_settings(s, {{16, 16, 128}, {16, 8, 128}, {32, 8, 128}, {32, 4, 128}, {32, 8, 64}, {32, 4, 64}},
                      kTensorCoreContexts, block_size, 1800);
}

// The CTAs taking the sequences in the order of AttentionMetadata::seq_order (the runner's longest
// context first) change which sequence's work starts first, nothing else: each kernel family, with
// the longest-first order and with a scrambled one, against the CPU backend and bit for bit against
// the same case in batch order (every split's partial is merged in split order, whichever CTA
// finishes last). Kernels: the tensor cores (bf16; fp8 through the ring, 20 x 8 CTAs past the SMs),
// the CUDA-core ring and register kernels, the tiled kernel of group 3, and the wide CTAs; split
// and unsplit; NaN-poisoned rows past the contexts.
TEST(CudaAttentionShapes, DecodeSequenceOrder) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const std::vector<int>& ctx = kTensorCoreContexts;
  std::vector<int32_t> longest(ctx.size());
  std::iota(longest.begin(), longest.end(), 0);
  std::stable_sort(longest.begin(), longest.end(), [&](int32_t a, int32_t b) { return ctx[a] > ctx[b]; });
  std::vector<int32_t> scrambled(ctx.size());
  for (size_t i = 0; i < ctx.size(); ++i) scrambled[i] = static_cast<int32_t>((i * 7 + 3) % ctx.size());
  struct Kernel {
    const char* name;
    Heads h;
    bool fp8;
    EnvVars env;
    size_t seqs;
  };
  const Kernel kernels[] = {
      {"tensor cores", {16, 8, 128}, false, {}, 20},
      {"tensor cores, fp8 ring", {16, 8, 128}, true, {}, 20},
      {"tensor cores, group 4", {32, 8, 64}, false, {}, 20},
      {"CUDA-core ring", {16, 8, 128}, false, {{"MINIVLLM_DECODE_MMA", "0"}}, 20},
      {"CUDA-core registers", {16, 8, 64}, false, {{"MINIVLLM_DECODE_MMA", "0"}, {"MINIVLLM_DECODE_RING", "0"}}, 20},
      {"tiled, group 3", {9, 3, 64}, false, {}, 20},
      {"wide CTAs", {16, 8, 128}, false, {}, 4},
  };
  uint32_t seed = 1000;
  for (const Kernel& k : kernels) {
    for (const bool one_split : {false, true}) {
      const int bs = one_split ? 256 : 16;
      const std::vector<int> lens(ctx.begin(), ctx.begin() + static_cast<std::ptrdiff_t>(k.seqs));
      AttentionCase c = decode_case(k.h.nq, k.h.nkv, k.h.hd, bs, lens, (4096 - 2047) / bs);
      c.poison_cache = true;
      c.fp8 = k.fp8;
      EnvVars vars = k.env;
      vars.emplace_back("MINIVLLM_DECODE_SEQ_ORDER", "1");  // whatever the policy says
      if (one_split) vars.emplace_back("MINIVLLM_DECODE_MIN_PARTITION", "1000000");
      Backends b = make_backends(vars);
      const std::string what = std::string("decode, ") + k.name + (one_split ? ", one split" : ", split") + ", " +
                               std::to_string(k.seqs) + " seqs";
      const AttentionOutputs plain = run_attention_case(b, c, seed);
      expect_close(plain.gpu, plain.cpu, kNmse, kAbs, what + ", batch order");
      for (const std::vector<int32_t>* order : {&longest, &scrambled}) {
        std::vector<int32_t> o;
        for (int32_t r : *order) {
          if (static_cast<size_t>(r) < k.seqs) o.push_back(r);  // the order of the case's first seqs
        }
        c.seq_order = o;
        const std::string name = what + (order == &longest ? ", longest first" : ", scrambled");
        const AttentionOutputs ordered = run_attention_case(b, c, seed);
        expect_close(ordered.gpu, ordered.cpu, kNmse, kAbs, name);
        EXPECT_TRUE(ordered.sentinel_intact) << name << ": the row after the output was written";
        ASSERT_EQ(ordered.gpu.size(), plain.gpu.size());
        EXPECT_TRUE(std::equal(ordered.gpu.begin(), ordered.gpu.end(), plain.gpu.begin(),
                               [](float x, float y) { return x == y || (std::isnan(x) && std::isnan(y)); }))
            << name << ": differs from batch order";
      }
      ++seed;
    }
  }
}

TEST(CudaAttentionShapes, DecodeManySplitsMergeFromL2) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  // One sequence of 5000 keys: ~79 splits of 64 keys, more than the merge keeps in shared memory.
  check(decode_case(6, 2, 96, 64, {5000}), "decode, 79 splits", 300);
  check(decode_case(16, 1, 256, 16, {4999}), "decode, 79 splits", 301);
  check(decode_case(9, 3, 64, 256, {5001}), "decode, 79 splits", 302);
}

TEST(CudaAttentionShapes, PrefillReadsCachedPrefix) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  // Query spans of 7, 129, 1 and 65 rows after cached prefixes of 300, 17, 1000 and 0 keys.
  const std::vector<int> len_q = {7, 129, 1, 65};
  const std::vector<int> len_k = {7 + 300, 129 + 17, 1 + 1000, 65};
  uint32_t seed = 400;
  const std::pair<Heads, int> shapes[] = {{{9, 3, 64}, 16},  {{10, 2, 128}, 32}, {{12, 2, 96}, 64},
                                          {{14, 2, 256}, 16}, {{16, 1, 96}, 256}, {{32, 2, 256}, 128},
                                          {{3, 3, 96}, 32},  {{4, 2, 256}, 64}};
  for (const auto& [h, block_size] : shapes) {
    check({h.nq, h.nkv, h.hd, block_size, len_q, len_k}, "prefill with prefix", seed++);
  }
}

TEST(CudaAttentionShapes, PrefillLongAndWithoutCache) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  check({6, 2, 96, 16, {1100}, {1100 + 77}}, "prefill 1100 rows after 77 cached", 500);
  check({2, 1, 256, 64, {1031}, {1031}}, "prefill 1031 rows", 501);
  for (const Heads& h : {Heads{6, 2, 96}, Heads{7, 1, 256}, Heads{9, 3, 64}}) {
    AttentionCase c{h.nq, h.nkv, h.hd, 16, {7, 129, 1}, {7, 129, 1}};
    c.no_cache = true;
    check(c, "prefill without cache", 502);
  }
}

// Host only: which decode kernel each shape gets (exact, or tiles of how many heads).
TEST(CudaAttentionShapes, DecodeKernelChoice) {
  auto tiles = [](int hd, int group, int max_tile) {
    const cuda::DecodeHeadTiles t = cuda::decode_head_tiles(hd, group, max_tile);
    return std::to_string(t.heads_per_cta) + "x" + std::to_string(t.tiles) + (t.exact ? " exact" : " tiled");
  };
  EXPECT_EQ(tiles(128, 2, 8), "2x1 exact");  // Qwen3-0.6B
  EXPECT_EQ(tiles(64, 4, 8), "4x1 exact");   // Llama-3.2-1B
  EXPECT_EQ(tiles(128, 8, 4), "8x1 exact");  // the tile limit never replaces an exact kernel
  EXPECT_EQ(tiles(64, 3, 8), "4x1 tiled");   // SmolLM2: one padded tile of 4, not the group-4 kernel
  EXPECT_EQ(tiles(128, 6, 8), "8x1 tiled");
  EXPECT_EQ(tiles(128, 6, 4), "4x2 tiled");
  EXPECT_EQ(tiles(64, 16, 8), "8x2 tiled");
  EXPECT_EQ(tiles(64, 12, 4), "4x3 tiled");
  EXPECT_EQ(tiles(96, 1, 8), "1x1 tiled");
  EXPECT_EQ(tiles(256, 2, 8), "2x1 tiled");
  EXPECT_EQ(tiles(256, 8, 8), "8x1 tiled");
  EXPECT_EQ(tiles(256, 16, 4), "4x4 tiled");
  // Wide CTAs of two heads: only even groups past one wide CTA's 256 q values at head_dim 64 / 128.
  auto pairs = [](int hd, int group) { return cuda::decode_wide_head_pairs(hd, group).tiles; };
  EXPECT_EQ(pairs(128, 4), 2);  // the 8B models
  EXPECT_EQ(pairs(128, 8), 4);  // Qwen3-30B-A3B
  EXPECT_EQ(pairs(64, 8), 4);
  EXPECT_EQ(pairs(128, 2), 0);  // one wide CTA holds it
  EXPECT_EQ(pairs(64, 4), 0);
  EXPECT_EQ(pairs(128, 3), 0);  // odd
  EXPECT_EQ(pairs(96, 4), 0);
  EXPECT_EQ(pairs(256, 2), 0);
  EXPECT_TRUE(cuda::decode_wide_fits(128, cuda::decode_wide_head_pairs(128, 4)));
  EXPECT_FALSE(cuda::decode_wide_fits(128, cuda::decode_wide_head_pairs(128, 2)));
  EXPECT_FALSE(cuda::decode_wide_fits(128, cuda::decode_head_tiles(128, 4, 8)));
  // The longest wide split that stages (160 KB of k and v rows), in whole wide steps.
  EXPECT_EQ(cuda::decode_wide_staged_partition(128, cuda::decode_wide_granule(128, 2)), 256);
  EXPECT_EQ(cuda::decode_wide_staged_partition(64, cuda::decode_wide_granule(64, 4)), 512);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(CudaAttentionShapes, SupportedShapesPassTheStartUpCheck) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  for (int hd : {64, 96, 128, 256}) {
    for (int group = 1; group <= 16; ++group) {
      EXPECT_EQ(error_of([&] { gpu->check_attention_shape(2 * group, 2, hd); }), "") << group << " " << hd;
    }
  }
}

TEST(CudaAttentionShapes, OtherShapesAndBlockSizesFailAtStartUp) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  const std::string group17 = error_of([&] { gpu->check_attention_shape(17, 1, 64); });
  EXPECT_NE(group17.find("GQA group 17"), std::string::npos) << group17;
  EXPECT_NE(group17.find("supported: GQA group (q heads per kv head) 1 to 16, head_dim 64, 96, 128 or 256"),
            std::string::npos)
      << group17;
  const std::string hd80 = error_of([&] { gpu->check_attention_shape(8, 8, 80); });
  EXPECT_NE(hd80.find("head_dim 80 not supported"), std::string::npos) << hd80;
  const std::string uneven = error_of([&] { gpu->check_attention_shape(9, 2, 64); });
  EXPECT_NE(uneven.find("9 q heads / 2 kv heads (not a whole GQA group)"), std::string::npos) << uneven;
  // The engine accepts any multiple of 16; the CUDA kernels need a power of two.
  const std::string bs48 = error_of([&] { gpu->allocate_kv_cache(4, 48, 2, 64); });
  EXPECT_NE(bs48.find("block_size 48 not supported"), std::string::npos) << bs48;
  EXPECT_EQ(error_of([&] { gpu->allocate_kv_cache(4, 512, 2, 96); }), "");
  const std::string kv_hd = error_of([&] { gpu->allocate_kv_cache(4, 16, 2, 80); });
  EXPECT_NE(kv_hd.find("head_dim 80 not supported"), std::string::npos) << kv_hd;
}

// The rope kernels rotate any even number of leading dims (partial_rotary_factor): Phi-4-mini's
// 96 of 128 passes the start-up check; an odd width (no pairing) or one past the head fails,
// naming the config key.
TEST(CudaAttentionShapes, PartialRotaryPassesStartUpOddWidthFails) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
  EXPECT_EQ(error_of([&] { gpu->check_rotary_dim(128, 128); }), "");
  EXPECT_EQ(error_of([&] { gpu->check_rotary_dim(128, 96); }), "");
  EXPECT_EQ(error_of([&] { gpu->check_rotary_dim(64, 48); }), "");
  EXPECT_EQ(error_of([&] { gpu->check_rotary_dim(128, 40); }), "");
  const std::string odd = error_of([&] { gpu->check_rotary_dim(128, 95); });
  EXPECT_NE(odd.find("partial_rotary_factor"), std::string::npos) << odd;
  EXPECT_NE(odd.find("95 of head_dim 128"), std::string::npos) << odd;
  const std::string wide = error_of([&] { gpu->check_rotary_dim(64, 66); });
  EXPECT_NE(wide.find("66 of head_dim 64"), std::string::npos) << wide;
}

}  // namespace
}  // namespace minivllm::cuda_test
