// AVX-512 (F, BW, VL) block dot products of quant_kernels.h: the AVX2 kernels' row loop, scales and
// lane sums (quant_kernels_x86.h), with each 32-element block multiplied by one 512-bit vpmaddwd
// instead of two 256-bit ones (and Q8_0's 32 bytes widened by one instruction). This file alone is
// built with those flags; quant_kernels.cc calls it only after cpuid says the CPU has them.
// The 16-bit dot products and the panel decoding stay the AVX2 ones (memory-bound either way).
// Not the default (quant_kernels.cc): on an Intel Xeon host its Q4_1 kernel ran 3.52 ns per block
// against AVX2's 3.03 (one thread, L2) and 4.06 against 3.42 (8 threads, from memory): the extra
// insert and fold per block cost more than the halved multiplies save. Q8_0 was even.
#include <immintrin.h>

#include "backend/cpu/quant_kernels_k_x86.h"

namespace minivllm::cpu {

const QuantKernels& quant_kernels_avx2();  // quant_kernels_avx2.cc

namespace {

// The 32 weights of a block as int16 in element order.
template <DType T>
inline __m512i block_weights(const uint8_t* w) {
  if constexpr (T == DType::kQ8_0) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2)));
  } else {
    __m256i lo, hi;
    Block<T>::load(w, &lo, &hi);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
}

// w . x over the 32 elements of a block as 8 int32 partial sums: one vpmaddwd, then its two halves added.
template <DType T>
__m256i block_products(const uint8_t* w, const int16_t* xq) {
  const __m512i p = _mm512_madd_epi16(block_weights<T>(w), _mm512_loadu_si512(xq));
  return _mm256_add_epi32(_mm512_castsi512_si256(p), _mm512_extracti64x4_epi64(p, 1));
}

// Sub-block s (32 elements) of a super-block . its activation codes: one vpmaddwd as above.
template <DType T>
__m256i super_products_512(const uint8_t* w, int s, const int16_t* xq) {
  __m256i lo, hi;
  Super<T>::codes(w, s, &lo, &hi);
  const __m512i p = _mm512_madd_epi16(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_loadu_si512(xq));
  return _mm256_add_epi32(_mm512_castsi512_si256(p), _mm512_extracti64x4_epi64(p, 1));
}

// The 16-element-sub-block formats (Q2_K, Q3_K, Q6_K) keep the 256-bit products, compiled here
// with the AVX-512 flags.
QuantKernels make_avx512() {
  QuantKernels k = quant_kernels_avx2();
  k.dot_q8_0 = dot_block<DType::kQ8_0, block_products<DType::kQ8_0>>;
  k.dot_q4_0 = dot_block<DType::kQ4_0, block_products<DType::kQ4_0>>;
  k.dot_q4_1 = dot_block<DType::kQ4_1, block_products<DType::kQ4_1>>;
  const auto set = [&k](DType t, DotFn f) { k.dot_codes[static_cast<int>(t) - static_cast<int>(DType::kQ5_0)] = f; };
  set(DType::kQ5_0, dot_block<DType::kQ5_0, block_products<DType::kQ5_0>>);
  set(DType::kQ5_1, dot_block<DType::kQ5_1, block_products<DType::kQ5_1>>);
  set(DType::kIQ4_NL, dot_block<DType::kIQ4_NL, block_products<DType::kIQ4_NL>>);
  set(DType::kQ2_K, dot_super<DType::kQ2_K, super_products_256<DType::kQ2_K>>);
  set(DType::kQ3_K, dot_super<DType::kQ3_K, super_products_256<DType::kQ3_K>>);
  set(DType::kQ4_K, dot_super<DType::kQ4_K, super_products_512<DType::kQ4_K>>);
  set(DType::kQ5_K, dot_super<DType::kQ5_K, super_products_512<DType::kQ5_K>>);
  set(DType::kQ6_K, dot_super<DType::kQ6_K, super_products_256<DType::kQ6_K>>);
  set(DType::kIQ4_XS, dot_super<DType::kIQ4_XS, super_products_512<DType::kIQ4_XS>>);
  return k;
}

}  // namespace

const QuantKernels& quant_kernels_avx512() {
  static const QuantKernels kernels = make_avx512();
  return kernels;
}

}  // namespace minivllm::cpu
