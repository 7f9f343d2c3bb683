// What every kernel that rotates q / k or writes a token into the paged cache must agree on: the
// NeoX half-split rotation of one pair, and the cache row of a (slot, kv head). Kept in one place
// so that the rope kernels and the qkv gemv's epilogue cannot drift apart.
#pragma once

#include <cstdint>

namespace minivllm::cuda {

// Pair (x1, x2) = (x[i], x[i + head_dim / 2]) rotated by the angle whose cos / sin are c / s.
__device__ __forceinline__ void rotate_pair(float x1, float x2, float c, float s, float& lo, float& hi) {
  lo = x1 * c - x2 * s;
  hi = x2 * c + x1 * s;
}

// The cache is [num_blocks, num_kv_heads, block_size, head_dim] (k and v apart): the row of head_dim
// values that kv head kvh of the token at `slot` occupies. fp8 caches index their scales by it too.
__device__ __forceinline__ int64_t kv_cache_row(int64_t slot, int block_size, int num_kv_heads, int kvh) {
  const int64_t block = slot / block_size, offset = slot - block * block_size;
  return (block * num_kv_heads + kvh) * block_size + offset;
}

}  // namespace minivllm::cuda
