// Linear layers: out[T, N] = x[T, K] * W[N, K]^T (+ bias) through OpenBLAS.
// The OpenMP team splits the output features N into one contiguous slice per thread and each
// thread calls single-threaded OpenBLAS on its slice: the weight, which dominates the traffic at
// decode time, is read once, by one core per slice, and only one thread pool ever runs.
#include <cblas.h>
#include <omp.h>

#include <algorithm>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_checks.h"

namespace minivllm {
namespace {

// Below this many multiply-adds one thread is faster than waking the team.
constexpr int64_t kParallelMacs = int64_t{1} << 16;
// Slices start on whole cache lines of the output row.
constexpr int64_t kSliceAlign = 16;

void linear_slice(const float* x, const float* w, const float* bias, int64_t t, int64_t k, int64_t n,
                  int64_t n0, int64_t n1, float* out) {
  const int64_t width = n1 - n0;
  if (width <= 0 || t == 0) return;
  if (t == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(width), static_cast<int>(k), 1.0f, w + n0 * k,
                static_cast<int>(k), x, 1, 0.0f, out + n0, 1);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(t), static_cast<int>(width),
                static_cast<int>(k), 1.0f, x, static_cast<int>(k), w + n0 * k, static_cast<int>(k), 0.0f,
                out + n0, static_cast<int>(n));
  }
  if (bias == nullptr) return;
  for (int64_t r = 0; r < t; ++r) {
    float* row = out + r * n;
#pragma omp simd
    for (int64_t j = n0; j < n1; ++j) row[j] += bias[j];
  }
}

}  // namespace

void CpuBackend::linear(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out) {
  cpu::check_tensor(x, DType::kF32, "linear", "x");
  cpu::check_tensor(weight, DType::kF32, "linear", "weight");
  cpu::check_tensor(out, DType::kF32, "linear", "out");
  MINIVLLM_CHECK(weight.ndim() == 2) << "linear: weight " << weight.describe() << " must be [out, in]";
  const int64_t n = weight.size(0);
  const int64_t k = weight.size(1);
  const int64_t t = cpu::rows_with_cols(x, k, "linear", "x");
  MINIVLLM_CHECK(cpu::rows_with_cols(out, n, "linear", "out") == t)
      << "linear: out " << out.describe() << " vs x " << x.describe() << " and weight " << weight.describe();
  const float* bias_p = nullptr;
  if (bias != nullptr) {
    cpu::check_tensor(*bias, DType::kF32, "linear", "bias");
    MINIVLLM_CHECK_EQ(bias->numel(), n) << "linear: bias " << bias->describe();
    bias_p = bias->ptr<float>();
  }
  const float* xp = x.ptr<float>();
  const float* wp = weight.ptr<float>();
  float* op = out.ptr<float>();
  const int threads = static_cast<int>(std::min<int64_t>(num_threads_, (n + kSliceAlign - 1) / kSliceAlign));
  if (threads <= 1 || t * n * k < kParallelMacs) {
    linear_slice(xp, wp, bias_p, t, k, n, 0, n, op);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t id = omp_get_thread_num();
    const int64_t team = omp_get_num_threads();
    const int64_t per = (n + team - 1) / team;
    const int64_t slice = (per + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
    const int64_t n0 = std::min(n, id * slice);
    const int64_t n1 = std::min(n, n0 + slice);
    linear_slice(xp, wp, bias_p, t, k, n, n0, n1, op);
  }
}

}  // namespace minivllm
