// store_kvcache + attention of the CPU backend against a double-precision reference that works on
// each sequence's logical keys and values, never on the paged cache: prefill with and without a
// cached prefix, decode batches of mixed context lengths, GQA groups 1/2/4, head_dim 64/128,
// block sizes 16/256, contexts ending mid-block, scattered (non-contiguous) blocks, decode keys cut
// into spans when there are few sequences and kv heads. Every case runs on an f32 cache, an fp8
// one and a bf16 one (the last two against the reference over the values their caches hold).
// Sliding windows (window > 0): the block-table entries of blocks wholly before the first query
// row's window point at a never-written (NaN) block, so reading one fails the case.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "common/fp8.h"
#include "common/tuning.h"
#include "cpu_test_util.h"

namespace minivllm::cpu_test {
namespace {

struct AttnCase {
  int nq, nkv, hd, block_size;
  std::vector<int> len_k;  // keys per sequence (cached prefix + new tokens)
  std::vector<int> len_q;  // new tokens per sequence; decode: all 1
  bool decode;
  int window = 0;  // sliding window (0: full attention)
  bool sinks = false;  // a sink logit per q head in each softmax (gpt-oss): sink_logits(nq)
};

// The cases' sink logits: of the scores' order, some above them, so that they take a real share.
std::vector<float> sink_logits(int nq) { return random_floats(static_cast<size_t>(nq), 400, -2, 3); }

void PrintTo(const AttnCase& c, std::ostream* os) {
  *os << (c.decode ? "decode" : "prefill") << " nq " << c.nq << " nkv " << c.nkv << " hd " << c.hd << " bs "
      << c.block_size << " window " << c.window << (c.sinks ? " sinks" : "") << " len_k/len_q";
  for (size_t s = 0; s < c.len_k.size(); ++s) *os << " " << c.len_k[s] << "/" << c.len_q[s];
}

// One sequence's logical q (query rows only), k and v (every position), [pos][head][hd].
struct SeqData {
  std::vector<float> q, k, v;
};

std::vector<double> attention_ref(const AttnCase& c, const std::vector<SeqData>& seqs, double scale) {
  const int group = c.nq / c.nkv;
  const std::vector<float> sinks = sink_logits(c.nq);
  std::vector<double> out;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int lq = c.len_q[s], lk = c.len_k[s];
    for (int i = 0; i < lq; ++i) {
      const int pos = lk - lq + i;
      const int first = c.window > 0 ? std::max(0, pos + 1 - c.window) : 0;
      for (int h = 0; h < c.nq; ++h) {
        const int kvh = h / group;
        const float* q = seqs[s].q.data() + (static_cast<size_t>(i) * c.nq + h) * c.hd;
        std::vector<double> score(pos + 1);
        double max_score = -1e300, denom = 0;
        for (int j = first; j <= pos; ++j) {
          const float* k = seqs[s].k.data() + (static_cast<size_t>(j) * c.nkv + kvh) * c.hd;
          double dot = 0;
          for (int d = 0; d < c.hd; ++d) dot += static_cast<double>(q[d]) * k[d];
          score[j] = dot * scale;
          max_score = std::max(max_score, score[j]);
        }
        for (int j = first; j <= pos; ++j) denom += (score[j] = std::exp(score[j] - max_score));
        if (c.sinks) denom += std::exp(static_cast<double>(sinks[h]) - max_score);  // a weight, no value
        for (int d = 0; d < c.hd; ++d) {
          double acc = 0;
          for (int j = first; j <= pos; ++j) {
            acc += score[j] * seqs[s].v[(static_cast<size_t>(j) * c.nkv + kvh) * c.hd + d];
          }
          out.push_back(acc / denom);
        }
      }
    }
  }
  return out;
}

class AttentionTest : public ::testing::TestWithParam<AttnCase> {
 protected:
  std::unique_ptr<Backend> b = make_cpu_backend();

  // qkv rows for positions [p0, p1) of every sequence, with the slots those positions map to.
  // Rows whose slot is -1 carry garbage k/v that must never reach the cache.
  Tensor make_qkv(const AttnCase& c, const std::vector<SeqData>& seqs, const std::vector<int>& p0,
                  const std::vector<int>& p1, const std::vector<std::vector<int32_t>>& tables,
                  std::vector<int32_t>* slots, bool with_skipped_rows) {
    const int64_t stride = static_cast<int64_t>(c.nq + 2 * c.nkv) * c.hd;
    std::vector<float> rows;
    slots->clear();
    for (size_t s = 0; s < seqs.size(); ++s) {
      for (int pos = p0[s]; pos < p1[s]; ++pos) {
        const int q_row = pos - (c.len_k[s] - c.len_q[s]);
        std::vector<float> row(stride, 0.0f);
        if (q_row >= 0) std::copy_n(seqs[s].q.begin() + q_row * c.nq * c.hd, c.nq * c.hd, row.begin());
        std::copy_n(seqs[s].k.begin() + pos * c.nkv * c.hd, c.nkv * c.hd, row.begin() + c.nq * c.hd);
        std::copy_n(seqs[s].v.begin() + pos * c.nkv * c.hd, c.nkv * c.hd, row.begin() + (c.nq + c.nkv) * c.hd);
        rows.insert(rows.end(), row.begin(), row.end());
        slots->push_back(tables[s][pos / c.block_size] * c.block_size + pos % c.block_size);
        if (with_skipped_rows && pos % 5 == 2) {  // a padding row: slot -1, k and v huge
          rows.insert(rows.end(), stride, 1e6f);
          slots->push_back(-1);
        }
      }
    }
    return upload(*b, rows, {static_cast<int64_t>(slots->size()), stride});
  }

  // store_kvcache of the cached prefix, then of the step's tokens, then attention over a cache of
  // `kv_dtype` (f32, bf16 or fp8). Returns the output; *seqs_out the sequences' q, k, v.
  std::vector<float> run(const AttnCase& c, DType kv_dtype, std::vector<SeqData>* seqs_out);

  // A lossy cache of `kv_dtype`: exactly the fp32 computation over the values it holds (`hold`
  // makes a sequence's q, k and v what attention computes with: the keys and values as the cache
  // gives them back), and measurably not over the exact ones (the relative squared error from the
  // exact result lies in (min_err, max_err)). `what` names it.
  void expect_lossy_cache(const AttnCase& c, DType kv_dtype, const std::function<void(SeqData&)>& hold,
                          double min_err, double max_err, const std::string& what);
};

// k and v as an fp8 cache holds them: each (position, kv head) row quantised on its own and read
// back (common/fp8.h), the reference of the fp8 path.
std::vector<float> fp8_round_trip_rows(const std::vector<float>& x, int hd) {
  std::vector<float> out(x.size());
  std::vector<uint8_t> q(static_cast<size_t>(hd));
  for (size_t r = 0; r < x.size() / hd; ++r) {
    float scale = 0;
    quantize_e4m3_row(x.data() + r * hd, hd, q.data(), &scale);
    dequantize_e4m3_row(q.data(), hd, scale, out.data() + r * hd);
  }
  return out;
}

// sum (out - exact)^2 / sum exact^2: how far a lossy cache's result is from the exact one.
double relative_sq_error(const std::vector<float>& out, const std::vector<double>& exact) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    err += (out[i] - exact[i]) * (out[i] - exact[i]);
    norm += exact[i] * exact[i];
  }
  return err / norm;
}

void AttentionTest::expect_lossy_cache(const AttnCase& c, DType kv_dtype, const std::function<void(SeqData&)>& hold,
                                       double min_err, double max_err, const std::string& what) {
  std::vector<SeqData> seqs;
  const std::vector<float> out = run(c, kv_dtype, &seqs);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  const std::vector<double> exact = attention_ref(c, seqs, scale);
  for (SeqData& s : seqs) hold(s);
  expect_close(out, attention_ref(c, seqs, scale), (what + " attention").c_str());
  const double err = relative_sq_error(out, exact);
  EXPECT_GT(err, min_err) << "the " << what << " cache gave the exact result";
  EXPECT_LT(err, max_err) << what << " error far beyond its format's";
}

TEST_P(AttentionTest, MatchesReference) {
  const AttnCase c = GetParam();
  std::vector<SeqData> seqs;
  const std::vector<float> out = run(c, DType::kF32, &seqs);
  expect_close(out, attention_ref(c, seqs, 1.0f / std::sqrt(static_cast<float>(c.hd))), "attention");
}

// Rows of hd values through kv_rotate_row (the fp8 cache's keys, and the queries with them).
std::vector<float> rotated_rows(std::vector<float> x, int hd) {
  for (size_t r = 0; r < x.size() / hd; ++r) kv_rotate_row(x.data() + r * hd, hd);
  return x;
}

// The fp8 cache: each (position, kv head) row quantised on its own (the cache really is fp8), the
// keys rotated first and the queries with them (store_kvcache rotates the step's q in qkv).
TEST_P(AttentionTest, Fp8CacheMatchesReferenceOnItsValues) {
  const AttnCase c = GetParam();
  ASSERT_TRUE(knob_flag("MINIVLLM_FP8_KV_ROTATE")) << "the reference below rotates";
  expect_lossy_cache(
      c, DType::kF8E4M3,
      [&](SeqData& s) {
        s.q = rotated_rows(s.q, c.hd);
        s.k = fp8_round_trip_rows(rotated_rows(s.k, c.hd), c.hd);
        s.v = fp8_round_trip_rows(s.v, c.hd);
      },
      1e-8, 5e-3, "fp8");
}

// The bf16 cache (kv_cache_dtype bf16, as llama.cpp's f16 one): each value rounded to bf16.
TEST_P(AttentionTest, Bf16CacheMatchesReferenceOnItsValues) {
  expect_lossy_cache(
      GetParam(), DType::kBF16,
      [](SeqData& s) {
        for (std::vector<float>* x : {&s.k, &s.v}) {
          for (float& v : *x) v = bf16_to_f32(f32_to_bf16(v));
        }
      },
      1e-12, 1e-4, "bf16");
}

std::vector<float> AttentionTest::run(const AttnCase& c, DType kv_dtype, std::vector<SeqData>* seqs_out) {
  const int num_seqs = static_cast<int>(c.len_k.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  std::vector<SeqData>& seqs = *seqs_out;
  seqs.assign(num_seqs, SeqData{});
  for (int s = 0; s < num_seqs; ++s) {
    seqs[s].q = random_floats(static_cast<size_t>(c.len_q[s]) * c.nq * c.hd, 100 + s, -2, 2);
    seqs[s].k = random_floats(static_cast<size_t>(c.len_k[s]) * c.nkv * c.hd, 200 + s, -2, 2);
    seqs[s].v = random_floats(static_cast<size_t>(c.len_k[s]) * c.nkv * c.hd, 300 + s, -1, 1);
  }
  // Blocks handed out in a scrambled order so sequences are not contiguous in the cache.
  int total_blocks = 0, max_blocks = 0;
  for (int lk : c.len_k) {
    total_blocks += (lk + c.block_size - 1) / c.block_size;
    max_blocks = std::max(max_blocks, (lk + c.block_size - 1) / c.block_size);
  }
  const int num_blocks = total_blocks + 3;
  std::vector<int32_t> pool(num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::reverse(pool.begin(), pool.end());
  std::rotate(pool.begin(), pool.begin() + 2, pool.end());
  std::vector<std::vector<int32_t>> tables(num_seqs);
  std::vector<int32_t> table_flat(static_cast<size_t>(num_seqs) * (max_blocks + 1), -1);
  size_t next = 0;
  for (int s = 0; s < num_seqs; ++s) {
    for (int blk = 0; blk < (c.len_k[s] + c.block_size - 1) / c.block_size; ++blk) {
      tables[s].push_back(pool[next++]);
      table_flat[s * (max_blocks + 1) + blk] = tables[s].back();
    }
  }
  KVCache cache = b->allocate_kv_cache(num_blocks, c.block_size, c.nkv, c.hd, kv_dtype);
  b->fill_bytes(cache.k, 0xFF);  // unwritten cache slots are NaN (f32 and e4m3): reading one fails the test
  b->fill_bytes(cache.v, 0xFF);
  if (cache.k_scale.defined()) {
    b->fill_bytes(cache.k_scale, 0xFF);
    b->fill_bytes(cache.v_scale, 0xFF);
  }

  AttentionMetadata meta;
  meta.num_seqs = num_seqs;
  meta.block_size = c.block_size;
  meta.max_num_blocks = max_blocks + 1;
  meta.block_tables = upload_i32(*b, table_flat, {num_seqs, max_blocks + 1});

  // 1. The cached prefix (positions before the query rows) goes in through store_kvcache.
  std::vector<int> zero(num_seqs, 0), prefix_end(num_seqs), end(c.len_k.begin(), c.len_k.end());
  for (int s = 0; s < num_seqs; ++s) prefix_end[s] = c.len_k[s] - c.len_q[s];
  std::vector<int32_t> slots;
  if (std::accumulate(prefix_end.begin(), prefix_end.end(), 0) > 0) {
    Tensor prefix = make_qkv(c, seqs, zero, prefix_end, tables, &slots, true);
    meta.slot_mapping = upload_i32(*b, slots, {static_cast<int64_t>(slots.size())});
    b->store_kvcache(prefix, c.nq, cache, meta);
  }
  // 2. The step itself: store the new tokens' k/v, then attend.
  Tensor qkv = make_qkv(c, seqs, prefix_end, end, tables, &slots, false);
  const int64_t tokens = static_cast<int64_t>(slots.size());
  meta.is_prefill = !c.decode;
  meta.num_tokens = static_cast<int>(tokens);
  meta.slot_mapping = upload_i32(*b, slots, {tokens});
  std::vector<int32_t> cu_q = {0}, cu_k = {0};
  for (int s = 0; s < num_seqs; ++s) {
    cu_q.push_back(cu_q.back() + c.len_q[s]);
    cu_k.push_back(cu_k.back() + c.len_k[s]);
  }
  meta.max_seqlen_q = *std::max_element(c.len_q.begin(), c.len_q.end());
  meta.max_seqlen_k = *std::max_element(c.len_k.begin(), c.len_k.end());
  meta.cu_seqlens_q = upload_i32(*b, cu_q, {num_seqs + 1});
  meta.cu_seqlens_k = upload_i32(*b, cu_k, {num_seqs + 1});
  meta.context_lens = upload_i32(*b, std::vector<int32_t>(c.len_k.begin(), c.len_k.end()), {num_seqs});
  b->store_kvcache(qkv, c.nq, cache, meta);
  if (c.window > 0) {  // blocks before every query row's window: as if freed and reused
    std::vector<int32_t> windowed = table_flat;
    for (int s = 0; s < num_seqs; ++s) {
      const int first = std::max(0, c.len_k[s] - c.len_q[s] + 1 - c.window);
      for (int blk = 0; blk < first / c.block_size; ++blk) windowed[s * (max_blocks + 1) + blk] = pool.back();
    }
    meta.block_tables = upload_i32(*b, windowed, {num_seqs, max_blocks + 1});
  }
  Tensor out = poisoned(*b, {tokens, static_cast<int64_t>(c.nq) * c.hd});
  const Tensor sinks = upload(*b, sink_logits(c.nq), {c.nq});
  b->attention(qkv, c.nq, cache, meta, scale, c.window, out, c.sinks ? &sinks : nullptr);
  return download(*b, out);
}

std::vector<AttnCase> cases() {
  return {
      // prefill, no cached prefix: 1, 7 and 129 tokens, GQA groups 1, 2, 4
      {4, 4, 64, 16, {1}, {1}, false},
      {8, 4, 128, 16, {7}, {7}, false},
      {8, 2, 64, 256, {129}, {129}, false},
      {9, 3, 64, 16, {129, 7, 1, 40}, {129, 7, 1, 40}, false},
      // prefill reading a cached prefix (cu_seqlens_k > cu_seqlens_q), ends mid-block
      {8, 2, 128, 16, {150, 33, 16}, {7, 1, 16}, false},
      {4, 4, 64, 256, {300, 129}, {129, 1}, false},
      {16, 8, 128, 16, {64, 100}, {1, 37}, false},
      // decode batches with different context lengths
      {9, 3, 64, 16, {1}, {1}, true},
      {9, 3, 64, 16, {17, 1, 300, 64, 65}, {1, 1, 1, 1, 1}, true},
      {8, 2, 128, 256, {257, 5, 1000}, {1, 1, 1}, true},
      {32, 8, 64, 16, {129, 31}, {1, 1}, true},
      {4, 4, 128, 256, {256, 255}, {1, 1}, true},
      // decode of one or two sequences with few kv heads: too few items for the threads, so the
      // keys are cut into spans whose softmax states are merged (2 or more spans, one crossing
      // blocks, unequal lengths)
      {9, 3, 64, 16, {300}, {1}, true},
      {8, 1, 128, 256, {1000}, {1}, true},
      {4, 1, 64, 16, {700, 130}, {1, 1}, true},
      // head dims off the vectorised paths (not a multiple of 32, of 8)
      {4, 2, 80, 16, {37, 20}, {37, 3}, false},
      {2, 1, 36, 16, {20, 5}, {1, 1}, true},
      // sliding windows: shorter than a block, mid-block, longer than the context; prefill with
      // and without a cached prefix, decode with spans
      {8, 2, 64, 16, {129, 7, 40}, {129, 7, 40}, false, 8},
      {9, 3, 64, 16, {150, 33, 16}, {7, 1, 16}, false, 37},
      {4, 4, 128, 16, {300, 129}, {129, 1}, false, 100},
      {9, 3, 64, 16, {17, 1, 300, 64, 65}, {1, 1, 1, 1, 1}, true, 20},
      {8, 1, 128, 16, {1000}, {1}, true, 300},
      {4, 2, 80, 16, {37, 20}, {37, 3}, false, 5000},
      // sink logits (gpt-oss): prefill with a cached prefix, decode batches, decode in spans, with a window
      {8, 2, 64, 16, {150, 33, 16}, {7, 1, 16}, false, 0, true},
      {9, 3, 64, 16, {17, 1, 300, 64, 65}, {1, 1, 1, 1, 1}, true, 0, true},
      {8, 1, 128, 256, {1000}, {1}, true, 0, true},
      {4, 1, 64, 16, {700, 130}, {1, 1}, true, 0, true},
      {8, 2, 64, 16, {129, 7, 40}, {129, 7, 40}, false, 8, true},
      {8, 1, 128, 16, {1000}, {1}, true, 300, true},
  };
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionTest, ::testing::ValuesIn(cases()));

TEST(AttentionWarmup, PrefillWithoutCacheReadsKeysFromQkv) {
  // nano-vllm's warm-up runs before the KV cache exists: no cache, no block_tables.
  auto b = make_cpu_backend();
  AttnCase c{8, 2, 64, 16, {7, 129}, {7, 129}, false};
  const int64_t stride = (c.nq + 2 * c.nkv) * c.hd;
  std::vector<SeqData> seqs(2);
  std::vector<float> rows;
  for (int s = 0; s < 2; ++s) {
    seqs[s].q = random_floats(c.len_q[s] * c.nq * c.hd, 400 + s, -2, 2);
    seqs[s].k = random_floats(c.len_k[s] * c.nkv * c.hd, 500 + s, -2, 2);
    seqs[s].v = random_floats(c.len_k[s] * c.nkv * c.hd, 600 + s, -1, 1);
    for (int p = 0; p < c.len_k[s]; ++p) {
      rows.insert(rows.end(), seqs[s].q.begin() + p * c.nq * c.hd, seqs[s].q.begin() + (p + 1) * c.nq * c.hd);
      rows.insert(rows.end(), seqs[s].k.begin() + p * c.nkv * c.hd, seqs[s].k.begin() + (p + 1) * c.nkv * c.hd);
      rows.insert(rows.end(), seqs[s].v.begin() + p * c.nkv * c.hd, seqs[s].v.begin() + (p + 1) * c.nkv * c.hd);
    }
  }
  AttentionMetadata meta;
  meta.is_prefill = true;
  meta.num_seqs = 2;
  meta.num_tokens = 136;
  meta.cu_seqlens_q = upload_i32(*b, {0, 7, 136}, {3});
  meta.cu_seqlens_k = upload_i32(*b, {0, 7, 136}, {3});
  meta.slot_mapping = upload_i32(*b, std::vector<int32_t>(136, 0), {136});
  KVCache no_cache;
  no_cache.num_kv_heads = c.nkv;
  no_cache.head_dim = c.hd;
  Tensor qkv = upload(*b, rows, {136, stride});
  b->store_kvcache(qkv, c.nq, no_cache, meta);  // a no-op without a cache
  Tensor out = poisoned(*b, {136, c.nq * c.hd});
  const float scale = 0.125f;
  b->attention(qkv, c.nq, no_cache, meta, scale, 0, out, nullptr);
  expect_close(download(*b, out), attention_ref(c, seqs, scale), "attention without cache");
}

TEST(AttentionChecks, BadBlockTableIsAnError) {
  auto b = make_cpu_backend();
  KVCache cache = b->allocate_kv_cache(2, 16, 1, 64);
  AttentionMetadata meta;
  meta.is_prefill = false;
  meta.num_seqs = 1;
  meta.block_size = 16;
  meta.context_lens = upload_i32(*b, {20}, {1});
  meta.block_tables = upload_i32(*b, {0, 2}, {1, 2});  // block 2 of 2
  Tensor qkv = b->empty(DType::kF32, {1, 3 * 64}), out = b->empty(DType::kF32, {1, 64});
  EXPECT_THROW(b->attention(qkv, 1, cache, meta, 0.125f, 0, out, nullptr), Error);
}

}  // namespace
}  // namespace minivllm::cpu_test
