// One attention scenario run on both backends: a paged cache filled through store_kvcache with
// the keys and values of every sequence's whole history (cached prefix and new tokens), block
// tables over a shuffled set of blocks, then prefill (varlen, the last len_q positions of each
// sequence) or decode (one query per sequence). Returns the two outputs as fp32, and whether a
// poisoned row just past the GPU output survived (a kernel storing beyond its heads would hit it).
// A sliding window (window > 0) also points the block-table entries of the blocks wholly before
// each sequence's first query window at a spare block, never written (NaN with poison_cache): a
// kernel reading one fails.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>

#include "common/fp8.h"
#include "common/tuning.h"
#include "cuda_test_util.h"

namespace minivllm::cuda_test {

struct AttentionCase {
  int nq, nkv, hd, block_size;
  std::vector<int> len_q;  // prefill: query rows per sequence (decode: ignored, 1)
  std::vector<int> len_k;  // keys per sequence (decode: context_lens)
  bool decode = false;
  bool no_cache = false;   // prefill without a cache (warm-up): keys come from qkv, len_q == len_k
  int extra_table_cols = 0;  // block-table capacity beyond the longest sequence
  bool fp8 = false;          // an fp8 KV cache on both backends (the CPU's is the reference)
  // The GPU cache is filled with NaN bytes before the history is stored: cache rows past a
  // sequence's keys stay NaN, so a kernel that lets them reach its output (0 * NaN) fails.
  bool poison_cache = false;
  // Multiply the q heads of the query rows and the k heads of every row: with q_gain * k_gain = 1
  // the scores are the random ones while q's and k's magnitudes move far from theirs. The products
  // are rounded to bf16 on the host, so both backends attend with the same q and k (the GPU's qkv
  // is bf16): at large gains the softmax is nearly one-hot, and q rounded on one side only moved
  // single outputs by 0.1.
  float q_gain = 1.0f;
  float k_gain = 1.0f;
  // Decode: AttentionMetadata::seq_order of both sides (empty: none, batch order).
  std::vector<int32_t> seq_order = {};
  int window = 0;  // Backend::attention's sliding window (0: none)
  float softcap = 0.0f;  // Backend::set_attention_softcap on both sides (Gemma 2; 0: none)
};

struct AttentionOutputs {
  std::vector<float> gpu, cpu;
  bool sentinel_intact = false;
};

struct SideMeta {
  AttentionMetadata meta;
  KVCache cache;
};

inline SideMeta build_side(Backend& be, const AttentionCase& c, const Tensor& history, const std::vector<int32_t>& slots,
                           const std::vector<int32_t>& tables, int table_cols, int num_blocks, bool poison = false) {
  SideMeta s;
  const int seqs = static_cast<int>(c.len_k.size());
  s.cache.num_kv_heads = c.nkv;
  s.cache.head_dim = c.hd;
  s.cache.block_size = c.block_size;
  if (!c.no_cache) {
    s.cache = be.allocate_kv_cache(num_blocks, c.block_size, c.nkv, c.hd,
                                   c.fp8 ? DType::kF8E4M3 : be.activation_dtype());
    if (poison) {
      be.fill_bytes(s.cache.k, 0xFF);
      be.fill_bytes(s.cache.v, 0xFF);
    }
    AttentionMetadata store;
    store.slot_mapping = upload_i32(be, slots);
    be.store_kvcache(upload(be, history), c.nq, s.cache, store);
    s.meta.block_tables = upload_i32(be, tables, {seqs, table_cols});
  }
  s.meta.is_prefill = !c.decode;
  s.meta.num_seqs = seqs;
  s.meta.block_size = c.block_size;
  s.meta.max_num_blocks = table_cols;
  std::vector<int32_t> cu_q{0}, cu_k{0};
  for (int i = 0; i < seqs; ++i) {
    cu_q.push_back(cu_q.back() + (c.decode ? 1 : c.len_q[i]));
    cu_k.push_back(cu_k.back() + c.len_k[i]);
    s.meta.max_seqlen_q = std::max(s.meta.max_seqlen_q, c.decode ? 1 : c.len_q[i]);
    s.meta.max_seqlen_k = std::max(s.meta.max_seqlen_k, c.len_k[i]);
  }
  s.meta.num_tokens = cu_q.back();
  s.meta.cu_seqlens_q = upload_i32(be, cu_q);
  s.meta.cu_seqlens_k = upload_i32(be, cu_k);
  s.meta.context_lens = upload_i32(be, std::vector<int32_t>(c.len_k.begin(), c.len_k.end()));
  if (!c.seq_order.empty()) s.meta.seq_order = upload_i32(be, c.seq_order);
  return s;
}

// The knobs that pick each decode kernel the policy or a user can reach (CudaBackend reads them when
// it is made); value nullptr leaves the policy's choice.
struct DecodeSwitch {
  const char* name;
  const char* value;
};
inline constexpr DecodeSwitch kDecodeSwitches[] = {
    {"MINIVLLM_DECODE_MMA", nullptr},    {"MINIVLLM_DECODE_MMA", "0"},    {"MINIVLLM_DECODE_MMA", "1"},
    {"MINIVLLM_DECODE_WIDE", "force"},   {"MINIVLLM_DECODE_RING", "1"},   {"MINIVLLM_DECODE_STAGED", "1"},
    {"MINIVLLM_DECODE_LANE_ELEMS", "16"}, {"MINIVLLM_DECODE_WIDE_MMA", "0"}};

// fn(tag) with the switch set (backends made inside see it), then put back as it was; tag names it
// in failures.
template <typename F>
void with_decode_switch(const DecodeSwitch& s, F&& fn) {
  const test::ScopedEnv env(s.value != nullptr ? test::EnvVars{{s.name, s.value}} : test::EnvVars{});
  fn(std::string(s.name) + "=" + (s.value ? s.value : "policy"));
}

inline AttentionOutputs run_attention_case(Backends& b, const AttentionCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int seqs = static_cast<int>(c.len_k.size());
  const int64_t width = static_cast<int64_t>(c.nq + 2 * c.nkv) * c.hd;
  int table_cols = c.extra_table_cols;
  int num_blocks = 3;
  for (int l : c.len_k) {
    const int blocks = (l + c.block_size - 1) / c.block_size;
    table_cols = std::max(table_cols, blocks + c.extra_table_cols);
    num_blocks += blocks;
  }
  std::vector<int32_t> free_blocks(num_blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  std::vector<int32_t> tables(static_cast<size_t>(seqs) * table_cols, -1);
  std::vector<int32_t> slots;
  std::vector<int64_t> first_row;  // history row of each sequence's key 0
  size_t next = 0;
  for (int s = 0; s < seqs; ++s) {
    first_row.push_back(static_cast<int64_t>(slots.size()));
    const int blocks = (c.len_k[s] + c.block_size - 1) / c.block_size;
    for (int j = 0; j < blocks; ++j) tables[s * table_cols + j] = free_blocks[next++];
    for (int j = 0; j < c.len_k[s]; ++j) {
      slots.push_back(tables[s * table_cols + j / c.block_size] * c.block_size + j % c.block_size);
    }
  }
  const int64_t history_rows = static_cast<int64_t>(slots.size());
  // Query rows: the last len_q (decode: 1) history rows of each sequence.
  std::vector<int64_t> rows;
  for (int s = 0; s < seqs; ++s) {
    const int lq = c.decode ? 1 : c.len_q[s];
    for (int r = c.len_k[s] - lq; r < c.len_k[s]; ++r) rows.push_back(first_row[s] + r);
  }
  // Keys and values for every history row, queries only for the query rows: the store reads no q,
  // and drawing it for every row took most of these tests' host time (2/3 of the values at 32 / 8 heads).
  Tensor history = host_tensor(DType::kF32, {history_rows, width});
  {
    std::vector<char> is_query(static_cast<size_t>(history_rows), 0);
    for (int64_t r : rows) is_query[static_cast<size_t>(r)] = 1;
    const int64_t q_width = static_cast<int64_t>(c.nq) * c.hd;
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (int64_t r = 0; r < history_rows; ++r) {
      float* row = history.ptr<float>() + r * width;
      const int64_t from = is_query[static_cast<size_t>(r)] ? 0 : q_width;
      std::fill_n(row, from, 0.0f);
      for (int64_t i = from; i < width; ++i) row[i] = bf16_to_f32(f32_to_bf16(d(rng)));
    }
  }
  if (c.k_gain != 1.0f) {
    for (int64_t r = 0; r < history_rows; ++r) {
      float* k = history.ptr<float>() + r * width + static_cast<int64_t>(c.nq) * c.hd;
      for (int64_t i = 0; i < static_cast<int64_t>(c.nkv) * c.hd; ++i) k[i] = bf16_to_f32(f32_to_bf16(k[i] * c.k_gain));
    }
  }
  const int64_t tokens = static_cast<int64_t>(rows.size());
  Tensor qkv = host_tensor(DType::kF32, {tokens, width});
  // An fp8 cache holds its keys rotated, and the store rotates the queries of the rows it stores
  // (Backend::store_kvcache); these query rows were stored as history rows, so rotate them here.
  const bool rotate = c.fp8 && !c.no_cache && knob_flag("MINIVLLM_FP8_KV_ROTATE");
  for (int64_t t = 0; t < tokens; ++t) {
    std::copy_n(history.ptr<float>() + rows[t] * width, width, qkv.ptr<float>() + t * width);
    for (int h = 0; h < c.nq; ++h) {
      float* q = qkv.ptr<float>() + t * width + static_cast<int64_t>(h) * c.hd;
      for (int i = 0; i < c.hd; ++i) q[i] *= c.q_gain;
      if (rotate) kv_rotate_row(q, c.hd);
      for (int i = 0; i < c.hd; ++i) q[i] = bf16_to_f32(f32_to_bf16(q[i]));
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  if (c.window > 0 && !c.no_cache) {  // blocks before every query's window: as if freed
    for (int s = 0; s < seqs; ++s) {
      const int lq = c.decode ? 1 : c.len_q[s];
      const int first = std::max(0, c.len_k[s] - lq + 1 - c.window);
      for (int j = 0; j < first / c.block_size; ++j) tables[s * table_cols + j] = free_blocks.back();
    }
  }
  AttentionOutputs out;
  {
    SideMeta s = build_side(*b.cpu, c, history, slots, tables, table_cols, num_blocks);
    Tensor o = b.cpu->empty(DType::kF32, {tokens, static_cast<int64_t>(c.nq) * c.hd});
    b.cpu->set_attention_softcap(c.softcap);
    b.cpu->attention(upload(*b.cpu, qkv), c.nq, s.cache, s.meta, scale, c.window, o, nullptr);
    out.cpu = download(*b.cpu, o);
  }
  {
    SideMeta s = build_side(*b.gpu, c, history, slots, tables, table_cols, num_blocks, c.poison_cache);
    const int64_t width_out = static_cast<int64_t>(c.nq) * c.hd;
    Tensor o_and_sentinel = b.gpu->empty(DType::kBF16, {tokens + 1, width_out});
    b.gpu->fill_bytes(o_and_sentinel, 0xFF);
    b.gpu->set_attention_softcap(c.softcap);
    b.gpu->attention(upload(*b.gpu, qkv), c.nq, s.cache, s.meta, scale, c.window, o_and_sentinel.rows(0, tokens),
                     nullptr);
    out.gpu = download(*b.gpu, o_and_sentinel);
    out.sentinel_intact = std::all_of(out.gpu.end() - width_out, out.gpu.end(), [](float v) { return std::isnan(v); });
    out.gpu.resize(static_cast<size_t>(tokens * width_out));
  }
  return out;
}

}  // namespace minivllm::cuda_test
