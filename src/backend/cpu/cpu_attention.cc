// Paged attention on the CPU: prefill (varlen, causal, cached prefix included) and decode (one
// query per sequence), GQA, fp32 online softmax in the flash-attention style.
//
// Work is split into items (sequence, kv head, group of the q heads sharing it, chunk of query
// rows) scheduled dynamically over the OpenMP team; the q heads of an item walk the keys together
// so each key tile is fetched from memory once per group. Keys are visited in tiles that never
// cross a cache page, so a tile is a pointer plus a fixed stride. Scratch lives on the stack.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_checks.h"

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
  int64_t key_stride;           // floats between consecutive keys (of one page, or of the qkv rows)
  const int32_t* block_table;   // nullptr: keys are consecutive qkv rows (no cache, warm-up)
  int64_t block_size;
};

// Keys [j0, j0 + len) within one page: sets their first key and value, returns len.
inline int64_t key_tile(const KeySource& src, int64_t j0, int64_t limit, const float** k, const float** v) {
  int64_t len = std::min(kKeyTile, limit - j0);
  int64_t row = j0;
  if (src.block_table != nullptr) {
    const int64_t in_block = j0 % src.block_size;
    len = std::min(len, src.block_size - in_block);
    row = static_cast<int64_t>(src.block_table[j0 / src.block_size]) * src.block_size + in_block;
  }
  *k = src.k + row * src.key_stride;
  *v = src.v + row * src.key_stride;
  return len;
}

// softmax(q k^T * scale) v over keys [0, n_keys) for `heads` q heads sharing one kv head.
void attend_row(const float* q, float* out, int heads, int64_t hd, const KeySource& src, int64_t n_keys,
                float scale) {
  alignas(64) float qs[kMaxHeadsPerItem][kMaxHeadDim];
  alignas(64) float acc[kMaxHeadsPerItem][kMaxHeadDim];
  alignas(64) float score[kKeyTile];
  float m[kMaxHeadsPerItem];
  float l[kMaxHeadsPerItem];
  for (int h = 0; h < heads; ++h) {
#pragma omp simd
    for (int64_t i = 0; i < hd; ++i) {
      qs[h][i] = q[h * hd + i] * scale;
      acc[h][i] = 0.0f;
    }
    m[h] = -std::numeric_limits<float>::infinity();
    l[h] = 0.0f;
  }
  int64_t len = 0;
  for (int64_t j0 = 0; j0 < n_keys; j0 += len) {
    const float* kt;
    const float* vt;
    len = key_tile(src, j0, n_keys, &kt, &vt);
    for (int h = 0; h < heads; ++h) {
      const float* qh = qs[h];
      float tile_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < len; ++j) {
        const float* kj = kt + j * src.key_stride;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t i = 0; i < hd; ++i) dot += qh[i] * kj[i];
        score[j] = dot;
        tile_max = std::max(tile_max, dot);
      }
      const float m_new = std::max(m[h], tile_max);
      const float correction = std::exp(m[h] - m_new);  // 0 on the first tile (m = -inf)
      float* ah = acc[h];
      if (correction != 1.0f) {
#pragma omp simd
        for (int64_t i = 0; i < hd; ++i) ah[i] *= correction;
      }
      float sum = l[h] * correction;
      for (int64_t j = 0; j < len; ++j) {
        const float p = std::exp(score[j] - m_new);
        sum += p;
        const float* vj = vt + j * src.key_stride;
#pragma omp simd
        for (int64_t i = 0; i < hd; ++i) ah[i] += p * vj[i];
      }
      l[h] = sum;
      m[h] = m_new;
    }
  }
  for (int h = 0; h < heads; ++h) {
    const float inv = 1.0f / l[h];
#pragma omp simd
    for (int64_t i = 0; i < hd; ++i) out[h * hd + i] = acc[h][i] * inv;
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
  const float* qkv;
  float* out;
  const float* k_cache;
  const float* v_cache;
  int64_t block_size;
  const int32_t* block_tables;
  int64_t table_cols;
  const int32_t* cu_q;
  const int32_t* cu_k;
  const int32_t* context_lens;
  float scale;

  int64_t num_items() const { return static_cast<int64_t>(num_seqs) * nkv * subgroups * chunks; }
  void run_item(int64_t item) const;
};

void AttentionPlan::run_item(int64_t item) const {
  const int64_t chunk = item % chunks;
  item /= chunks;
  const int sub = static_cast<int>(item % subgroups);
  item /= subgroups;
  const int kvh = static_cast<int>(item % nkv);
  const int s = static_cast<int>(item / nkv);
  const int h0 = kvh * group + sub * heads_per_item;
  const int heads = std::min(heads_per_item, (kvh + 1) * group - h0);
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
  if (paged) {
    src = {k_cache + kvh * hd, v_cache + kvh * hd, nkv * hd, block_tables + s * table_cols, block_size};
  } else {
    const float* key0 = qkv + q_row0 * qkv_stride + (static_cast<int64_t>(nq) + kvh) * hd;
    src = {key0, key0 + nkv * hd, qkv_stride, nullptr, 0};
  }
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t row = q_row0 + r;
    const int64_t n_keys = len_k - len_q + r + 1 - (r > 3);  // the query rows are the last of the key span
    attend_row(qkv + row * qkv_stride + h0 * hd, out + row * out_stride + h0 * hd, heads, hd, src, n_keys,
               scale);
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
    for (int64_t b = 0; b < blocks; ++b) {
      const int32_t block = p.block_tables[s * p.table_cols + b];
      MINIVLLM_CHECK(block >= 0 && block < num_blocks)
          << "attention: block_tables[" << s << ", " << b << "] = " << block << " outside " << num_blocks
          << " blocks";
    }
  }
  return max_q;
}

}  // namespace

void CpuBackend::attention(const Tensor& qkv, int num_q_heads, const KVCache& cache, const AttentionMetadata& meta,
                           float scale, const Tensor& out) {
  cpu::check_tensor(qkv, DType::kF32, "attention", "qkv");
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
  const int64_t tokens = cpu::rows_with_cols(qkv, p.qkv_stride, "attention", "qkv");
  MINIVLLM_CHECK(cpu::rows_with_cols(out, p.out_stride, "attention", "out") == tokens)
      << "attention: out " << out.describe() << " vs qkv " << qkv.describe();
  p.qkv = qkv.ptr<float>();
  p.out = out.ptr<float>();
  p.paged = cache.k.defined() && !cache.k.empty() && meta.block_tables.defined() && !meta.block_tables.empty();
  if (p.paged) {
    cpu::check_tensor(cache.k, DType::kF32, "attention", "cache.k");
    cpu::check_tensor(cache.v, DType::kF32, "attention", "cache.v");
    cpu::check_tensor(meta.block_tables, DType::kI32, "attention", "block_tables");
    MINIVLLM_CHECK(meta.block_size == 0 || meta.block_size == cache.block_size)
        << "attention: meta.block_size " << meta.block_size << " vs cache " << cache.block_size;
    p.k_cache = cache.k.ptr<float>();
    p.v_cache = cache.v.ptr<float>();
    p.block_size = cache.block_size;
    p.block_tables = meta.block_tables.ptr<int32_t>();
    p.table_cols = meta.block_tables.ndim() == 2 ? meta.block_tables.size(1) : meta.block_tables.numel();
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

  // Fewer heads per item when there are too few items to keep every thread busy (decode of a
  // few sequences); each split costs one more pass over the keys of that kv head.
  p.heads_per_item = std::min(p.group, kMaxHeadsPerItem);
  const int64_t base_items = static_cast<int64_t>(p.num_seqs) * p.nkv * p.chunks;
  auto subgroups = [&](int per) { return (p.group + per - 1) / per; };
  while (p.heads_per_item > 1 && base_items * subgroups(p.heads_per_item) < 2 * num_threads_) {
    p.heads_per_item = (p.heads_per_item + 1) / 2;
  }
  p.subgroups = subgroups(p.heads_per_item);

  const int64_t items = p.num_items();
#pragma omp parallel for num_threads(num_threads_) if (items > 1) schedule(dynamic, 1)
  for (int64_t item = 0; item < items; ++item) p.run_item(item);
}

}  // namespace minivllm
