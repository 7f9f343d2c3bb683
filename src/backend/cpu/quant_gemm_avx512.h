// The K-quant GEMMs of quant_kernels.h (QuantKernels::gemm) at 512 bits: batches of a few rows
// (decode with several sequences) on Q4_K / Q5_K / Q6_K / IQ4_XS weights, without the fp32 panels
// that sgemm needs. Each weight row is decoded once into int16 codes with its sub-block scale
// folded in (Q4_K: code x 6-bit scale <= 945; Q6_K: (code - 32) x int8 scale, |.| <= 4,096, the
// largest of the four), then multiplied with every activation row (SuperActs: int16, one scale a
// super-block), so a super-block's 256 products sum in int32 lanes (at most 16 products a lane:
// 16 x 4,096 x 32,767 < 2^31) and only the two super-block scales are applied in fp32. Register
// tiles of kTileW weight rows by kTileX activation rows share each load. Built into the two
// AVX-512 tables: with VNNI a product and its add are one vpdpwssd. Included only from
// quant_kernels_avx512.h (anonymous namespace: one copy per ISA).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backend/cpu/quant_kernels_k_x86.h"

namespace minivllm::cpu {
namespace {

inline __m512i add_products(__m512i acc, __m512i w, __m512i x) {
#ifdef __AVX512VNNI__
  return _mm512_dpwssd_epi32(acc, w, x);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(w, x));
#endif
}

// One weight row decoded for the GEMM: w[e] = d[e / 256] * q[e] + c[e / 32] (c: Q4_K / Q5_K's mins).
struct GemmRow {
  int16_t* q;
  float* d;
  float* c;
};

inline __m512i load_i16x32(const int16_t* p) { return _mm512_loadu_si512(p); }

// The 16 lanes summed. The halves are taken by the masked extract with a zero source: GCC 12's
// _mm512_reduce_add_ps and _mm512_castps512_ps256 pass an undefined one and warn (-Werror).
inline float hsum512(__m512 v) {
  const __m512d pd = _mm512_castps_pd(v);
  const __m256 lo = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xff, pd, 0));
  const __m256 hi = _mm256_castpd_ps(_mm512_mask_extractf64x4_pd(_mm256_setzero_pd(), 0xff, pd, 1));
  return hsum(_mm256_add_ps(lo, hi));
}

template <DType T>
void decode_gemm_row(const uint8_t* w, int64_t k, const GemmRow& r);

// Q4_K and Q5_K (Q4_K's layout with a fifth bit in qh: codes 0..31, x scale <= 1,953), the same
// scales and mins: each 32 bytes of nibbles hold sub-block 2p in the low nibbles, 2p + 1 in the high.
template <DType T>
void decode_k4_row(const uint8_t* w, int64_t k, const GemmRow& r) {
  constexpr bool kFifth = T == DType::kQ5_K;
  constexpr size_t kQs = kFifth ? 48 : 16;  // the nibbles' offset: Q5_K's qh (32 bytes) comes first
  for (int64_t sb = 0; sb < k / 256; ++sb, w += Super<T>::kBytes) {
    alignas(8) uint8_t sc[8], m[8];
    k4_scales_mins(w + 4, sc, m);
    r.d[sb] = load_f16(w);
    const float dmin = load_f16(w + 2);
    int16_t* q = r.q + 256 * sb;
    for (int p = 0; p < 4; ++p) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + kQs + 32 * p));
      __m256i lo = _mm256_and_si256(bytes, _mm256_set1_epi8(15));
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), _mm256_set1_epi8(15));
      if constexpr (kFifth) {  // bit s of qh[l] is bit 4 of sub-block s's element l (added: bit 4 is clear)
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16));
        const __m256i sixteen = _mm256_set1_epi8(16);
        lo = _mm256_mask_add_epi8(lo, _mm256_test_epi8_mask(qh, _mm256_set1_epi8(static_cast<char>(1 << (2 * p)))), lo,
                                 sixteen);
        hi = _mm256_mask_add_epi8(hi, _mm256_test_epi8_mask(qh, _mm256_set1_epi8(static_cast<char>(2 << (2 * p)))), hi,
                                 sixteen);
      }
      _mm512_storeu_si512(q + 64 * p, _mm512_mullo_epi16(_mm512_cvtepu8_epi16(lo), _mm512_set1_epi16(sc[2 * p])));
      _mm512_storeu_si512(q + 64 * p + 32,
                          _mm512_mullo_epi16(_mm512_cvtepu8_epi16(hi), _mm512_set1_epi16(sc[2 * p + 1])));
    }
    for (int j = 0; j < 8; ++j) r.c[8 * sb + j] = -dmin * static_cast<float>(m[j]);
  }
}

template <>
void decode_gemm_row<DType::kQ4_K>(const uint8_t* w, int64_t k, const GemmRow& r) {
  decode_k4_row<DType::kQ4_K>(w, k, r);
}

template <>
void decode_gemm_row<DType::kQ5_K>(const uint8_t* w, int64_t k, const GemmRow& r) {
  decode_k4_row<DType::kQ5_K>(w, k, r);
}

// Sub-block s's 32 int16 codes (lo: elements 0-15, hi: 16-31) times its scale.
inline __m512i scaled_codes(__m256i lo, __m256i hi, int scale) {
  return _mm512_mullo_epi16(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), _mm512_set1_epi16(scale));
}

// IQ4_XS: table values -127..113 times a 6-bit scale - 32, |.| <= 4,064; no mins.
template <>
void decode_gemm_row<DType::kIQ4_XS>(const uint8_t* w, int64_t k, const GemmRow& r) {
  using F = Super<DType::kIQ4_XS>;
  for (int64_t sb = 0; sb < k / 256; ++sb, w += F::kBytes) {
    r.d[sb] = load_f16(w);
    const int scales_h = u16(w + 2);
    for (int s = 0; s < 8; ++s) {
      const int ls = ((w[4 + s / 2] >> (4 * (s & 1))) & 15) | (((scales_h >> (2 * s)) & 3) << 4);
      __m256i lo, hi;
      F::codes(w, s, &lo, &hi);
      _mm512_storeu_si512(r.q + 256 * sb + 32 * s, scaled_codes(lo, hi, ls - 32));
    }
  }
}

template <>
void decode_gemm_row<DType::kQ6_K>(const uint8_t* w, int64_t k, const GemmRow& r) {
  using F = Super<DType::kQ6_K>;
  for (int64_t sb = 0; sb < k / 256; ++sb, w += F::kBytes) {
    r.d[sb] = load_f16(w + 208);
    const auto* scales = reinterpret_cast<const int8_t*>(w + 192);
    int16_t* q = r.q + 256 * sb;
    for (int n = 0; n < 2; ++n) {
      for (int kk = 0; kk < 4; ++kk) {  // elements 128 n + 32 kk + l: sub-blocks s (l < 16) and s + 1
        const int s = 8 * n + 2 * kk;
        const __m512i codes = _mm512_sub_epi16(_mm512_cvtepu8_epi16(F::run_codes(w, n, kk)), _mm512_set1_epi16(32));
        const __m512i scale = _mm512_mask_set1_epi16(_mm512_set1_epi16(scales[s]), 0xffff0000u, scales[s + 1]);
        _mm512_storeu_si512(q + 128 * n + 32 * kk, _mm512_mullo_epi16(codes, scale));
      }
    }
  }
}

// Weight rows by activation rows of one register tile (the accumulators: 2 x kTileW x kTileX of the
// 32 vector registers).
constexpr int kTileW = 4;
constexpr int kTileX = 3;

// Super-blocks of k a tile runs before the next tile (kc, in L1 with the weight rows' share).
constexpr int64_t kChunkSupers = 8;

// Adds super-blocks [sb0, sb1) of the tile's WR weight rows by XR activation rows from a0 to acc:
// the lane sums of x[a] . w[i] for one weight-row group and every activation row, at
// acc + (a * kTileW + i) * 16, carried from one k chunk to the next.
template <int WR, int XR>
void gemm_tile(const GemmRow* w, const SuperActs& x, int64_t a0, int64_t sb0, int64_t sb1, float* acc) {
  const int64_t k = x.k, supers = k / 256;
  __m512 sum[WR][XR];
  for (int i = 0; i < WR; ++i) {
    for (int a = 0; a < XR; ++a) sum[i][a] = _mm512_loadu_ps(acc + ((a0 + a) * kTileW + i) * 16);
  }
  const int16_t* xq = x.q + a0 * k;
  const float* xd = x.d + a0 * supers;
  for (int64_t sb = sb0; sb < sb1; ++sb) {
    __m512i products[WR][XR];
    for (int i = 0; i < WR; ++i) {
      for (int a = 0; a < XR; ++a) products[i][a] = _mm512_setzero_si512();
    }
    for (int s = 0; s < 8; ++s) {
      const int64_t e = 256 * sb + 32 * s;
      __m512i wv[WR];
      for (int i = 0; i < WR; ++i) wv[i] = load_i16x32(w[i].q + e);
      for (int a = 0; a < XR; ++a) {
        const __m512i xv = load_i16x32(xq + a * k + e);
        for (int i = 0; i < WR; ++i) products[i][a] = add_products(products[i][a], wv[i], xv);
      }
    }
    for (int i = 0; i < WR; ++i) {
      for (int a = 0; a < XR; ++a) {
        const __m512 scale = _mm512_set1_ps(w[i].d[sb] * xd[a * supers + sb]);
        sum[i][a] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(products[i][a]), scale, sum[i][a]);
      }
    }
  }
  for (int i = 0; i < WR; ++i) {
    for (int a = 0; a < XR; ++a) _mm512_storeu_ps(acc + ((a0 + a) * kTileW + i) * 16, sum[i][a]);
  }
}

// Bytes to bring into L2 a share at a time: the next weight rows' stored blocks, whose first touch
// would otherwise stall their decoding on DRAM (one prefetch of them all at once did not help).
struct Prefetch {
  const uint8_t* p;
  size_t left, share;
  void ask() {
    const size_t n = std::min(left, share);
    for (size_t line = 0; line < n; line += 64) _mm_prefetch(reinterpret_cast<const char*>(p + line), _MM_HINT_T1);
    p += n;
    left -= n;
  }
};

// Activation rows [a0, t) by tiles of XR, the last one narrower.
template <int WR, int XR>
void gemm_rows(const GemmRow* w, const SuperActs& x, int64_t a0, int64_t t, int64_t sb0, int64_t sb1, float* acc,
               Prefetch& pf) {
  if constexpr (XR > 0) {
    for (; a0 + XR <= t; a0 += XR) {
      pf.ask();
      gemm_tile<WR, XR>(w, x, a0, sb0, sb1, acc);
    }
    if (a0 < t) gemm_rows<WR, XR - 1>(w, x, a0, t, sb0, sb1, acc, pf);
  }
}

// gemm_rows for wr (1..WR) weight rows.
template <int WR>
void gemm_weight_rows(int wr, const GemmRow* w, const SuperActs& x, int64_t t, int64_t sb0, int64_t sb1, float* acc,
                      Prefetch& pf) {
  if constexpr (WR > 0) {
    if (wr == WR) {
      gemm_rows<WR, kTileX>(w, x, 0, t, sb0, sb1, acc, pf);
    } else {
      gemm_weight_rows<WR - 1>(wr, w, x, t, sb0, sb1, acc, pf);
    }
  }
}

// out[a * ldo + i] = the lanes of acc for (a, i) summed, plus (Q4_K) the mins: c . the activation
// sums of the 32-element blocks.
template <bool kMins>
void gemm_finish(int wr, const GemmRow* w, const SuperActs& x, int64_t t, const float* acc, float* out, int64_t ldo) {
  const int64_t blocks = x.k / 32;  // whole super-blocks of 8
  for (int64_t a = 0; a < t; ++a) {
    for (int i = 0; i < wr; ++i) {
      float v = hsum512(_mm512_loadu_ps(acc + (a * kTileW + i) * 16));
      if constexpr (kMins) {
        const float* xs = x.sum + a * blocks;
        __m256 m = _mm256_setzero_ps();
        for (int64_t j = 0; j < blocks; j += 8) {
          m = _mm256_fmadd_ps(_mm256_loadu_ps(w[i].c + j), _mm256_loadu_ps(xs + j), m);
        }
        v += hsum(m);
      }
      out[a * ldo + i] = v;
    }
  }
}

// The GemmFn: kTileW weight rows at a time decoded into a per-thread scratch (k int16 each), then
// against every activation row, kChunkSupers super-blocks at a time so that the rows' share and
// the activations' stay in L1 (at k = 8,192 the whole rows do not).
template <DType T>
void gemm_k(const uint8_t* w, size_t row_bytes, int64_t n, const SuperActs& x, int64_t t, float* out, int64_t ldo) {
  const int64_t k = x.k, supers = k / 256;
  const size_t qn = static_cast<size_t>(k), cn = qn / 32;
  thread_local std::vector<int16_t> q;
  thread_local std::vector<float> d, c, acc;
  if (q.size() < kTileW * qn) q.resize(kTileW * qn);
  if (d.size() < kTileW * qn / 256) d.resize(kTileW * qn / 256);
  if (c.size() < kTileW * cn) c.resize(kTileW * cn);
  if (acc.size() < static_cast<size_t>(t * kTileW * 16)) acc.resize(static_cast<size_t>(t * kTileW * 16));
  GemmRow rows[kTileW];
  for (int i = 0; i < kTileW; ++i) rows[i] = GemmRow{q.data() + i * qn, d.data() + i * qn / 256, c.data() + i * cn};
  const int64_t tiles = (supers + kChunkSupers - 1) / kChunkSupers * ((t + kTileX - 1) / kTileX);
  for (int64_t j = 0; j < n; j += kTileW) {
    const int wr = static_cast<int>(std::min<int64_t>(kTileW, n - j));
    for (int i = 0; i < wr; ++i) decode_gemm_row<T>(w + static_cast<size_t>(j + i) * row_bytes, k, rows[i]);
    const size_t ahead = static_cast<size_t>(std::clamp<int64_t>(n - j - kTileW, 0, kTileW)) * row_bytes;
    Prefetch pf{w + static_cast<size_t>(j + kTileW) * row_bytes, ahead,
                (ahead / 64 + static_cast<size_t>(tiles)) / static_cast<size_t>(tiles) * 64};
    std::fill(acc.begin(), acc.begin() + t * kTileW * 16, 0.0f);
    for (int64_t sb0 = 0; sb0 < supers; sb0 += kChunkSupers) {
      gemm_weight_rows<kTileW>(wr, rows, x, t, sb0, std::min(supers, sb0 + kChunkSupers), acc.data(), pf);
    }
    gemm_finish<T == DType::kQ4_K || T == DType::kQ5_K>(wr, rows, x, t, acc.data(), out + j, ldo);
  }
}

}  // namespace
}  // namespace minivllm::cpu
