// The AVX-512 table built with VNNI as well (quant_kernels_avx512.h): halves_products' second
// vpmaddwd and its add become one vpdpwssd, the same integer sums. The default where the CPU has
// AVX-512 F/BW/VL and VNNI (Ice Lake and later, Zen 4). Here Q8_0, Q4_0 and Q4_1 take this build
// too: faster than AVX2's, where the plain AVX-512 build of them was level; Q3_K keeps AVX2's
// (docs/PERFORMANCE.md, "Stop 104"). This file alone is built with these flags;
// quant_kernels.cc calls it only after cpuid says the CPU has them.
#include "backend/cpu/quant_kernels_avx512.h"

namespace minivllm::cpu {

namespace {

QuantKernels make_avx512_vnni() {
  QuantKernels k = make_avx512(quant_kernels_avx2());
  k.dot_q8_0 = dot_block<DType::kQ8_0, block_products_256<DType::kQ8_0>>;
  k.dot_q4_0 = dot_block<DType::kQ4_0, block_products_256<DType::kQ4_0>>;
  k.dot_q4_1 = dot_block<DType::kQ4_1, block_products_256<DType::kQ4_1>>;
  return k;
}

}  // namespace

const QuantKernels& quant_kernels_avx512_vnni() {
  static const QuantKernels kernels = make_avx512_vnni();
  return kernels;
}

}  // namespace minivllm::cpu
