// The paged KV cache of the CPU backend: layout [num_blocks, block_size, num_kv_heads, head_dim]
// in fp32 for k and for v (as nano-vllm), so one token's keys of all heads are one contiguous
// row and store_kvcache is a memcpy per token. Slot s lives in block s / block_size, row
// s % block_size, i.e. at row s of the cache seen as [num_blocks * block_size, kv_heads * head_dim].
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_checks.h"

namespace minivllm {

KVCache CpuBackend::allocate_kv_cache(int num_blocks, int block_size, int num_kv_heads, int head_dim) {
  MINIVLLM_CHECK(num_blocks > 0 && block_size > 0 && num_kv_heads > 0 && head_dim > 0)
      << "allocate_kv_cache: bad shape blocks=" << num_blocks << " block_size=" << block_size
      << " kv_heads=" << num_kv_heads << " head_dim=" << head_dim;
  return KVCache{empty(DType::kF32, {num_blocks, block_size, num_kv_heads, head_dim}), empty(DType::kF32, {num_blocks, block_size, num_kv_heads, head_dim}),
                 num_blocks, block_size, num_kv_heads, head_dim};
}

void CpuBackend::store_kvcache(const Tensor& qkv, int num_q_heads, const KVCache& cache,
                               const AttentionMetadata& meta) {
  // Before the cache exists (the warm-up pass) there is nothing to store, as in nano-vllm.
  if (!cache.k.defined() || cache.k.empty()) return;
  cpu::check_tensor(qkv, DType::kF32, "store_kvcache", "qkv");
  cpu::check_tensor(cache.k, DType::kF32, "store_kvcache", "cache.k");
  cpu::check_tensor(cache.v, DType::kF32, "store_kvcache", "cache.v");
  cpu::check_tensor(meta.slot_mapping, DType::kI32, "store_kvcache", "slot_mapping");
  const int64_t row = static_cast<int64_t>(cache.num_kv_heads) * cache.head_dim;
  const int64_t stride = static_cast<int64_t>(num_q_heads) * cache.head_dim + 2 * row;
  const int64_t tokens = cpu::rows_with_cols(qkv, stride, "store_kvcache", "qkv");
  MINIVLLM_CHECK(meta.slot_mapping.numel() >= tokens)
      << "store_kvcache: slot_mapping " << meta.slot_mapping.describe() << " for " << tokens << " tokens";
  const int64_t num_slots = static_cast<int64_t>(cache.num_blocks) * cache.block_size;
  MINIVLLM_CHECK_EQ(cache.k.numel(), num_slots * row) << "store_kvcache: cache.k " << cache.k.describe();
  const int32_t* slots = meta.slot_mapping.ptr<int32_t>();
  for (int64_t t = 0; t < tokens; ++t) {
    MINIVLLM_CHECK(slots[t] < num_slots) << "store_kvcache: slot " << slots[t] << " of token " << t
                                          << " outside the cache of " << num_slots << " slots";
  }
  const float* src = qkv.ptr<float>();
  float* k_cache = cache.k.ptr<float>();
  float* v_cache = cache.v.ptr<float>();
  const int64_t k_offset = static_cast<int64_t>(num_q_heads) * cache.head_dim;
#pragma omp parallel for num_threads(num_threads_) if (tokens >= 64) schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    if (slots[t] < 0) continue;
    const float* k = src + t * stride + k_offset;
    std::memcpy(k_cache + slots[t] * row, k, row * sizeof(float));
    std::memcpy(v_cache + slots[t] * row, k + row, row * sizeof(float));
  }
}

}  // namespace minivllm
