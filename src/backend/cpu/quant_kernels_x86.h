// The x86 block kernels shared by the AVX2 and AVX-512 translation units (quant_kernels_avx2.cc,
// quant_kernels_avx512.cc): block layouts, scale loads, the lane-sum transpose and the row loop.
// Everything here is in an anonymous namespace on purpose: each file compiles its own copy with
// its own instruction set, so the linker can never hand the AVX-512 copy to an AVX2-only CPU.
// Include it only from those two files.
#pragma once

#include <immintrin.h>

#include <cstring>

#include "backend/cpu/quant_kernels.h"

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

// The 32 nibbles of a q4 block as int16: the 16 bytes widened once, then the low nibbles (elements
// 0-15) masked and the high ones (16-31) shifted down, both in 16-bit lanes.
inline void nibbles(const uint8_t* qs, __m256i* lo, __m256i* hi) {
  const __m256i bytes = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  *lo = _mm256_and_si256(bytes, _mm256_set1_epi16(15));
  *hi = _mm256_srli_epi16(bytes, 4);
}

inline int u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Eight f16 values, each the first two bytes of one of eight blocks `stride` bytes apart, as fp32.
inline __m256 f16x8_strided(const uint8_t* p, size_t stride) {
  __m128i h = _mm_cvtsi32_si128(u16(p));
  h = _mm_insert_epi16(h, u16(p + 1 * stride), 1);
  h = _mm_insert_epi16(h, u16(p + 2 * stride), 2);
  h = _mm_insert_epi16(h, u16(p + 3 * stride), 3);
  h = _mm_insert_epi16(h, u16(p + 4 * stride), 4);
  h = _mm_insert_epi16(h, u16(p + 5 * stride), 5);
  h = _mm_insert_epi16(h, u16(p + 6 * stride), 6);
  h = _mm_insert_epi16(h, u16(p + 7 * stride), 7);
  return _mm256_cvtph_ps(h);
}

// The three block formats as one kernel. For one block: the weights widened to int16 (lo: elements
// 0-15, hi: 16-31). For eight consecutive blocks: their scales d and the factors c that multiply
// the activation sums (Q4_1: m, Q4_0: -8 d, Q8_0: none).
template <DType T>
struct Block;
template <>
struct Block<DType::kQ8_0> {
  static constexpr size_t kBytes = 34;
  static constexpr bool kOffset = false;
  static void load(const uint8_t* w, __m256i* lo, __m256i* hi) {
    *lo = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2)));
    *hi = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 18)));
  }
  static float d(const uint8_t* w) { return load_f16(w); }
  static float c(const uint8_t*) { return 0; }
  static void scales8(const uint8_t* w, __m256* d, __m256* c) {
    *d = f16x8_strided(w, kBytes);
    *c = _mm256_setzero_ps();
  }
};
template <>
struct Block<DType::kQ4_0> {
  static constexpr size_t kBytes = 18;
  static constexpr bool kOffset = true;
  static void load(const uint8_t* w, __m256i* lo, __m256i* hi) { nibbles(w + 2, lo, hi); }
  static float d(const uint8_t* w) { return load_f16(w); }
  static float c(const uint8_t* w) { return -8.0f * load_f16(w); }
  static void scales8(const uint8_t* w, __m256* d, __m256* c) {
    *d = f16x8_strided(w, kBytes);
    *c = _mm256_mul_ps(*d, _mm256_set1_ps(-8.0f));
  }
};
template <>
struct Block<DType::kQ4_1> {
  static constexpr size_t kBytes = 20;
  static constexpr bool kOffset = true;
  static void load(const uint8_t* w, __m256i* lo, __m256i* hi) { nibbles(w + 4, lo, hi); }
  static float d(const uint8_t* w) { return load_f16(w); }
  static float c(const uint8_t* w) { return load_f16(w + 2); }
  static void scales8(const uint8_t* w, __m256* d, __m256* c) {
    *d = f16x8_strided(w, kBytes);
    *c = f16x8_strided(w + 2, kBytes);
  }
};

// The eight lane sums of p[0..7] as one vector, in block order: an 8 x 8 transpose folded into adds
// (unpacks of 32-bit, then 64-bit elements, then the two 128-bit halves). Cheaper than vphaddd,
// which is several micro-ops on Zen 3: 1.80 -> 1.71 ns per Q4_1 block.
inline __m256i lane_sums8(const __m256i* p) {
  __m256i t[4];  // t[i] = [a0+a2, b0+b2, a1+a3, b1+b3 | a4+a6, b4+b6, a5+a7, b5+b7] for a, b = p[2i], p[2i+1]
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_add_epi32(_mm256_unpacklo_epi32(p[2 * i], p[2 * i + 1]),
                            _mm256_unpackhi_epi32(p[2 * i], p[2 * i + 1]));
  }
  // [sums of the low halves of p[0..3] | sums of their high halves], then the same for p[4..7]
  const __m256i u0 = _mm256_add_epi32(_mm256_unpacklo_epi64(t[0], t[1]), _mm256_unpackhi_epi64(t[0], t[1]));
  const __m256i u1 = _mm256_add_epi32(_mm256_unpacklo_epi64(t[2], t[3]), _mm256_unpackhi_epi64(t[2], t[3]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

// How far ahead of the current block the weight rows are prefetched: the hardware prefetcher alone
// leaves these kernels well short of the memory's bandwidth (distances measured: docs/PERFORMANCE.md,
// "Decode past llama.cpp", "Stop 113").
constexpr int kPrefetchBytes = 8192;

// One group of eight blocks of one row into its accumulators: acc += (lane sums of p) * d * xd,
// and, for the formats with an offset, off += c * xs.
template <DType T>
inline void add_group(const __m256i* p, __m256 d, __m256 c, __m256 xd, __m256 xs, __m256* acc, __m256* off) {
  *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lane_sums8(p)), _mm256_mul_ps(d, xd), *acc);
  if (Block<T>::kOffset) *off = _mm256_fmadd_ps(c, xs, *off);
}

// R weight rows (row_bytes apart) against one activation row. Eight blocks at a time: the integer
// products of each block are summed across lanes into one int32 per block, so that the block scales
// are applied to eight blocks with one multiply (and loaded with one conversion), instead of a
// broadcast, a conversion and a multiply-add per block; the blocks past the last whole group take
// that per-block way.
// Products(w, xq): block w . the block's 32 activation codes, as 8 int32 partial sums (per ISA).
template <DType T, int R, __m256i (*Products)(const uint8_t*, const int16_t*)>
void dot_rows(const uint8_t* w, size_t row_bytes, const ActRow& x, int64_t blocks, float* out) {
  using B = Block<T>;
  __m256 acc[R], off[R];
  for (int r = 0; r < R; ++r) acc[r] = off[r] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    const __m256 xd = _mm256_loadu_ps(x.d + b);
    const __m256 xs = _mm256_loadu_ps(x.sum + b);
    for (int r = 0; r < R; ++r) {
      const uint8_t* wb = w + r * row_bytes + b * B::kBytes;
      for (size_t line = 0; line < 8 * B::kBytes; line += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(wb + kPrefetchBytes + line), _MM_HINT_T0);
      }
      __m256i p[8];
      for (int j = 0; j < 8; ++j) p[j] = Products(wb + j * B::kBytes, x.q + 32 * (b + j));
      __m256 d, c;
      B::scales8(wb, &d, &c);
      add_group<T>(p, d, c, xd, xs, &acc[r], &off[r]);
    }
  }
  // A last partial group (SmolLM2's rows of 576 are two groups and two blocks): each block's lane
  // sums are scaled by one broadcast, with no transpose of padding and no scales staged through
  // memory. Only the row's own blocks are read: the row may end the mapping.
  float tail[R] = {};
  for (; b < blocks; ++b) {
    const float xd = x.d[b], xs = x.sum[b];
    for (int r = 0; r < R; ++r) {
      const uint8_t* wb = w + r * row_bytes + b * B::kBytes;
      const __m256 p = _mm256_cvtepi32_ps(Products(wb, x.q + 32 * b));
      acc[r] = _mm256_fmadd_ps(p, _mm256_set1_ps(B::d(wb) * xd), acc[r]);
      if (B::kOffset) tail[r] += B::c(wb) * xs;
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_add_ps(acc[r], off[r])) + tail[r];
}

// A 32-element block's int16 codes (lo: elements 0-15, hi: 16-31) . its activation codes, as 8
// int32 partial sums. Built with VNNI (quant_kernels_avx512_vnni.cc), the second product and the
// add are one vpdpwssd: the same sums (no pair of int16 products overflows int32 here).
inline __m256i halves_products(__m256i lo, __m256i hi, const int16_t* xq) {
  const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
  const __m256i x_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 16));
#if defined(__AVX512VNNI__)
  return _mm256_dpwssd_epi32(_mm256_madd_epi16(lo, x_lo), hi, x_hi);
#else
  return _mm256_add_epi32(_mm256_madd_epi16(lo, x_lo), _mm256_madd_epi16(hi, x_hi));
#endif
}

// w . x over the 32 elements of block b, as 8 int32 partial sums, at 256 bits.
template <DType T>
__m256i block_products_256(const uint8_t* w, const int16_t* xq) {
  __m256i lo, hi;
  Block<T>::load(w, &lo, &hi);
  return halves_products(lo, hi, xq);
}

// Up to kDotRows rows per call: the activation loads and scales are shared by the rows, and the call
// overhead is paid once per four rows (batch-1 decode calls it for every four output features).
template <DType T, __m256i (*Products)(const uint8_t*, const int16_t*)>
void dot_block(const uint8_t* w, size_t row_bytes, int rows, const ActRow& x, int64_t blocks, float* out) {
  switch (rows) {
    case 4: dot_rows<T, 4, Products>(w, row_bytes, x, blocks, out); return;
    case 3: dot_rows<T, 3, Products>(w, row_bytes, x, blocks, out); return;
    case 2: dot_rows<T, 2, Products>(w, row_bytes, x, blocks, out); return;
    default: dot_rows<T, 1, Products>(w, row_bytes, x, blocks, out); return;
  }
}

}  // namespace
}  // namespace minivllm::cpu
