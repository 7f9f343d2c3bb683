// The x86 kernels of the formats decoded by common/quant_blocks.h's decode_block (Q5_0, Q5_1,
// IQ4_NL in 32-element blocks; Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS in 256-element super-blocks), shared
// by the AVX2 and AVX-512 files like quant_kernels_x86.h (anonymous namespace: one copy per ISA).
// The integer codes of a sub-block are unpacked into int16 lanes and multiplied with the int16
// activation codes; the float scales (super-block scale times sub-block scale) are applied to eight
// sub-blocks at once, after the lane sums: the same row loop as the legacy formats, with a
// super-block's eight 32-element sub-blocks as one group (two groups of 16-element ones for Q2_K,
// Q3_K and Q6_K, whose scales change every 16 elements; Q2_K's mins too).
#pragma once

#include "backend/cpu/quant_kernels_x86.h"
#include "common/quant_blocks.h"

namespace minivllm::cpu {
namespace {

// int16 lanes with bit i of a 16-bit word set in lane i.
inline __m256i lane_bits() {
  return _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
                           static_cast<int16_t>(0x8000));
}

// 16 in each int16 lane whose bit of `bits` is set.
inline __m256i bit4_of(uint32_t bits) {
  const __m256i m = lane_bits();
  const __m256i set = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16(static_cast<int16_t>(bits)), m), m);
  return _mm256_and_si256(set, _mm256_set1_epi16(16));
}

inline uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// 32 nibble codes looked up in a 16-entry int8 table (IQ4_NL's, MXFP4's): lo = elements 0-15, hi = 16-31.
inline void table_codes(const int8_t* values, const uint8_t* qs, __m256i* lo, __m256i* hi) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(values));
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i m4 = _mm_set1_epi8(15);
  *lo = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(table, _mm_and_si128(bytes, m4)));
  *hi = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(bytes, 4), m4)));
}
inline void iq4_codes(const uint8_t* qs, __m256i* lo, __m256i* hi) { table_codes(kIq4NlValues, qs, lo, hi); }

// Q5_0's codes are taken as nibble + 16 * fifth bit, 0..31; its bias of -16 multiplies the
// activation sums instead, as Q4_0's -8 does.
template <>
struct Block<DType::kQ5_0> {
  static constexpr size_t kBytes = 22;
  static constexpr bool kOffset = true;
  static void load(const uint8_t* w, __m256i* lo, __m256i* hi) {
    const uint32_t qh = u32_at(w + 2);
    nibbles(w + 6, lo, hi);
    *lo = _mm256_or_si256(*lo, bit4_of(qh & 0xffff));
    *hi = _mm256_or_si256(*hi, bit4_of(qh >> 16));
  }
  static float d(const uint8_t* w) { return load_f16(w); }
  static float c(const uint8_t* w) { return -16.0f * load_f16(w); }
  static void scales8(const uint8_t* w, __m256* d, __m256* c) {
    *d = f16x8_strided(w, kBytes);
    *c = _mm256_mul_ps(*d, _mm256_set1_ps(-16.0f));
  }
};
template <>
struct Block<DType::kQ5_1> {
  static constexpr size_t kBytes = 24;
  static constexpr bool kOffset = true;
  static void load(const uint8_t* w, __m256i* lo, __m256i* hi) {
    const uint32_t qh = u32_at(w + 4);
    nibbles(w + 8, lo, hi);
    *lo = _mm256_or_si256(*lo, bit4_of(qh & 0xffff));
    *hi = _mm256_or_si256(*hi, bit4_of(qh >> 16));
  }
  static float d(const uint8_t* w) { return load_f16(w); }
  static float c(const uint8_t* w) { return load_f16(w + 2); }
  static void scales8(const uint8_t* w, __m256* d, __m256* c) {
    *d = f16x8_strided(w, kBytes);
    *c = f16x8_strided(w + 2, kBytes);
  }
};
template <>
struct Block<DType::kIQ4_NL> {
  static constexpr size_t kBytes = 18;
  static constexpr bool kOffset = false;
  static void load(const uint8_t* w, __m256i* lo, __m256i* hi) { iq4_codes(w + 2, lo, hi); }
  static float d(const uint8_t* w) { return load_f16(w); }
  static float c(const uint8_t*) { return 0; }
  static void scales8(const uint8_t* w, __m256* d, __m256* c) {
    *d = f16x8_strided(w, kBytes);
    *c = _mm256_setzero_ps();
  }
};
template <>
struct Block<DType::kMXFP4> {
  static constexpr size_t kBytes = 17;
  static constexpr bool kOffset = false;
  static void load(const uint8_t* w, __m256i* lo, __m256i* hi) { table_codes(kMxfp4Values, w + 1, lo, hi); }
  static float d(const uint8_t* w) { return mxfp4_scale(w[0]); }
  static float c(const uint8_t*) { return 0; }
  // mxfp4_scale of eight blocks' exponents at once: (e - 1) << 23, or the denormal 0x00200000 << e for e < 2.
  static void scales8(const uint8_t* w, __m256* d, __m256* c) {
    const __m256i e = _mm256_setr_epi32(w[0], w[kBytes], w[2 * kBytes], w[3 * kBytes], w[4 * kBytes], w[5 * kBytes],
                                        w[6 * kBytes], w[7 * kBytes]);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i denormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    *d = _mm256_castsi256_ps(_mm256_blendv_epi8(normal, denormal, small));
    *c = _mm256_setzero_ps();
  }
};

// Super-block formats. kSub: elements per scale. codes(w, s, ...): sub-block s as int16 (32-element
// formats: lo = elements 0-15, hi = 16-31; 16-element ones: one vector). scales(w, d, c): the float
// scale of every sub-block, and for kOffset formats the term c[s] that multiplies the activation
// sum of 32-element sub-block s.
template <DType T>
struct Super;

// Q4_K / Q5_K's eight 6-bit scales and mins as bytes (layout: common/quant_blocks_k.cc).
inline void k4_scales_mins(const uint8_t* s, uint8_t sc[8], uint8_t m[8]) {
  const uint32_t a0 = u32_at(s), a1 = u32_at(s + 4), a2 = u32_at(s + 8);
  const uint32_t sc_lo = a0 & 0x3f3f3f3fu, m_lo = a1 & 0x3f3f3f3fu;
  const uint32_t sc_hi = (a2 & 0x0f0f0f0fu) | (((a0 >> 6) & 0x03030303u) << 4);
  const uint32_t m_hi = ((a2 >> 4) & 0x0f0f0f0fu) | (((a1 >> 6) & 0x03030303u) << 4);
  std::memcpy(sc, &sc_lo, 4);
  std::memcpy(sc + 4, &sc_hi, 4);
  std::memcpy(m, &m_lo, 4);
  std::memcpy(m + 4, &m_hi, 4);
}

inline __m256 u8x8_to_ps(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// The four-bit codes of Q4_K / Q5_K sub-block s: nibbles of 32 bytes, low ones for even s.
inline void k4_nibbles(const uint8_t* qs, int s, __m256i* lo, __m256i* hi) {
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * (s / 2)));
  const __m256i nib = _mm256_and_si256((s & 1) ? _mm256_srli_epi16(bytes, 4) : bytes, _mm256_set1_epi8(15));
  *lo = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(nib));
  *hi = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(nib, 1));
}

inline void k4_scales(const uint8_t* w, float* d, float* c) {
  alignas(8) uint8_t sc[8], m[8];
  k4_scales_mins(w + 4, sc, m);
  _mm256_storeu_ps(d, _mm256_mul_ps(_mm256_set1_ps(load_f16(w)), u8x8_to_ps(sc)));
  _mm256_storeu_ps(c, _mm256_mul_ps(_mm256_set1_ps(-load_f16(w + 2)), u8x8_to_ps(m)));
}

template <>
struct Super<DType::kQ4_K> {
  static constexpr bool kMins16 = false;
  static constexpr size_t kBytes = 144;
  static constexpr int kSub = 32;
  static constexpr bool kOffset = true;
  static void codes(const uint8_t* w, int s, __m256i* lo, __m256i* hi) { k4_nibbles(w + 16, s, lo, hi); }
  static void scales(const uint8_t* w, float* d, float* c) { k4_scales(w, d, c); }
};
template <>
struct Super<DType::kQ5_K> {
  static constexpr bool kMins16 = false;
  static constexpr size_t kBytes = 176;
  static constexpr int kSub = 32;
  static constexpr bool kOffset = true;
  static void codes(const uint8_t* w, int s, __m256i* lo, __m256i* hi) {
    k4_nibbles(w + 48, s, lo, hi);
    // bit s of qh[l] is bit 4 of element l's code
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16));
    const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << s));
    const __m256i b16 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit), _mm256_set1_epi8(16));
    *lo = _mm256_or_si256(*lo, _mm256_cvtepu8_epi16(_mm256_castsi256_si128(b16)));
    *hi = _mm256_or_si256(*hi, _mm256_cvtepu8_epi16(_mm256_extracti128_si256(b16, 1)));
  }
  static void scales(const uint8_t* w, float* d, float* c) { k4_scales(w, d, c); }
};
template <>
struct Super<DType::kIQ4_XS> {
  static constexpr bool kMins16 = false;
  static constexpr size_t kBytes = 136;
  static constexpr int kSub = 32;
  static constexpr bool kOffset = false;
  static void codes(const uint8_t* w, int s, __m256i* lo, __m256i* hi) { iq4_codes(w + 8 + 16 * s, lo, hi); }
  static void scales(const uint8_t* w, float* d, float*) {
    const float sd = load_f16(w);
    const int scales_h = u16(w + 2);
    for (int j = 0; j < 8; ++j) {
      const int ls = ((w[4 + j / 2] >> (4 * (j & 1))) & 15) | (((scales_h >> (2 * j)) & 3) << 4);
      d[j] = sd * static_cast<float>(ls - 32);
    }
  }
};
// Element e = 128 n + 32 k + l; 16-element sub-block s = 8 n + 2 k + l / 16.
template <>
struct Super<DType::kQ6_K> {
  static constexpr bool kMins16 = false;
  static constexpr size_t kBytes = 210;
  static constexpr int kSub = 16;
  static constexpr bool kOffset = false;
  // The 32 code bytes (0..63, before the bias of -32) of the run of elements 128 n + 32 k + l, l < 32:
  // one 256-bit load of ql and one of qh. 16-element sub-blocks 8 n + 2 k and 8 n + 2 k + 1 are its
  // two halves.
  static __m256i run_codes(const uint8_t* w, int n, int k) {
    const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 64 * n + 32 * (k & 1)));
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 128 + 32 * n));
    const __m256i low = _mm256_and_si256(k >= 2 ? _mm256_srli_epi16(ql, 4) : ql, _mm256_set1_epi8(15));
    const __m256i high = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), _mm256_set1_epi8(3));
    return _mm256_or_si256(low, _mm256_slli_epi16(high, 4));  // high <= 3: no carry across bytes
  }
  // 16 code bytes as int16 with the bias applied.
  static __m256i biased(__m128i code) { return _mm256_sub_epi16(_mm256_cvtepu8_epi16(code), _mm256_set1_epi16(32)); }
  static __m256i codes(const uint8_t* w, int s) {
    const __m256i run = run_codes(w, s / 8, (s / 2) % 4);
    return biased(s % 2 ? _mm256_extracti128_si256(run, 1) : _mm256_castsi256_si128(run));
  }
  // Sub-blocks s and s + 1 (s even) . their activation codes, from one run_codes where codes() would
  // make it twice.
  static void pair_products(const uint8_t* w, int s, const int16_t* xq, __m256i* p0, __m256i* p1) {
    const __m256i run = run_codes(w, s / 8, (s / 2) % 4);
    *p0 = _mm256_madd_epi16(biased(_mm256_castsi256_si128(run)),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)));
    *p1 = _mm256_madd_epi16(biased(_mm256_extracti128_si256(run, 1)),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 16)));
  }
  static void scales(const uint8_t* w, float* d, float*) {
    const __m256 sd = _mm256_set1_ps(load_f16(w + 208));
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 192));
    _mm256_storeu_ps(d, _mm256_mul_ps(sd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc))));
    _mm256_storeu_ps(d + 8, _mm256_mul_ps(sd, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)))));
  }
};
template <>
struct Super<DType::kQ3_K> {
  static constexpr bool kMins16 = false;
  static constexpr size_t kBytes = 110;
  static constexpr int kSub = 16;
  static constexpr bool kOffset = false;
  static __m256i codes(const uint8_t* w, int s) {
    const int n = s / 8, k = (s / 2) % 4, half = s % 2;
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 32 + 32 * n + 16 * half));
    const __m128i hm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 * half));
    const __m128i low = _mm_and_si128(_mm_srl_epi16(qs, _mm_cvtsi32_si128(2 * k)), _mm_set1_epi8(3));
    const __m128i bit = _mm_set1_epi8(static_cast<char>(1 << (4 * n + k)));
    // 4 where the high bit is clear
    const __m128i minus = _mm_andnot_si128(_mm_cmpeq_epi8(_mm_and_si128(hm, bit), bit), _mm_set1_epi8(4));
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(low, minus));
  }
  static void scales(const uint8_t* w, float* d, float*) {
    const float sd = load_f16(w + 108);
    const uint8_t* sc = w + 96;
    for (int i = 0; i < 16; ++i) {
      const int low = i < 8 ? sc[i] & 15 : sc[i - 8] >> 4;
      const int high = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
      d[i] = sd * static_cast<float>((low | (high << 4)) - 32);
    }
  }
};

// Q2_K: 2-bit codes with a 4-bit scale and a 4-bit min every 16 elements (quant_blocks_k.cc).
template <>
struct Super<DType::kQ2_K> {
  static constexpr bool kMins16 = true;  // c[s] multiplies the activation sum of 16-element sub-block s
  static constexpr size_t kBytes = 84;
  static constexpr int kSub = 16;
  static constexpr bool kOffset = false;
  static __m256i codes(const uint8_t* w, int s) {
    const int n = s / 8, k = (s / 2) % 4, half = s % 2;
    const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 + 32 * n + 16 * half));
    return _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srl_epi16(qs, _mm_cvtsi32_si128(2 * k)), _mm_set1_epi8(3)));
  }
  static void scales(const uint8_t* w, float* d, float* c) {
    const __m256 sd = _mm256_set1_ps(load_f16(w + 80)), smin = _mm256_set1_ps(-load_f16(w + 82));
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
    const __m128i lo = _mm_and_si128(sc, _mm_set1_epi8(15));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(15));
    _mm256_storeu_ps(d, _mm256_mul_ps(sd, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo))));
    _mm256_storeu_ps(d + 8, _mm256_mul_ps(sd, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)))));
    _mm256_storeu_ps(c, _mm256_mul_ps(smin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi))));
    _mm256_storeu_ps(c + 8, _mm256_mul_ps(smin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)))));
  }
};

// Sub-block s of super-block w . its activation codes, as 8 int32 partial sums (the 256-bit way;
// the AVX-512 file has its own for 32-element sub-blocks).
template <DType T>
__m256i super_products_256(const uint8_t* w, int s, const int16_t* xq) {
  using F = Super<T>;
  if constexpr (F::kSub == 16) {
    return _mm256_madd_epi16(F::codes(w, s), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq)));
  } else {
    __m256i lo, hi;
    F::codes(w, s, &lo, &hi);
    return halves_products(lo, hi, xq);
  }
}

// Group g's eight sub-blocks (8 g .. 8 g + 7) of super-block w . their activation codes (xq: the
// group's), one Products call a sub-block; Q6_K takes them in pairs from one run_codes. The group
// functions are forced inline: called through a template argument, GCC otherwise kept them calls
// (PERFORMANCE.md, "Stop 113").
template <DType T, __m256i (*Products)(const uint8_t*, int, const int16_t*)>
[[gnu::always_inline]] inline void each_products(const uint8_t* w, int g, const int16_t* xq, __m256i* p) {
  using F = Super<T>;
  if constexpr (requires { &F::pair_products; }) {
    for (int j = 0; j < 8; j += 2) F::pair_products(w, 8 * g + j, xq + F::kSub * j, &p[j], &p[j + 1]);
  } else {
    for (int j = 0; j < 8; ++j) p[j] = Products(w, 8 * g + j, xq + F::kSub * j);
  }
}

// The AVX2 group products of Q4_K / Q5_K: all eight 32-element sub-blocks. Each 16 bytes of nibbles
// are widened to int16 once and give two sub-blocks' codes (low nibbles: sub-block 2q, high: 2q + 1),
// so a super-block takes 8 widening shuffles where codes() takes 24 (three a sub-block: the shuffle
// ports were the limit). The integer sums are codes()'s, lane for lane.
template <bool kFifth>
[[gnu::always_inline]] inline void k4_group_products(const uint8_t* w, int, const int16_t* xq, __m256i* p) {
  const uint8_t* qs = w + (kFifth ? 48 : 16);
  const __m256i m4 = _mm256_set1_epi16(15);
  __m256i h[2];
  if constexpr (kFifth) {  // qh[l] x 16: bit s of qh[l] (bit 4 of sub-block s's element l) at bit 4 + s
    for (int half = 0; half < 2; ++half) {
      h[half] = _mm256_slli_epi16(
          _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16 + 16 * half))), 4);
    }
  }
  for (int q = 0; q < 4; ++q) {
    __m256i lo[2], hi[2];
    for (int half = 0; half < 2; ++half) {  // elements 16 half .. 16 half + 15 of both sub-blocks
      const __m256i b =
          _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 32 * q + 16 * half)));
      lo[half] = _mm256_and_si256(b, m4);
      hi[half] = _mm256_srli_epi16(b, 4);
      if constexpr (kFifth) {
        const __m256i sixteen = _mm256_set1_epi16(16);
        lo[half] = _mm256_or_si256(lo[half], _mm256_and_si256(_mm256_srli_epi16(h[half], 2 * q), sixteen));
        hi[half] = _mm256_or_si256(hi[half], _mm256_and_si256(_mm256_srli_epi16(h[half], 2 * q + 1), sixteen));
      }
    }
    p[2 * q] = halves_products(lo[0], lo[1], xq + 64 * q);
    p[2 * q + 1] = halves_products(hi[0], hi[1], xq + 64 * q + 32);
  }
}

// The AVX2 group products of Q6_K: group n's eight 16-element sub-blocks (elements 128 n + 32 k + l,
// sub-block 8 n + 2 k + l / 16), their ql and qh bytes widened to int16 once for all four k (6
// shuffles for 128 codes, where run_codes then biased() take 12), the code's two high bits moved
// into place with one shift each. The integer sums are pair_products', lane for lane.
[[gnu::always_inline]] inline void q6_group_products(const uint8_t* w, int n, const int16_t* xq, __m256i* p) {
  const __m256i m4 = _mm256_set1_epi16(15), m3 = _mm256_set1_epi16(0x30), bias = _mm256_set1_epi16(32);
  for (int half = 0; half < 2; ++half) {  // l in [16 half, 16 half + 16)
    const auto widen = [&](const uint8_t* b) {
      return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * half)));
    };
    const __m256i h = widen(w + 128 + 32 * n);
    const __m256i ql[2] = {widen(w + 64 * n), widen(w + 64 * n + 32)};  // k = 0, 2 and k = 1, 3
    const __m256i high[4] = {_mm256_slli_epi16(h, 4), _mm256_slli_epi16(h, 2), h, _mm256_srli_epi16(h, 2)};
    for (int k = 0; k < 4; ++k) {
      const __m256i low = k < 2 ? _mm256_and_si256(ql[k], m4) : _mm256_srli_epi16(ql[k - 2], 4);
      const __m256i code = _mm256_sub_epi16(_mm256_or_si256(low, _mm256_and_si256(high[k], m3)), bias);
      p[2 * k + half] =
          _mm256_madd_epi16(code, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * k + 16 * half)));
    }
  }
}

// R weight rows of super-blocks against one activation row (`blocks` 32-element blocks, a multiple
// of 8). Per super-block and row: the sub-blocks' scales decoded once, then groups of eight
// sub-blocks as in dot_rows, their products from Group.
template <DType T, int R, void (*Group)(const uint8_t*, int, const int16_t*, __m256i*)>
void dot_super_rows(const uint8_t* w, size_t row_bytes, const ActRow& x, int64_t blocks, float* out) {
  using F = Super<T>;
  constexpr int kGroups = 256 / F::kSub / 8;
  __m256 acc[R], off[R];
  for (int r = 0; r < R; ++r) acc[r] = off[r] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < blocks / 8; ++sb) {
    const float* xd = x.d + 8 * sb;
    __m256 xdv[kGroups];
    if constexpr (kGroups == 1) {
      xdv[0] = _mm256_loadu_ps(xd);
    } else {  // a 32-element block's activation scale for each of its two 16-element sub-blocks
      const __m256i twice = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
      xdv[0] = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(xd)), twice);
      xdv[1] = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(xd + 4)), twice);
    }
    const int16_t* xq = x.q + 256 * sb;
    // Q2_K's mins: the activation sum of each 16-element sub-block, once for all R rows.
    __m256 xsum16[kGroups];
    if constexpr (F::kMins16) {
      const __m256i ones = _mm256_set1_epi16(1);
      for (int g = 0; g < kGroups; ++g) {
        __m256i p[8];
        for (int j = 0; j < 8; ++j) {
          p[j] = _mm256_madd_epi16(ones, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 16 * (8 * g + j))));
        }
        xsum16[g] = _mm256_mul_ps(_mm256_cvtepi32_ps(lane_sums8(p)), xdv[g]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const uint8_t* wb = w + r * row_bytes + sb * F::kBytes;
      for (size_t line = 0; line < F::kBytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(wb + kPrefetchBytes + line), _MM_HINT_T0);
      }
      alignas(32) float d[16], c[16];
      F::scales(wb, d, c);
      for (int g = 0; g < kGroups; ++g) {
        __m256i p[8];
        Group(wb, g, xq + 8 * F::kSub * g, p);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lane_sums8(p)), _mm256_mul_ps(_mm256_load_ps(d + 8 * g), xdv[g]),
                                 acc[r]);
      }
      if constexpr (F::kOffset) off[r] = _mm256_fmadd_ps(_mm256_load_ps(c), _mm256_loadu_ps(x.sum + 8 * sb), off[r]);
      if constexpr (F::kMins16) {
        for (int g = 0; g < kGroups; ++g) off[r] = _mm256_fmadd_ps(_mm256_load_ps(c + 8 * g), xsum16[g], off[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_add_ps(acc[r], off[r]));
}

// The DotFn of a super-block format whose groups of eight sub-blocks Group multiplies.
template <DType T, void (*Group)(const uint8_t*, int, const int16_t*, __m256i*)>
void dot_super_grouped(const uint8_t* w, size_t row_bytes, int rows, const ActRow& x, int64_t blocks, float* out) {
  switch (rows) {
    case 4: dot_super_rows<T, 4, Group>(w, row_bytes, x, blocks, out); return;
    case 3: dot_super_rows<T, 3, Group>(w, row_bytes, x, blocks, out); return;
    case 2: dot_super_rows<T, 2, Group>(w, row_bytes, x, blocks, out); return;
    default: dot_super_rows<T, 1, Group>(w, row_bytes, x, blocks, out); return;
  }
}

// The DotFn of a super-block format whose sub-blocks Products multiplies one at a time.
template <DType T, __m256i (*Products)(const uint8_t*, int, const int16_t*)>
void dot_super(const uint8_t* w, size_t row_bytes, int rows, const ActRow& x, int64_t blocks, float* out) {
  dot_super_grouped<T, each_products<T, Products>>(w, row_bytes, rows, x, blocks, out);
}

}  // namespace
}  // namespace minivllm::cpu
