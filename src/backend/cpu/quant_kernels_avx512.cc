// AVX-512 (F, BW, VL) block dot products of quant_kernels.h (quant_kernels_avx512.h), the default
// where the CPU has them but not VNNI. Q8_0, Q4_0, Q4_1 and Q3_K keep the AVX2 build: theirs ran
// level or slower built here (Q3_K's codes through masks too), the others faster
// (tools/bench_quant_kernels). This file alone is built with these flags; quant_kernels.cc calls it
// only after cpuid says the CPU has them. The 16-bit dot products stay the AVX2 ones (memory-bound
// either way), and so does the panel decoding of every format but Q5_0 and Q8_0 (quant_kernels_avx512.h).
#include "backend/cpu/quant_kernels_avx512.h"

namespace minivllm::cpu {

const QuantKernels& quant_kernels_avx512() {
  static const QuantKernels kernels = make_avx512(quant_kernels_avx2());
  return kernels;
}

}  // namespace minivllm::cpu
