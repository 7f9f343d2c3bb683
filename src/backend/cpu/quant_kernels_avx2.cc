// AVX2 + FMA + F16C dot products of quant_kernels.h (this file alone is built with those flags;
// quant_kernels.cc calls it only after cpuid says the CPU has them). Per 32-element block: the
// weights widened to int16, vpmaddwd against the int16 activations, the int32 sums scaled once.
// The K-quants' kernels: quant_kernels_k_x86.h.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/quant_kernels_k_x86.h"
#include "common/quant_blocks.h"

namespace minivllm::cpu {
namespace {

inline __m256 load_bf16x8(const uint8_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline __m256 load_f16x8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

template <__m256 (*Load)(const uint8_t*), float (*Scalar)(const uint8_t*)>
float dot_16bit(const uint8_t* w, const float* x, int64_t k) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) {
    a0 = _mm256_fmadd_ps(Load(w + 2 * i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(Load(w + 2 * i + 16), _mm256_loadu_ps(x + i + 8), a1);
  }
  for (; i + 8 <= k; i += 8) a0 = _mm256_fmadd_ps(Load(w + 2 * i), _mm256_loadu_ps(x + i), a0);
  float acc = hsum(_mm256_add_ps(a0, a1));
  for (; i < k; ++i) acc += Scalar(w + 2 * i) * x[i];
  return acc;
}

inline float bf16_scalar(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return bf16_to_f32(v);
}

// 16 int8 values (as int16 lanes of v, 0 <= half < 2 picks 8 of them) scaled: v * d + m.
inline __m256 scale8(__m256i v16, int half, __m256 d, __m256 m) {
  const __m128i part = half == 0 ? _mm256_castsi256_si128(v16) : _mm256_extracti128_si256(v16, 1);
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(part)), d, m);
}

inline void store32(__m256i lo, __m256i hi, __m256 d, __m256 m, float* out) {
  _mm256_storeu_ps(out, scale8(lo, 0, d, m));
  _mm256_storeu_ps(out + 8, scale8(lo, 1, d, m));
  _mm256_storeu_ps(out + 16, scale8(hi, 0, d, m));
  _mm256_storeu_ps(out + 24, scale8(hi, 1, d, m));
}

// The decode_block formats' panels: each sub-block's codes widened and scaled, q d + c, bit for bit
// the scalar decoding (q d is exact in fp32 wherever c != 0, so the fused multiply-add rounds as the
// scalar multiply then add does; c = +0 elsewhere, as there).
template <DType T>
void dequant_block32(const uint8_t* w, float* out, int64_t n) {
  using B = Block<T>;
  for (int64_t b = 0; b < n / 32; ++b, w += B::kBytes, out += 32) {
    __m256i lo, hi;
    B::load(w, &lo, &hi);
    store32(lo, hi, _mm256_set1_ps(B::d(w)), _mm256_set1_ps(B::c(w)), out);
  }
}

template <DType T>
void dequant_super(const uint8_t* w, float* out, int64_t n) {
  using F = Super<T>;
  for (int64_t sb = 0; sb < n / 256; ++sb, w += F::kBytes, out += 256) {
    alignas(32) float d[16], c[16] = {};
    F::scales(w, d, c);
    for (int s = 0; s < 256 / F::kSub; ++s) {
      if constexpr (F::kSub == 16) {  // c: Q2_K's mins (exact products: 2-bit codes), else +0
        const __m256i q = F::codes(w, s);
        const __m256 ds = _mm256_set1_ps(d[s]), cs = _mm256_set1_ps(c[s]);
        _mm256_storeu_ps(out + 16 * s, scale8(q, 0, ds, cs));
        _mm256_storeu_ps(out + 16 * s + 8, scale8(q, 1, ds, cs));
      } else {
        __m256i lo, hi;
        F::codes(w, s, &lo, &hi);
        store32(lo, hi, _mm256_set1_ps(d[s]), _mm256_set1_ps(c[s]), out + 32 * s);
      }
    }
  }
}

void dequant(DType dtype, const uint8_t* w, float* out, int64_t n) {
  switch (dtype) {
    case DType::kQ5_0: dequant_block32<DType::kQ5_0>(w, out, n); return;
    case DType::kQ5_1: dequant_block32<DType::kQ5_1>(w, out, n); return;
    case DType::kIQ4_NL: dequant_block32<DType::kIQ4_NL>(w, out, n); return;
    case DType::kMXFP4: dequant_block32<DType::kMXFP4>(w, out, n); return;
    case DType::kQ2_K: dequant_super<DType::kQ2_K>(w, out, n); return;
    case DType::kQ3_K: dequant_super<DType::kQ3_K>(w, out, n); return;
    case DType::kQ4_K: dequant_super<DType::kQ4_K>(w, out, n); return;
    case DType::kQ5_K: dequant_super<DType::kQ5_K>(w, out, n); return;
    case DType::kQ6_K: dequant_super<DType::kQ6_K>(w, out, n); return;
    case DType::kIQ4_XS: dequant_super<DType::kIQ4_XS>(w, out, n); return;
    case DType::kQ8_0:
      for (int64_t b = 0; b < n / 32; ++b, w += 34, out += 32) {
        const __m256i lo = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2)));
        const __m256i hi = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 18)));
        store32(lo, hi, _mm256_set1_ps(load_f16(w)), _mm256_setzero_ps(), out);
      }
      return;
    case DType::kQ4_0:
      for (int64_t b = 0; b < n / 32; ++b, w += 18, out += 32) {
        __m256i lo, hi;
        nibbles(w + 2, &lo, &hi);
        const float d = load_f16(w);
        store32(lo, hi, _mm256_set1_ps(d), _mm256_set1_ps(-8.0f * d), out);
      }
      return;
    case DType::kQ4_1:
      for (int64_t b = 0; b < n / 32; ++b, w += 20, out += 32) {
        __m256i lo, hi;
        nibbles(w + 4, &lo, &hi);
        store32(lo, hi, _mm256_set1_ps(load_f16(w)), _mm256_set1_ps(load_f16(w + 2)), out);
      }
      return;
    case DType::kBF16:
    case DType::kF16: {
      int64_t i = 0;
      const bool bf = dtype == DType::kBF16;
      for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, bf ? load_bf16x8(w + 2 * i) : load_f16x8(w + 2 * i));
      for (; i < n; ++i) out[i] = bf ? bf16_scalar(w + 2 * i) : load_f16(w + 2 * i);
      return;
    }
    default:
      dequantize_to_f32(dtype, w, out, n);
  }
}

QuantKernels make_avx2() {
  QuantKernels k = quant_kernels(Isa::kScalar);
  k.dot_q8_0 = dot_block<DType::kQ8_0, block_products_256<DType::kQ8_0>>;
  k.dot_q4_0 = dot_block<DType::kQ4_0, block_products_256<DType::kQ4_0>>;
  k.dot_q4_1 = dot_block<DType::kQ4_1, block_products_256<DType::kQ4_1>>;
  k.dot_bf16 = dot_16bit<load_bf16x8, bf16_scalar>;
  k.dot_f16 = dot_16bit<load_f16x8, load_f16>;
  k.dequant = dequant;
  k.set_codes(DType::kQ5_0, dot_block<DType::kQ5_0, block_products_256<DType::kQ5_0>>);
  k.set_codes(DType::kQ5_1, dot_block<DType::kQ5_1, block_products_256<DType::kQ5_1>>);
  k.set_codes(DType::kIQ4_NL, dot_block<DType::kIQ4_NL, block_products_256<DType::kIQ4_NL>>);
  k.set_codes(DType::kQ2_K, dot_super<DType::kQ2_K, super_products_256<DType::kQ2_K>>);
  k.set_codes(DType::kQ3_K, dot_super<DType::kQ3_K, super_products_256<DType::kQ3_K>>);
  k.set_codes(DType::kQ4_K, dot_super_grouped<DType::kQ4_K, k4_group_products<false>>);
  k.set_codes(DType::kQ5_K, dot_super_grouped<DType::kQ5_K, k4_group_products<true>>);
  k.set_codes(DType::kQ6_K, dot_super_grouped<DType::kQ6_K, q6_group_products>);
  k.set_codes(DType::kIQ4_XS, dot_super<DType::kIQ4_XS, super_products_256<DType::kIQ4_XS>>);
  k.set_codes(DType::kMXFP4, dot_block<DType::kMXFP4, block_products_256<DType::kMXFP4>>);
  return k;
}

}  // namespace

const QuantKernels& quant_kernels_avx2() {
  static const QuantKernels kernels = make_avx2();
  return kernels;
}

}  // namespace minivllm::cpu
