// qk_norm_rope: optional per-head RMSNorm of q and k (Qwen3's q_norm / k_norm), then the
// half-split rotary embedding over the leading dims of each head that cos_sin is wide (all of
// head_dim, or Phi-4-mini's partial_rotary_factor), in place on the fused qkv rows. v is left
// untouched.
#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_row_ops.h"

namespace minivllm {

void CpuBackend::qk_norm_rope(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim,
                              const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& positions,
                              const Tensor& cos_sin) {
  cpu::check_tensor(qkv, DType::kF32, "qk_norm_rope", "qkv");
  cpu::check_tensor(positions, DType::kI32, "qk_norm_rope", "positions");
  cpu::check_tensor(cos_sin, DType::kF32, "qk_norm_rope", "cos_sin");
  MINIVLLM_CHECK(num_q_heads > 0 && num_kv_heads > 0 && head_dim > 0 && head_dim % 2 == 0)
      << "qk_norm_rope: heads " << num_q_heads << "/" << num_kv_heads << " head_dim " << head_dim;
  const int64_t stride = static_cast<int64_t>(num_q_heads + 2 * num_kv_heads) * head_dim;
  const int64_t tokens = cpu::rows_with_cols(qkv, stride, "qk_norm_rope", "qkv");
  MINIVLLM_CHECK_EQ(positions.numel(), tokens) << "qk_norm_rope: positions " << positions.describe();
  MINIVLLM_CHECK(cos_sin.ndim() == 2 && cos_sin.size(1) >= 2 && cos_sin.size(1) <= head_dim &&
                 cos_sin.size(1) % 2 == 0)
      << "qk_norm_rope: cos_sin " << cos_sin.describe() << " must be [max_pos, rotary dims], the rotary dims even and "
      << "at most head_dim " << head_dim;
  const int64_t rotary = cos_sin.size(1);
  const int64_t max_pos = cpu::rows_with_cols(cos_sin, rotary, "qk_norm_rope", "cos_sin");
  const float* qn = nullptr;
  const float* kn = nullptr;
  if (q_norm != nullptr) {
    cpu::check_tensor(*q_norm, DType::kF32, "qk_norm_rope", "q_norm");
    MINIVLLM_CHECK_EQ(q_norm->numel(), head_dim) << "qk_norm_rope: q_norm " << q_norm->describe();
    qn = q_norm->ptr<float>();
  }
  if (k_norm != nullptr) {
    cpu::check_tensor(*k_norm, DType::kF32, "qk_norm_rope", "k_norm");
    MINIVLLM_CHECK_EQ(k_norm->numel(), head_dim) << "qk_norm_rope: k_norm " << k_norm->describe();
    kn = k_norm->ptr<float>();
  }
  const int32_t* pos = positions.ptr<int32_t>();
  for (int64_t t = 0; t < tokens; ++t) {
    MINIVLLM_CHECK(pos[t] >= 0 && pos[t] < max_pos)
        << "qk_norm_rope: position " << pos[t] << " of token " << t << " outside cos_sin " << cos_sin.describe();
  }
  float* base = qkv.ptr<float>();
  const float* table = cos_sin.ptr<float>();
  const int64_t half = rotary / 2;  // pairs (i, i + rotary / 2); dims from rotary on pass through
  const int heads = num_q_heads + num_kv_heads;
#pragma omp parallel for num_threads(num_threads_) if (tokens >= 4) schedule(static)
  for (int64_t t = 0; t < tokens; ++t) {
    const float* cos = table + static_cast<int64_t>(pos[t]) * rotary;
    const float* sin = cos + half;
    for (int h = 0; h < heads; ++h) {
      float* x = base + t * stride + static_cast<int64_t>(h) * head_dim;
      const float* norm = h < num_q_heads ? qn : kn;
      if (norm != nullptr) cpu::rms_norm_row(x, norm, eps, head_dim, x);
      cpu::rope_row(x, cos, sin, half);
    }
  }
}

}  // namespace minivllm
