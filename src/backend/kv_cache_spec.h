// The KV cache's element type (the kv_cache_dtype key) and its size: what the runner needs to turn
// a memory budget into blocks. Host-only; the layouts themselves are each backend's own.
//
//   auto       the backend's activation dtype (fp32 on the CPU, bf16 on CUDA)
//   bf16       bf16 k and v
//   fp8        (alias fp8_e4m3) e4m3 k and v, each (token, kv head) row with its fp32 scale
//              amax / 448 beside it (common/fp8.h): 2 * kv_heads * (head_dim + 4) bytes a token,
//              against 2 * kv_heads * head_dim * 2 for bf16 (1.94x the tokens at head_dim 128)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/dtype.h"

namespace minivllm {

// The values the kv_cache_dtype key takes, for its row in the config table.
inline constexpr std::string_view kKvCacheDtypeKey = "kv_cache_dtype";

// The element type the key's value names on a backend of activation dtype `activation`; throws a
// ConfigKeyError naming the key for an unknown value.
DType resolve_kv_cache_dtype(std::string_view value, DType activation);

// Whether a KV cache of `dtype` needs per-row scales (fp8).
inline bool kv_cache_has_scales(DType dtype) { return dtype == DType::kF8E4M3; }

// Bytes one token takes in one layer's cache: k and v of every kv head, their scales included.
int64_t kv_cache_bytes_per_token_per_layer(int num_kv_heads, int head_dim, DType dtype);

// Blocks of `block_size` tokens over `num_layers` layers that `budget_bytes` holds (0 when the
// budget is negative).
int64_t kv_cache_blocks_for_budget(int64_t budget_bytes, int block_size, int64_t num_layers, int num_kv_heads,
                                   int head_dim, DType dtype);

// "fp8_e4m3 (+ fp32 scale per token and kv head)", "bf16", "f32": for log lines.
std::string describe_kv_cache_dtype(DType dtype);

}  // namespace minivllm
