// Helpers of the CPU backend tests: random host data, uploads, poisoned outputs and the
// comparison against double-precision references (relative L2 error plus max-abs error).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "common/check.h"

namespace minivllm::cpu_test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline Tensor upload(Backend& b, const std::vector<float>& v, const std::vector<int64_t>& shape) {
  Tensor t = b.empty(DType::kF32, shape);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size());
  b.copy_from_host(t, v.data());
  return t;
}

inline Tensor upload_i32(Backend& b, const std::vector<int32_t>& v, const std::vector<int64_t>& shape) {
  Tensor t = b.empty(DType::kI32, shape);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size());
  b.copy_from_host(t, v.data());
  return t;
}

// An output whose every element is NaN until the op writes it.
inline Tensor poisoned(Backend& b, const std::vector<int64_t>& shape) {
  Tensor t = b.empty(DType::kF32, shape);
  b.fill_bytes(t, 0xFF);
  return t;
}

inline std::vector<float> download(Backend& b, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  b.copy_to_host(v.data(), t);
  return v;
}

// ||out - ref|| / ||ref|| < rel_tol and max |out - ref| <= abs_tol * max(1, max |ref|); NaN fails.
inline void expect_close(const std::vector<float>& out, const std::vector<double>& ref, const char* what,
                         double rel_tol = 1e-5, double abs_tol = 1e-5) {
  ASSERT_EQ(out.size(), ref.size()) << what;
  double diff2 = 0, ref2 = 0, max_diff = 0, max_ref = 0;
  size_t worst = 0, nans = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (std::isnan(out[i])) ++nans;
    const double d = std::abs(static_cast<double>(out[i]) - ref[i]);
    diff2 += d * d;
    ref2 += ref[i] * ref[i];
    if (!(d <= max_diff)) {
      max_diff = d;
      worst = i;
    }
    max_ref = std::max(max_ref, std::abs(ref[i]));
  }
  EXPECT_EQ(nans, 0u) << what << ": elements left unwritten (NaN), first checked worst at " << worst;
  const double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  EXPECT_LT(rel, rel_tol) << what << ": relative L2 error";
  EXPECT_LE(max_diff, abs_tol * std::max(1.0, max_ref))
      << what << ": max abs error at " << worst << " (out " << out[worst] << ", ref " << ref[worst] << ")";
}

}  // namespace minivllm::cpu_test
