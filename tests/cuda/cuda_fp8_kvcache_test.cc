// The FP8 KV cache on the GPU against the CPU backend's (the reference, common/fp8.h):
// - store_kvcache writes the same e4m3 bytes and scales as the CPU from the same bf16 inputs, and
//   rotates q and k in qkv as the CPU does (common/fp8.h: kv_rotate_row);
// - the fused qk_norm_rope_store writes what rope followed by the host's quantisation gives;
// - decode and prefill attention over an fp8 cache (dequantised on load) match the CPU backend's
//   attention over its fp8 cache: GQA groups 1 to 8 (3, 5, 6, 7 included), head_dim 64, 96, 128,
//   256, block sizes 16, 64 and 256, cached prefixes (chunked prefill) and split-KV decode.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attention_case.h"
#include "common/fp8.h"
#include "common/tuning.h"

namespace minivllm::cuda_test {
namespace {

struct HeadShape {
  int nq, nkv, hd;
};

std::vector<uint8_t> bytes_of(Backend& b, const Tensor& t) {
  std::vector<uint8_t> v(t.nbytes());
  b.copy_to_host(v.data(), t);
  return v;
}

std::vector<float> floats_of(Backend& b, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  b.copy_to_host(v.data(), t);
  return v;
}

// GPU cache rows are (block, kv head, offset), the CPU's (block, offset, kv head).
int64_t gpu_row(int64_t slot, int h, int nkv, int block_size) {
  return (slot / block_size * nkv + h) * block_size + slot % block_size;
}

TEST(CudaFp8KvCache, StoreWritesTheCpuBytesAndScales) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(81);
  for (int block_size : {16, 256}) {
    for (HeadShape s : {HeadShape{16, 8, 128}, HeadShape{9, 3, 64}, HeadShape{12, 2, 96}, HeadShape{8, 2, 256}}) {
      const int num_blocks = 12;
      const int64_t slots = static_cast<int64_t>(num_blocks) * block_size, tokens = 129;
      std::vector<int32_t> perm(slots);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      std::vector<int32_t> slot(perm.begin(), perm.begin() + tokens);
      for (int64_t t = 0; t < tokens; t += 10) slot[t] = -1;  // padding tokens store nothing
      const int64_t width = static_cast<int64_t>(s.nq + 2 * s.nkv) * s.hd;
      Tensor qkv = random_values({tokens, width}, rng, 2.0f);
      qkv.ptr<float>()[s.nq * s.hd] = 0.0f;  // a row with a zero keeps working
      KVCache cc = b.cpu->allocate_kv_cache(num_blocks, block_size, s.nkv, s.hd, DType::kF8E4M3);
      KVCache cg = b.gpu->allocate_kv_cache(num_blocks, block_size, s.nkv, s.hd, DType::kF8E4M3);
      for (const Tensor* t : {&cg.k, &cg.v, &cg.k_scale, &cg.v_scale}) b.gpu->fill_bytes(*t, 0xFF);
      AttentionMetadata mc, mg;
      mc.slot_mapping = upload_i32(*b.cpu, slot);
      mg.slot_mapping = upload_i32(*b.gpu, slot);
      Tensor qkv_cpu = upload(*b.cpu, qkv), qkv_gpu = upload(*b.gpu, qkv);
      b.cpu->store_kvcache(qkv_cpu, s.nq, cc, mc);
      b.gpu->store_kvcache(qkv_gpu, s.nq, cg, mg);
      // q and k rotated in place (padding rows too), as the CPU's rounded to bf16; v untouched.
      const std::vector<float> got_qkv = download(*b.gpu, qkv_gpu), want_qkv = download(*b.cpu, qkv_cpu);
      int64_t bad_qkv = 0;
      for (size_t i = 0; i < got_qkv.size(); ++i) bad_qkv += got_qkv[i] != bf16_to_f32(f32_to_bf16(want_qkv[i]));
      EXPECT_EQ(bad_qkv, 0) << "hd " << s.hd << ": qkv after the store differs from the CPU's";
      if (knob_flag("MINIVLLM_FP8_KV_ROTATE")) {  // and the CPU's is H q, H k (a wrong H would pass above)
        std::vector<float> head(qkv.ptr<float>() + s.hd, qkv.ptr<float>() + 2 * s.hd);  // row 0, q head 1
        kv_rotate_row(head.data(), s.hd);
        EXPECT_EQ(std::vector<float>(want_qkv.begin() + s.hd, want_qkv.begin() + 2 * s.hd), head);
        EXPECT_NE(want_qkv[s.hd], qkv.ptr<float>()[s.hd]);
      }
      std::vector<bool> written(slots, false);
      for (int32_t sl : slot) {
        if (sl >= 0) written[sl] = true;
      }
      for (int which = 0; which < 2; ++which) {
        const uint8_t* ref = (which == 0 ? cc.k : cc.v).ptr<uint8_t>();
        const float* ref_scale = (which == 0 ? cc.k_scale : cc.v_scale).ptr<float>();
        const std::vector<uint8_t> got = bytes_of(*b.gpu, which == 0 ? cg.k : cg.v);
        const std::vector<float> got_scale = floats_of(*b.gpu, which == 0 ? cg.k_scale : cg.v_scale);
        int64_t bad = 0, bad_scale = 0, unpoisoned = 0;
        for (int64_t sl = 0; sl < slots; ++sl) {
          for (int h = 0; h < s.nkv; ++h) {
            const int64_t gr = gpu_row(sl, h, s.nkv, block_size), cr = sl * s.nkv + h;
            if (!written[sl]) {
              unpoisoned += got[gr * s.hd] != 0xFF || !std::isnan(got_scale[gr]);
              continue;
            }
            bad += std::memcmp(got.data() + gr * s.hd, ref + cr * s.hd, s.hd) != 0;
            bad_scale += got_scale[gr] != ref_scale[cr];
          }
        }
        const std::string what = std::string(which == 0 ? "k" : "v") + " hd " + std::to_string(s.hd) + " group " +
                                 std::to_string(s.nq / s.nkv) + " block_size " + std::to_string(block_size);
        EXPECT_EQ(bad, 0) << what << ": rows whose bytes differ from the CPU's";
        EXPECT_EQ(bad_scale, 0) << what << ": scales differ from the CPU's";
        EXPECT_EQ(unpoisoned, 0) << what << ": written outside slot_mapping";
      }
    }
  }
}

// The fused kernel quantises the rotated k it also writes back to qkv (in fp32: with the fp8 rotation,
// before rounding it to bf16): so its cache must be the host quantisation of that qkv (and of the
// untouched v), or that to the rounding. rd: the rotary dims of each shape (0: all
// of head_dim); qkv must also be the CPU's qk_norm_rope (k norm only), then kv_rotate_row.
void expect_fused_store_quantises_rotated_keys(std::initializer_list<HeadShape> shapes, std::initializer_list<int> rds,
                                               uint32_t seed) {
  Backends b;
  std::mt19937 rng(seed);
  const int block_size = 16, num_blocks = 16;
  ASSERT_EQ(shapes.size(), rds.size());
  auto rd_it = rds.begin();
  for (HeadShape s : shapes) {
    const int rd = *rd_it > 0 ? *rd_it : s.hd;
    ++rd_it;
    const int64_t tokens = 37, width = static_cast<int64_t>(s.nq + 2 * s.nkv) * s.hd;
    const Tensor host_table = rope_table(1024, rd);
    Tensor table = upload_f32(*b.gpu, host_table);
    const Tensor kn_host = random_values({s.hd}, rng, 0.2f, 1.0f);
    Tensor kn = upload(*b.gpu, kn_host);
    Tensor qkv = random_values({tokens, width}, rng, 1.5f);
    std::vector<int32_t> pos(tokens), slot(tokens);
    for (int64_t t = 0; t < tokens; ++t) {
      pos[t] = static_cast<int32_t>((t * 37) % 1024);
      slot[t] = t == 3 ? -1 : static_cast<int32_t>(t * 5 % (num_blocks * block_size));
    }
    KVCache cg = b.gpu->allocate_kv_cache(num_blocks, block_size, s.nkv, s.hd, DType::kF8E4M3);
    for (const Tensor* t : {&cg.k, &cg.v, &cg.k_scale, &cg.v_scale}) b.gpu->fill_bytes(*t, 0xFF);
    AttentionMetadata m;
    m.slot_mapping = upload_i32(*b.gpu, slot);
    Tensor qg = upload(*b.gpu, qkv);
    b.gpu->qk_norm_rope_store(qg, {s.nq, s.nkv, s.hd, nullptr, &kn, 1e-6f, upload_i32(*b.gpu, pos), table, cg, m});
    const std::vector<float> rotated = download(*b.gpu, qg);  // bf16 values, exact in fp32
    const bool rotate = knob_flag("MINIVLLM_FP8_KV_ROTATE");
    const std::vector<uint8_t> k8 = bytes_of(*b.gpu, cg.k), v8 = bytes_of(*b.gpu, cg.v);
    const std::vector<float> ks = floats_of(*b.gpu, cg.k_scale), vs = floats_of(*b.gpu, cg.v_scale);
    std::vector<uint8_t> q(s.hd);
    int64_t bad = 0;
    for (int64_t t = 0; t < tokens; ++t) {
      if (slot[t] < 0) continue;
      for (int h = 0; h < s.nkv; ++h) {
        const int64_t gr = gpu_row(slot[t], h, s.nkv, block_size);
        for (int part = 0; part < 2; ++part) {
          const float* x = rotated.data() + t * width + (s.nq + part * s.nkv + h) * s.hd;
          float scale = 0;
          quantize_e4m3_row(x, s.hd, q.data(), &scale);
          if (part == 1 || !rotate) {  // v (and an unrotated k): quantised from what qkv holds
            bad += std::memcmp(q.data(), (part == 0 ? k8 : v8).data() + gr * s.hd, s.hd) != 0;
            bad += (part == 0 ? ks : vs)[gr] != scale;
            continue;
          }
          // A rotated k is quantised from its fp32 rotation, qkv holds that rounded to bf16: the
          // cache row read back is qkv's k to e4m3's half step (2^-4) and bf16's (2^-8).
          std::vector<float> back(s.hd);
          dequantize_e4m3_row(k8.data() + gr * s.hd, s.hd, ks[gr], back.data());
          bad += std::fabs(ks[gr] - scale) > scale * 0.008f;
          for (int i = 0; i < s.hd; ++i) bad += std::fabs(back[i] - x[i]) > 0.07f * std::fabs(x[i]) + 0.002f * scale;
        }
      }
    }
    EXPECT_EQ(bad, 0) << "hd " << s.hd << " rotary " << rd << " group " << s.nq / s.nkv;
    EXPECT_EQ(k8[gpu_row(3 * 5, 0, s.nkv, block_size) * s.hd], 0xFF) << "slot -1 was stored";
    {  // the rotated qkv itself against the CPU's rope (k norm, no q norm) and rotation
      Tensor qc = upload(*b.cpu, qkv), knc = upload(*b.cpu, kn_host);
      b.cpu->qk_norm_rope(qc, s.nq, s.nkv, s.hd, nullptr, &knc, 1e-6f, upload_i32(*b.cpu, pos),
                          upload_f32(*b.cpu, host_table));
      std::vector<float> want = download(*b.cpu, qc);
      if (rotate) {  // the fp8 store rotates q and k after rope
        for (int64_t t = 0; t < tokens; ++t) {
          for (int h = 0; h < s.nq + s.nkv; ++h) kv_rotate_row(want.data() + t * width + h * s.hd, s.hd);
        }
      }
      expect_close(rotated, want, 1e-4, 0.06, "fp8 fused rope, hd " + std::to_string(s.hd) + " rotary " +
                                                   std::to_string(rd));
    }
  }
}

TEST(CudaFp8KvCache, FusedRopeStoreQuantisesTheRotatedKeys) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  expect_fused_store_quantises_rotated_keys(
      {HeadShape{16, 8, 128}, HeadShape{9, 3, 64}, HeadShape{10, 2, 96}, HeadShape{8, 1, 256}}, {0, 0, 0, 0}, 82);
}

// The same over a partial rotary (the fp8 cache takes the warp kernel): Phi-4-mini's 96 of 128,
// 64 of 128, 48 of 64, 40 of 96.
TEST(CudaFp8KvCache, FusedRopeStorePartialRotaryQuantisesTheRotatedKeys) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  expect_fused_store_quantises_rotated_keys(
      {HeadShape{24, 8, 128}, HeadShape{16, 8, 128}, HeadShape{8, 2, 64}, HeadShape{10, 2, 96}}, {96, 64, 48, 40}, 87);
}

constexpr double kNmse = 2e-4;  // as the bf16 attention tests: bf16 q and output; fp8 is in both sides
constexpr double kAbs = 2e-2;

void check(AttentionCase c, const std::string& name, uint32_t seed) {
  c.fp8 = true;
  Backends b;
  const AttentionOutputs o = run_attention_case(b, c, seed);
  expect_close(o.gpu, o.cpu, kNmse, kAbs, "fp8 " + name);
  EXPECT_TRUE(o.sentinel_intact) << name << ": the row after the output was written";
}

std::vector<int> contexts(int n, int max_len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(1, max_len);
  std::vector<int> v = {1, 255, 256, 257, max_len};
  while (static_cast<int>(v.size()) < n) v.push_back(d(rng));
  return v;
}

TEST(CudaFp8Attention, PrefillOverCachedPrefixes) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  check({16, 8, 128, 256, {1, 7, 129}, {1, 7, 129}}, "prefill qwen3 shapes, no prefix", 91);
  check({32, 8, 64, 16, {7, 129, 1, 65}, {7 + 300, 129 + 17, 1 + 1000, 65}}, "prefix, llama shapes, bs 16", 92);
  check({9, 3, 64, 64, {33, 100, 1}, {33 + 250, 100 + 513, 1 + 64}}, "prefix, group 3, bs 64", 93);
  check({8, 8, 128, 16, {64}, {64 + 4033}}, "a 64-token chunk after 4033 cached, group 1", 94);
  check({10, 2, 96, 16, {7, 40}, {7 + 129, 40}}, "prefix, group 5, hd 96", 95);
  check({12, 2, 256, 16, {17, 1}, {17 + 31, 1 + 300}}, "prefix, group 6, hd 256", 96);
  check({14, 2, 128, 256, {129}, {129 + 700}}, "prefix, group 7", 97);
}

TEST(CudaFp8Attention, DecodeMixedContexts) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  struct D {
    int nq, nkv, hd, bs, seqs, max_len;
    const char* name;
  };
  for (const D& d : {D{16, 8, 128, 256, 37, 3000, "qwen3 shapes, split-KV"}, D{32, 8, 64, 16, 19, 3000, "llama shapes"},
                     D{9, 3, 64, 64, 23, 2000, "group 3 (SmolLM2)"}, D{8, 8, 128, 16, 2, 2999, "group 1"},
                     D{16, 8, 64, 256, 80, 1500, "group 2, one split"}, D{10, 2, 96, 16, 9, 1200, "group 5, hd 96"},
                     D{12, 2, 256, 16, 5, 900, "group 6, hd 256"}, D{14, 2, 128, 64, 7, 1800, "group 7"},
                     D{16, 1, 128, 16, 3, 700, "group 16"}}) {
    AttentionCase c{d.nq, d.nkv, d.hd, d.bs, {}, contexts(d.seqs, d.max_len, d.seqs)};
    c.decode = true;
    check(c, std::string("decode ") + d.name, 98 + d.seqs);
  }
}

// q at 1000x the usual with keys at 1/1000, and the reverse: the scores are the random ones, but
// the cache's row scales absorb the keys' size, so q meets e4m3 keys (|k| <= 448) at magnitudes
// far from the other tests' (a kernel that took q.k in f16 without rescaling q would overflow or
// lose q to subnormals). The target models' exact kernels and a tiled one. The absolute
// tolerance scales with the largest output (bf16 output rounding is relative): the q x 1000
// Llama case reaches 3.6, and its worst error, 0.0207, is that rounding plus the caches' bytes
// (the GPU quantises bf16 keys, the CPU f32 ones).
TEST(CudaFp8Attention, DecodeWithLargeAndSmallQueries) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  for (float gain : {1000.0f, 1e-3f}) {
    for (const AttentionCase& shape : {AttentionCase{16, 8, 128, 16, {}, {}}, AttentionCase{32, 8, 64, 256, {}, {}},
                                       AttentionCase{9, 3, 64, 16, {}, {}}}) {
      AttentionCase c = shape;
      c.len_k = contexts(12, 1500, 7);
      c.decode = true;
      c.fp8 = true;
      c.q_gain = gain;
      c.k_gain = 1.0f / gain;
      const std::string name = "fp8 decode, q x " + std::to_string(gain) + ", k / it, " + std::to_string(c.nq) +
                               "/" + std::to_string(c.nkv) + " heads, hd " + std::to_string(c.hd);
      Backends b;
      const AttentionOutputs o = run_attention_case(b, c, 200 + c.nq);
      float ref_max = 1.0f;
      for (float v : o.cpu) ref_max = std::max(ref_max, std::fabs(v));
      expect_close(o.gpu, o.cpu, kNmse, kAbs * ref_max, name);
      EXPECT_TRUE(o.sentinel_intact) << name << ": the row after the output was written";
    }
  }
}

}  // namespace
}  // namespace minivllm::cuda_test
