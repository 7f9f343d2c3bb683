// AVX2 + FMA + F16C dot products of quant_kernels.h (this file alone is built with those flags;
// quant_kernels.cc calls it only after cpuid says the CPU has them). Per 32-element block: the
// weights widened to int16, vpmaddwd against the int16 activations, the int32 sums scaled once.
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/quant_kernels.h"
#include "common/quant_blocks.h"

namespace minivllm::cpu {
namespace {

inline float load_f16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return _cvtsh_ss(v);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// sum over 32 lanes of w (two int16 vectors: elements 0-15, 16-31) times x, as 8 int32 partial sums.
inline __m256i madd32(__m256i w_lo, __m256i w_hi, const ActBlock& x) {
  const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q));
  const __m256i x_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + 16));
  return _mm256_add_epi32(_mm256_madd_epi16(w_lo, x_lo), _mm256_madd_epi16(w_hi, x_hi));
}

// The 32 nibbles of a q4 block as int16: the 16 bytes widened once, then the low nibbles (elements
// 0-15) masked and the high ones (16-31) shifted down, both in 16-bit lanes.
inline void nibbles(const uint8_t* qs, __m256i* lo, __m256i* hi) {
  const __m256i bytes = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  *lo = _mm256_and_si256(bytes, _mm256_set1_epi16(15));
  *hi = _mm256_srli_epi16(bytes, 4);
}

// The three block formats as one kernel: the weights of one block widened to int16 (lo: elements
// 0-15, hi: 16-31), its scale d, and the per-block term that multiplies the activation sum
// (Q4_1: +m, Q4_0: -8 d, Q8_0: none).
template <DType T>
struct Block;
template <>
struct Block<DType::kQ8_0> {
  static constexpr size_t kBytes = 34;
  static void load(const uint8_t* w, __m256i* lo, __m256i* hi, float* d, float* c) {
    *lo = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2)));
    *hi = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 18)));
    *d = load_f16(w);
    *c = 0;
  }
};
template <>
struct Block<DType::kQ4_0> {
  static constexpr size_t kBytes = 18;
  static void load(const uint8_t* w, __m256i* lo, __m256i* hi, float* d, float* c) {
    nibbles(w + 2, lo, hi);
    *d = load_f16(w);
    *c = -8.0f * *d;
  }
};
template <>
struct Block<DType::kQ4_1> {
  static constexpr size_t kBytes = 20;
  static void load(const uint8_t* w, __m256i* lo, __m256i* hi, float* d, float* c) {
    nibbles(w + 4, lo, hi);
    *d = load_f16(w);
    *c = load_f16(w + 2);
  }
};

// One row: two accumulators (even and odd blocks), or the FMA latency chain bounds the loop.
template <DType T>
float dot_block(const uint8_t* w, const ActBlock* x, int64_t blocks) {
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  float extra = 0;
  for (int64_t b = 0; b < blocks; ++b, w += Block<T>::kBytes) {
    __m256i lo, hi;
    float d, c;
    Block<T>::load(w, &lo, &hi, &d, &c);
    acc[b & 1] = _mm256_fmadd_ps(_mm256_set1_ps(d * x[b].d), _mm256_cvtepi32_ps(madd32(lo, hi, x[b])), acc[b & 1]);
    extra += c * x[b].sum;
  }
  return hsum(_mm256_add_ps(acc[0], acc[1])) + extra;
}

// Two rows against one activation row: the activation loads and scales are shared, and the two
// rows' chains run side by side (batch-1 decode).
template <DType T>
void dot2_block(const uint8_t* w0, const uint8_t* w1, const ActBlock* x, int64_t blocks, float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  float e0 = 0, e1 = 0;
  for (int64_t b = 0; b < blocks; ++b, w0 += Block<T>::kBytes, w1 += Block<T>::kBytes) {
    const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].q));
    const __m256i x_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].q + 16));
    __m256i lo, hi;
    float d, c;
    Block<T>::load(w0, &lo, &hi, &d, &c);
    __m256i p = _mm256_add_epi32(_mm256_madd_epi16(lo, x_lo), _mm256_madd_epi16(hi, x_hi));
    a0 = _mm256_fmadd_ps(_mm256_set1_ps(d * x[b].d), _mm256_cvtepi32_ps(p), a0);
    e0 += c * x[b].sum;
    Block<T>::load(w1, &lo, &hi, &d, &c);
    p = _mm256_add_epi32(_mm256_madd_epi16(lo, x_lo), _mm256_madd_epi16(hi, x_hi));
    a1 = _mm256_fmadd_ps(_mm256_set1_ps(d * x[b].d), _mm256_cvtepi32_ps(p), a1);
    e1 += c * x[b].sum;
  }
  out[0] = hsum(a0) + e0;
  out[1] = hsum(a1) + e1;
}

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

void dequant(DType dtype, const uint8_t* w, float* out, int64_t n) {
  switch (dtype) {
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

const QuantKernels kAvx2{dot_block<DType::kQ8_0>,
                         dot_block<DType::kQ4_0>,
                         dot_block<DType::kQ4_1>,
                         dot_16bit<load_bf16x8, bf16_scalar>,
                         dot_16bit<load_f16x8, load_f16>,
                         dequant,
                         dot2_block<DType::kQ8_0>,
                         dot2_block<DType::kQ4_0>,
                         dot2_block<DType::kQ4_1>};

}  // namespace

const QuantKernels& quant_kernels_avx2() { return kAvx2; }

}  // namespace minivllm::cpu
