// The CPU backend's block dot products (quant_kernels.h) per instruction set: rows of 1536 elements
// (SmolLM2's MLP width, whole K-quant super-blocks) of Q4_0, Q4_1, Q8_0, Q5_0, Q5_1, IQ4_NL, Q4_K,
// Q5_K, Q6_K, Q3_K, Q2_K, IQ4_XS and MXFP4, four rows per call as batch-1 decode calls them, L2-resident
// (about 300 KiB) and streamed from memory (about 100 MB), on 1 and N threads. Prints ns per
// 32-element block per thread and GB/s for every ISA the CPU has (the best of many repetitions).
// Another row width K (a multiple of 32) times the rows of that width: SmolLM2's 576, whose 18
// blocks end in a partial group of eight, runs only the 32-element formats, as a Q4_K_M file
// stores them.
//   bench_quant_kernels [threads] [K]     (default: the cores OpenMP sees, 1536)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/quant_kernels.h"

using namespace minivllm;
using namespace minivllm::cpu;

int main(int argc, char** argv) {
  const int many = argc > 1 ? std::atoi(argv[1]) : omp_get_max_threads();
  const int64_t k = argc > 2 ? std::atoi(argv[2]) : 1536, blocks = k / 32;
  if (k <= 0 || k % 32 != 0) {
    std::fprintf(stderr, "bench_quant_kernels: K must be a positive multiple of 32, not %ld\n", static_cast<long>(k));
    return 2;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-0.5f, 0.5f);
  std::vector<float> x(k);
  for (auto& v : x) v = uni(rng);
  ActScratch scratch;
  scratch.quantize(x.data(), 1, k);
  const ActRow act = scratch.row(0);
  for (const DType dtype : {DType::kQ4_0, DType::kQ4_1, DType::kQ8_0, DType::kQ5_0, DType::kQ5_1, DType::kIQ4_NL,
                            DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ3_K, DType::kQ2_K, DType::kIQ4_XS,
                            DType::kMXFP4}) {
    if (k % dtype_block(dtype) != 0) continue;  // a K-quant needs whole 256-element super-blocks
    const size_t row_bytes = dtype_nbytes(dtype, k), unit = dtype_size(dtype);
    // Offsets of each block's f16 scales: 0.125 there keeps every sum finite.
    std::vector<size_t> f16_at{0};
    if (dtype == DType::kQ4_1 || dtype == DType::kQ5_1 || dtype == DType::kQ4_K || dtype == DType::kQ5_K) {
      f16_at = {0, 2};
    }
    if (dtype == DType::kQ6_K) f16_at = {208};
    if (dtype == DType::kQ3_K) f16_at = {108};
    if (dtype == DType::kQ2_K) f16_at = {80, 82};
    for (const int64_t rows : {int64_t(300 << 10) / int64_t(row_bytes) / 4 * 4, int64_t(100 << 20) / int64_t(row_bytes) / 4 * 4}) {
      std::vector<uint8_t> w(static_cast<size_t>(rows) * row_bytes);
      for (auto& b : w) b = static_cast<uint8_t>(rng());
      const uint16_t scale = 0x3000;  // f16 0.125
      for (size_t b = 0; b < w.size() / unit; ++b) {
        if (dtype == DType::kMXFP4) {  // its E8M0 exponent byte: 2^-4
          w[b * unit] = 124;
          continue;
        }
        for (size_t at : f16_at) std::memcpy(&w[b * unit + at], &scale, 2);
      }
      std::vector<float> out(static_cast<size_t>(rows));
      for (const int threads : {1, many}) {
        for (const Isa isa : kIsas) {
          if (!isa_supported(isa)) continue;
          const QuantKernels& q = quant_kernels(isa);
          const DotFn dot = q.dot(dtype);
          double best = 1e9;
          const int reps = isa == Isa::kScalar ? 3 : rows < 10000 ? 2000 : 30;
          for (int rep = 0; rep < reps; ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads)
            {
              const int64_t per = rows / omp_get_num_threads() / kDotRows * kDotRows;
              const int64_t r0 = omp_get_thread_num() * per;
              for (int64_t r = r0; r + kDotRows <= r0 + per; r += kDotRows) {
                dot(&w[r * row_bytes], row_bytes, kDotRows, act, blocks, &out[r]);
              }
            }
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          }
          std::printf("%s %-6s rows %6ld threads %2d: %8.3f ms %6.1f GB/s %6.2f ns/block/thread\n",
                      dtype_name(dtype), isa_name(isa), static_cast<long>(rows), threads, best * 1e3,
                      static_cast<double>(rows * row_bytes) / best / 1e9,
                      best * 1e9 / (static_cast<double>(rows * blocks) / threads));
        }
      }
    }
  }
  return 0;
}
