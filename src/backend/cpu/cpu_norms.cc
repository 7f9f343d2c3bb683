// RMSNorm and the fused residual-add + RMSNorm, per row in fp32 (HF order: (x * rsqrt) * w), and
// OLMo 2's q/k norms over all heads (a token's q and k each one row, spread over the heads).
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_row_ops.h"

namespace minivllm {
namespace {

// Rows below this are not worth waking the team for (a decode step has one row per sequence).
constexpr int64_t kParallelRows = 4;

}  // namespace

void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  cpu::check_tensor(x, DType::kF32, "rms_norm", "x");
  cpu::check_tensor(weight, DType::kF32, "rms_norm", "weight");
  cpu::check_tensor(out, DType::kF32, "rms_norm", "out");
  const int64_t n = weight.numel();
  const int64_t rows = cpu::rows_with_cols(x, n, "rms_norm", "x");
  MINIVLLM_CHECK_EQ(out.numel(), x.numel()) << "rms_norm: out " << out.describe() << " vs x " << x.describe();
  const float* xp = x.ptr<float>();
  const float* wp = weight.ptr<float>();
  float* op = out.ptr<float>();
#pragma omp parallel for num_threads(num_threads_) if (rows >= kParallelRows) schedule(static)
  for (int64_t r = 0; r < rows; ++r) cpu::rms_norm_row(xp + r * n, wp, eps, n, op + r * n);
}

void CpuBackend::add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, float eps) {
  cpu::check_tensor(x, DType::kF32, "add_rms_norm", "x");
  cpu::check_tensor(residual, DType::kF32, "add_rms_norm", "residual");
  cpu::check_tensor(weight, DType::kF32, "add_rms_norm", "weight");
  const int64_t n = weight.numel();
  const int64_t rows = cpu::rows_with_cols(x, n, "add_rms_norm", "x");
  MINIVLLM_CHECK_EQ(residual.numel(), x.numel())
      << "add_rms_norm: residual " << residual.describe() << " vs x " << x.describe();
  float* xp = x.ptr<float>();
  float* rp = residual.ptr<float>();
  const float* wp = weight.ptr<float>();
#pragma omp parallel for num_threads(num_threads_) if (rows >= kParallelRows) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = xp + r * n;
    float* rr = rp + r * n;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) rr[i] += xr[i];
    cpu::rms_norm_row(rr, wp, eps, n, xr);
  }
}

namespace {

// q and k of qkv[T, (nq + 2 nkv) hd]: the token count, with the shapes checked.
int64_t qk_tokens(const Tensor& qkv, int nq, int nkv, int hd, const char* op) {
  cpu::check_tensor(qkv, DType::kF32, op, "qkv");
  MINIVLLM_CHECK(nq > 0 && nkv > 0 && hd > 0) << op << ": heads " << nq << "/" << nkv << " head_dim " << hd;
  return cpu::rows_with_cols(qkv, static_cast<int64_t>(nq + 2 * nkv) * hd, op, "qkv");
}

float sum_squares(const float* row, int64_t n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += row[i] * row[i];
  return s;
}

void check_sums(const Tensor& sums, int64_t tokens, const char* op) {
  cpu::check_tensor(sums, DType::kF32, op, "sums");
  MINIVLLM_CHECK(sums.numel() == 2 * tokens) << op << ": sums " << sums.describe() << " for " << tokens << " tokens";
}

}  // namespace

void CpuBackend::qk_sum_squares(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim,
                                const Tensor& sums) {
  const int64_t tokens = qk_tokens(qkv, num_q_heads, num_kv_heads, head_dim, "qk_sum_squares");
  check_sums(sums, tokens, "qk_sum_squares");
  const int64_t q = static_cast<int64_t>(num_q_heads) * head_dim, k = static_cast<int64_t>(num_kv_heads) * head_dim;
  const int64_t stride = q + 2 * k;
  const float* x = qkv.ptr<float>();
  float* out = sums.ptr<float>();
  for (int64_t t = 0; t < tokens; ++t) {
    for (int part = 0; part < 2; ++part) {
      out[2 * t + part] = sum_squares(x + t * stride + (part == 0 ? 0 : q), part == 0 ? q : k);
    }
  }
}

void CpuBackend::qk_norm_full_width(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim,
                                    const Tensor& sums, int64_t q_width, int64_t k_width, const Tensor& q_norm,
                                    const Tensor& k_norm, float eps) {
  const char* op = "qk_norm_full_width";
  const int64_t tokens = qk_tokens(qkv, num_q_heads, num_kv_heads, head_dim, op);
  if (sums.defined()) check_sums(sums, tokens, op);  // else one rank: each row's own sums, below
  const int64_t q = static_cast<int64_t>(num_q_heads) * head_dim, k = static_cast<int64_t>(num_kv_heads) * head_dim;
  cpu::check_tensor(q_norm, DType::kF32, op, "q_norm");
  cpu::check_tensor(k_norm, DType::kF32, op, "k_norm");
  MINIVLLM_CHECK(q_norm.numel() == q && k_norm.numel() == k && q_width >= q && k_width >= k)
      << op << ": q_norm " << q_norm.describe() << ", k_norm " << k_norm.describe() << " for " << num_q_heads << " / "
      << num_kv_heads << " heads of " << head_dim << " (widths " << q_width << " / " << k_width << ")";
  const int64_t stride = q + 2 * k;
  float* x = qkv.ptr<float>();
  const float* given = sums.defined() ? sums.ptr<float>() : nullptr;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int part = 0; part < 2; ++part) {
      float* row = x + t * stride + (part == 0 ? 0 : q);
      const int64_t n = part == 0 ? q : k;
      const float* w = (part == 0 ? q_norm : k_norm).ptr<float>();
      const float sum = given != nullptr ? given[2 * t + part] : sum_squares(row, n);
      const float inv = 1.0f / std::sqrt(sum / static_cast<float>(part == 0 ? q_width : k_width) + eps);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) row[i] = (row[i] * inv) * w[i];
    }
  }
}

}  // namespace minivllm
