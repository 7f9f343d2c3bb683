// Decode attention, split-KV (flash-decoding), GQA-aware.
//
// Grid (num_splits, num_kv_heads, num_seqs), 128 threads (512 for the "wide" CTAs of small batches,
// decode_policy.h's decode_use_wide). One CTA reads the keys of ONE kv head in
// one partition of one sequence and serves all the q heads of that kv head, so every KV byte is
// read once per step. Inside the CTA, a "lane group" of head_dim / 8 lanes owns one key at a
// time (16-byte loads of k and v, each lane 8 dims; or head_dim / 16 lanes of 16 dims each, see
// "Lane width" at the kernel); the groups of a warp read consecutive keys,
// and each group keeps its own online softmax (max, sum, 8 or 16 accumulators per q head) with no
// shared memory or barrier in the main loop. kUnroll keys per group are loaded before any use,
// so several 16-byte loads per thread are in flight. The groups merge through shared memory at
// the end (log-sum-exp; decode_finish.cuh, shared with the tensor-core kernels of
// decode_attention_mma.cu). With several splits, each CTA writes its partial (o, lse) and bumps a
// per-(sequence, kv head) counter; the CTA that finishes last merges the splits and resets the
// counter, so there is no second kernel (and no second graph node per layer). A sequence whose
// keys all fall in its first split skips that: the one CTA with keys writes the output.
//
// num_splits / partition are computed on the host from graph-constant values (num_seqs,
// max_num_blocks), never from context_lens, so the launch shape is fixed inside a CUDA graph;
// CTAs whose partition starts past the sequence's length return at once. A sliding window moves
// the splits' origin from key 0 to just before the window's first key (decode_finish.cuh:
// decode_key_origin; blocks before it are never read, and the host plans the splits over the
// window) and masks the keys between the origin and the window.
//
// Shapes. The GQA groups 1, 2, 4 and 8 at head_dim 64 and 128 (the target models) have exact
// kernels: one CTA per kv head, its kGroup q heads in registers. Every other group (up to
// kMaxAttentionGroup) takes a "tiled" kernel: the group is covered by ceil(group / kGroup) CTAs of
// kGroup heads each (the last one padded with heads whose q is zero and which are never stored),
// so group 3 runs as one CTA of 4 heads and group 12 as two CTAs of 8 (each reading the kv head).
// head_dim 96 uses 16 lanes per key (12 of them loading); 256 uses a whole warp per key.
// At small batch, even groups too large for one wide CTA's registers may take wide CTAs of two q
// heads each, tiled the same way (launch_wide_pairs; MINIVLLM_DECODE_WIDE_PAIRS).
//
// FP8 cache (kFp8): the same lanes own the same 8 dims of a key, loaded as 8 bytes instead of 16,
// plus the key's k and v scales (one f32 each, the same address for a lane group). The k scale
// multiplies the finished q.k; the v scale multiplies p before it weights v (l sums p unscaled),
// so dequantising costs two multiplies per key, not one per element. The bf16 instantiations are
// the code they were (every fp8 difference is `if constexpr`).
#include <algorithm>
#include <type_traits>
#include <cfloat>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/decode_finish.cuh"
#include "backend/cuda/decode_policy.h"
#include "backend/cuda/device_utils.cuh"
#include "backend/cuda/fp8_kv.cuh"
#include "backend/cuda/pdl_launch.h"

namespace minivllm::cuda {
namespace {

constexpr int kWarps = 4;              // a CTA at batch sizes that give every SM CTAs of its own
constexpr int kWideWarps = 16;         // a "wide" CTA at small batch (decode_wide_fits)
constexpr int kThreads = kWarps * 32;  // the tiled kernels' CTA
// Wide kernels for group x head_dim <= 256 (the target models: 2 x 128, 4 x 64): past that the
// registers of 16 warps spill (group 8 at head_dim 64 did).
constexpr int kMaxWideGroupDims = 256;
// Keys per lane group in flight: 8 where the registers allow (groups up to 2), as the 4-warp
// kernel does at small batch.
constexpr int wide_unroll(int group) { return group <= 2 ? 8 : 4; }
constexpr float kLog2e = 1.4426950408889634f;

constexpr int pow2_ceil(int v) {
  int p = 1;
  while (p < v) p *= 2;
  return p;
}

// kUnroll: keys per lane group loaded before any use. 4 streams the cache at ~98% of copy
// bandwidth when many CTAs run; with splits (few sequences), 8 makes a 64-key split one step.
// kElems: elements of a key per lane, 8 or 16 (kernel comment: "Lane width").
template <int kHeadDim, int kUnroll = 4, int kCtaWarps = kWarps, int kElems = 8>
struct DecodeShape {
  static_assert(kHeadDim % kElems == 0 && kHeadDim / kElems <= 32, "head_dim: whole lane chunks, one warp per key");
  static constexpr int kChunks = kHeadDim / kElems;      // lane chunks of one key
  static constexpr int kLanes = pow2_ceil(kChunks);      // lanes per key (the last kLanes - kChunks idle)
  static constexpr bool kAllLanesLoad = kLanes == kChunks;
  static constexpr int kKeysPerWarp = 32 / kLanes;
  static constexpr int kGroups = kCtaWarps * kKeysPerWarp;  // keys in flight per CTA per unroll step
  static constexpr int kStep = kGroups * kUnroll;        // keys per loop iteration
};

// One lane's kElems elements of a key row in the cache: the words it loads (16 bytes each, or one
// 8-byte word for 8 fp8 elements) and their conversion to f32 (fp8: unscaled).
template <bool kFp8, int kElems>
struct LaneWords {
  static_assert(!kFp8 || kElems == 8, "fp8 keys: 8 elements a lane (launch_split: no 16-element fp8 kernel)");
  static constexpr int kBytes = kElems * (kFp8 ? 1 : 2);
  using Word = std::conditional_t<(kBytes >= 16), uint4, uint2>;
  static constexpr int kWords = kBytes / static_cast<int>(sizeof(Word));
  // The first word of lane chunk dl of cache row `row` (a row is `chunks` lane chunks).
  __device__ static const Word* at(const void* cache, int64_t row, int chunks, int dl) {
    return static_cast<const Word*>(cache) + (row * chunks + dl) * kWords;
  }
  __device__ static void load(const void* cache, int64_t row, int chunks, int dl, Word (&w)[kWords]) {
    const Word* p = at(cache, row, chunks, dl);
#pragma unroll
    for (int i = 0; i < kWords; ++i) w[i] = __ldg(p + i);
  }
  __device__ static void zero(Word (&w)[kWords]) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) w[i] = Word{};
  }
  __device__ static void to_f32(const Word (&w)[kWords], float* f) {
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (kFp8) {
        fp8x8_to_f32(w[i], f + 8 * i);
      } else {
        bf16x8_to_f32(w[i], f + 8 * i);
      }
    }
  }
};

// Launched with programmatic dependent launch: the context length and the first block-table entry
// (the step's inputs) are loaded, and this thread's first keys prefetched into L2, while the rope
// kernel still runs; q and the cache are read after pdl_wait().
// kExact: the GQA group is kGroup (grid.y = kv heads). Otherwise grid.y = kv heads x tiles and this
// CTA serves `heads` <= kGroup q heads of its kv head; everything shape-dependent below folds to
// the exact kernel's constants when kExact.
// kCtaWarps: 4, or kWideWarps at small batch. A wide CTA walks 4x the keys per step with the same
// keys in flight per lane, and its warps first merge their lane groups by shuffles (the shared
// memory of a lane-group merge at 16 warps would exceed the static limit); the 4-warp kernel
// computes what it did before wide CTAs existed.
// Lane width (kElems): 8 elements of a key a lane (one 16-byte bf16 load), or 16 (two loads), for
// bf16 caches at groups up to 4 (decode_policy.h: decode_use_lane16). With 16, half as many lanes
// share a key, so a key's dot product takes one shuffle level fewer and its softmax runs on half
// the lanes, but q and acc double in registers (group 4: 212 instead of 128, half the CTAs per
// SM). Such a CTA merges its lane groups by shuffles first, as a wide one does (twice the groups
// would double the shared-memory rows).
// kStaged (wide bf16 CTAs, decode_policy.h: decode_use_staged): before pdl_wait the CTA copies its
// partition's keys and values into shared memory with bulk copies, all but the newest key (the one
// this step's rope kernel writes), so that after the wait its key loop reads shared memory instead
// of waiting on L2 round trips; the newest key is read from the cache after the wait.
// kRing (4-warp bf16 CTAs, decode_policy.h: decode_use_ring): the partition streams through kRing
// shared-memory stages of one loop step each (kStep keys of k, then their v), filled by bulk copies
// that thread 0 issues kRing steps ahead; each stage completes on its own mbarrier. The first
// stages go out before pdl_wait, as the staged CTAs' copies do (all but the newest key, which is
// read from the cache after the wait); a stage is refilled once every thread has its keys in
// registers, so the copies stay kRing - 1 steps ahead of the arithmetic. Unlike register loads,
// the bytes in flight do not wait on the warps' arithmetic or their registers.
template <int kHeadDim, int kGroup, int kUnroll, bool kExact, bool kFp8, int kCtaWarps = kWarps, int kElems = 8,
          bool kStaged = false, int kRing = 0, bool kCap = false>
__global__ __launch_bounds__(kCtaWarps * 32) void decode_split_kernel(AttentionArgs a, int plan_partition,
                                                                      int num_splits, DecodeScratch scratch) {
  static_assert(!kStaged || (!kFp8 && kElems == 8), "staged keys: bf16, 8 elements a lane");
  static_assert(kRing == 0 || (!kFp8 && !kStaged && kExact && kCtaWarps == kWarps), "ring: exact 4-warp bf16 CTAs");
  constexpr int kCtaThreads = kCtaWarps * 32;
  constexpr bool kWide = kCtaWarps != kWarps;
  constexpr bool kWarpMerge = kWide || kElems != 8;  // lane groups merge by shuffles before shared memory
  pdl_launch_dependents();  // the o projection's gemv may start streaming its weights now
  using S = DecodeShape<kHeadDim, kUnroll, kCtaWarps, kElems>;
  using W = LaneWords<kFp8, kElems>;  // one lane's kElems elements of a key
  using Word = typename W::Word;
  const int split = blockIdx.x;
  const int seq = decode_cta_seq(a);
  const int gqa = kExact ? kGroup : a.num_q_heads / a.num_kv_heads;
  const int tiles = kExact ? 1 : (gqa + kGroup - 1) / kGroup;
  const int kvh = kExact ? static_cast<int>(blockIdx.y) : static_cast<int>(blockIdx.y) / tiles;
  const int tile = kExact ? 0 : static_cast<int>(blockIdx.y) - kvh * tiles;
  const int head0 = kExact ? 0 : kvh * gqa + tile * kGroup;  // tiled: this CTA's first q head
  // q head g of this CTA (written as the exact kernel always wrote it, so that kernel is unchanged).
  auto q_head = [&](int g) { return kExact ? kvh * kGroup + g : head0 + g; };
  const int heads = kExact ? kGroup : min(kGroup, gqa - tile * kGroup);  // real q heads (the rest pad)
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int dl = lane % S::kLanes;                         // this lane's kElems dims: dl * kElems ..
  const bool loads = S::kAllLanesLoad || dl < S::kChunks;  // head_dim 96: lanes 12..15 of a key idle
  const int group = warp * S::kKeysPerWarp + lane / S::kLanes;
  constexpr int kChunks = S::kChunks;
  const int32_t* table = a.block_tables + static_cast<int64_t>(seq) * a.table_cols;
  const SplitBlockGuess guess = guess_split_block(a, table, split, plan_partition);
  const int ctx = a.context_lens[seq];
  const int first_key = decode_first_key(a, ctx);            // the window's first key (0: none)
  const int origin = decode_key_origin(a, first_key);        // the splits' key 0, block-aligned
  // kStaged: a sequence whose staged splits would take more CTAs than a wave takes splits twice as
  // long, unstaged (AttentionArgs::wide_wave_ctas). Every CTA of the sequence decides alike.
  int partition = plan_partition;
  bool long_unstaged = false;
  if constexpr (kStaged) {
    const int64_t used = (ctx - origin + plan_partition - 1) / plan_partition;
    long_unstaged = a.wide_wave_ctas > 0 && used * gridDim.y * gridDim.z > a.wide_wave_ctas;
    if (long_unstaged) partition = 2 * plan_partition;  // (then nothing is staged)
  }
  const int start = origin + split * partition;
  const int first_col = start >> a.block_size_log2;
  const int32_t first_block = first_col >= a.table_cols ? -1 : guess.block_of(table, first_col);
  if (start < ctx && first_block >= 0) {
    // Older keys are not rewritten by this step; the newest one is, and L2 sees that write.
    const int bs_mask = (1 << a.block_size_log2) - 1;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = start + u * S::kGroups + group;
      if (loads && j < ctx && (j >> a.block_size_log2) == first_col) {
        const int64_t row = ((static_cast<int64_t>(first_block) * a.num_kv_heads + kvh) << a.block_size_log2) +
                            (j & bs_mask);
        asm volatile("prefetch.global.L2 [%0];" ::"l"(W::at(a.k_cache, row, kChunks, dl)));
        asm volatile("prefetch.global.L2 [%0];" ::"l"(W::at(a.v_cache, row, kChunks, dl)));
      }
    }
  }
  if (start >= ctx) {  // past this sequence: the merge counts only the splits that hold keys
    if (ctx <= 0 && split == 0) {  // no keys at all (a padded row): zeros, never garbage
      pdl_wait();  // an earlier kernel may still read out
      const int64_t first = kExact ? static_cast<int64_t>(kvh) * kGroup * kHeadDim
                                   : static_cast<int64_t>(head0) * kHeadDim;  // this CTA's first q head
      __nv_bfloat16* out =
          static_cast<__nv_bfloat16*>(a.out) + static_cast<int64_t>(seq) * a.num_q_heads * kHeadDim + first;
      for (int i = threadIdx.x; i < heads * kHeadDim; i += kCtaThreads) out[i] = __float2bfloat16(0.0f);
    }
    return;
  }
  const int end = min(ctx, start + partition);
  // kStaged: keys [start, staged_end) go to shared memory (K rows, then V rows, row j - start).
  // kRing: the same keys, a loop step at a time, into ring stages (K rows, then V rows, row j - base).
  extern __shared__ __align__(128) uint8_t staged_smem[];
  constexpr int kBars = kRing > 0 ? kRing : 1;
  __shared__ __align__(8) uint64_t staged_bar[kBars];
  const int staged_end = (kStaged && !long_unstaged) || kRing > 0 ? min(end, ctx - 1) : start;
  constexpr uint32_t kRowBytes = kHeadDim * 2;
  constexpr uint32_t kStageBytes = 2u * S::kStep * kRowBytes;  // kRing: one loop step's k and v
  // Keys [j0, j1) to shared memory at k_dst (k rows) and v_dst (v rows): one bulk copy per block
  // of the range, for k and for v, counted on bar. Thread 0 only.
  auto copy_rows = [&](uint32_t k_dst, uint32_t v_dst, int j0, int j1, uint32_t bar) {
    mbar_expect_tx(bar, 2u * static_cast<uint32_t>(j1 - j0) * kRowBytes);
    const int bs = 1 << a.block_size_log2;
    for (int j = j0; j < j1;) {
      const int col = j >> a.block_size_log2, in_block = j & (bs - 1);
      const int rows = min(j1 - j, bs - in_block);
      const int64_t row = ((static_cast<int64_t>(col == first_col ? first_block : table[col]) * a.num_kv_heads + kvh)
                           << a.block_size_log2) + in_block;
      const uint32_t off = static_cast<uint32_t>(j - j0) * kRowBytes, n = static_cast<uint32_t>(rows) * kRowBytes;
      bulk_copy_to_smem(k_dst + off, static_cast<const char*>(a.k_cache) + row * kRowBytes, n, bar);
      bulk_copy_to_smem(v_dst + off, static_cast<const char*>(a.v_cache) + row * kRowBytes, n, bar);
      j += rows;
    }
  };
  // kRing: loop step c's keys (those before staged_end) into stage c % kRing; none past the range.
  auto ring_fill = [&](int c) {
    const int j0 = start + c * S::kStep;
    const int j1 = min(staged_end, j0 + S::kStep);
    if (j1 <= j0) return;
    const uint32_t dst = smem_addr(staged_smem) + static_cast<uint32_t>(c % kBars) * kStageBytes;
    copy_rows(dst, dst + S::kStep * kRowBytes, j0, j1, smem_addr(&staged_bar[c % kBars]));
  };
  if constexpr (kStaged || kRing > 0) {
    if (threadIdx.x == 0) {
      for (int i = 0; i < kBars; ++i) mbar_init(smem_addr(&staged_bar[i]), 1);
      mbar_init_fence();
      if constexpr (kStaged) {
        if (staged_end > start) {
          const uint32_t k_dst = smem_addr(staged_smem);
          copy_rows(k_dst, k_dst + static_cast<uint32_t>(partition) * kRowBytes, start, staged_end,
                    smem_addr(&staged_bar[0]));
        }
      } else {
        for (int c = 0; c < kRing; ++c) ring_fill(c);
      }
    }
    __syncthreads();  // the barriers are initialised before anyone waits on them
  }
  pdl_wait();

  const int64_t qkv_stride = static_cast<int64_t>(a.num_q_heads + 2 * a.num_kv_heads) * kHeadDim;
  const float qscale = a.scale * kLog2e;
  // Soft-capping in the log2 domain the scores are in: cap * tanh(s / cap) of the natural score s,
  // times log2(e), is c * tanh(d / c) of d = s log2(e), with c = cap log2(e).
  const float cap_log2 = a.softcap * kLog2e;

  float q[kGroup][kElems];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    const __nv_bfloat16* qp = static_cast<const __nv_bfloat16*>(a.qkv) + seq * qkv_stride +
                              static_cast<int64_t>(q_head(g)) * kHeadDim + dl * kElems;
#pragma unroll
    for (int c = 0; c < kElems / 8; ++c) {
      if constexpr (kExact && S::kAllLanesLoad) {
        bf16x8_to_f32(reinterpret_cast<const uint4*>(qp)[c], q[g] + 8 * c);
      } else {  // a pad head or an idle lane: q = 0
        const bool real = g < heads && loads;
        bf16x8_to_f32(real ? reinterpret_cast<const uint4*>(qp)[c] : make_uint4(0, 0, 0, 0), q[g] + 8 * c);
      }
    }
#pragma unroll
    for (int i = 0; i < kElems; ++i) q[g][i] *= qscale;
  }
  float m[kGroup], l[kGroup], acc[kGroup][kElems];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int i = 0; i < kElems; ++i) acc[g][i] = 0.0f;
  }

  const int bs_mask = (1 << a.block_size_log2) - 1;
  if constexpr (kStaged) {
    if (staged_end > start) mbar_wait(smem_addr(&staged_bar[0]), 0);  // the bulk copies have landed
  }

  for (int base = start, step = 0; base < end; base += S::kStep, ++step) {
    // kRing: this step's stage, once its copies have landed (a step with no staged key has none).
    const uint8_t* stage = staged_smem + static_cast<uint32_t>(step % kBars) * kStageBytes;
    if constexpr (kRing > 0) {
      if (base < staged_end) mbar_wait(smem_addr(&staged_bar[step % kBars]), (step / kBars) & 1);
    }
    Word kr[kUnroll][W::kWords], vr[kUnroll][W::kWords];
    float ks[kFp8 ? kUnroll : 1], vs[kFp8 ? kUnroll : 1];  // fp8: the keys' scales
    bool valid[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = base + u * S::kGroups + group;
      valid[u] = j < end && j >= first_key;
      if (kStaged && valid[u] && j < staged_end) {
        const Word* kp = W::at(staged_smem, j - start, kChunks, dl);
        const Word* vp = W::at(staged_smem + static_cast<int64_t>(partition) * kRowBytes, j - start, kChunks, dl);
#pragma unroll
        for (int i = 0; i < W::kWords; ++i) {
          kr[u][i] = kp[i];
          vr[u][i] = vp[i];
        }
      } else if (kRing > 0 && valid[u] && j < staged_end) {
        const Word* kp = W::at(stage, j - base, kChunks, dl);
        const Word* vp = W::at(stage + S::kStep * kRowBytes, j - base, kChunks, dl);
#pragma unroll
        for (int i = 0; i < W::kWords; ++i) {
          kr[u][i] = kp[i];
          vr[u][i] = vp[i];
        }
      } else if (valid[u] && loads) {
        const int64_t block =
            (j >> a.block_size_log2) == first_col ? first_block : table[j >> a.block_size_log2];
        const int64_t row = ((block * a.num_kv_heads + kvh) << a.block_size_log2) + (j & bs_mask);
        W::load(a.k_cache, row, kChunks, dl, kr[u]);
        W::load(a.v_cache, row, kChunks, dl, vr[u]);
        if constexpr (kFp8) {
          ks[u] = __ldg(a.k_scale + row);
          vs[u] = __ldg(a.v_scale + row);
        }
      } else {
        W::zero(kr[u]);
        W::zero(vr[u]);
        if constexpr (kFp8) ks[u] = vs[u] = 0.0f;
      }
    }
    if constexpr (kRing > 0) {
      __syncthreads();  // every thread holds this stage's keys in registers: refill it kRing steps ahead
      if (threadIdx.x == 0) ring_fill(step + kRing);
    }
    float s[kUnroll][kGroup];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float k[kElems];
      W::to_f32(kr[u], k);
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        float d = 0.0f;
#pragma unroll
        for (int i = 0; i < kElems; ++i) d = fmaf(q[g][i], k[i], d);
#pragma unroll
        for (int o = S::kLanes / 2; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        if constexpr (kFp8) d *= ks[u];  // after the sum: idle lanes (scale 0) keep no state that is read
        if constexpr (kCap) d = cap_log2 * tanhf(d / cap_log2);
        s[u][g] = valid[u] ? d : -INFINITY;
      }
    }
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      float mx = m[g];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) mx = fmaxf(mx, s[u][g]);
      if (mx == -INFINITY) continue;  // no key of this group yet
      const float corr = exp2f(m[g] - mx);
      l[g] *= corr;
#pragma unroll
      for (int i = 0; i < kElems; ++i) acc[g][i] *= corr;
      m[g] = mx;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float v[kElems];
      W::to_f32(vr[u], v);
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        const float p = valid[u] ? exp2f(s[u][g] - m[g]) : 0.0f;
        l[g] += p;
        float pv = p;
        if constexpr (kFp8) pv *= vs[u];
#pragma unroll
        for (int i = 0; i < kElems; ++i) acc[g][i] = fmaf(pv, v[i], acc[g][i]);
      }
    }
  }

  // Merge the lane groups of the CTA: each writes its state to shared memory (a wide CTA, or one
  // of 16-element lanes: each warp's, once its lane groups have merged by shuffles), and every
  // output sums the rows.
  constexpr int kRows = kWarpMerge ? kCtaWarps : S::kGroups;
  __shared__ float sm_m[kRows][kGroup];
  __shared__ float sm_l[kRows][kGroup];
  __shared__ float sm_acc[kRows][kGroup][kHeadDim];
  if constexpr (kWarpMerge) {
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
#pragma unroll
      for (int o = S::kLanes; o < 32; o <<= 1) {
        const float mo = __shfl_xor_sync(0xffffffffu, m[g], o);
        const float lo = __shfl_xor_sync(0xffffffffu, l[g], o);
        const float mx = fmaxf(m[g], mo);
        // A lane group that saw no key has m = -inf and l = acc = 0: weight 0, never NaN.
        const float ws = m[g] == -INFINITY ? 0.0f : exp2f(m[g] - mx);
        const float wo = mo == -INFINITY ? 0.0f : exp2f(mo - mx);
        l[g] = l[g] * ws + lo * wo;
#pragma unroll
        for (int i = 0; i < kElems; ++i) acc[g][i] = acc[g][i] * ws + __shfl_xor_sync(0xffffffffu, acc[g][i], o) * wo;
        m[g] = mx;
      }
    }
  }
  const int row = kWarpMerge ? warp : group;             // this lane group's shared-memory row
  const bool writes = !kWarpMerge || lane < S::kLanes;  // the warp's first lane group holds its state
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    if (writes && loads) {
#pragma unroll
      for (int i = 0; i < kElems; ++i) sm_acc[row][g][dl * kElems + i] = acc[g][i];
    }
    if (writes && dl == 0) {
      sm_m[row][g] = m[g];
      sm_l[row][g] = l[g];
    }
  }
  // Merge the rows, write the output or this split's partial; the last split merges the splits.
  decode_finish_cta<kHeadDim, kGroup, kRows, kCtaThreads>(
      a, scratch, sm_m, sm_l, sm_acc, seq, kExact ? kvh * kGroup : head0, heads, split, num_splits, partition,
      ctx - origin,
      kExact ? static_cast<int64_t>(seq) * a.num_kv_heads + kvh : static_cast<int64_t>(seq) * gridDim.y + blockIdx.y);
}

// Ring kernels (kRing): a stage is one loop step's keys and values, 32 keys of 512 bytes at
// head_dim 128 and 64 of 256 at 64 (16 KB whatever the lane width). Groups up to 2 take 3 stages
// (up to 128 registers a thread: four CTAs an SM fit by registers and shared memory); larger groups
// as many stages (up to 4) as keep a CTA, with its static merge rows, within 72 KB (three CTAs an
// SM). At group 2, 3 stages were level with 4 in the kernel alone and a little faster on the
// Qwen3-0.6B workload (measured: PERFORMANCE.md, "Decode attention: a ring of bulk copies, and group 2
// on the tensor cores").
constexpr int kRingCtaSmemBytes = 72 * 1024;
template <int kHeadDim, int kUnroll, int kElems>
constexpr int ring_stage_bytes() {
  return DecodeShape<kHeadDim, kUnroll, kWarps, kElems>::kStep * kHeadDim * 2 * 2;
}
template <int kHeadDim, int kGroup, int kUnroll, int kElems>
constexpr int ring_stages() {
  if (kGroup <= 2) return 3;
  using Sh = DecodeShape<kHeadDim, kUnroll, kWarps, kElems>;
  constexpr int rows = kElems == 8 ? Sh::kGroups : kWarps;  // the kernel's merge rows (kWarpMerge)
  constexpr int merge_bytes = rows * kGroup * (kHeadDim + 2) * 4;
  constexpr int stages = (kRingCtaSmemBytes - merge_bytes) / ring_stage_bytes<kHeadDim, kUnroll, kElems>();
  static_assert(stages >= 2, "ring: at least two stages");
  return stages < 4 ? stages : 4;
}

// The ring kernel of kElems elements a lane (kUnroll keys a lane group a step: one 16 KB stage).
template <int kHeadDim, int kGroup, int kUnroll, int kElems>
void launch_ring(dim3 grid, const AttentionArgs& a, int num_splits, int partition, const DecodeScratch& sc,
                 cudaStream_t st) {
  constexpr int kStages = ring_stages<kHeadDim, kGroup, kUnroll, kElems>();
  constexpr auto k = decode_split_kernel<kHeadDim, kGroup, kUnroll, true, false, kWarps, kElems, false, kStages>;
  constexpr int kBytes = kStages * ring_stage_bytes<kHeadDim, kUnroll, kElems>();
  allow_dynamic_smem<k>(kBytes);
  launch_with_pdl(k, grid, dim3(kThreads), kBytes, st, a, partition, num_splits, sc);
}

// A staged wide kernel: shared memory for the k and v rows of its split.
template <auto kKernel, int kHeadDim>
void launch_staged(dim3 grid, const AttentionArgs& a, int num_splits, int partition, const DecodeScratch& sc,
                   cudaStream_t st) {
  allow_dynamic_smem<kKernel>(static_cast<int>(kMaxDecodeStagedSmemBytes));
  const size_t bytes = decode_staged_smem_bytes(kHeadDim, partition);
  MINIVLLM_CHECK(bytes <= kMaxDecodeStagedSmemBytes) << "decode attention: " << bytes << " bytes of staged keys";
  launch_with_pdl(kKernel, grid, dim3(kWideWarps * 32), bytes, st, a, partition, num_splits, sc);
}

template <int kHeadDim, int kGroup, bool kFp8>
void launch_split(const AttentionArgs& a, int num_splits, int partition, const DecodeVariant& v,
                  const DecodeScratch& sc, cudaStream_t st) {
  const dim3 grid(num_splits, a.num_kv_heads, a.num_seqs);
  const bool lane16 = v.lane16;
  if constexpr (kGroup * kHeadDim <= kMaxWideGroupDims) {
    if (v.wide) {
      constexpr int kUnroll = wide_unroll(kGroup);
      if constexpr (!kFp8) {
        if (v.staged && decode_use_staged(kHeadDim, partition)) {
          return launch_staged<decode_split_kernel<kHeadDim, kGroup, kUnroll, true, false, kWideWarps, 8, true>,
                               kHeadDim>(grid, a, num_splits, partition, sc, st);
        }
      }
      launch_with_pdl(decode_split_kernel<kHeadDim, kGroup, kUnroll, true, kFp8, kWideWarps>, grid,
                      dim3(kWideWarps * 32), 0, st, a, partition, num_splits, sc);
      return;
    }
  }
  if constexpr (!kFp8 && kGroup <= kMaxRingGroup && (kHeadDim == 64 || kHeadDim == 128)) {
    if (v.ring) {  // decode_policy.h: decode_use_ring
      if (lane16) return launch_ring<kHeadDim, kGroup, 2, 16>(grid, a, num_splits, partition, sc, st);
      return launch_ring<kHeadDim, kGroup, 4, 8>(grid, a, num_splits, partition, sc, st);
    }
  }
  if constexpr (!kFp8 && kGroup <= kMaxLane16Group) {  // decode_policy.h
    if (lane16) {
      // The bytes in flight per lane of the 8-element kernels: a key is 32 bytes a lane, so half
      // their unroll.
      constexpr int kUnroll = 2;
      if constexpr (kGroup <= 2) {  // as the 8-element kernels: twice the keys in flight with splits
        if (num_splits > 1) {
          launch_with_pdl(decode_split_kernel<kHeadDim, kGroup, 2 * kUnroll, true, kFp8, kWarps, 16>, grid,
                          dim3(kThreads), 0, st, a, partition, num_splits, sc);
          return;
        }
      }
      launch_with_pdl(decode_split_kernel<kHeadDim, kGroup, kUnroll, true, kFp8, kWarps, 16>, grid, dim3(kThreads), 0,
                      st, a, partition, num_splits, sc);
      return;
    }
  }
  if constexpr (kGroup <= 2) {  // registers allow 8 keys in flight per lane group
    if (num_splits > 1) {        // few sequences: short splits, one step each
      launch_with_pdl(decode_split_kernel<kHeadDim, kGroup, 8, true, kFp8>, grid, dim3(kThreads), 0, st, a,
                      partition, num_splits, sc);
      return;
    }
  }
  {
    launch_with_pdl(decode_split_kernel<kHeadDim, kGroup, 4, true, kFp8>, grid, dim3(kThreads), 0, st, a, partition,
                    num_splits, sc);
  }
}

// Wide CTAs of two q heads (decode_wide_head_pairs): group / 2 CTAs a kv head, each the wide
// group-2 kernel's work on its pair of heads, staged as that kernel is.
template <int kHeadDim, bool kFp8>
void launch_wide_pairs(const AttentionArgs& a, int num_splits, int partition, const DecodeVariant& v,
                       const DecodeScratch& sc, cudaStream_t st) {
  constexpr int kUnroll = wide_unroll(2);
  const int tiles = a.num_q_heads / a.num_kv_heads / 2;
  const dim3 grid(num_splits, a.num_kv_heads * tiles, a.num_seqs);
  if constexpr (!kFp8) {
    if (v.staged && decode_use_staged(kHeadDim, partition)) {
      return launch_staged<decode_split_kernel<kHeadDim, 2, kUnroll, false, false, kWideWarps, 8, true>, kHeadDim>(
          grid, a, num_splits, partition, sc, st);
    }
  }
  launch_with_pdl(decode_split_kernel<kHeadDim, 2, kUnroll, false, kFp8, kWideWarps>, grid, dim3(kWideWarps * 32), 0,
                  st, a, partition, num_splits, sc);
}

// Any group: ceil(group / kGroup) CTAs per kv head.
// Soft-capped scores (Gemma 2) take these kernels only, as their own instances (kCap): a uniform
// branch on the cap in every kernel slowed the uncapped models' batch-1 decode (PERFORMANCE.md,
// "Stop 79").
template <int kHeadDim, int kGroup, bool kFp8>
void launch_tiled(const AttentionArgs& a, int num_splits, int partition, const DecodeScratch& sc, cudaStream_t st) {
  const int tiles = (a.num_q_heads / a.num_kv_heads + kGroup - 1) / kGroup;
  const dim3 grid(num_splits, a.num_kv_heads * tiles, a.num_seqs);
  if (a.softcap > 0.0f) {
    launch_with_pdl(decode_split_kernel<kHeadDim, kGroup, 4, false, kFp8, kWarps, 8, false, 0, true>, grid,
                    dim3(kThreads), 0, st, a, partition, num_splits, sc);
    return;
  }
  launch_with_pdl(decode_split_kernel<kHeadDim, kGroup, 4, false, kFp8>, grid, dim3(kThreads), 0, st, a, partition,
                  num_splits, sc);
}

bool has_exact_kernel(int head_dim, int group) {
  return (head_dim == 64 || head_dim == 128) && (group == 1 || group == 2 || group == 4 || group == 8);
}

// t comes from decode_head_tiles: the exact kernel when the model's group has one, else the tiled
// kernel of t.heads_per_cta heads (4 or 8 at the target models' head dims; a tile of 4 may serve
// group 3, so heads_per_cta alone does not choose between them).
template <int kHeadDim, bool kFp8>
void dispatch(const AttentionArgs& a, const DecodeHeadTiles& t, int num_splits, int partition, const DecodeVariant& v,
              const DecodeScratch& sc, cudaStream_t st) {
  if (t.exact) {
    if constexpr (kHeadDim == 64 || kHeadDim == 128) {
      switch (t.heads_per_cta) {
        case 1: return launch_split<kHeadDim, 1, kFp8>(a, num_splits, partition, v, sc, st);
        case 2: return launch_split<kHeadDim, 2, kFp8>(a, num_splits, partition, v, sc, st);
        case 4: return launch_split<kHeadDim, 4, kFp8>(a, num_splits, partition, v, sc, st);
        default: return launch_split<kHeadDim, 8, kFp8>(a, num_splits, partition, v, sc, st);
      }
    }
  }
  if constexpr (kHeadDim == 64 || kHeadDim == 128) {  // tiles of 4 or 8 only (decode_head_tiles)
    if (v.wide) return launch_wide_pairs<kHeadDim, kFp8>(a, num_splits, partition, v, sc, st);  // decode_wide_fits
    if (t.heads_per_cta == 4) return launch_tiled<kHeadDim, 4, kFp8>(a, num_splits, partition, sc, st);
    return launch_tiled<kHeadDim, 8, kFp8>(a, num_splits, partition, sc, st);
  } else {
    switch (t.heads_per_cta) {
      case 1: return launch_tiled<kHeadDim, 1, kFp8>(a, num_splits, partition, sc, st);
      case 2: return launch_tiled<kHeadDim, 2, kFp8>(a, num_splits, partition, sc, st);
      case 4: return launch_tiled<kHeadDim, 4, kFp8>(a, num_splits, partition, sc, st);
      default: return launch_tiled<kHeadDim, 8, kFp8>(a, num_splits, partition, sc, st);
    }
  }
}

template <bool kFp8>
void dispatch_head_dim(const AttentionArgs& a, const DecodeHeadTiles& tiles, int num_splits, int partition,
                       const DecodeVariant& v, const DecodeScratch& scratch, cudaStream_t stream) {
  switch (a.head_dim) {  // a supported shape (attention_shape_supported, checked in cuda_ops.cc)
    case 64: return dispatch<64, kFp8>(a, tiles, num_splits, partition, v, scratch, stream);
    case 128: return dispatch<128, kFp8>(a, tiles, num_splits, partition, v, scratch, stream);
    case 96: return dispatch<96, kFp8>(a, tiles, num_splits, partition, DecodeVariant{}, scratch, stream);
    default: return dispatch<256, kFp8>(a, tiles, num_splits, partition, DecodeVariant{}, scratch, stream);
  }
}

}  // namespace

DecodeHeadTiles decode_head_tiles(int head_dim, int group, int max_tile_heads, bool exact) {
  if (exact && has_exact_kernel(head_dim, group)) return {group, 1, true};
  // The smallest instantiated tile holding the group, at most max_tile_heads (4 or 8).
  int per_cta = group <= 1 ? 1 : group <= 2 ? 2 : group <= 4 ? 4 : 8;
  per_cta = std::min(per_cta, max_tile_heads <= 4 ? 4 : 8);
  if (head_dim == 64 || head_dim == 128) per_cta = std::max(per_cta, 4);  // tiled<4>, tiled<8> only
  return {per_cta, (group + per_cta - 1) / per_cta, false};
}

int decode_partition_granule(int head_dim) {
  switch (head_dim) {
    case 64: return DecodeShape<64>::kStep;
    case 96: return DecodeShape<96>::kStep;
    case 128: return DecodeShape<128>::kStep;
    default: return DecodeShape<256>::kStep;
  }
}

DecodeHeadTiles decode_wide_head_pairs(int head_dim, int group) {
  const bool fits = (head_dim == 64 || head_dim == 128) && group % 2 == 0 && group * head_dim > kMaxWideGroupDims;
  return fits ? DecodeHeadTiles{2, group / 2, false} : DecodeHeadTiles{2, 0, false};
}

bool decode_wide_fits(int head_dim, const DecodeHeadTiles& tiles) {
  const bool pairs = !tiles.exact && tiles.heads_per_cta == 2 && tiles.tiles > 0;  // decode_wide_head_pairs
  return (tiles.exact || pairs) && (head_dim == 64 || head_dim == 128) &&
         tiles.heads_per_cta * head_dim <= kMaxWideGroupDims;
}

int decode_wide_granule(int head_dim, int group) {
  const bool u8 = wide_unroll(group) == 8;
  return head_dim == 64 ? (u8 ? DecodeShape<64, 8, kWideWarps>::kStep : DecodeShape<64, 4, kWideWarps>::kStep)
                        : (u8 ? DecodeShape<128, 8, kWideWarps>::kStep : DecodeShape<128, 4, kWideWarps>::kStep);
}

void launch_decode_attention(const AttentionArgs& a, const DecodeHeadTiles& tiles, int num_splits, int partition,
                             const DecodeVariant& v, const DecodeScratch& scratch, cudaStream_t stream) {
  if (a.num_seqs == 0) return;
  MINIVLLM_CHECK(!v.wide || decode_wide_fits(a.head_dim, tiles)) << "decode attention: no wide kernel for this shape";
  MINIVLLM_CHECK(a.softcap == 0.0f || (!tiles.exact && !v.wide))
      << "decode attention: soft-capped scores take the tiled kernels (decode_head_tiles without exact ones)";
  if (a.kv_fp8) {  // the staged and ring kernels copy bf16 rows
    DecodeVariant fp8 = v;
    fp8.staged = fp8.ring = false;
    return dispatch_head_dim<true>(a, tiles, num_splits, partition, fp8, scratch, stream);
  }
  dispatch_head_dim<false>(a, tiles, num_splits, partition, v, scratch, stream);
}

}  // namespace minivllm::cuda
