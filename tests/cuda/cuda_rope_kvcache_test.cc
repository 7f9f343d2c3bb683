// qk_norm_rope and store_kvcache of the CUDA backend against the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cuda_test_util.h"

namespace minivllm::cuda_test {
namespace {

struct HeadShape {
  int nq, nkv, hd;
};

TEST(CudaRope, QkNormRopeMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(11);
  // Then SmolLM2's heads (group 3), and head_dim 96 (lanes own one or two rotary pairs) and 256.
  for (HeadShape s : {HeadShape{16, 8, 128}, HeadShape{32, 8, 64}, HeadShape{4, 4, 64}, HeadShape{9, 3, 64},
                      HeadShape{10, 2, 96}, HeadShape{8, 1, 256}}) {
    Tensor table = rope_table(4096, s.hd, 1e6);
    Tensor tc = upload_f32(*b.cpu, table), tg = upload_f32(*b.gpu, table);
    Tensor qn = random_values({s.hd}, rng, 0.2f, 1.0f), kn = random_values({s.hd}, rng, 0.2f, 1.0f);
    Tensor qnc = upload(*b.cpu, qn), knc = upload(*b.cpu, kn), qng = upload(*b.gpu, qn), kng = upload_f32(*b.gpu, kn);
    for (int64_t tokens : {1, 7, 129, 4097}) {
      for (bool norms : {true, false}) {
        const int64_t width = static_cast<int64_t>(s.nq + 2 * s.nkv) * s.hd;
        Tensor qkv = random_values({tokens, width}, rng, 1.5f);
        std::vector<int32_t> pos(tokens);
        std::uniform_int_distribution<int32_t> d(0, 4095);
        for (auto& p : pos) p = d(rng);
        Tensor qc = upload(*b.cpu, qkv), qg = upload(*b.gpu, qkv);
        b.cpu->qk_norm_rope(qc, s.nq, s.nkv, s.hd, norms ? &qnc : nullptr, norms ? &knc : nullptr, 1e-6f,
                            upload_i32(*b.cpu, pos), tc);
        b.gpu->qk_norm_rope(qg, s.nq, s.nkv, s.hd, norms ? &qng : nullptr, norms ? &kng : nullptr, 1e-6f,
                            upload_i32(*b.gpu, pos), tg);
        expect_close(download(*b.gpu, qg), download(*b.cpu, qc), 1e-4, 0.06,
                     "qk_norm_rope hd=" + std::to_string(s.hd) + " T=" + std::to_string(tokens) +
                         (norms ? " norms" : ""));
      }
    }
  }
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
