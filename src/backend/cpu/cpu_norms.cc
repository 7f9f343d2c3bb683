// RMSNorm and the fused residual-add + RMSNorm, per row in fp32 (HF order: (x * rsqrt) * w).
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

}  // namespace minivllm
