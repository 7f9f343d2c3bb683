// What every kernel that rotates q / k or writes a token into the paged cache must agree on: the
// NeoX half-split rotation of one pair, which dims of a head pair up (partial rotary), and the
// cache row of a (slot, kv head). Kept in one place so that the rope kernels and the qkv gemv's
// epilogue cannot drift apart.
#pragma once

#include <cstdint>

namespace minivllm::cuda {

// Pair (x1, x2) = (x[i], x[i + rotary_dim / 2]) rotated by the angle whose cos / sin are c / s.
__device__ __forceinline__ void rotate_pair(float x1, float x2, float c, float s, float& lo, float& hi) {
  lo = x1 * c - x2 * s;
  hi = x2 * c + x1 * s;
}

// A head's head_dim dims as head_dim / 2 slots of two, (lo, lo + span). The first rotary_dim dims
// rotate in pairs (i, i + rotary_dim / 2) (transformers' partial_rotary_factor; the CPU backend's
// rope_row), the rest pass through: slot j < rotary_dim / 2 is the rotary pair (j, j + rotary_dim /
// 2), whose cos / sin are column j of the table ([max_pos, rotary_dim]: cos, then sin); slot
// rotary_dim / 2 + j' holds the pass-through dims (rotary_dim + j', rotary_dim + j' + (head_dim -
// rotary_dim) / 2), split in halves the same way, so that with both widths multiples of 16 eight
// slots in a row are two 16-byte runs. rotary_dim == head_dim: every slot is (j, j + head_dim / 2).
// Both widths even, 0 < rotary_dim <= head_dim.
struct RopeSlot {
  int lo, span;  // the slot's dims: lo and lo + span
  bool rotary;   // a rotary pair (its cos / sin column is lo), else two pass-through dims
};

__device__ __forceinline__ RopeSlot rope_slot(int j, int head_dim, int rotary_dim) {
  const int rhalf = rotary_dim >> 1;
  if (j < rhalf) return RopeSlot{j, rhalf, true};
  return RopeSlot{rotary_dim + (j - rhalf), (head_dim - rotary_dim) >> 1, false};
}

// The cache is [num_blocks, num_kv_heads, block_size, head_dim] (k and v apart): the row of head_dim
// values that kv head kvh of the token at `slot` occupies. fp8 caches index their scales by it too.
__device__ __forceinline__ int64_t kv_cache_row(int64_t slot, int block_size, int num_kv_heads, int kvh) {
  const int64_t block = slot / block_size, offset = slot - block * block_size;
  return (block * num_kv_heads + kvh) * block_size + offset;
}

}  // namespace minivllm::cuda
