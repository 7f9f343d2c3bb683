// Paged attention on the CPU: prefill (varlen, causal, cached prefix included) and decode (one
// query per sequence), GQA, fp32 online softmax in the flash-attention style.
//
// Work is split into items (sequence, kv head, group of the q heads sharing it, chunk of query
// rows) scheduled dynamically over the OpenMP team; the q heads of an item walk the keys together
// so each key tile is fetched from memory once per group. Decode with fewer items than twice the
// threads (batch 1 of a model with few kv heads) also cuts each item's keys into spans and merges
// the spans' softmax states afterwards. Keys are visited in tiles that never
// cross a cache page, so a tile is a pointer plus a fixed stride. Scratch lives on the stack.
// The two inner loops (q.k for four keys, p.v into register-held accumulators) use AVX2
// intrinsics: they are most of the decode time and GCC's `omp simd` reductions were 2x slower.
// An fp8 cache (cpu_kvcache.cc) is read a tile at a time: the tile's keys and values are
// dequantised (e4m3 x its row's scale) into a per-thread fp32 scratch, and the fp32 code runs on
// that. It is the reference of the CUDA kernels' fp8 path, not a fast path.
// A sliding window (window > 0) moves each query row's first key up to n_keys - window: the keys
// before it are never visited, nor their cache blocks' table entries read.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_checks.h"
#include "backend/cpu/cpu_row_ops.h"
#include "common/fp8.h"

namespace minivllm {
namespace {

constexpr int kMaxHeadDim = 256;
constexpr int kMaxHeadsPerItem = 8;
constexpr int64_t kKeyTile = 64;
constexpr int64_t kQueryChunk = 16;

// Where the keys and values of one sequence and one kv head live.
struct KeySource {
  const float* k;               // paged: cache base + kv head offset; direct: key 0 of the sequence
  const float* v;
  int64_t key_stride;           // elements between consecutive keys (of one page, or of the qkv rows)
  const int32_t* block_table;   // nullptr: keys are consecutive qkv rows (no cache, warm-up)
  int64_t block_size;
  // An fp8 cache (k and v unused): elements at k8 / v8 (cache base + kv head offset), the scale
  // of cache row r at k_scale[r * scale_stride] (base + kv head).
  const uint8_t* k8 = nullptr;
  const uint8_t* v8 = nullptr;
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  int64_t scale_stride = 0;
  // A bf16 cache (k and v unused): elements at k16 / v16 (cache base + kv head offset).
  const uint16_t* k16 = nullptr;
  const uint16_t* v16 = nullptr;
};

// A key or value element as fp32: fp32 as it is, bf16 widened (the top half of a float).
inline float widen(float x) { return x; }
inline float widen(uint16_t x) { return bf16_to_f32(x); }

// Keys [j0, j0 + len) within one page: sets their first key and value and the stride between
// keys, returns len. An fp8 tile is dequantised into this thread's scratch first; a bf16 one is
// read where it is (*k16, *v16 set, *k and *v not), widened in registers by the tile loops.
inline int64_t key_tile(const KeySource& src, int64_t j0, int64_t limit, int64_t hd, const float** k,
                        const float** v, const uint16_t** k16, const uint16_t** v16, int64_t* stride) {
  int64_t len = std::min(kKeyTile, limit - j0);
  int64_t row = j0;
  if (src.block_table != nullptr) {
    const int64_t in_block = j0 % src.block_size;
    len = std::min(len, src.block_size - in_block);
    row = static_cast<int64_t>(src.block_table[j0 / src.block_size]) * src.block_size + in_block;
  }
  *k16 = *v16 = nullptr;
  if (src.k16 != nullptr) {
    *k16 = src.k16 + row * src.key_stride;
    *v16 = src.v16 + row * src.key_stride;
    *stride = src.key_stride;
    return len;
  }
  if (src.k8 == nullptr) {
    *k = src.k + row * src.key_stride;
    *v = src.v + row * src.key_stride;
    *stride = src.key_stride;
    return len;
  }
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(2 * kKeyTile * kMaxHeadDim));
  float* kd = scratch.data();
  float* vd = kd + kKeyTile * kMaxHeadDim;
  for (int64_t j = 0; j < len; ++j) {
    const int64_t r = row + j;
    dequantize_e4m3_row(src.k8 + r * src.key_stride, hd, src.k_scale[r * src.scale_stride], kd + j * hd);
    dequantize_e4m3_row(src.v8 + r * src.key_stride, hd, src.v_scale[r * src.scale_stride], vd + j * hd);
  }
  *k = kd;
  *v = vd;
  *stride = hd;
  return len;
}

#ifdef __AVX2__
// Eight elements as fp32: fp32 loaded, bf16 widened in the register (half the bytes from memory).
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// The four dot products of q with k0..k3 (hd a multiple of 8), reduced across lanes together.
// Plain loops with `omp simd reduction` spill every lane to the stack and add them one by one,
// which cost as much as the products themselves.
template <typename E>
inline __m128 dot4(const float* q, const E* k0, const E* k1, const E* k2, const E* k3, int64_t hd) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  for (int64_t i = 0; i < hd; i += 8) {
    const __m256 qi = _mm256_loadu_ps(q + i);
    a0 = _mm256_fmadd_ps(qi, load8(k0 + i), a0);
    a1 = _mm256_fmadd_ps(qi, load8(k1 + i), a1);
    a2 = _mm256_fmadd_ps(qi, load8(k2 + i), a2);
    a3 = _mm256_fmadd_ps(qi, load8(k3 + i), a3);
  }
  const __m256 pairs = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(pairs), _mm256_extractf128_ps(pairs, 1));
}
#endif

// score[j] = q . k_j for the keys of one tile, four keys at a time so four independent FMA
// chains are in flight (one chain per key would wait on the FMA latency). Returns the max score.
template <typename E>
inline float tile_scores(const float* q, const E* k, int64_t stride, int64_t len, int64_t hd, float* score) {
  float max_score = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
#ifdef __AVX2__
  if (hd % 8 == 0) {
    __m128 max4 = _mm_set1_ps(max_score);
    for (; j + 4 <= len; j += 4) {
      const E* k0 = k + j * stride;
      const __m128 d = dot4(q, k0, k0 + stride, k0 + 2 * stride, k0 + 3 * stride, hd);
      _mm_storeu_ps(score + j, d);
      max4 = _mm_max_ps(max4, d);
    }
    alignas(16) float m4[4];
    _mm_store_ps(m4, max4);
    max_score = std::max(std::max(m4[0], m4[1]), std::max(m4[2], m4[3]));
  }
#endif
  for (; j < len; ++j) {
    const E* kj = k + j * stride;
    float d = 0.0f;
#pragma omp simd reduction(+ : d)
    for (int64_t i = 0; i < hd; ++i) d += q[i] * widen(kj[i]);
    score[j] = d;
    max_score = std::max(max_score, d);
  }
  return max_score;
}

// acc += sum_j p[j] v_j. With AVX2, 32 columns of acc stay in registers across the whole tile;
// otherwise four values per pass over acc.
template <typename E>
inline void tile_values(const float* p, const E* v, int64_t stride, int64_t len, int64_t hd, float* acc) {
#ifdef __AVX2__
  if (hd % 32 == 0) {
    for (int64_t c = 0; c < hd; c += 32) {
      __m256 a0 = _mm256_loadu_ps(acc + c), a1 = _mm256_loadu_ps(acc + c + 8);
      __m256 a2 = _mm256_loadu_ps(acc + c + 16), a3 = _mm256_loadu_ps(acc + c + 24);
      for (int64_t j = 0; j < len; ++j) {
        const E* vj = v + j * stride + c;
        const __m256 pj = _mm256_set1_ps(p[j]);
        a0 = _mm256_fmadd_ps(pj, load8(vj), a0);
        a1 = _mm256_fmadd_ps(pj, load8(vj + 8), a1);
        a2 = _mm256_fmadd_ps(pj, load8(vj + 16), a2);
        a3 = _mm256_fmadd_ps(pj, load8(vj + 24), a3);
      }
      _mm256_storeu_ps(acc + c, a0);
      _mm256_storeu_ps(acc + c + 8, a1);
      _mm256_storeu_ps(acc + c + 16, a2);
      _mm256_storeu_ps(acc + c + 24, a3);
    }
    return;
  }
#endif
  int64_t j = 0;
  for (; j + 4 <= len; j += 4) {
    const E* v0 = v + j * stride;
    const E* v1 = v0 + stride;
    const E* v2 = v1 + stride;
    const E* v3 = v2 + stride;
    const float p0 = p[j], p1 = p[j + 1], p2 = p[j + 2], p3 = p[j + 3];
#pragma omp simd
    for (int64_t i = 0; i < hd; ++i) {
      acc[i] += (p0 * widen(v0[i]) + p1 * widen(v1[i])) + (p2 * widen(v2[i]) + p3 * widen(v3[i]));
    }
  }
  for (; j < len; ++j) {
    const E* vj = v + j * stride;
    const float pj = p[j];
#pragma omp simd
    for (int64_t i = 0; i < hd; ++i) acc[i] += pj * widen(vj[i]);
  }
}

// The online-softmax state of `heads` q heads sharing one kv head over keys [j_begin, j_end): per
// head the running max m, the sum l of exp(score - m), and acc = sum of exp(score - m) v (hd values
// per head, unnormalised). An empty span leaves m = -inf, l = 0, acc = 0.
void attend_span(const float* q, int heads, int64_t hd, const KeySource& src, int64_t j_begin, int64_t j_end,
                 float scale, float softcap, float* m, float* l, float* acc) {
  alignas(64) float qs[kMaxHeadsPerItem][kMaxHeadDim];
  alignas(64) float score[kKeyTile];
  for (int h = 0; h < heads; ++h) {
#pragma omp simd
    for (int64_t i = 0; i < hd; ++i) {
      qs[h][i] = q[h * hd + i] * scale;
      acc[h * hd + i] = 0.0f;
    }
    m[h] = -std::numeric_limits<float>::infinity();
    l[h] = 0.0f;
  }
  int64_t len = 0;
  for (int64_t j0 = j_begin; j0 < j_end; j0 += len) {
    const float* kt = nullptr;
    const float* vt = nullptr;
    const uint16_t* kt16;
    const uint16_t* vt16;
    int64_t stride;
    len = key_tile(src, j0, j_end, hd, &kt, &vt, &kt16, &vt16, &stride);
    for (int h = 0; h < heads; ++h) {
      float tile_max = kt16 != nullptr ? tile_scores(qs[h], kt16, stride, len, hd, score)
                                       : tile_scores(qs[h], kt, stride, len, hd, score);
      if (softcap > 0.0f) {  // Gemma 2: each scaled score through cap * tanh(score / cap), which keeps the max
        for (int64_t j = 0; j < len; ++j) score[j] = softcap * std::tanh(score[j] / softcap);
        tile_max = softcap * std::tanh(tile_max / softcap);
      }
      const float m_new = std::max(m[h], tile_max);
      const float correction = std::exp(m[h] - m_new);  // 0 on the first tile (m = -inf)
      cpu::exp_shifted(score, len, m_new);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < len; ++j) sum += score[j];
      float* ah = acc + h * hd;
      if (correction != 1.0f) {
#pragma omp simd
        for (int64_t i = 0; i < hd; ++i) ah[i] *= correction;
      }
      if (vt16 != nullptr) {
        tile_values(score, vt16, stride, len, hd, ah);
      } else {
        tile_values(score, vt, stride, len, hd, ah);
      }
      l[h] = l[h] * correction + sum;
      m[h] = m_new;
    }
  }
}

// softmax(q k^T * scale) v over keys [j_begin, n_keys) for `heads` q heads sharing one kv head; with
// sinks (the heads' own, or nullptr), each head's sink logit joins its denominator.
void attend_row(const float* q, float* out, int heads, int64_t hd, const KeySource& src, int64_t j_begin,
                int64_t n_keys, float scale, float softcap, const float* sinks) {
  alignas(64) float acc[kMaxHeadsPerItem * kMaxHeadDim];
  float m[kMaxHeadsPerItem];
  float l[kMaxHeadsPerItem];
  attend_span(q, heads, hd, src, j_begin, n_keys, scale, softcap, m, l, acc);
  for (int h = 0; h < heads; ++h) {
    const float inv = 1.0f / (sinks != nullptr ? l[h] + std::exp(sinks[h] - m[h]) : l[h]);
#pragma omp simd
    for (int64_t i = 0; i < hd; ++i) out[h * hd + i] = acc[h * hd + i] * inv;
  }
}

// The shape of one call, checked once; items are numbered seq-major.
struct AttentionPlan {
  bool prefill;
  bool paged;
  int num_seqs;
  int nq, nkv, group;
  int64_t hd, qkv_stride, out_stride;
  int heads_per_item, subgroups;
  int64_t chunks;  // query chunks per sequence (1 in decode)
  // Decode only: the keys of each item cut into `splits` spans, whose softmax states go to
  // `partials` (per item and span: m and l for every head of the item, then its acc) and are merged
  // after the parallel loop.
  int64_t splits = 1;
  float* partials = nullptr;
  const float* qkv;
  float* out;
  const float* k_cache;
  const float* v_cache;
  const uint8_t* k_cache8;  // fp8 cache: elements and per-(slot, kv head) scales (k_cache unused)
  const uint8_t* v_cache8;
  const uint16_t* k_cache16 = nullptr;  // bf16 cache (k_cache unused)
  const uint16_t* v_cache16 = nullptr;
  const float* k_scale;
  const float* v_scale;
  int64_t block_size;
  const int32_t* block_tables;
  int64_t table_cols;
  const int32_t* cu_q;
  const int32_t* cu_k;
  const int32_t* context_lens;
  float scale;
  float softcap = 0.0f;  // Gemma 2's score cap; 0: none
  const float* sinks = nullptr;  // gpt-oss's per-q-head sink logits; nullptr: none
  int64_t window;  // 0: every earlier key

  // The first key a query row seeing keys [0, n_keys) attends.
  int64_t first_key(int64_t n_keys) const { return window > 0 ? std::max<int64_t>(0, n_keys - window) : 0; }

  int64_t num_items() const { return static_cast<int64_t>(num_seqs) * nkv * subgroups * chunks * splits; }
  int64_t partial_floats() const { return heads_per_item * (hd + 2); }
  // The sequence, kv head and q heads [h0, h0 + heads) of group g, numbered (sequence, kv head,
  // subgroup) seq-major: an item without its chunk and split. heads <= 0 for a subgroup past the group.
  struct Heads {
    int s, kvh, h0, heads;
  };
  Heads heads_of(int64_t g) const {
    const int sub = static_cast<int>(g % subgroups);
    const int kvh = static_cast<int>((g / subgroups) % nkv);
    const int h0 = kvh * group + sub * heads_per_item;
    return {static_cast<int>(g / subgroups / nkv), kvh, h0, std::min(heads_per_item, (kvh + 1) * group - h0)};
  }
  void run_item(int64_t item) const;
  void merge_splits() const;
};

void AttentionPlan::run_item(int64_t item) const {
  float* partial = partials == nullptr ? nullptr : partials + item * partial_floats();
  const int64_t split = item % splits;
  item /= splits;
  const int64_t chunk = item % chunks;
  const auto [s, kvh, h0, heads] = heads_of(item / chunks);
  if (heads <= 0) return;

  int64_t q_row0, len_q, len_k;
  if (prefill) {
    q_row0 = cu_q[s];
    len_q = cu_q[s + 1] - cu_q[s];
    len_k = cu_k[s + 1] - cu_k[s];
  } else {
    q_row0 = s;
    len_q = 1;
    len_k = context_lens[s];
  }
  const int64_t r0 = chunk * kQueryChunk;
  const int64_t r1 = std::min(len_q, r0 + kQueryChunk);
  if (r0 >= r1) return;

  KeySource src;
  if (paged && k_cache8 != nullptr) {
    src = {nullptr, nullptr, nkv * hd, block_tables + s * table_cols, block_size};
    src.k8 = k_cache8 + kvh * hd;
    src.v8 = v_cache8 + kvh * hd;
    src.k_scale = k_scale + kvh;
    src.v_scale = v_scale + kvh;
    src.scale_stride = nkv;
  } else if (paged && k_cache16 != nullptr) {
    src = {nullptr, nullptr, nkv * hd, block_tables + s * table_cols, block_size};
    src.k16 = k_cache16 + kvh * hd;
    src.v16 = v_cache16 + kvh * hd;
  } else if (paged) {
    src = {k_cache + kvh * hd, v_cache + kvh * hd, nkv * hd, block_tables + s * table_cols, block_size};
  } else {
    const float* key0 = qkv + q_row0 * qkv_stride + (static_cast<int64_t>(nq) + kvh) * hd;
    src = {key0, key0 + nkv * hd, qkv_stride, nullptr, 0};
  }
  if (splits > 1) {  // decode: one span of this sequence's keys
    const int64_t first = first_key(len_k), span = len_k - first;
    const int64_t j0 = first + span * split / splits, j1 = first + span * (split + 1) / splits;
    attend_span(qkv + q_row0 * qkv_stride + h0 * hd, heads, hd, src, j0, j1, scale, softcap, partial,
                partial + heads_per_item, partial + 2 * heads_per_item);
    return;
  }
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t row = q_row0 + r;
    const int64_t n_keys = len_k - len_q + r + 1;  // the query rows are the last of the key span
    attend_row(qkv + row * qkv_stride + h0 * hd, out + row * out_stride + h0 * hd, heads, hd, src,
               first_key(n_keys), n_keys, scale, softcap, sinks == nullptr ? nullptr : sinks + h0);
  }
}

// out = the spans' states combined: each span's acc and l rescaled to the largest m of the spans.
void AttentionPlan::merge_splits() const {
  const int64_t groups = static_cast<int64_t>(num_seqs) * nkv * subgroups;  // items without the split
  for (int64_t g = 0; g < groups; ++g) {
    const auto [s, kvh, h0, heads] = heads_of(g);
    const float* first = partials + g * splits * partial_floats();
    for (int h = 0; h < heads; ++h) {
      float m_max = -std::numeric_limits<float>::infinity();
      for (int64_t sp = 0; sp < splits; ++sp) m_max = std::max(m_max, first[sp * partial_floats() + h]);
      float* o = out + s * out_stride + (h0 + h) * hd;
      std::fill(o, o + hd, 0.0f);
      float l = 0.0f;
      for (int64_t sp = 0; sp < splits; ++sp) {
        const float* part = first + sp * partial_floats();
        if (part[heads_per_item + h] == 0.0f) continue;  // an empty span (m = -inf)
        const float w = std::exp(part[h] - m_max);
        l += w * part[heads_per_item + h];
        const float* acc = part + 2 * heads_per_item + h * hd;
#pragma omp simd
        for (int64_t i = 0; i < hd; ++i) o[i] += w * acc[i];
      }
      if (sinks != nullptr) l += std::exp(sinks[h0 + h] - m_max);
      const float inv = 1.0f / l;
#pragma omp simd
      for (int64_t i = 0; i < hd; ++i) o[i] *= inv;
    }
  }
}

// Checks the metadata of every sequence against the tensors it indexes; returns the longest query span.
int64_t check_sequences(const AttentionPlan& p, int64_t tokens, int64_t num_blocks) {
  int64_t max_q = 0;
  for (int s = 0; s < p.num_seqs; ++s) {
    int64_t len_q = 1, len_k = 0, end_q = s + 1;
    if (p.prefill) {
      len_q = p.cu_q[s + 1] - p.cu_q[s];
      len_k = p.cu_k[s + 1] - p.cu_k[s];
      end_q = p.cu_q[s + 1];
      MINIVLLM_CHECK(len_q >= 0 && len_q <= len_k) << "attention: sequence " << s << " has " << len_q
                                                   << " query rows for " << len_k << " keys";
      MINIVLLM_CHECK(p.paged || len_q == len_k)
          << "attention: sequence " << s << " has a cached prefix but no block_tables";
    } else {
      len_k = p.context_lens[s];
      MINIVLLM_CHECK_GE(len_k, 1) << "attention: context_lens[" << s << "]";
    }
    MINIVLLM_CHECK(end_q <= tokens) << "attention: sequence " << s << " ends at row " << end_q << " of "
                                    << tokens;
    max_q = std::max(max_q, len_q);
    if (!p.paged || len_q == 0) continue;
    const int64_t blocks = (len_k + p.block_size - 1) / p.block_size;
    MINIVLLM_CHECK(blocks <= p.table_cols) << "attention: sequence " << s << " needs " << blocks
                                           << " blocks, block_tables has " << p.table_cols << " columns";
    // Blocks wholly before the first query row's window are never read (a sliding layer's freed blocks).
    for (int64_t b = p.first_key(len_k - len_q + 1) / p.block_size; b < blocks; ++b) {
      const int32_t block = p.block_tables[s * p.table_cols + b];
      MINIVLLM_CHECK(block >= 0 && block < num_blocks)
          << "attention: block_tables[" << s << ", " << b << "] = " << block << " outside " << num_blocks
          << " blocks";
    }
  }
  return max_q;
}

}  // namespace

void CpuBackend::set_attention_softcap(float cap) {
  MINIVLLM_CHECK(cap >= 0.0f) << "attention soft-cap must be >= 0, got " << cap;
  attention_softcap_ = cap;
}

void CpuBackend::attention(const Tensor& qkv, int num_q_heads, const KVCache& cache, const AttentionMetadata& meta,
                           float scale, int window, const Tensor& out, const Tensor* sinks) {
  cpu::check_tensor(qkv, DType::kF32, "attention", "qkv");
  MINIVLLM_CHECK_GE(window, 0) << "attention: sliding window";
  cpu::check_tensor(out, DType::kF32, "attention", "out");
  MINIVLLM_CHECK(cache.num_kv_heads > 0 && cache.head_dim > 0 && cache.head_dim <= kMaxHeadDim)
      << "attention: cache kv_heads " << cache.num_kv_heads << " head_dim " << cache.head_dim << " (max "
      << kMaxHeadDim << ")";
  MINIVLLM_CHECK(num_q_heads > 0 && num_q_heads % cache.num_kv_heads == 0)
      << "attention: " << num_q_heads << " q heads for " << cache.num_kv_heads << " kv heads";
  AttentionPlan p{};
  p.prefill = meta.is_prefill;
  p.num_seqs = meta.num_seqs;
  p.nq = num_q_heads;
  p.nkv = cache.num_kv_heads;
  p.group = num_q_heads / cache.num_kv_heads;
  p.hd = cache.head_dim;
  p.qkv_stride = (static_cast<int64_t>(p.nq) + 2 * p.nkv) * p.hd;
  p.out_stride = static_cast<int64_t>(p.nq) * p.hd;
  p.scale = scale;
  p.softcap = attention_softcap_;
  p.window = window;
  if (sinks != nullptr) {
    cpu::check_tensor(*sinks, DType::kF32, "attention", "sinks");
    MINIVLLM_CHECK(sinks->numel() == num_q_heads)
        << "attention: sinks " << sinks->describe() << " for " << num_q_heads << " q heads";
    p.sinks = sinks->ptr<float>();
  }
  const int64_t tokens = cpu::rows_with_cols(qkv, p.qkv_stride, "attention", "qkv");
  MINIVLLM_CHECK(cpu::rows_with_cols(out, p.out_stride, "attention", "out") == tokens)
      << "attention: out " << out.describe() << " vs qkv " << qkv.describe();
  p.qkv = qkv.ptr<float>();
  p.out = out.ptr<float>();
  p.paged = cache.k.defined() && !cache.k.empty() && meta.block_tables.defined() && !meta.block_tables.empty();
  if (p.paged) {
    const bool fp8 = cache.dtype() == DType::kF8E4M3, bf16 = cache.dtype() == DType::kBF16;
    const DType elem = fp8 ? DType::kF8E4M3 : bf16 ? DType::kBF16 : DType::kF32;
    cpu::check_tensor(cache.k, elem, "attention", "cache.k");
    cpu::check_tensor(cache.v, elem, "attention", "cache.v");
    cpu::check_tensor(meta.block_tables, DType::kI32, "attention", "block_tables");
    MINIVLLM_CHECK(meta.block_size == 0 || meta.block_size == cache.block_size)
        << "attention: meta.block_size " << meta.block_size << " vs cache " << cache.block_size;
    if (fp8) {
      cpu::check_tensor(cache.k_scale, DType::kF32, "attention", "cache.k_scale");
      cpu::check_tensor(cache.v_scale, DType::kF32, "attention", "cache.v_scale");
      const int64_t rows = static_cast<int64_t>(cache.num_blocks) * cache.block_size * cache.num_kv_heads;
      MINIVLLM_CHECK(cache.k.numel() == rows * cache.head_dim && cache.k_scale.numel() == rows &&
                     cache.v_scale.numel() == rows)
          << "attention: fp8 cache " << cache.k.describe() << " with scales " << cache.k_scale.describe();
      p.k_cache8 = cache.k.ptr<uint8_t>();
      p.v_cache8 = cache.v.ptr<uint8_t>();
      p.k_scale = cache.k_scale.ptr<float>();
      p.v_scale = cache.v_scale.ptr<float>();
    } else if (bf16) {
      p.k_cache16 = cache.k.ptr<uint16_t>();
      p.v_cache16 = cache.v.ptr<uint16_t>();
    } else {
      p.k_cache = cache.k.ptr<float>();
      p.v_cache = cache.v.ptr<float>();
    }
    p.block_size = cache.block_size;
    p.block_tables = meta.block_tables.ptr<int32_t>();
    p.table_cols = meta.block_tables.ndim() == 2 ? meta.block_tables.size(1) : meta.block_tables.numel();
    MINIVLLM_CHECK(meta.max_num_blocks == 0 || meta.max_num_blocks == p.table_cols)
        << "attention: meta.max_num_blocks " << meta.max_num_blocks << " vs block_tables "
        << meta.block_tables.describe();
    MINIVLLM_CHECK(meta.block_tables.numel() >= p.table_cols * p.num_seqs)
        << "attention: block_tables " << meta.block_tables.describe() << " for " << p.num_seqs << " sequences";
  }
  if (p.prefill) {
    cpu::check_tensor(meta.cu_seqlens_q, DType::kI32, "attention", "cu_seqlens_q");
    cpu::check_tensor(meta.cu_seqlens_k, DType::kI32, "attention", "cu_seqlens_k");
    MINIVLLM_CHECK(meta.cu_seqlens_q.numel() > p.num_seqs && meta.cu_seqlens_k.numel() > p.num_seqs)
        << "attention: cu_seqlens " << meta.cu_seqlens_q.describe() << " for " << p.num_seqs << " sequences";
    p.cu_q = meta.cu_seqlens_q.ptr<int32_t>();
    p.cu_k = meta.cu_seqlens_k.ptr<int32_t>();
  } else {
    MINIVLLM_CHECK(p.paged) << "attention: decode needs the KV cache and block_tables";
    cpu::check_tensor(meta.context_lens, DType::kI32, "attention", "context_lens");
    MINIVLLM_CHECK(meta.context_lens.numel() >= p.num_seqs)
        << "attention: context_lens " << meta.context_lens.describe() << " for " << p.num_seqs << " sequences";
    p.context_lens = meta.context_lens.ptr<int32_t>();
  }
  const int64_t max_q = check_sequences(p, tokens, cache.num_blocks);
  p.chunks = std::max<int64_t>(1, (max_q + kQueryChunk - 1) / kQueryChunk);

  // Too few items to keep every thread busy (decode of a few sequences): decode cuts each item's
  // keys into spans, whose states are merged afterwards (every key is still read once); prefill
  // gives each item fewer heads instead (each such split costs one more pass over the keys).
  p.heads_per_item = std::min(p.group, kMaxHeadsPerItem);
  auto subgroups = [&](int per) { return (p.group + per - 1) / per; };
  const int64_t base_items = static_cast<int64_t>(p.num_seqs) * p.nkv * p.chunks * subgroups(p.heads_per_item);
  if (!p.prefill && base_items < 2 * num_threads_) {
    int64_t shortest = std::numeric_limits<int64_t>::max();
    for (int s = 0; s < p.num_seqs; ++s) {
      shortest = std::min<int64_t>(shortest, p.context_lens[s] - p.first_key(p.context_lens[s]));
    }
    // Spans of at least one key tile: shorter ones would cost more in merging than they save.
    p.splits = std::max<int64_t>(1, std::min<int64_t>((2 * num_threads_ + base_items - 1) / base_items,
                                                      shortest / kKeyTile));
  }
  if (p.splits == 1) {
    while (p.heads_per_item > 1 &&
           static_cast<int64_t>(p.num_seqs) * p.nkv * p.chunks * subgroups(p.heads_per_item) < 2 * num_threads_) {
      p.heads_per_item = (p.heads_per_item + 1) / 2;
    }
  }
  p.subgroups = subgroups(p.heads_per_item);

  const int64_t items = p.num_items();
  if (p.splits > 1) {
    const auto need = static_cast<size_t>(items * p.partial_floats());
    if (attention_partials_.size() < need) attention_partials_.resize(need);
    p.partials = attention_partials_.data();
  }
#pragma omp parallel for num_threads(num_threads_) if (items > 1) schedule(dynamic, 1)
  for (int64_t item = 0; item < items; ++item) p.run_item(item);
  if (p.splits > 1) p.merge_splits();
}

}  // namespace minivllm
