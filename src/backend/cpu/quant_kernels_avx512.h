// The AVX-512 (F, BW, VL) block kernels shared by the two AVX-512 tables: quant_kernels_avx512.cc
// and quant_kernels_avx512_vnni.cc, which is the same code built with VNNI as well, so that
// halves_products (quant_kernels_x86.h) fuses its second multiply and the add into one vpdpwssd.
// Both are 256-bit code: 512-bit vpmaddwd products lost on both hosts measured (an Intel Xeon, and
// this workplace's AMD EPYC, which splits 512-bit operations in two: docs/PERFORMANCE.md, "CPU:
// 256-bit AVX-512 kernels"). With these flags the compiler has 32 vector registers, and Q5_0 / Q5_1
// take their fifth bits through mask registers. Everything here is in an anonymous namespace
// on purpose, as in quant_kernels_x86.h: include it only from those two files.
#pragma once

#include <immintrin.h>

#include "backend/cpu/quant_gemm_avx512.h"
#include "backend/cpu/quant_kernels_k_x86.h"

namespace minivllm::cpu {

const QuantKernels& quant_kernels_avx2();  // quant_kernels_avx2.cc: the formats this file leaves as they are

namespace {

// A 32-element block's nibbles plus 16 where its bit of `fifth` is set (bit i: element i), . its
// activation codes: each half of the mask register is the lane mask of one half of the block, so a
// half costs one masked add instead of AVX2's broadcast, test and select.
inline __m256i fifth_bit_products(__m256i lo, __m256i hi, __mmask32 fifth, const int16_t* xq) {
  const __m256i sixteen = _mm256_set1_epi16(16);
  lo = _mm256_mask_add_epi16(lo, static_cast<__mmask16>(fifth), lo, sixteen);
  hi = _mm256_mask_add_epi16(hi, static_cast<__mmask16>(fifth >> 16), hi, sixteen);
  return halves_products(lo, hi, xq);
}

// Q5_0 / Q5_1: qh is the block's mask as it stands. (Loading it straight into a mask register from
// memory, kmovw k, m16, ran slower than through a general register.)
template <DType T>
__m256i block_products_masked(const uint8_t* w, const int16_t* xq) {
  constexpr size_t kQh = T == DType::kQ5_0 ? 2 : 4;
  __m256i lo, hi;
  nibbles(w + kQh + 4, &lo, &hi);
  return fifth_bit_products(lo, hi, u32_at(w + kQh), xq);
}

// Q5_0's and Q8_0's panel decoding (batches of 5 rows and more decode the weights into fp32 panels
// for sgemm) at 512 bits. Q5_0: a block's 32 possible values d (code - 16) made once as two tables, then each element
// looked up by its five-bit code (vpermt2ps), 16 at a time. The scalar decoding's values bit for bit:
// d (code - 16) is exact in fp32 (a 5-bit integer times an f16 scale), and the + 0 makes code 16 a
// +0 as there (d * 0 alone is -0 where d < 0).
void dequant_q5_0_512(const uint8_t* w, float* out, int64_t n) {
  const __m512 low_codes = _mm512_setr_ps(-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1);
  const __m512 high_codes = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i fifteen = _mm512_set1_epi32(15), sixteen = _mm512_set1_epi32(16);
  for (int64_t b = 0; b < n / 32; ++b, w += 22, out += 32) {
    const __m512 d = _mm512_set1_ps(load_f16(w));
    const __m512 lo_table = _mm512_add_ps(_mm512_mul_ps(d, low_codes), _mm512_setzero_ps());
    const __m512 hi_table = _mm512_add_ps(_mm512_mul_ps(d, high_codes), _mm512_setzero_ps());
    const uint32_t qh = u32_at(w + 2);
    const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 6)));
    __m512i lo = _mm512_and_si512(bytes, fifteen), hi = _mm512_srli_epi32(bytes, 4);
    lo = _mm512_mask_or_epi32(lo, static_cast<__mmask16>(qh), lo, sixteen);
    hi = _mm512_mask_or_epi32(hi, static_cast<__mmask16>(qh >> 16), hi, sixteen);
    _mm512_storeu_ps(out, _mm512_permutex2var_ps(lo_table, lo, hi_table));
    _mm512_storeu_ps(out + 16, _mm512_permutex2var_ps(lo_table, hi, hi_table));
  }
}

// Q8_0's, 16 codes a conversion and a multiply-add: code d + 0, as the scalar decoding (d * 0 alone is
// -0 where d < 0).
void dequant_q8_0_512(const uint8_t* w, float* out, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, w += 34, out += 32) {
    const __m512 d = _mm512_set1_ps(load_f16(w));
    for (int h = 0; h < 2; ++h) {
      const __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 + 16 * h));
      const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(codes));
      _mm512_storeu_ps(out + 16 * h, _mm512_fmadd_ps(q, d, _mm512_setzero_ps()));
    }
  }
}

void dequant_avx512(DType dtype, const uint8_t* w, float* out, int64_t n) {
  if (dtype == DType::kQ5_0) {
    dequant_q5_0_512(w, out, n);
  } else if (dtype == DType::kQ8_0) {
    dequant_q8_0_512(w, out, n);
  } else {
    quant_kernels_avx2().dequant(dtype, w, out, n);
  }
}

// The AVX-512 table: `base` (the AVX2 one) with the formats whose 256-bit AVX-512 build is faster.
QuantKernels make_avx512(QuantKernels k) {
  k.set_codes(DType::kQ5_0, dot_block<DType::kQ5_0, block_products_masked<DType::kQ5_0>>);
  k.set_codes(DType::kQ5_1, dot_block<DType::kQ5_1, block_products_masked<DType::kQ5_1>>);
  k.set_codes(DType::kIQ4_NL, dot_block<DType::kIQ4_NL, block_products_256<DType::kIQ4_NL>>);
  k.set_codes(DType::kMXFP4, dot_block<DType::kMXFP4, block_products_256<DType::kMXFP4>>);
  k.set_codes(DType::kQ2_K, dot_super<DType::kQ2_K, super_products_256<DType::kQ2_K>>);
  k.set_codes(DType::kQ4_K, dot_super_grouped<DType::kQ4_K, k4_group_products<false>>);
  k.set_codes(DType::kQ5_K, dot_super_grouped<DType::kQ5_K, k4_group_products<true>>);
  k.set_codes(DType::kQ6_K, dot_super_grouped<DType::kQ6_K, q6_group_products>);
  k.set_codes(DType::kIQ4_XS, dot_super<DType::kIQ4_XS, super_products_256<DType::kIQ4_XS>>);
  k.dequant = dequant_avx512;
  k.gemm_q4_k = gemm_k<DType::kQ4_K>;
  k.gemm_q5_k = gemm_k<DType::kQ5_K>;
  k.gemm_q6_k = gemm_k<DType::kQ6_K>;
  k.gemm_iq4_xs = gemm_k<DType::kIQ4_XS>;
  return k;
}

}  // namespace
}  // namespace minivllm::cpu
