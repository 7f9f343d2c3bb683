// Which prefill attention kernel runs a launch: host-only, so the choice is testable without a GPU.
//
// The Hopper kernel (prefill_attention_wgmma.cu: wgmma, TMA, warp-specialised) takes the shapes
// that matter for speed: bf16 keys (a bf16 cache, or no cache), head_dim 64 or 128, any GQA
// group, block sizes from 16 up (TMA boxes of min(block_size, 128) rows), on an sm_90 device.
// Everything else (an fp8 cache, head_dim 96 / 256, sliding windows, soft-capped scores, other
// devices) takes the mma.sync kernel (prefill_attention.cu). MINIVLLM_PREFILL_KERNEL=mma forces the latter (tests, comparisons).
#pragma once

namespace minivllm::cuda {

enum class PrefillKernel { kMmaSync, kWgmma };

struct PrefillShape {
  int head_dim;
  bool has_cache;  // keys through the block table (else straight from qkv)
  bool kv_fp8;     // the cache is e4m3 (only matters with a cache)
  int block_size;  // cache block size (only matters with a cache)
  int sm_major;    // compute capability of the device
  bool force_mma;  // MINIVLLM_PREFILL_KERNEL=mma
  bool sliding_window = false;  // a sliding-window layer (AttentionArgs::window > 0)
  bool softcap = false;         // soft-capped scores (AttentionArgs::softcap > 0, Gemma 2)
};

constexpr int kWgmmaMinBlockSize = 16;

inline PrefillKernel prefill_kernel_choice(const PrefillShape& s) {
  if (s.force_mma || s.sm_major != 9) return PrefillKernel::kMmaSync;
  // The wgmma kernel has no sliding window yet (its producer and V zeroing assume keys from 0).
  if (s.sliding_window) return PrefillKernel::kMmaSync;
  // Nor soft-capping: the mma.sync kernel caps each score before its mask and max.
  if (s.softcap) return PrefillKernel::kMmaSync;
  if (s.head_dim != 64 && s.head_dim != 128) return PrefillKernel::kMmaSync;
  if (s.has_cache && (s.kv_fp8 || s.block_size < kWgmmaMinBlockSize)) return PrefillKernel::kMmaSync;
  return PrefillKernel::kWgmma;
}

}  // namespace minivllm::cuda
