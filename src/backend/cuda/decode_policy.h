// How decode attention splits the keys (flash-decoding), from graph-constant values only: the
// batch size, the heads and the block table's capacity (max_num_blocks * block_size), never the
// per-step context lengths, so a captured graph stays valid whatever the contexts become.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace minivllm::cuda {

constexpr int kMaxDecodeGroup = 8;  // q heads per CTA (larger groups take several CTAs: decode_head_tiles)
// Default least keys per split. Small splits cost little since the last CTA of a (sequence, kv
// head) merges the splits itself (no combine kernel), and they cut the serial loop of a CTA: at
// batch 1 and a short context, 256-key splits leave ~2 CTAs per kv head each walking 8 steps.
// MINIVLLM_DECODE_MIN_PARTITION overrides it (tuning only).
constexpr int kDefaultMinDecodePartition = 64;
// Most q heads per CTA of the tiled decode kernels (GQA groups without an exact kernel: 3, 5-7,
// 9-16, and every group at head_dim 96 and 256). MINIVLLM_DECODE_TILE_HEADS (4 or 8) overrides it.
// 4 is as fast or faster for every shape it changes (measured: PERFORMANCE.md, "Decode tile
// heads"). More CTAs per kv head keep more loads in flight; the exact kernels (groups 1, 2, 4, 8 at
// head_dim 64/128) do not use it.
constexpr int kDefaultDecodeTileHeads = 4;

// Decode at one sequence, tensor-core kernels: a context of at most this many keys is one split
// (AttentionArgs::one_split_keys): below it one CTA's key loop costs less than the split merge
// (PERFORMANCE.md, "Stop 65"). MINIVLLM_DECODE_ONE_SPLIT_KEYS overrides it (0: off).
constexpr int kDefaultDecodeOneSplitKeys = 384;
// ... and each CTA pulls at most this many of its split's keys into L2 before its PDL wait
// (AttentionArgs::prefetch_split; MINIVLLM_DECODE_PREFETCH_SPLIT=0: its first tiles only).
constexpr int kDecodePrefetchMaxKeys = 1024;

// Default most keys per split, at any batch size. Without it a large batch ran one CTA per
// (sequence, kv head): the kernel lasted as long as its longest context, and while the long
// CTAs streamed their keys alone the short ones had left their SMs idle (the seeds' workload,
// contexts of 100 to 2,048 keys). Splitting long contexts into partitions of at most this many
// keys evens the CTAs out; CTAs whose partition starts past their sequence's end return at once.
// On the Qwen3-0.6B workload 512 beat no limit, 1,024 and 2,048, and 256 was level with it;
// Llama-3.2-1B (head_dim 64) did not move (measured: PERFORMANCE.md, "H100: the seeds' throughput
// workload", the 2026-11-23 rows).
// MINIVLLM_DECODE_MAX_PARTITION overrides it (tuning; 0 = no limit, the policy before).
constexpr int kDefaultMaxDecodePartition = 512;
// The same bound for the tensor-core kernels (decode_attention_mma.cu), whose CTAs cost more to
// start and end (q to fragments, the warps' merge): fewer, longer splits pay (measured:
// PERFORMANCE.md, "Tensor-core decode split bound").
// MINIVLLM_DECODE_MAX_PARTITION sets both.
constexpr int kDefaultMaxDecodeMmaPartition = 2048;

// Enough CTAs to give every SM a few (each streams its keys; more in flight hides latency).
inline int64_t decode_target_ctas(int num_sms) { return 4 * static_cast<int64_t>(num_sms); }

// Split scratch, in floats of partial output (a row is one (sequence, q head, split) of head_dim
// floats, so head_dim 64 gets twice the rows of 128): 32 MB. When a batch would need more, the
// policy takes fewer splits (plan_decode_split's capacity_rows).
constexpr int64_t kDecodePartialFloats = int64_t{8} << 20;
constexpr int kMinDecodeHeadDim = 64;
inline int64_t decode_partial_rows(int head_dim) { return kDecodePartialFloats / head_dim; }

struct DecodeSplit {
  int num_splits = 1;
  int partition = 0;  // keys per split, a multiple of the kernel's step
};

inline DecodeSplit plan_decode_split(int num_seqs, int num_kv_heads, int group, int64_t max_context, int granule,
                                     int num_sms, int64_t capacity_rows,
                                     int min_partition = kDefaultMinDecodePartition,
                                     int max_partition = kDefaultMaxDecodePartition) {
  DecodeSplit d;
  max_context = std::max<int64_t>(max_context, 1);
  const int64_t ctas = std::max<int64_t>(1, static_cast<int64_t>(num_seqs) * num_kv_heads);
  const int64_t target = decode_target_ctas(num_sms);
  int64_t splits = ctas < target ? (target + ctas - 1) / ctas : 1;
  if (max_partition > 0) splits = std::max(splits, (max_context + max_partition - 1) / max_partition);
  // min_partition wins over max_partition: it is the floor a split is worth launching for.
  splits = std::min(splits, std::max<int64_t>(1, (max_context + min_partition - 1) / min_partition));
  while (splits > 1 && ctas * group * splits > capacity_rows) --splits;
  int64_t partition = (max_context + splits - 1) / splits;
  partition = (partition + granule - 1) / granule * granule;
  d.partition = static_cast<int>(partition);
  d.num_splits = static_cast<int>((max_context + partition - 1) / partition);
  return d;
}

// Staged wide CTAs (decode_attention.cu, kStaged): a wide CTA over a bf16 cache copies its
// partition's keys and values into shared memory before it waits for the rope kernel, so its key
// loop no longer waits on L2 round trips after the wait. Where the partition fits
// kMaxDecodeStagedSmemBytes (a 256-key split: 128 KB at head_dim 128, 64 KB at 64).
// MINIVLLM_DECODE_STAGED=0 turns it off. It made batch-1 decode faster on both models (measured:
// PERFORMANCE.md, "H100: the seeds' throughput workload", batch-1 table, the 2026-11-26 staged row).
constexpr size_t kMaxDecodeStagedSmemBytes = 160 * 1024;
inline size_t decode_staged_smem_bytes(int head_dim, int partition) {
  return static_cast<size_t>(partition) * head_dim * 2 * 2;  // k and v rows, bf16
}
inline bool decode_use_staged(int head_dim, int partition) {
  const size_t bytes = decode_staged_smem_bytes(head_dim, partition);
  return bytes > 0 && bytes <= kMaxDecodeStagedSmemBytes;
}

// The wide CTAs' batches on the tensor cores, staged (decode_attention_mma.cu's staged kernel,
// cuda_kernels.h: launch_decode_attention_mma_staged), at up to this many sequences: it won at one
// and two, and lost at four on Qwen3-0.6B (PERFORMANCE.md, "Stop 81", "Stop 83").
// MINIVLLM_DECODE_WIDE_MMA overrides it (0: off).
constexpr int kDecodeWideMmaMaxSeqs = 2;
// Its q heads a CTA: at most 128 of their dims (one head at head_dim 128, two at 64), which beat
// larger CTAs on every shape measured. Only the exact wide kernels' shapes (group x head_dim <=
// 256) take it; the head pairs' shapes keep the CUDA cores (0): at group 8 they beat it at any
// head count, and at group 4, head_dim 128 the 32 CTAs a split need staged rounds past ~1,000 keys
// and lost there (PERFORMANCE.md, "Stop 81"). MINIVLLM_DECODE_WIDE_MMA_HEADS overrides it.
inline int decode_wide_mma_heads(int head_dim, int group) {
  if (head_dim <= 0 || group * head_dim > 256) return 0;
  return std::max(1, std::min(group, 128 / head_dim));
}

// Wide CTAs of two q heads (cuda_kernels.h: decode_wide_head_pairs) replace the tensor-core kernel
// at up to this many sequences: measured at one (PERFORMANCE.md, "Stop 69"); batches of 2-4, which
// the wide rule would also give them, keep the tensor cores until measured.
// MINIVLLM_DECODE_WIDE_PAIRS overrides it (0: off).
constexpr int kDecodeWidePairsMaxSeqs = 1;

// Wide CTAs over a bf16 cache stage their split only where it fits (decode_use_staged): 256 keys at
// head_dim 128, while the plan's 512-key bound (kDefaultMaxDecodePartition) left the engine's
// 4,096-key tables in unstaged 512-key splits. Capping a wide split at the largest staged length (a
// multiple of the wide step; 0 if not even one step fits) keeps short contexts staged. A staged CTA
// holds an SM alone (its shared memory), so a long context's staged splits would outnumber the SMs:
// each CTA checks its sequence's context, and where its staged splits would take more than a wave
// (AttentionArgs::wide_wave_ctas) it takes splits twice as long, unstaged. At the 8B and MoE shapes
// staged 256-key splits won at short contexts and 512-key unstaged ones at 3,000 keys (PERFORMANCE.md,
// "Stop 69"). For the head pairs only (decode_wide_head_pairs): Qwen3-0.6B's exact wide kernel did not
// move with it, so it keeps the plan's splits. MINIVLLM_DECODE_WIDE_STAGED_SPLITS=0 turns it off.
inline int decode_wide_staged_partition(int head_dim, int wide_granule) {
  const int keys = static_cast<int>(kMaxDecodeStagedSmemBytes / decode_staged_smem_bytes(head_dim, 1));
  return keys / wide_granule * wide_granule;
}

// Wide decode CTAs (16 warps instead of 4; decode_attention.cu): at small batches a split of one
// wide step holds the keys that four 4-warp CTAs would, so fewer contexts need the merge across
// CTAs. Up to half a (sequence, kv head) CTA per SM before splitting: 8 sequences of 8 kv heads on
// an H100. Wide CTAs win clearly at 8 sequences and lose at 32 (measured: PERFORMANCE.md, "H100: the
// seeds' throughput workload", the table "Wide decode CTAs beyond batch 1").
inline bool decode_use_wide(int num_seqs, int kv_ctas, int num_sms) {
  return static_cast<int64_t>(num_seqs) * kv_ctas * 2 <= num_sms;
}

// The split plan of wide CTAs: plan_decode_split with one wide CTA per SM as the occupancy target
// (a quarter of the 4-warp target) and at least one wide step per split.
inline DecodeSplit plan_wide_decode_split(int num_seqs, int kv_ctas, int group, int64_t max_context, int wide_granule,
                                          int num_sms, int64_t capacity_rows,
                                          int min_partition = kDefaultMinDecodePartition,
                                          int max_partition = kDefaultMaxDecodePartition) {
  return plan_decode_split(num_seqs, kv_ctas, group, max_context, wide_granule, std::max(1, num_sms / 4),
                           capacity_rows, std::max(min_partition, wide_granule), max_partition);
}

// 16 key elements a lane instead of 8 (decode_attention.cu's "Lane width"; bf16 caches, the exact
// 4-warp kernels of groups up to 4). Fewer shuffles and softmax lanes per key, twice the registers
// for q and the accumulators. Group 2 is as fast or faster at every batch size; group 4 is faster
// while its CTAs fit one per SM, but once they outnumber the SMs the lost occupancy costs more than
// the instructions saved (measured: PERFORMANCE.md, "Decode lane width"). So group 2 always, groups
// 1 and 4 while the (sequence, kv head) CTAs fit one per SM.
// Past this group q and the accumulators (2 x group x 16 floats a lane) crowd out the loads in
// flight; decode_attention.cu instantiates no 16-element kernel for larger groups.
constexpr int kMaxLane16Group = 4;
inline bool decode_use_lane16(int group, int num_seqs, int kv_ctas, int num_sms) {
  if (group > kMaxLane16Group) return false;
  return group == 2 || static_cast<int64_t>(num_seqs) * kv_ctas <= num_sms;
}

// The ring kernels (decode_attention.cu, kRing): the exact 4-warp CTAs over a bf16 cache stream
// their keys through shared-memory stages filled by bulk copies, issued a few loop steps ahead by
// one thread, instead of each warp loading its keys into registers and waiting on them. Groups up
// to 4 (q and the accumulators of larger groups leave no registers for three CTAs an SM).
// MINIVLLM_DECODE_RING=0|1 overrides the policy.
constexpr int kMaxRingGroup = 4;
inline bool decode_use_ring(bool kv_fp8, int head_dim, int group, bool exact) {
  return !kv_fp8 && exact && group <= kMaxRingGroup && (head_dim == 64 || head_dim == 128);
}

// The tensor-core decode kernel (decode_attention_mma.cu) instead of the 4-warp CUDA-core ones,
// where decode_mma_fits. It was faster over fp8 caches at every batch size and over bf16 at group 4;
// over bf16 at group 2 only while the (sequence, kv head) CTAs fit one per SM, since past that the
// CUDA-core kernel is at copy bandwidth already (measured: PERFORMANCE.md, "Tensor-core decode
// attention against the CUDA cores"). Group 1 and 8 over bf16 follow their neighbours (not measured).
// Since then the tensor-core kernel took 2,048-key splits and the CUDA-core one a ring of bulk
// copies, and group 2 now takes the tensor cores at every batch size: they beat the ring on the
// Qwen3-0.6B workload and on every kernel shape measured but the first 16 mixed contexts (measured:
// PERFORMANCE.md, "Decode attention: a ring of bulk copies, and group 2 on the tensor cores").
// MINIVLLM_DECODE_MMA=0|1 overrides it. Partitions are multiples of a CTA's 4 warp tiles of 16 keys.
// At one sequence groups 4 and 8 take the wide CTAs of two q heads instead (cuda_kernels.h:
// decode_wide_head_pairs), which beat this kernel there (PERFORMANCE.md, "Stop 69").
constexpr int kDecodeMmaGranule = 64;
inline bool decode_use_mma(bool kv_fp8, int group) { return kv_fp8 || group >= 2; }

// Which tensor-core kernel: a cp.async ring in shared memory once the (sequence, kv head) CTAs
// outnumber the SMs, for fp8 caches and for bf16 ones at GQA group 4; else fragments loaded straight
// into registers. The ring wins for fp8 on full batches and loses at small ones; over bf16 it pays
// at group 4 and loses at groups 2 and 8, group 1 not measured (PERFORMANCE.md, "Tensor-core decode:
// ring or registers" and "Stop 87").
// MINIVLLM_DECODE_MMA_RING=0|1 overrides it.
inline bool decode_mma_ring(bool kv_fp8, int group, int num_seqs, int kv_ctas, int num_sms) {
  return (kv_fp8 || group == 4) && static_cast<int64_t>(num_seqs) * kv_ctas > num_sms;
}

// Whether decode CTAs take the sequences longest context first (AttentionMetadata::seq_order, the
// runner's order) rather than in batch order. It moves no result, only which CTAs start in the
// first waves: a long context no longer starts last and runs on alone. It paid for fp8 caches at
// once. Over bf16 it first lost: the register kernel then loaded one tile a warp at head_dim 128,
// and its CTAs paid the order's extra dependent load before their first keys more than the tail
// saved. With two tiles a warp (decode_attention_mma.cu: mma_tiles) it pays for bf16 too (measured:
// PERFORMANCE.md, "Decode CTAs longest context first" and "Two tiles a warp in the bf16 tensor-core
// decode kernel").
// So every cache type. MINIVLLM_DECODE_SEQ_ORDER=0|1 overrides it.
inline bool decode_use_seq_order() { return true; }

}  // namespace minivllm::cuda
