// Helpers of the CUDA tests: a CPU and a GPU backend side by side, bf16-rounded random inputs
// (both backends see the same values), uploads, downloads and the NMSE / max-abs comparison.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_backend.h"
#include "common/dtype.h"
#include "common/tensor.h"
#include "scoped_env.h"

namespace minivllm::cuda_test {

#define MINIVLLM_SKIP_WITHOUT_CUDA() \
  if (!::minivllm::cuda_device_available()) GTEST_SKIP() << "no CUDA device"

// Device 0 is an sm_90 GPU (the decode GEMM's wgmma and TMA kernels).
inline bool on_hopper() {
  if (!cuda_device_available()) return false;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  return prop.major == 9 && prop.minor == 0;
}

struct Backends {
  std::unique_ptr<Backend> cpu = make_cpu_backend();
  std::unique_ptr<Backend> gpu = make_cuda_backend(0);
};

// Backends whose GPU backend was made with the tuning knobs `knobs` (name, value) set, a value of
// "" leaving its knob untouched (CudaBackend reads its knobs when it is made); afterwards the knobs
// are as they were before (test::ScopedEnv).
inline Backends backends_with(std::initializer_list<std::pair<const char*, const char*>> knobs) {
  test::EnvVars set;
  for (const auto& [name, value] : knobs) {
    if (*value != '\0') set.emplace_back(name, value);
  }
  const test::ScopedEnv env(set);
  return Backends{};
}
inline Backends backends_with(const char* name, const char* value) { return backends_with({{name, value}}); }

// Normal(0, scale) values already rounded to bf16.
inline Tensor random_values(const std::vector<int64_t>& shape, std::mt19937& rng, float scale = 1.0f,
                            float mean = 0.0f) {
  Tensor t = host_tensor(DType::kF32, shape);
  std::normal_distribution<float> d(mean, scale);
  float* p = t.ptr<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = bf16_to_f32(f32_to_bf16(d(rng)));
  return t;
}

// An fp32 host tensor as the backend's activation / weight dtype (fp32 on the CPU, bf16 on CUDA).
// The rotary table the engine builds ([max_pos, head_dim]: cos of each frequency, then sin) in fp32
// on the host, for kernels that take cos_sin.
inline Tensor rope_table(int64_t max_pos, int64_t head_dim, double theta = 1e6) {
  Tensor t = host_tensor(DType::kF32, {max_pos, head_dim});
  const int64_t half = head_dim / 2;
  for (int64_t p = 0; p < max_pos; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = p * std::pow(theta, -2.0 * i / head_dim);
      t.ptr<float>()[p * head_dim + i] = static_cast<float>(std::cos(angle));
      t.ptr<float>()[p * head_dim + half + i] = static_cast<float>(std::sin(angle));
    }
  }
  return t;
}

inline Tensor upload(Backend& b, const Tensor& host_f32) { return b.upload_weight(host_f32); }
// ... kept in fp32 on every backend (cos_sin, logits).
inline Tensor upload_f32(Backend& b, const Tensor& host_f32) { return b.upload_weight(host_f32, true); }

inline Tensor upload_i32(Backend& b, const std::vector<int32_t>& v, std::vector<int64_t> shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  Tensor t = b.empty(DType::kI32, shape);
  b.copy_from_host(t, v.data());
  b.synchronize();
  return t;
}

inline std::vector<float> download(Backend& b, const Tensor& t) {
  std::vector<uint8_t> raw(t.nbytes());
  b.copy_to_host(raw.data(), t);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  convert_to_f32(raw.data(), t.dtype(), out.data(), out.size());
  return out;
}

struct Diff {
  double nmse = 0.0;
  double max_abs = 0.0;
  double ref_max = 0.0;
  int64_t nonfinite = 0;
};

inline Diff diff(const std::vector<float>& got, const std::vector<float>& ref) {
  Diff d;
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++d.nonfinite;
      continue;
    }
    const double e = static_cast<double>(got[i]) - ref[i];
    err += e * e;
    norm += static_cast<double>(ref[i]) * ref[i];
    d.max_abs = std::max(d.max_abs, std::abs(e));
    d.ref_max = std::max(d.ref_max, static_cast<double>(std::abs(ref[i])));
  }
  d.nmse = norm > 0 ? err / norm : err;
  return d;
}

inline void expect_close(const std::vector<float>& got, const std::vector<float>& ref, double nmse_tol,
                         double abs_tol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const Diff d = diff(got, ref);
  EXPECT_EQ(d.nonfinite, 0) << what << ": non-finite outputs (unwritten or NaN)";
  EXPECT_LE(d.nmse, nmse_tol) << what << " (max_abs " << d.max_abs << ", ref_max " << d.ref_max << ")";
  EXPECT_LE(d.max_abs, abs_tol) << what << " (nmse " << d.nmse << ", ref_max " << d.ref_max << ")";
}

}  // namespace minivllm::cuda_test
