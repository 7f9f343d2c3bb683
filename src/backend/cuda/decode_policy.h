// How decode attention splits the keys (flash-decoding), from graph-constant values only: the
// batch size, the heads and the block table's capacity (max_num_blocks * block_size), never the
// per-step context lengths, so a captured graph stays valid whatever the contexts become.
#pragma once

#include <algorithm>
#include <cstdint>

namespace minivllm::cuda {

constexpr int kMaxDecodeHeadDim = 256;
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

// Enough CTAs to give every SM a few (each streams its keys; more in flight hides latency).
inline int64_t decode_target_ctas(int num_sms) { return 4 * static_cast<int64_t>(num_sms); }

// Split scratch rows the policy can ever need: splits > 1 only while seqs * kv_heads < target,
// and then seqs * kv_heads * splits < 2 * target.
inline int64_t max_decode_partial_rows(int num_sms) { return 2 * decode_target_ctas(num_sms) * kMaxDecodeGroup; }

struct DecodeSplit {
  int num_splits = 1;
  int partition = 0;  // keys per split, a multiple of the kernel's step
};

inline DecodeSplit plan_decode_split(int num_seqs, int num_kv_heads, int group, int64_t max_context, int granule,
                                     int num_sms, int64_t capacity_rows,
                                     int min_partition = kDefaultMinDecodePartition) {
  DecodeSplit d;
  max_context = std::max<int64_t>(max_context, 1);
  const int64_t ctas = std::max<int64_t>(1, static_cast<int64_t>(num_seqs) * num_kv_heads);
  const int64_t target = decode_target_ctas(num_sms);
  int64_t splits = ctas < target ? (target + ctas - 1) / ctas : 1;
  splits = std::min(splits, std::max<int64_t>(1, (max_context + min_partition - 1) / min_partition));
  while (splits > 1 && ctas * group * splits > capacity_rows) --splits;
  int64_t partition = (max_context + splits - 1) / splits;
  partition = (partition + granule - 1) / granule * granule;
  d.partition = static_cast<int>(partition);
  d.num_splits = static_cast<int>((max_context + partition - 1) / partition);
  return d;
}

}  // namespace minivllm::cuda
