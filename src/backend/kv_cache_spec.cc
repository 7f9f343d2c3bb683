#include "backend/kv_cache_spec.h"

#include <algorithm>

#include "common/check.h"
#include "common/config_key.h"

namespace minivllm {

DType resolve_kv_cache_dtype(std::string_view value, DType activation) {
  if (value == "auto") return activation;
  if (value == "bf16") return DType::kBF16;
  if (value == "fp8" || value == "fp8_e4m3") return DType::kF8E4M3;
  throw ConfigKeyError("config key", std::string(kKvCacheDtypeKey),
                       std::string("must be one of auto, bf16, fp8, fp8_e4m3, got '").append(value).append("'"));
}

int64_t kv_cache_bytes_per_token_per_layer(int num_kv_heads, int head_dim, DType dtype) {
  MINIVLLM_CHECK(num_kv_heads > 0 && head_dim > 0) << "KV cache of " << num_kv_heads << " kv heads of " << head_dim;
  const int64_t row = static_cast<int64_t>(head_dim) * static_cast<int64_t>(dtype_size(dtype)) +
                      (kv_cache_has_scales(dtype) ? static_cast<int64_t>(sizeof(float)) : 0);
  return 2 * static_cast<int64_t>(num_kv_heads) * row;
}

int64_t kv_cache_blocks_for_budget(int64_t budget_bytes, int block_size, int64_t num_layers, int num_kv_heads,
                                   int head_dim, DType dtype) {
  MINIVLLM_CHECK(block_size > 0 && num_layers > 0) << "KV cache of " << num_layers << " layers, block_size "
                                                   << block_size;
  const int64_t block_bytes =
      static_cast<int64_t>(block_size) * num_layers * kv_cache_bytes_per_token_per_layer(num_kv_heads, head_dim, dtype);
  return std::max<int64_t>(0, budget_bytes) / block_bytes;
}

std::string describe_kv_cache_dtype(DType dtype) {
  std::string s = dtype_name(dtype);
  if (kv_cache_has_scales(dtype)) s += " (+ fp32 scale per token and kv head)";
  return s;
}

}  // namespace minivllm
