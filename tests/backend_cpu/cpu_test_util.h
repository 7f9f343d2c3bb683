// Helpers of the CPU backend tests: random host data, uploads, poisoned outputs and the
// comparison against double-precision references (relative L2 error plus max-abs error).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/quant_kernels.h"
#include "common/check.h"
#include "common/dtype.h"

namespace minivllm::cpu_test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Forces an ISA for the quantised dot products, and restores the choice however the test ends.
struct IsaGuard {
  explicit IsaGuard(cpu::Isa isa) : previous(cpu::set_isa(isa)) {}
  ~IsaGuard() { cpu::set_isa(previous); }
  cpu::Isa previous;
};

// The ISAs this CPU can run, scalar first (kIsas is narrowest first).
inline std::vector<cpu::Isa> runnable_isas() {
  std::vector<cpu::Isa> out;
  for (cpu::Isa isa : cpu::kIsas) {
    if (cpu::isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

// Byte offsets of a ggml block's f16 scales, and a magnitude that keeps the weights near 1.
struct F16Fields {
  std::vector<size_t> at;
  float scale;
};

inline F16Fields f16_fields(DType t) {
  switch (t) {
    case DType::kQ8_0: return {{0}, 0.01f};
    case DType::kQ4_0: case DType::kQ5_0: return {{0}, 0.06f};
    case DType::kQ4_1: case DType::kQ5_1: return {{0, 2}, 0.06f};
    case DType::kIQ4_NL: return {{0}, 0.008f};
    case DType::kQ2_K: return {{80, 82}, 0.05f};
    case DType::kQ3_K: return {{108}, 0.01f};
    case DType::kQ4_K: case DType::kQ5_K: return {{0, 2}, 0.005f};
    case DType::kQ6_K: return {{208}, 0.0005f};
    case DType::kIQ4_XS: return {{0}, 0.0005f};
    default: return {{}, 0};
  }
}

// A host [n, k] tensor of random ggml blocks of type t (random codes, finite f16 scales of random
// sign): every code pattern, which quantising real values would not give.
inline Tensor random_blocks(DType t, int64_t n, int64_t k, uint32_t seed) {
  Tensor host = host_tensor(t, {n, k});
  std::mt19937 gen(seed);
  auto* bytes = static_cast<uint8_t*>(host.data());
  const size_t total = dtype_nbytes(t, n * k), block = dtype_size(t);
  for (size_t i = 0; i < total; ++i) bytes[i] = static_cast<uint8_t>(gen());
  const F16Fields f = f16_fields(t);
  std::uniform_real_distribution<float> dist(0.2f, 1.0f);
  for (size_t b = 0; b < total / block; ++b) {
    for (size_t at : f.at) {
      const uint16_t h = f32_to_f16((gen() & 1 ? -1.0f : 1.0f) * dist(gen) * f.scale);
      std::memcpy(bytes + b * block + at, &h, 2);
    }
    // MXFP4's E8M0 exponent: scales 2^-10 .. 2^-3 (its codes reach 12), where any byte would overflow.
    if (t == DType::kMXFP4) bytes[b * block] = static_cast<uint8_t>(118 + gen() % 8);
  }
  return host;
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
