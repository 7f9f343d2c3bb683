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
// 4: on an H100 (2026-11-22, CudaBench.DecodeAttentionBandwidth, 256 seqs x 1024 keys) it is as fast
// or faster for every shape it changes: group 6 183 vs 214 us, group 16 352 vs 367 us, head_dim 256
// group 8 195 vs 240 us; SmolLM2's group 3 unchanged (91 us). More CTAs per kv head keep more
// loads in flight; the exact kernels (groups 1, 2, 4, 8 at head_dim 64/128) do not use it.
constexpr int kDefaultDecodeTileHeads = 4;

// Default most keys per split, at any batch size. Without it a large batch ran one CTA per
// (sequence, kv head): the kernel lasted as long as its longest context, and while the long
// CTAs streamed their keys alone the short ones had left their SMs idle (the seeds' workload,
// contexts of 100 to 2,048 keys). Splitting long contexts into partitions of at most this many
// keys evens the CTAs out; CTAs whose partition starts past their sequence's end return at once.
// On an H100 (2026-11-23, Qwen3-0.6B workload, interleaved): no limit 18,056 / 18,061 tok/s,
// 2048: 17,909, 1024: 18,295 / 18,039, 512: 18,783 / 18,951, 256: 18,900; Llama-3.2-1B
// (head_dim 64) unchanged within noise (31.6-31.8k at 0 and 512).
// MINIVLLM_DECODE_MAX_PARTITION overrides it (tuning; 0 = no limit, the policy before).
constexpr int kDefaultMaxDecodePartition = 512;
// The same bound for the tensor-core kernels (decode_attention_mma.cu), whose CTAs cost more to
// start and end (q to fragments, the warps' merge): fewer, longer splits pay. H100, 2026-11-24,
// seeds' workload, tok/s at 512 / 1024 / 2048 for every decode kernel, two rounds: Llama-3.2-1B
// 35,506 / 35,850 / 35,947 and 36,031 / 35,671 / 36,420; fp8 cache, Qwen3-0.6B 24,374 / 25,072 /
// 24,982 and 24,589 / 24,963 / 25,093, Llama 36,762 / 38,346 / 40,094 and 36,948 / 39,222 /
// 39,856. Kernel on the mixed contexts (CudaBench, 512 / 2048, us): fp8 Llama heads 159.8 / 120.6,
// fp8 Qwen3 heads 233.5 / 219.8, bf16 Llama heads 195.6 / 184.3.
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
// MINIVLLM_DECODE_STAGED=0 turns it off. H100, 2026-11-26, batch-1 decode, interleaved: Qwen3-0.6B
// 1,207 / 1,209 against 1,186 / 1,183 tok/s, Llama-3.2-1B 851 / 849 against 844 / 843.
constexpr size_t kMaxDecodeStagedSmemBytes = 160 * 1024;
inline size_t decode_staged_smem_bytes(int head_dim, int partition) {
  return static_cast<size_t>(partition) * head_dim * 2 * 2;  // k and v rows, bf16
}
inline bool decode_use_staged(int head_dim, int partition) {
  const size_t bytes = decode_staged_smem_bytes(head_dim, partition);
  return bytes > 0 && bytes <= kMaxDecodeStagedSmemBytes;
}

// Wide decode CTAs (16 warps instead of 4; decode_attention.cu): at small batches a split of one
// wide step holds the keys that four 4-warp CTAs would, so fewer contexts need the merge across
// CTAs. Up to half a (sequence, kv head) CTA per SM before splitting: 8 sequences of 8 kv heads on
// an H100. CudaBench (2026-11-23, 700-key contexts): 8 sequences 14.3 vs 24.9 us (Qwen3 heads),
// 13.1 vs 21.1 (Llama); 16: 27.5 vs 31.3 and 24.1 vs 24.0; 32: 50.9 vs 45.4 and 45.6 vs 30.0.
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
// for q and the accumulators. On an H100 (2026-11-23, CudaBench, 16 / 8 elements, us): group 2
// (Qwen3 heads) 256 x 1024 keys 369.0 / 369.8, mixed contexts 370.3 / 373.2, 16 sequences x 700
// 25.7 / 31.5, 32 x 700 44.5 / 45.3; group 4 (Llama heads) 16 x 700 17.3 / 24.7 but 32 x 700
// 36.5 / 30.3 and 256 x 1024 271.7 / 218.7: once its CTAs outnumber the SMs, the lost occupancy
// costs more than the instructions saved. So group 2 always, groups 1 and 4 while the
// (sequence, kv head) CTAs fit one per SM.
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
// where decode_mma_fits. On an H100 (2026-11-24, CudaBench.DecodeAttentionTensorCores, tensor /
// CUDA cores, us): fp8 caches at every batch size (Qwen3 heads 256 x 1,024 keys 246 / 257, mixed
// contexts 266 / 271, 16 x 700 keys 16.2 / 30.8; Llama heads 163 / 205, 190 / 223, 11.9 / 24.8);
// bf16 at group 4 (Llama: 193 / 224, 195 / 234, 16 x 700 12.7 / 17.7, 32 x 700 22.6 / 30.7); bf16
// at group 2 only while the (sequence, kv head) CTAs fit one per SM (Qwen3: 16 x 700 22.1 / 26.0,
// but 32 x 700 44.5 / 44.1 and 256 x 1,024 375 / 368, where the CUDA-core kernel is at copy
// bandwidth already). Group 1 and 8 over bf16 follow their neighbours (not measured).
// Since then the tensor-core kernel took 2,048-key splits and the CUDA-core one a ring of bulk
// copies, and group 2 now takes the tensor cores at every batch size: H100, 2026-11-26, the
// Qwen3-0.6B workload, one binary, interleaved, two rounds: 20,612 / 20,609 tok/s with
// MINIVLLM_DECODE_MMA=1 against 20,328 / 20,314 (ring past 16 sequences) and 20,265 / 20,261 (the
// register-loading kernel before it); CudaBench.DecodeAttentionTensorCores, Qwen3 heads, tensor
// cores / ring: 256 x 1,024 keys 356.7 / 362.2 us, 32 x 700 34.1 / 40.9, 16 x 700 21.6 / 23.4 (the
// first 16 mixed contexts of the batch sweep: 31.2 / 28.2, the one shape the ring wins).
// MINIVLLM_DECODE_MMA=0|1 overrides it. Partitions are multiples of a CTA's 4 warp tiles of 16 keys.
constexpr int kDecodeMmaGranule = 64;
inline bool decode_use_mma(bool kv_fp8, int group) { return kv_fp8 || group >= 2; }

// Which tensor-core kernel: a cp.async ring in shared memory for fp8 caches once the (sequence, kv
// head) CTAs outnumber the SMs; else fragments loaded straight into registers. H100, 2026-11-24,
// in one run (us, ring / registers): fp8 Qwen3 heads 256 x 1,024 keys 232 / 250, mixed contexts
// 234 / 267, 32 x 700 keys 33.2 / 33.4, 16 x 700 21.7 / 16.2; fp8 Llama heads 149 / 165,
// 161 / 193, 22.3 / 22.4, 15.0 / 11.9; bf16 Llama heads 191 / 193, 16 x 700 13.3 / 12.8; bf16
// Qwen3 heads 16 x 700 28.4 / 21.5 (a bf16 head_dim-128 tile is 8 KB: two ring stages only). The
// bf16 ring at every batch size loses on the workload too (H100, 2026-11-27, Qwen3-0.6B, one binary,
// interleaved: MINIVLLM_DECODE_MMA_RING=1 18,646 / 18,633 tok/s against 20,589 / 20,590).
// MINIVLLM_DECODE_MMA_RING=0|1 overrides it.
inline bool decode_mma_ring(bool kv_fp8, int num_seqs, int kv_ctas, int num_sms) {
  return kv_fp8 && static_cast<int64_t>(num_seqs) * kv_ctas > num_sms;
}

// Whether decode CTAs take the sequences longest context first (AttentionMetadata::seq_order, the
// runner's order) rather than in batch order. It moves no result, only which CTAs start in the
// first waves: a long context no longer starts last and runs on alone. H100, seeds' workload, one
// binary, MINIVLLM_DECODE_SEQ_ORDER=1 / 0 interleaved, tok/s:
// - 2026-11-27 (first session): Qwen3-0.6B with an fp8 cache 26,629 / 26,622 / 26,738 against
//   25,784 / 25,749 / 25,790 (+3.5%, three device calls), Llama-3.2-1B fp8 43,335 against 42,495
//   (+2.0%); bf16 Qwen3 20,502 / 20,503 against 20,649 / 20,634 (-0.7%), Llama 38,957 against
//   38,958. The bf16 register kernel then loaded one tile a warp at head_dim 128: its CTAs paid
//   the order's extra dependent load before their first keys more than the tail saved.
// - 2026-11-27 (later session), with two tiles a warp at head_dim 128 (decode_attention_mma.cu:
//   mma_tiles): bf16 Qwen3 21,083 / 21,067 against 20,893 / 20,877 (+0.9%), bf16 Llama 39,193
//   against 39,001 (+0.5%).
// So every cache type. MINIVLLM_DECODE_SEQ_ORDER=0|1 overrides it.
inline bool decode_use_seq_order() { return true; }

}  // namespace minivllm::cuda
