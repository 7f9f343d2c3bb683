// qk_norm_rope and store_kvcache of the CUDA backend against the CPU backend, and the qkv gemv with
// the rope and the cache store in its epilogue against those unfused ops; each also with a partial
// rotary (partial_rotary_factor: the first rotary_dim dims of a head rotate, the rest pass through).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda_test_util.h"
#include "model/rope.h"

namespace minivllm::cuda_test {
namespace {

struct HeadShape {
  int nq, nkv, hd;
};

struct PartialShape {
  int nq, nkv, hd, rd;  // rd: the rotary dims (hd: the whole head)
};

// Phi-4-mini's table: head_dim 128, partial_rotary_factor 0.75 (96 rotary dims), longrope with its
// published long factors and attention factor sqrt(1 + ln 32 / ln 4096), built as the engine builds
// it (model/rope.h) for an engine whose context passes the pretrained 4,096 (the long factors).
Tensor phi4_mini_long_table() {
  ModelConfig cfg;
  cfg.head_dim = 128;
  cfg.rotary_dim = 96;
  cfg.rope_theta = 10000.0;
  RopeScaling& s = cfg.rope_scaling;
  s.type = "longrope";
  s.original_max_position_embeddings = 4096;
  s.long_factor = {1,           1.118320672, 1.250641126, 1.398617824, 1.564103225, 1.74916897,  1.956131817,
                   2.187582649, 2.446418898, 2.735880826, 3.059592084, 3.421605075, 3.826451687, 4.279200023,
                   4.785517845, 5.351743533, 5.984965424, 6.693110555, 7.485043894, 8.370679318, 9.36110372,
                   10.4687158,  11.70738129, 13.09260651, 14.64173252, 16.37415215, 18.31155283, 20.47818807,
                   22.90118105, 25.61086418, 28.64115884, 32.03,       32.1,        32.13,       32.23,
                   32.6,        32.61,       32.64,       32.66,       32.7,        32.71,       32.93,
                   32.97,       33.28,       33.49,       33.5,        44.16,       47.77};
  s.short_factor.assign(48, 1.0);
  s.attention_factor = std::sqrt(1.0 + std::log(32.0) / std::log(4096.0));
  return rope_cos_sin_table(cfg, 8192);  // an 8,192-token engine: the long factors
}

// qk_norm_rope of random q/k/v rows against the CPU backend, with and without q/k norms (a norm
// covers the whole head, pass-through dims included), on `table` ([positions, rd / 2] cos | sin).
// Without norms the pass-through dims of q and k, and all of v, must keep their input bits.
void expect_qk_norm_rope_matches_cpu(Backends& b, std::mt19937& rng, const PartialShape& s, const Tensor& table,
                                     std::initializer_list<int64_t> token_counts) {
  ASSERT_EQ(table.size(1), s.rd);
  Tensor tc = upload_f32(*b.cpu, table), tg = upload_f32(*b.gpu, table);
  Tensor qn = random_values({s.hd}, rng, 0.2f, 1.0f), kn = random_values({s.hd}, rng, 0.2f, 1.0f);
  Tensor qnc = upload(*b.cpu, qn), knc = upload(*b.cpu, kn), qng = upload(*b.gpu, qn), kng = upload_f32(*b.gpu, kn);
  for (int64_t tokens : token_counts) {
    for (bool norms : {true, false}) {
      const std::string tag = "nq " + std::to_string(s.nq) + " nkv " + std::to_string(s.nkv) + " hd " +
                              std::to_string(s.hd) + " rotary " + std::to_string(s.rd) + " T " +
                              std::to_string(tokens) + (norms ? " norms" : "");
      const int64_t width = static_cast<int64_t>(s.nq + 2 * s.nkv) * s.hd;
      Tensor qkv = random_values({tokens, width}, rng, 1.5f);
      std::vector<int32_t> pos(tokens);
      std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(table.size(0)) - 1);
      for (auto& p : pos) p = d(rng);
      Tensor qc = upload(*b.cpu, qkv), qg = upload(*b.gpu, qkv);
      b.cpu->qk_norm_rope(qc, s.nq, s.nkv, s.hd, norms ? &qnc : nullptr, norms ? &knc : nullptr, 1e-6f,
                          upload_i32(*b.cpu, pos), tc);
      b.gpu->qk_norm_rope(qg, s.nq, s.nkv, s.hd, norms ? &qng : nullptr, norms ? &kng : nullptr, 1e-6f,
                          upload_i32(*b.gpu, pos), tg);
      const std::vector<float> got = download(*b.gpu, qg);
      expect_close(got, download(*b.cpu, qc), 1e-4, 0.06, "qk_norm_rope " + tag);
      if (norms) continue;
      const float* in = qkv.ptr<float>();  // bf16 values: exact on the GPU
      int64_t moved = 0;
      for (int64_t t = 0; t < tokens; ++t) {
        for (int h = 0; h < s.nq + 2 * s.nkv; ++h) {
          for (int d2 = h < s.nq + s.nkv ? s.rd : 0; d2 < s.hd; ++d2) {
            const int64_t e = t * width + static_cast<int64_t>(h) * s.hd + d2;
            moved += got[e] != in[e];
          }
        }
      }
      EXPECT_EQ(moved, 0) << tag << ": pass-through dims of q / k, or v, changed";
    }
  }
}

TEST(CudaRope, QkNormRopeMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(11);
  // Then SmolLM2's heads (group 3), and head_dim 96 (lanes own one or two rotary pairs) and 256.
  for (PartialShape s : {PartialShape{16, 8, 128, 128}, PartialShape{32, 8, 64, 64}, PartialShape{4, 4, 64, 64},
                         PartialShape{9, 3, 64, 64}, PartialShape{10, 2, 96, 96}, PartialShape{8, 1, 256, 256}}) {
    expect_qk_norm_rope_matches_cpu(b, rng, s, rope_table(4096, s.hd, 1e6), {1, 7, 129, 4097});
  }
}

// The partial rotary: the 16-byte kernel where head_dim and the rotary dims are multiples of 16
// (Phi-4-mini's 96 of 128 on its own longrope table, 64 of 128, 48 of 64, 48 of 96), the
// warp-per-head kernel otherwise (40 of 128, 24 of 64, 2 of 64, 72 of 96).
TEST(CudaRope, PartialRotaryMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(17);
  for (PartialShape s : {PartialShape{24, 8, 128, 96}, PartialShape{16, 8, 128, 64}, PartialShape{8, 2, 64, 48},
                         PartialShape{10, 2, 96, 48}, PartialShape{12, 4, 128, 40}, PartialShape{9, 3, 64, 24},
                         PartialShape{4, 4, 64, 2}, PartialShape{10, 2, 96, 72}}) {
    const bool phi4 = s.hd == 128 && s.rd == 96;
    expect_qk_norm_rope_matches_cpu(b, rng, s, phi4 ? phi4_mini_long_table() : rope_table(4096, s.rd, 1e4),
                                    {1, 7, 129, 1031});
  }
}

// Element by element: the same values (within tol), NaN (poison: never written) in the same places.
void expect_same_or_poisoned(const std::vector<float>& got, const std::vector<float>& ref, double tol,
                             const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::isnan(got[i]) ? std::isnan(ref[i]) : (!std::isnan(ref[i]) && std::fabs(got[i] - ref[i]) <= tol);
    if (!ok && bad++ == 0) first = static_cast<int64_t>(i);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " differ, first at " << first << " (" << got[first] << " vs "
                    << ref[first] << ")";
}

struct RopeGemvShape {
  int nq, nkv, hd;
  int64_t k;
  bool bias;
  int rd = 0;  // the rotary dims; 0: all of head_dim
};

// rms_norm_linear_rope_store and linear_rope_store (x already normed, as tensor parallelism gives
// it) where the qkv gemv applies the rope and stores k and v itself (1-2 tokens; rows up to 1,024
// through the gemv's norm prologue, longer ones after the norm kernel) against the unfused ops
// (MINIVLLM_GEMV_ROPE=0: the projection, then qk_norm_rope_store) on the same inputs: qkv and both
// caches, slot by slot. 3 tokens take the unfused ops on both.
void expect_qkv_gemv_rope_matches_unfused(std::initializer_list<RopeGemvShape> shapes, uint32_t seed) {
  Backends unfused = backends_with({{"MINIVLLM_GEMV_ROPE", "0"}});
  Backends fused;
  std::mt19937 rng(seed);
  for (RopeGemvShape s : shapes) {
    const int64_t n = static_cast<int64_t>(s.nq + 2 * s.nkv) * s.hd;
    const int rd = s.rd > 0 ? s.rd : s.hd;
    Tensor table = rope_table(4096, rd, 5e5);
    Tensor w = random_values({n, s.k}, rng, 1.0f / std::sqrt(static_cast<float>(s.k)));
    Tensor nw = random_values({s.k}, rng, 0.3f, 1.0f);
    Tensor bias = random_values({n}, rng, 0.5f);
    for (int64_t tokens : {1, 2, 3}) {
      for (bool from_normed : {false, true}) {
        const std::string tag = "nq " + std::to_string(s.nq) + " nkv " + std::to_string(s.nkv) + " hd " +
                                std::to_string(s.hd) + " rotary " + std::to_string(rd) + " K " + std::to_string(s.k) +
                                " T " + std::to_string(tokens) + (from_normed ? " linear_rope_store" : "");
        Tensor res = random_values({tokens, s.k}, rng, 3.0f);
        Tensor x = random_values({tokens, s.k}, rng, 1.0f);
        std::vector<int32_t> pos(tokens), slot(tokens);
        std::uniform_int_distribution<int32_t> dp(0, 4095), ds(0, 40 * 16 - 1);
        for (int64_t t = 0; t < tokens; ++t) {
          pos[t] = dp(rng);
          slot[t] = static_cast<int32_t>(ds(rng) / tokens * tokens + t);  // distinct slots
        }
        if (tokens == 2) slot[1] = -1;  // a padding row: rotated, not stored
        std::vector<float> qkv_out[2], k_out[2], v_out[2];
        int which = 0;
        for (Backends* b : {&unfused, &fused}) {
          Backend& g = *b->gpu;
          KVCache cache = g.allocate_kv_cache(40, 16, s.nkv, s.hd);
          g.fill_bytes(cache.k, 0xFF);
          g.fill_bytes(cache.v, 0xFF);
          AttentionMetadata meta;
          meta.slot_mapping = upload_i32(g, slot);
          Tensor qkv = g.empty(DType::kBF16, {tokens, n});
          g.fill_bytes(qkv, 0xFF);
          Tensor normed = g.empty(DType::kBF16, {tokens, s.k});
          const Tensor bg = upload(g, bias);
          if (from_normed) {
            g.linear_rope_store(upload(g, x), upload(g, w), s.bias ? &bg : nullptr, qkv,
                                {s.nq, s.nkv, s.hd, nullptr, nullptr, 1e-6f, upload_i32(g, pos), upload_f32(g, table),
                                 cache, meta});
          } else {
            g.rms_norm_linear_rope_store({upload_f32(g, res), upload(g, nw), 1e-6f, normed}, upload(g, w),
                                         s.bias ? &bg : nullptr, qkv,
                                         {s.nq, s.nkv, s.hd, nullptr, nullptr, 1e-6f, upload_i32(g, pos),
                                          upload_f32(g, table), cache, meta});
          }
          qkv_out[which] = download(g, qkv);
          k_out[which] = download(g, cache.k);
          v_out[which] = download(g, cache.v);
          ++which;
        }
        // The products sum in another order in the two gemvs: a bf16 rounding step at most.
        expect_close(qkv_out[1], qkv_out[0], 1e-5, 0.05, tag + ": qkv");
        expect_same_or_poisoned(k_out[1], k_out[0], 0.05, tag + ": k cache");
        expect_same_or_poisoned(v_out[1], v_out[0], 0.05, tag + ": v cache");
      }
    }
  }
}

TEST(CudaRope, QkvGemvWithRopeMatchesUnfused) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  // Llama-3.2-1B's heads (K = 2,048: norm kernel) and a tensor-parallel rank's half of them,
  // Qwen2.5-0.5B's (bias, K = 896), SmolLM2's group 3, head_dim 128 at n = 2,048 (two rows a CTA) and
  // 4,096 (four), head_dim 96.
  expect_qkv_gemv_rope_matches_unfused(
      {RopeGemvShape{32, 8, 64, 2048, false}, RopeGemvShape{16, 4, 64, 2048, false},
       RopeGemvShape{14, 2, 64, 896, true}, RopeGemvShape{9, 3, 64, 576, false},
       RopeGemvShape{8, 4, 128, 1024, false}, RopeGemvShape{16, 8, 128, 1024, true},
       RopeGemvShape{10, 2, 96, 1024, false}},
      13);
}

// MINIVLLM_GEMV_NORM_MAX_K=4096 (both backends): rows past 1,024 take the late norm inside the qkv
// gemv too (with the rope, and in the unfused projection, which LateNormPastTheDefaultBoundMatchesCpu
// checks against the CPU): Llama-3.2-1B's heads, Llama-3.1-8B's (K = 4,096, two rows a CTA).
TEST(CudaRope, QkvGemvWithRopeAndLateNormPastTheDefaultBoundMatchesUnfused) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  const test::ScopedEnv env("MINIVLLM_GEMV_NORM_MAX_K", "4096");
  expect_qkv_gemv_rope_matches_unfused({RopeGemvShape{32, 8, 64, 2048, false}, RopeGemvShape{32, 8, 128, 4096, true}},
                                       17);
}

// The same with a partial rotary, where a CTA's pairs of rows are rotary pairs (i, i + rd / 2) or
// two pass-through rows (rope_slot): Phi-4-mini's heads (24 / 8 of 128, 96 rotary; n = 5,120, four
// rows a CTA; K = 3,072: norm kernel) and a tensor-parallel rank's half of them (K = 1,024: the
// gemv's prologue), 64 of 128 with bias, 48 of 64 (two rows a CTA), 40 of 96 and 2 of 64.
TEST(CudaRope, PartialRotaryQkvGemvWithRopeMatchesUnfused) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  expect_qkv_gemv_rope_matches_unfused(
      {RopeGemvShape{24, 8, 128, 3072, false, 96}, RopeGemvShape{12, 4, 128, 1024, false, 96},
       RopeGemvShape{8, 4, 128, 1024, true, 64}, RopeGemvShape{4, 2, 64, 512, false, 48},
       RopeGemvShape{10, 2, 96, 1024, true, 40}, RopeGemvShape{8, 2, 64, 256, false, 2}},
      19);
}

// The GPU cache is [blocks, kv_heads, block_size, head_dim], the CPU's [blocks, block_size,
// kv_heads, head_dim]: compare slot by slot; slots nobody wrote must keep the GPU's poison.
TEST(CudaKvCache, StoreKvcacheWritesTheMappedSlots) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(12);
  for (int block_size : {16, 256}) {
    for (HeadShape s : {HeadShape{16, 8, 128}, HeadShape{32, 8, 64}, HeadShape{12, 2, 96}, HeadShape{8, 2, 256}}) {
      const int num_blocks = 40;
      const int64_t slots = static_cast<int64_t>(num_blocks) * block_size;
      const int64_t tokens = 129;
      std::vector<int32_t> perm(slots);
      for (int64_t i = 0; i < slots; ++i) perm[i] = static_cast<int32_t>(i);
      std::shuffle(perm.begin(), perm.end(), rng);
      std::vector<int32_t> slot(perm.begin(), perm.begin() + tokens);
      for (int64_t t = 0; t < tokens; t += 10) slot[t] = -1;  // padding tokens
      const int64_t width = static_cast<int64_t>(s.nq + 2 * s.nkv) * s.hd;
      Tensor qkv = random_values({tokens, width}, rng);
      KVCache cc = b.cpu->allocate_kv_cache(num_blocks, block_size, s.nkv, s.hd);
      KVCache cg = b.gpu->allocate_kv_cache(num_blocks, block_size, s.nkv, s.hd);
      b.gpu->fill_bytes(cg.k, 0xFF);
      b.gpu->fill_bytes(cg.v, 0xFF);
      AttentionMetadata mc, mg;
      mc.slot_mapping = upload_i32(*b.cpu, slot);
      mg.slot_mapping = upload_i32(*b.gpu, slot);
      b.cpu->store_kvcache(upload(*b.cpu, qkv), s.nq, cc, mc);
      b.gpu->store_kvcache(upload(*b.gpu, qkv), s.nq, cg, mg);
      for (int which = 0; which < 2; ++which) {
        const std::vector<float> ref = download(*b.cpu, which == 0 ? cc.k : cc.v);
        const std::vector<float> got = download(*b.gpu, which == 0 ? cg.k : cg.v);
        std::vector<bool> written(slots, false);
        for (int32_t sl : slot) {
          if (sl >= 0) written[sl] = true;
        }
        int64_t bad = 0, unpoisoned = 0;
        for (int64_t sl = 0; sl < slots; ++sl) {
          const int64_t blk = sl / block_size, off = sl % block_size;
          for (int h = 0; h < s.nkv; ++h) {
            for (int d = 0; d < s.hd; ++d) {
              const float g = got[((blk * s.nkv + h) * block_size + off) * s.hd + d];
              if (written[sl]) {
                bad += g != ref[(sl * s.nkv + h) * s.hd + d];
              } else {
                unpoisoned += !std::isnan(g);
              }
            }
          }
        }
        EXPECT_EQ(bad, 0) << (which == 0 ? "k" : "v") << " cache, block_size " << block_size;
        EXPECT_EQ(unpoisoned, 0) << (which == 0 ? "k" : "v") << " cache written outside slot_mapping";
      }
    }
  }
}

}  // namespace
}  // namespace minivllm::cuda_test
