// The CUDA backend's fused and widened ops against the CPU backend's unfused ones:
// linear into fp32 logits (gemv and cuBLASLt paths), qk_norm_rope_store (one kernel: norm, rope
// and the cache write) and linear_act_mul (the gate/up gemv writing act(g) * u). Outputs are
// poisoned before every call, so unwritten values show as NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "cuda_test_util.h"

namespace minivllm::cuda_test {
namespace {

constexpr int64_t kGuard = 64;  // poisoned fp32 values after the logits that must stay poisoned

// M = 1 takes the gemv; 3 and 129 take cuBLASLt (CudaBackend::use_gemv). Bias variant: 0 none, 1 bf16, 2 fp32.
void check_linear_f32(Backends& b, int64_t tokens, int64_t n, int64_t k, int variant, std::mt19937& rng) {
  const std::string tag = "f32 out M=" + std::to_string(tokens) + " N=" + std::to_string(n) +
                          " K=" + std::to_string(k) + " bias " + std::to_string(variant);
  Tensor w = random_values({n, k}, rng, 1.0f / std::sqrt(static_cast<float>(k)));
  Tensor bias = random_values({n}, rng);
  Tensor x = random_values({tokens, k}, rng);
  Tensor bc = upload(*b.cpu, bias), bg = variant == 2 ? upload_f32(*b.gpu, bias) : upload(*b.gpu, bias);
  Tensor oc = b.cpu->empty(DType::kF32, {tokens, n});
  Tensor guarded = b.gpu->empty(DType::kF32, {tokens * n + kGuard});
  b.gpu->fill_bytes(guarded, 0xFF);  // fp32 0xFFFFFFFF is a NaN
  Tensor og = guarded.rows(0, tokens * n).view({tokens, n});
  b.cpu->linear(upload(*b.cpu, x), upload(*b.cpu, w), variant == 0 ? nullptr : &bc, oc);
  b.gpu->linear(upload(*b.gpu, x), upload(*b.gpu, w), variant == 0 ? nullptr : &bg, og);
  const std::vector<float> all = download(*b.gpu, guarded);
  const std::vector<float> got(all.begin(), all.begin() + tokens * n);
  // fp32 out: no output rounding, so only accumulation order differs.
  expect_close(got, download(*b.cpu, oc), 1e-6, 2e-3, tag);
  int64_t tail_written = 0;
  for (int64_t i = tokens * n; i < static_cast<int64_t>(all.size()); ++i) tail_written += !std::isnan(all[i]);
  EXPECT_EQ(tail_written, 0) << tag << ": writes past the output";
}

TEST(CudaLinearF32, LmHeadLogitsMatchCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(81);
  for (int64_t tokens : {1, 3, 129}) check_linear_f32(b, tokens, 151936, 1024, 0, rng);
}

TEST(CudaLinearF32, OddShapesAndBiasMatchCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(82);
  for (int64_t tokens : {1, 3}) {
    for (int64_t n : {7, 129, 4097}) {
      for (int variant = 0; variant < 3; ++variant) check_linear_f32(b, tokens, n, 2056, variant, rng);
    }
  }
  for (int variant = 0; variant < 3; ++variant) check_linear_f32(b, 129, 1032, 1024, variant, rng);
}

struct RopeStoreShape {
  int nq, nkv, hd, block_size;
  int rd = 0;  // the rotary dims (partial_rotary_factor); 0: all of head_dim
};

// GPU cache [blocks, kv_heads, block_size, head_dim], CPU cache [blocks, block_size, kv_heads,
// head_dim]: gathers the GPU's written slots in the CPU's order and counts stray writes.
void check_cache(const std::vector<float>& got, const std::vector<float>& ref, const std::vector<int32_t>& slot,
                 const RopeStoreShape& s, int64_t slots, const std::string& tag) {
  std::vector<bool> written(slots, false);
  for (int32_t sl : slot) {
    if (sl >= 0) written[sl] = true;
  }
  std::vector<float> got_w, ref_w;
  int64_t unpoisoned = 0;
  for (int64_t sl = 0; sl < slots; ++sl) {
    const int64_t blk = sl / s.block_size, off = sl % s.block_size;
    for (int h = 0; h < s.nkv; ++h) {
      for (int d = 0; d < s.hd; ++d) {
        const float g = got[((blk * s.nkv + h) * s.block_size + off) * s.hd + d];
        if (written[sl]) {
          got_w.push_back(g);
          ref_w.push_back(ref[(sl * s.nkv + h) * s.hd + d]);
        } else {
          unpoisoned += !std::isnan(g);
        }
      }
    }
  }
  expect_close(got_w, ref_w, 1e-4, 0.06, tag);
  EXPECT_EQ(unpoisoned, 0) << tag << ": cache written outside slot_mapping";
}

// qk_norm_rope_store (one kernel) against the CPU's qk_norm_rope then store_kvcache: qkv and the
// cache, slot by slot; odd token counts, padding slots, with and without q/k norms.
void expect_rope_store_matches_cpu(std::initializer_list<RopeStoreShape> shapes, uint32_t seed) {
  Backends b;
  std::mt19937 rng(seed);
  for (RopeStoreShape s : shapes) {
    const int rd = s.rd > 0 ? s.rd : s.hd;
    Tensor table = rope_table(4096, rd);
    Tensor tc = upload_f32(*b.cpu, table), tg = upload_f32(*b.gpu, table);
    Tensor qn = random_values({s.hd}, rng, 0.2f, 1.0f), kn = random_values({s.hd}, rng, 0.2f, 1.0f);
    Tensor qnc = upload(*b.cpu, qn), knc = upload(*b.cpu, kn), qng = upload(*b.gpu, qn), kng = upload(*b.gpu, kn);
    for (int64_t tokens : {1, 7, 129}) {
      for (bool norms : {true, false}) {
        const std::string tag = "hd=" + std::to_string(s.hd) + " rotary=" + std::to_string(rd) +
                                " T=" + std::to_string(tokens) + (norms ? " norms" : "");
        const int num_blocks = 12;
        const int64_t slots = static_cast<int64_t>(num_blocks) * s.block_size;
        std::vector<int32_t> perm(slots);
        for (int64_t i = 0; i < slots; ++i) perm[i] = static_cast<int32_t>(i);
        std::shuffle(perm.begin(), perm.end(), rng);
        std::vector<int32_t> slot(perm.begin(), perm.begin() + tokens);
        for (int64_t t = 3; t < tokens; t += 10) slot[t] = -1;  // padding: rotated, not stored
        std::vector<int32_t> pos(tokens);
        std::uniform_int_distribution<int32_t> d(0, 4095);
        for (auto& p : pos) p = d(rng);
        const int64_t width = static_cast<int64_t>(s.nq + 2 * s.nkv) * s.hd;
        Tensor qkv = random_values({tokens, width}, rng, 1.5f);
        Tensor qc = upload(*b.cpu, qkv), qg = upload(*b.gpu, qkv);
        KVCache cc = b.cpu->allocate_kv_cache(num_blocks, s.block_size, s.nkv, s.hd);
        KVCache cg = b.gpu->allocate_kv_cache(num_blocks, s.block_size, s.nkv, s.hd);
        b.gpu->fill_bytes(cg.k, 0xFF);
        b.gpu->fill_bytes(cg.v, 0xFF);
        AttentionMetadata mc, mg;
        mc.slot_mapping = upload_i32(*b.cpu, slot);
        mg.slot_mapping = upload_i32(*b.gpu, slot);
        // The CPU reference: the unfused pair, explicitly.
        b.cpu->qk_norm_rope(qc, s.nq, s.nkv, s.hd, norms ? &qnc : nullptr, norms ? &knc : nullptr, 1e-6f,
                            upload_i32(*b.cpu, pos), tc);
        b.cpu->store_kvcache(qc, s.nq, cc, mc);
        b.gpu->qk_norm_rope_store(qg, {s.nq, s.nkv, s.hd, norms ? &qng : nullptr, norms ? &kng : nullptr, 1e-6f,
                                       upload_i32(*b.gpu, pos), tg, cg, mg});
        expect_close(download(*b.gpu, qg), download(*b.cpu, qc), 1e-4, 0.06, "qkv " + tag);
        check_cache(download(*b.gpu, cg.k), download(*b.cpu, cc.k), slot, s, slots, "k cache " + tag);
        check_cache(download(*b.gpu, cg.v), download(*b.cpu, cc.v), slot, s, slots, "v cache " + tag);
      }
    }
  }
}

TEST(CudaQkNormRopeStore, MatchesCpuUnfusedPair) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  expect_rope_store_matches_cpu({RopeStoreShape{16, 8, 128, 256}, RopeStoreShape{32, 8, 64, 16},
                                 RopeStoreShape{14, 2, 96, 32}, RopeStoreShape{5, 1, 256, 64}},
                                83);
}

// A partial rotary (the first rd dims rotate, the rest pass through into the cache): Phi-4-mini's
// 96 of 128 and 64 of 128 (the 16-byte kernel), 48 of 64, 40 of 96 and 24 of 64 (the warp kernel).
TEST(CudaQkNormRopeStore, PartialRotaryMatchesCpuUnfusedPair) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  expect_rope_store_matches_cpu({RopeStoreShape{24, 8, 128, 16, 96}, RopeStoreShape{16, 8, 128, 256, 64},
                                 RopeStoreShape{8, 2, 64, 16, 48}, RopeStoreShape{14, 2, 96, 32, 40},
                                 RopeStoreShape{9, 3, 64, 64, 24}},
                                86);
}

// Warm-up runs before the cache exists: the fused op must still rotate q and k.
TEST(CudaQkNormRopeStore, RotatesWithoutACache) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(84);
  const int nq = 16, nkv = 8, hd = 128;
  Tensor table = rope_table(64, hd);
  Tensor qkv = random_values({3, (nq + 2 * nkv) * hd}, rng);
  std::vector<int32_t> pos = {0, 17, 63};
  Tensor qc = upload(*b.cpu, qkv), qg = upload(*b.gpu, qkv);
  b.cpu->qk_norm_rope(qc, nq, nkv, hd, nullptr, nullptr, 1e-6f, upload_i32(*b.cpu, pos), upload_f32(*b.cpu, table));
  b.gpu->qk_norm_rope_store(qg, {nq, nkv, hd, nullptr, nullptr, 1e-6f, upload_i32(*b.gpu, pos),
                                 upload_f32(*b.gpu, table), KVCache{}, AttentionMetadata{}});
  expect_close(download(*b.gpu, qg), download(*b.cpu, qc), 1e-4, 0.06, "qkv without cache");
}

// tokens 1..8 take the fused gemv (where linear would take the gemv); 16 the default path.
TEST(CudaLinearActMul, MatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(85);
  struct Shape {
    int64_t inter, k;
  };
  for (Shape sh : {Shape{3072, 1024}, Shape{129, 2056}, Shape{7, 8}, Shape{1032, 3072}}) {
    for (Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
      Tensor w = random_values({2 * sh.inter, sh.k}, rng, 1.0f / std::sqrt(static_cast<float>(sh.k)));
      Tensor wc = upload(*b.cpu, w), wg = upload(*b.gpu, w);
      for (int64_t tokens : {1, 2, 3, 8, 16}) {
        if (tokens == 16 && sh.inter % 8 != 0) continue;  // cuBLASLt + act_mul need multiples of 8
        const std::string tag = "linear_act_mul " + std::string(activation_name(act)) + " M=" + std::to_string(tokens) +
                                " I=" + std::to_string(sh.inter) + " K=" + std::to_string(sh.k);
        Tensor x = random_values({tokens, sh.k}, rng);
        Tensor oc = b.cpu->empty(DType::kF32, {tokens, sh.inter});
        Tensor sc = b.cpu->empty(DType::kF32, {tokens, 2 * sh.inter});
        Tensor og = b.gpu->empty(DType::kBF16, {tokens, sh.inter});
        Tensor sg = b.gpu->empty(DType::kBF16, {tokens, 2 * sh.inter});
        b.gpu->fill_bytes(og, 0xFF);
        b.cpu->linear(upload(*b.cpu, x), wc, nullptr, sc);  // the reference, unfused
        b.cpu->act_mul(sc, oc, act);
        b.gpu->linear_act_mul(upload(*b.gpu, x), wg, sg, og, act);
        expect_close(download(*b.gpu, og), download(*b.cpu, oc), 5e-5, 0.05, tag);
      }
    }
  }
}

// A decode MLP block as one graph: add_rms_norm -> fused gate/up gemv -> down gemv (in place on
// x), replayed several times. The gemvs start early (programmatic dependent launch) and must
// still see their predecessor's output and not overwrite x while it is read.
TEST(CudaLinearActMul, ChainReplaysInAGraph) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(86);
  const int64_t hidden = 1024, inter = 3072;
  Tensor wgu = random_values({2 * inter, hidden}, rng, 1.0f / std::sqrt(static_cast<float>(hidden)));
  Tensor wd = random_values({hidden, inter}, rng, 1.0f / std::sqrt(static_cast<float>(inter)));
  Tensor norm = random_values({hidden}, rng, 0.1f, 1.0f);
  Tensor x0 = random_values({1, hidden}, rng), r0 = random_values({1, hidden}, rng);
  Tensor gu_c = upload(*b.cpu, wgu), d_c = upload(*b.cpu, wd), n_c = upload(*b.cpu, norm);
  Tensor gu_g = upload(*b.gpu, wgu), d_g = upload(*b.gpu, wd), n_g = upload(*b.gpu, norm);
  Tensor xc = upload(*b.cpu, x0), rc = upload_f32(*b.cpu, r0), xg = upload(*b.gpu, x0), rg = upload_f32(*b.gpu, r0);
  Tensor ac = b.cpu->empty(DType::kF32, {1, inter}), sc = b.cpu->empty(DType::kF32, {1, 2 * inter});
  Tensor ag = b.gpu->empty(DType::kBF16, {1, inter}), sg = b.gpu->empty(DType::kBF16, {1, 2 * inter});
  auto step = [](Backend& be, const Tensor& x, const Tensor& r, const Tensor& n, const Tensor& gu, const Tensor& d,
                 const Tensor& s, const Tensor& a) {
    be.add_rms_norm(x, r, n, 1e-6f);
    be.linear_act_mul(x, gu, s, a, Activation::kSilu);
    be.linear(a, d, nullptr, x);
  };
  ASSERT_TRUE(b.gpu->supports_graphs());
  step(*b.gpu, xg, rg, n_g, gu_g, d_g, sg, ag);  // warm-up outside the capture
  step(*b.cpu, xc, rc, n_c, gu_c, d_c, sc, ac);
  b.gpu->synchronize();
  const int graph = b.gpu->capture_graph([&] { step(*b.gpu, xg, rg, n_g, gu_g, d_g, sg, ag); });
  for (int i = 0; i < 3; ++i) {
    b.gpu->replay_graph(graph);
    step(*b.cpu, xc, rc, n_c, gu_c, d_c, sc, ac);
  }
  b.gpu->synchronize();
  expect_close(download(*b.gpu, xg), download(*b.cpu, xc), 2e-4, 0.1, "x after 4 MLP steps");
  expect_close(download(*b.gpu, rg), download(*b.cpu, rc), 2e-4, 0.1, "residual after 4 MLP steps");
}

}  // namespace
}  // namespace minivllm::cuda_test
