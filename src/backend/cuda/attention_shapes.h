// The attention shapes the CUDA kernels take (decode, prefill, rope and the cache write), checked
// once at start-up (CudaBackend::check_attention_shape) and again by each attention op.
#pragma once

#include <string>

namespace minivllm::cuda {

constexpr int kMaxAttentionGroup = 16;  // q heads per kv head

inline bool attention_head_dim_supported(int head_dim) {
  return head_dim == 64 || head_dim == 96 || head_dim == 128 || head_dim == 256;
}

inline bool attention_shape_supported(int num_q_heads, int num_kv_heads, int head_dim) {
  return num_kv_heads > 0 && num_q_heads % num_kv_heads == 0 && num_q_heads / num_kv_heads >= 1 &&
         num_q_heads / num_kv_heads <= kMaxAttentionGroup && attention_head_dim_supported(head_dim);
}

// The rope kernels (rope_kvcache.cu, the qkv gemv's rope epilogue) rotate the first rotary_dim dims
// of each head in pairs (i, i + rotary_dim / 2) and pass the rest through (partial_rotary_factor),
// any even width up to head_dim; 16-byte accesses where both widths are multiples of 16.
inline bool rope_rotary_dim_supported(int head_dim, int rotary_dim) {
  return rotary_dim >= 2 && rotary_dim <= head_dim && rotary_dim % 2 == 0;
}

inline std::string supported_attention_shapes() {
  return "supported: GQA group (q heads per kv head) 1 to " + std::to_string(kMaxAttentionGroup) +
         ", head_dim 64, 96, 128 or 256";
}

// "9 q heads / 3 kv heads (GQA group 3), head_dim 80 not supported by the CUDA attention kernels; supported: ..."
inline std::string describe_unsupported_attention(int num_q_heads, int num_kv_heads, int head_dim) {
  std::string s = std::to_string(num_q_heads) + " q heads / " + std::to_string(num_kv_heads) + " kv heads";
  if (num_kv_heads > 0 && num_q_heads % num_kv_heads == 0) {
    s += " (GQA group " + std::to_string(num_q_heads / num_kv_heads) + ")";
  } else {
    s += " (not a whole GQA group)";
  }
  return s + ", head_dim " + std::to_string(head_dim) + " not supported by the CUDA attention kernels; " +
         supported_attention_shapes();
}

}  // namespace minivllm::cuda
