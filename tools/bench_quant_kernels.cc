// The CPU backend's block dot products (quant_kernels.h) per instruction set: Q4_1 and Q8_0 rows of
// SmolLM2's width (576), four rows per call as batch-1 decode calls them, L2-resident (1,000 rows)
// and streamed from memory (186,000 rows: about the model's Q4_1 bytes), on 1 and N threads.
// Prints ns per block per thread and GB/s for every ISA the CPU has (the best of many repetitions).
//   bench_quant_kernels [threads]     (default: the cores OpenMP sees)
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
  const int64_t k = 576, blocks = k / 32;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-0.5f, 0.5f);
  std::vector<float> x(k);
  for (auto& v : x) v = uni(rng);
  ActScratch scratch;
  scratch.quantize(x.data(), 1, k);
  const ActRow act = scratch.row(0);
  for (const DType dtype : {DType::kQ4_1, DType::kQ8_0}) {
    const size_t block_bytes = dtype == DType::kQ4_1 ? 20 : 34;
    const size_t row_bytes = blocks * block_bytes;
    for (const int64_t rows : {int64_t{1000}, int64_t{186000}}) {
      std::vector<uint8_t> w(static_cast<size_t>(rows) * row_bytes);
      for (auto& b : w) b = static_cast<uint8_t>(rng());
      const uint16_t scale = 0x3000;  // f16 0.125: finite scales (and Q4_1 offsets) in every block
      for (int64_t b = 0; b < rows * blocks; ++b) {
        std::memcpy(&w[b * block_bytes], &scale, 2);
        if (dtype == DType::kQ4_1) std::memcpy(&w[b * block_bytes + 2], &scale, 2);
      }
      std::vector<float> out(static_cast<size_t>(rows));
      for (const int threads : {1, many}) {
        for (const Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
          if (!isa_supported(isa)) continue;
          const QuantKernels& q = quant_kernels(isa);
          const auto dot = dtype == DType::kQ4_1 ? q.dot_q4_1 : q.dot_q8_0;
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
