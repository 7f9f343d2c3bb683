// The FP8 KV cache's host pieces: e4m3 conversion (every code, rounding against a brute-force
// nearest value, saturation), the per-row quantisation, the kv_cache_dtype values, the sizing of
// the cache from a memory budget (fp8 holds about twice bf16's tokens), and the CPU backend's fp8
// store (the bytes and scales quantize_e4m3_row gives, the keys rotated, slot -1 untouched).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "backend/kv_cache_spec.h"
#include "common/config_key.h"
#include "common/fp8.h"
#include "cpu_test_util.h"
#include "scoped_env.h"

namespace minivllm::cpu_test {
namespace {

bool is_nan_code(int c) { return (c & 0x7f) == 0x7f; }

TEST(E4M3, KnownValues) {
  EXPECT_EQ(e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x07), 7 * std::ldexp(1.0f, -9));
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0x39), 1.125f);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
}

TEST(E4M3, EveryCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if (is_nan_code(c)) {
      EXPECT_TRUE(std::isnan(e4m3_to_f32(f32_to_e4m3(e4m3_to_f32(static_cast<uint8_t>(c))))));
      continue;
    }
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(static_cast<uint8_t>(c))), c) << "code " << c;
  }
}

// The nearest finite e4m3 value to x, ties to the even code; beyond 448: 448 (saturation).
uint8_t nearest_e4m3(float x) {
  const float a = std::fabs(x);
  int best = 0;
  double best_d = 1e30;
  for (int c = 0; c <= 0x7e; ++c) {
    const double d = std::fabs(static_cast<double>(e4m3_to_f32(static_cast<uint8_t>(c))) - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best = c;
      best_d = d;
    }
  }
  return static_cast<uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

TEST(E4M3, RoundsToNearestEvenAndSaturates) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exp(-14, 10);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(mant(rng), exp(rng));
    ASSERT_EQ(f32_to_e4m3(x), nearest_e4m3(x)) << "x = " << x;
  }
  // Exact midpoints: ties go to the even mantissa.
  EXPECT_EQ(f32_to_e4m3(1.0625f), 0x38);                    // 1 | 1.125 -> 1
  EXPECT_EQ(f32_to_e4m3(1.1875f), 0x3a);                    // 1.125 | 1.25 -> 1.25
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.5f, -9)), 0x02);       // subnormals 1 | 2 -> 2
  EXPECT_EQ(f32_to_e4m3(std::ldexp(0.5f, -9)), 0x00);       // 0 | 1 -> 0
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7e);                     // 448 | (480) -> 448
  EXPECT_EQ(f32_to_e4m3(1e6f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(-INFINITY), 0xfe);
  EXPECT_TRUE(is_nan_code(f32_to_e4m3(NAN)));
}

TEST(E4M3, RowQuantisationErrorIsBounded) {
  for (int hd : {64, 96, 128, 256}) {
    std::vector<float> x = random_floats(static_cast<size_t>(hd), 11 + hd, -3, 3);
    x[5] = 0.0f;
    x[7] = 1e-6f;  // far below the row's range: subnormal or zero
    std::vector<uint8_t> q(static_cast<size_t>(hd));
    std::vector<float> back(static_cast<size_t>(hd));
    float scale = 0;
    quantize_e4m3_row(x.data(), hd, q.data(), &scale);
    dequantize_e4m3_row(q.data(), hd, scale, back.data());
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(scale, amax / 448.0f);
    int at_max = 0;
    for (int i = 0; i < hd; ++i) {
      at_max += (q[i] & 0x7f) == 0x7e;
      // Half a step of 3 mantissa bits (2^-4 relative), or half a subnormal step (2^-10 * scale).
      EXPECT_LE(std::fabs(back[i] - x[i]), std::max(std::fabs(x[i]) * 0.0625f, scale * std::ldexp(1.0f, -10)) * 1.0001f)
          << "hd " << hd << " i " << i << " x " << x[i] << " back " << back[i];
    }
    EXPECT_GE(at_max, 1) << "the largest value maps to +-448";
  }
  std::vector<float> zeros(64, 0.0f), back(64, 1.0f);
  std::vector<uint8_t> q(64, 0xAA);
  float scale = -1;
  quantize_e4m3_row(zeros.data(), 64, q.data(), &scale);
  dequantize_e4m3_row(q.data(), 64, scale, back.data());
  EXPECT_EQ(scale, 0.0f);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(back[i], 0.0f);
}

TEST(KvCacheSpec, ResolvesTheKeysValues) {
  EXPECT_EQ(resolve_kv_cache_dtype("auto", DType::kF32), DType::kF32);
  EXPECT_EQ(resolve_kv_cache_dtype("auto", DType::kBF16), DType::kBF16);
  EXPECT_EQ(resolve_kv_cache_dtype("bf16", DType::kF32), DType::kBF16);
  EXPECT_EQ(resolve_kv_cache_dtype("fp8", DType::kBF16), DType::kF8E4M3);
  EXPECT_EQ(resolve_kv_cache_dtype("fp8_e4m3", DType::kBF16), DType::kF8E4M3);
  try {
    resolve_kv_cache_dtype("fp4", DType::kBF16);
    FAIL() << "fp4 accepted";
  } catch (const ConfigKeyError& e) {
    EXPECT_EQ(e.key(), "kv_cache_dtype");
    EXPECT_NE(std::string(e.what()).find("'fp4'"), std::string::npos) << e.what();
  }
}

TEST(KvCacheSpec, Fp8HoldsAboutTwiceTheTokensOfBf16) {
  // Per token and layer: k and v of every kv head, plus fp8's two f32 scales per kv head.
  EXPECT_EQ(kv_cache_bytes_per_token_per_layer(8, 128, DType::kBF16), 2 * 8 * 128 * 2);
  EXPECT_EQ(kv_cache_bytes_per_token_per_layer(8, 128, DType::kF8E4M3), 2 * 8 * (128 + 4));
  EXPECT_EQ(kv_cache_bytes_per_token_per_layer(3, 64, DType::kF32), 2 * 3 * 64 * 4);
  struct Model {
    const char* name;
    int layers, nkv, hd;
  };
  const int64_t budget = int64_t{60} << 30;  // what an H100 leaves after Qwen3-0.6B's weights, roughly
  for (const Model& m : {Model{"qwen3-0.6b", 28, 8, 128}, Model{"llama-3.2-1b", 16, 8, 64}}) {
    const int64_t bf16 = kv_cache_blocks_for_budget(budget, 256, m.layers, m.nkv, m.hd, DType::kBF16);
    const int64_t fp8 = kv_cache_blocks_for_budget(budget, 256, m.layers, m.nkv, m.hd, DType::kF8E4M3);
    ASSERT_GT(bf16, 0) << m.name;
    const double ratio = static_cast<double>(fp8) / static_cast<double>(bf16);
    const double expected = 2.0 * m.hd / (m.hd + 4);  // 1.94 at head_dim 128, 1.88 at 64
    EXPECT_NEAR(ratio, expected, 2.0 / static_cast<double>(bf16)) << m.name;
    EXPECT_GT(ratio, 1.85) << m.name;
    // Exactly what fits: one more block would pass the budget.
    const int64_t block_bytes = 256 * m.layers * kv_cache_bytes_per_token_per_layer(m.nkv, m.hd, DType::kF8E4M3);
    EXPECT_LE(fp8 * block_bytes, budget);
    EXPECT_GT((fp8 + 1) * block_bytes, budget);
  }
  EXPECT_EQ(kv_cache_blocks_for_budget(-5, 16, 2, 1, 64, DType::kF8E4M3), 0);
}

TEST(CpuFp8Cache, StoreWritesEachRowsQuantisationAndSkipsMinusOne) {
  auto b = make_cpu_backend();
  const int nq = 9, nkv = 3, hd = 64, bs = 16, blocks = 4;
  const int64_t stride = (nq + 2 * nkv) * hd;
  const std::vector<int32_t> slots = {5, -1, 40, 63};
  std::vector<float> rows = random_floats(slots.size() * stride, 3, -4, 4);
  KVCache cache = b->allocate_kv_cache(blocks, bs, nkv, hd, DType::kF8E4M3);
  ASSERT_EQ(cache.dtype(), DType::kF8E4M3);
  ASSERT_TRUE(cache.k_scale.defined());
  for (const Tensor* t : {&cache.k, &cache.v, &cache.k_scale, &cache.v_scale}) b->fill_bytes(*t, 0x5A);
  AttentionMetadata meta;
  meta.slot_mapping = upload_i32(*b, slots, {4});
  b->store_kvcache(upload(*b, rows, {4, stride}), nq, cache, meta);
  const uint8_t* k8 = cache.k.ptr<uint8_t>();
  const uint8_t* v8 = cache.v.ptr<uint8_t>();
  const float* ks = cache.k_scale.ptr<float>();
  const float* vs = cache.v_scale.ptr<float>();
  std::vector<uint8_t> q(hd);
  for (size_t t = 0; t < slots.size(); ++t) {
    for (int h = 0; h < nkv; ++h) {
      const int64_t r = static_cast<int64_t>(t == 1 ? 1 : slots[t]) * nkv + h;
      if (t == 1) {  // slot -1: nothing written; slot 1 is nobody's, so still the poison
        EXPECT_EQ(k8[r * hd], 0x5A);
        continue;
      }
      for (int part = 0; part < 2; ++part) {
        float scale = 0;
        std::vector<float> x(rows.begin() + t * stride + (nq + part * nkv + h) * hd,
                             rows.begin() + t * stride + (nq + part * nkv + h + 1) * hd);
        if (part == 0) kv_rotate_row(x.data(), hd);  // keys are stored rotated
        quantize_e4m3_row(x.data(), hd, q.data(), &scale);
        EXPECT_EQ(std::memcmp(q.data(), (part == 0 ? k8 : v8) + r * hd, hd), 0) << "token " << t << " head " << h;
        EXPECT_EQ((part == 0 ? ks : vs)[r], scale);
      }
    }
  }
}

// kv_rotate_row is H x for the Sylvester Walsh-Hadamard H of order P = n & -n on each run of P
// (against the matrix, entry by entry), orthogonal and its own inverse.
TEST(KvRotation, IsTheNormalisedHadamardOnEachBlock) {
  for (int n : {32, 64, 96, 128, 256}) {
    const int p = n & -n;
    ASSERT_EQ(kv_rotation_block(n), p);
    const std::vector<float> x = random_floats(n, 7 + n, -3, 3);
    std::vector<float> y = x;
    kv_rotate_row(y.data(), n);
    double err = 0, dot_x = 0, dot_y = 0;
    for (int i = 0; i < n; ++i) {
      const int base = i / p * p;
      double want = 0;
      for (int j = 0; j < p; ++j) want += (__builtin_popcount((i - base) & j) % 2 ? -1.0 : 1.0) * x[base + j];
      err = std::max(err, std::fabs(want / std::sqrt(static_cast<double>(p)) - y[i]));
      dot_x += static_cast<double>(x[i]) * x[i];
      dot_y += static_cast<double>(y[i]) * y[i];
    }
    EXPECT_LT(err, 1e-5) << "n " << n;
    EXPECT_NEAR(dot_y, dot_x, 1e-4 * dot_x) << "n " << n;
    kv_rotate_row(y.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i], 1e-5) << "n " << n << " i " << i;
  }
}

// Why keys are rotated: trained keys carry a few large channels that the queries weight too, and
// e4m3 keeps 3 mantissa bits of each element, so the score's error is the large channels'. The
// store rotates the keys it quantises and the rows' queries in qkv; q'.k' read back from the cache
// must be q.k (to the format's error), and with two shared large channels that error must be well
// below an unrotated cache's (MINIVLLM_FP8_KV_ROTATE=0).
TEST(CpuFp8Cache, RotatedKeysCutTheScoresErrorOnLargeChannels) {
  const int nq = 2, nkv = 1, hd = 64, bs = 16, tokens = 48;
  const int64_t stride = (nq + 2 * nkv) * hd;
  std::vector<float> rows = random_floats(tokens * stride, 11, -1, 1);
  for (int t = 0; t < tokens; ++t) {
    for (int h = 0; h < nq + nkv; ++h) {
      rows[t * stride + h * hd + 5] *= 24.0f;  // channels 5 and 37: large in q and in k
      rows[t * stride + h * hd + 37] += 16.0f;
    }
  }
  std::vector<int32_t> slots(tokens);
  for (int t = 0; t < tokens; ++t) slots[t] = t;
  double err_of[2] = {0, 0};
  for (int rotate = 0; rotate < 2; ++rotate) {
    auto b = test::with_env({{"MINIVLLM_FP8_KV_ROTATE", rotate ? "1" : "0"}}, [] { return make_cpu_backend(); });
    KVCache cache = b->allocate_kv_cache(tokens / bs, bs, nkv, hd, DType::kF8E4M3);
    AttentionMetadata meta;
    meta.slot_mapping = upload_i32(*b, slots, {tokens});
    Tensor qkv = upload(*b, rows, {tokens, stride});
    b->store_kvcache(qkv, nq, cache, meta);
    const float* q_held = qkv.ptr<float>();
    std::vector<float> k(hd);
    double err = 0, norm = 0;
    for (int t = 0; t < tokens; ++t) {  // query row t (head 0) against every stored key
      for (int j = 0; j < tokens; ++j) {
        dequantize_e4m3_row(cache.k.ptr<uint8_t>() + j * hd, hd, cache.k_scale.ptr<float>()[j], k.data());
        double got = 0, exact = 0;
        for (int d = 0; d < hd; ++d) {
          got += static_cast<double>(q_held[t * stride + d]) * k[d];
          exact += static_cast<double>(rows[t * stride + d]) * rows[j * stride + nq * hd + d];
        }
        err += (got - exact) * (got - exact);
        norm += exact * exact;
      }
    }
    err_of[rotate] = err / norm;
  }
  EXPECT_LT(err_of[1], 1e-4) << "rotated: q'.k' is not q.k";
  EXPECT_LT(err_of[1], 0.25 * err_of[0]) << "rotation did not cut the error: " << err_of[1] << " vs " << err_of[0];
}

// The bf16 cache: each element rounded to nearest even (common/dtype.h), slot -1 untouched; other
// element types are refused by name.
TEST(CpuBf16Cache, StoreRoundsEachElementAndSkipsMinusOne) {
  auto b = make_cpu_backend();
  EXPECT_TRUE(b->supports_kv_cache_dtype(DType::kF32));
  EXPECT_TRUE(b->supports_kv_cache_dtype(DType::kF8E4M3));
  EXPECT_TRUE(b->supports_kv_cache_dtype(DType::kBF16));
  EXPECT_FALSE(b->supports_kv_cache_dtype(DType::kF16));
  EXPECT_THROW(b->allocate_kv_cache(2, 16, 1, 64, DType::kF16), Error);
  const int nq = 2, nkv = 1, hd = 64, bs = 16;
  KVCache cache = b->allocate_kv_cache(2, bs, nkv, hd, DType::kBF16);
  std::vector<uint16_t> sentinel(static_cast<size_t>(2 * bs * nkv * hd), 0x7fc1);
  b->copy_from_host(cache.k, sentinel.data());
  b->copy_from_host(cache.v, sentinel.data());
  const int64_t stride = (nq + 2 * nkv) * hd;
  const std::vector<float> rows = random_floats(static_cast<size_t>(2 * stride), 5, -3, 3);
  AttentionMetadata meta;
  meta.slot_mapping = upload_i32(*b, {17, -1}, {2});
  b->store_kvcache(upload(*b, rows, {2, stride}), nq, cache, meta);
  std::vector<uint16_t> k(sentinel.size()), v(sentinel.size());
  b->copy_to_host(k.data(), cache.k);
  b->copy_to_host(v.data(), cache.v);
  for (int i = 0; i < hd; ++i) {
    EXPECT_EQ(k[17 * hd + i], f32_to_bf16(rows[nq * hd + i])) << i;
    EXPECT_EQ(v[17 * hd + i], f32_to_bf16(rows[(nq + nkv) * hd + i])) << i;
  }
  for (size_t i = 0; i < k.size(); ++i) {
    if (i / hd == 17) continue;
    ASSERT_EQ(k[i], 0x7fc1) << i;
    ASSERT_EQ(v[i], 0x7fc1) << i;
  }
}

}  // namespace
}  // namespace minivllm::cpu_test
