// The paged KV cache of the CPU backend: layout [num_blocks, block_size, num_kv_heads, head_dim]
// for k and for v (as nano-vllm), so one token's keys of all heads are one contiguous row and
// store_kvcache is a memcpy per token. Slot s lives in block s / block_size, row s % block_size,
// i.e. at row s of the cache seen as [num_blocks * block_size, kv_heads * head_dim].
//
// Elements are fp32 (kv_cache_dtype auto), bf16 (bf16: half the bytes, as llama.cpp's f16 cache;
// rounded to nearest even), or fp8 e4m3 (fp8): each (slot, kv head) row of k and of v quantised on
// its own (common/fp8.h), its f32 scale at [slot, kv head] of k_scale / v_scale, the keys rotated
// first (kv_rotate_row). The fp8 cache is the reference of the CUDA backend's: the same bytes from
// the same inputs.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_checks.h"
#include "common/fp8.h"

namespace minivllm {

bool CpuBackend::supports_kv_cache_dtype(DType dtype) const {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF8E4M3;
}

std::string CpuBackend::supported_kv_cache_dtypes() const { return "auto (f32), bf16, fp8 (e4m3)"; }

KVCache CpuBackend::allocate_kv_cache(int num_blocks, int block_size, int num_kv_heads, int head_dim, DType dtype) {
  MINIVLLM_CHECK(num_blocks > 0 && block_size > 0 && num_kv_heads > 0 && head_dim > 0)
      << "allocate_kv_cache: bad shape blocks=" << num_blocks << " block_size=" << block_size
      << " kv_heads=" << num_kv_heads << " head_dim=" << head_dim;
  MINIVLLM_CHECK(supports_kv_cache_dtype(dtype))
      << "cpu backend: a KV cache of " << dtype_name(dtype) << " is not supported; supported: "
      << supported_kv_cache_dtypes();
  KVCache c;
  c.k = empty(dtype, {num_blocks, block_size, num_kv_heads, head_dim});
  c.v = empty(dtype, {num_blocks, block_size, num_kv_heads, head_dim});
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.num_kv_heads = num_kv_heads;
  c.head_dim = head_dim;
  if (dtype == DType::kF8E4M3) {
    c.k_scale = empty(DType::kF32, {num_blocks, block_size, num_kv_heads});
    c.v_scale = empty(DType::kF32, {num_blocks, block_size, num_kv_heads});
  }
  return c;
}

void CpuBackend::store_kvcache(const Tensor& qkv, int num_q_heads, const KVCache& cache,
                               const AttentionMetadata& meta) {
  // Before the cache exists (the warm-up pass) there is nothing to store, as in nano-vllm.
  if (!cache.k.defined() || cache.k.empty()) return;
  const bool fp8 = cache.dtype() == DType::kF8E4M3, bf16 = cache.dtype() == DType::kBF16;
  const DType elem = fp8 ? DType::kF8E4M3 : bf16 ? DType::kBF16 : DType::kF32;
  cpu::check_tensor(qkv, DType::kF32, "store_kvcache", "qkv");
  cpu::check_tensor(cache.k, elem, "store_kvcache", "cache.k");
  cpu::check_tensor(cache.v, elem, "store_kvcache", "cache.v");
  cpu::check_tensor(meta.slot_mapping, DType::kI32, "store_kvcache", "slot_mapping");
  const int64_t row = static_cast<int64_t>(cache.num_kv_heads) * cache.head_dim;
  const int64_t stride = static_cast<int64_t>(num_q_heads) * cache.head_dim + 2 * row;
  const int64_t tokens = cpu::rows_with_cols(qkv, stride, "store_kvcache", "qkv");
  MINIVLLM_CHECK(meta.slot_mapping.numel() >= tokens)
      << "store_kvcache: slot_mapping " << meta.slot_mapping.describe() << " for " << tokens << " tokens";
  const int64_t num_slots = static_cast<int64_t>(cache.num_blocks) * cache.block_size;
  MINIVLLM_CHECK_EQ(cache.k.numel(), num_slots * row) << "store_kvcache: cache.k " << cache.k.describe();
  if (fp8) {
    cpu::check_tensor(cache.k_scale, DType::kF32, "store_kvcache", "cache.k_scale");
    cpu::check_tensor(cache.v_scale, DType::kF32, "store_kvcache", "cache.v_scale");
    MINIVLLM_CHECK(cache.k_scale.numel() == num_slots * cache.num_kv_heads &&
                   cache.v_scale.numel() == cache.k_scale.numel())
        << "store_kvcache: scales " << cache.k_scale.describe() << " for " << num_slots << " slots";
  }
  const int32_t* slots = meta.slot_mapping.ptr<int32_t>();
  for (int64_t t = 0; t < tokens; ++t) {
    MINIVLLM_CHECK(slots[t] < num_slots) << "store_kvcache: slot " << slots[t] << " of token " << t
                                          << " outside the cache of " << num_slots << " slots";
  }
  const float* src = qkv.ptr<float>();
  const int64_t k_offset = static_cast<int64_t>(num_q_heads) * cache.head_dim;
  if (fp8) {
    const int64_t hd = cache.head_dim, nkv = cache.num_kv_heads;
    uint8_t* k_cache = cache.k.ptr<uint8_t>();
    uint8_t* v_cache = cache.v.ptr<uint8_t>();
    float* k_scale = cache.k_scale.ptr<float>();
    float* v_scale = cache.v_scale.ptr<float>();
#pragma omp parallel for num_threads(num_threads_) if (tokens >= 64) schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
      // Keys are stored rotated, and the row's queries rotated in qkv, which attention reads next
      // (common/fp8.h: kv_rotate_row; Backend::store_kvcache). Padding rows too: their attention
      // stays consistent.
      for (int64_t h = 0; fp8_kv_rotate_ && h < num_q_heads + nkv; ++h) {
        kv_rotate_row(qkv.ptr<float>() + t * stride + h * hd, hd);
      }
      if (slots[t] < 0) continue;
      const float* k = src + t * stride + k_offset;
      for (int64_t h = 0; h < nkv; ++h) {
        const int64_t r = slots[t] * nkv + h;  // the (slot, kv head) row
        quantize_e4m3_row(k + h * hd, hd, k_cache + r * hd, k_scale + r);
        quantize_e4m3_row(k + row + h * hd, hd, v_cache + r * hd, v_scale + r);
      }
    }
    return;
  }
  if (bf16) {
    uint16_t* k_cache = cache.k.ptr<uint16_t>();
    uint16_t* v_cache = cache.v.ptr<uint16_t>();
#pragma omp parallel for num_threads(num_threads_) if (tokens >= 64) schedule(static)
    for (int64_t t = 0; t < tokens; ++t) {
      if (slots[t] < 0) continue;
      const float* k = src + t * stride + k_offset;
      for (int64_t i = 0; i < row; ++i) {
        k_cache[slots[t] * row + i] = f32_to_bf16(k[i]);
        v_cache[slots[t] * row + i] = f32_to_bf16(k[row + i]);
      }
    }
    return;
  }
  float* k_cache = cache.k.ptr<float>();
  float* v_cache = cache.v.ptr<float>();
#pragma omp parallel for num_threads(num_threads_) if (tokens >= 64) schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    if (slots[t] < 0) continue;
    const float* k = src + t * stride + k_offset;
    std::memcpy(k_cache + slots[t] * row, k, row * sizeof(float));
    std::memcpy(v_cache + slots[t] * row, k + row, row * sizeof(float));
  }
}

}  // namespace minivllm
