// Element-wise, norm and linear ops of the CUDA backend against the CPU backend, on odd shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cuda_test_util.h"

namespace minivllm::cuda_test {
namespace {

const int64_t kTokenCounts[] = {1, 7, 129, 4097};

TEST(CudaOps, EmbeddingIsVocabParallel) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(1);
  const int64_t rows = 1000, hidden = 264, vocab_start = 500;
  Tensor w = random_values({rows, hidden}, rng);
  Tensor wc = upload(*b.cpu, w), wg = upload(*b.gpu, w);
  for (int64_t tokens : kTokenCounts) {
    std::vector<int32_t> ids(tokens);
    std::uniform_int_distribution<int32_t> d(0, 1999);  // half of them belong to another shard
    for (auto& id : ids) id = d(rng);
    Tensor oc = b.cpu->empty(DType::kF32, {tokens, hidden});
    Tensor og = b.gpu->empty(DType::kBF16, {tokens, hidden});
    b.gpu->fill_bytes(og, 0xFF);
    b.cpu->embedding(upload_i32(*b.cpu, ids), wc, vocab_start, oc);
    b.gpu->embedding(upload_i32(*b.gpu, ids), wg, vocab_start, og);
    expect_close(download(*b.gpu, og), download(*b.cpu, oc), 0.0, 0.0, "embedding " + std::to_string(tokens));
    // Straight into an fp32 tensor (the residual stream), as the model does on one rank.
    Tensor og32 = b.gpu->empty(DType::kF32, {tokens, hidden});
    b.gpu->fill_bytes(og32, 0xFF);
    b.gpu->embedding(upload_i32(*b.gpu, ids), wg, vocab_start, og32);
    expect_close(download(*b.gpu, og32), download(*b.cpu, oc), 0.0, 0.0, "embedding f32 " + std::to_string(tokens));
  }
}

// Dummy weights made in place: the GPU's bf16 values are the CPU's fp32 ones rounded, for a row
// shard, a column shard and a 1-D part (the hash and its scaling are bit-identical on both).
TEST(CudaOps, FillHashedUniformMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  const HashedUniform h{0x9E3779B97F4A7C15ull, -0.25f, 0.5f / 16777216.0f};
  struct Case {
    int64_t rows, cols, base, row_stride;
  };
  for (const Case& c : {Case{37, 1000, 5000, 1000}, Case{129, 264, 132, 528}, Case{1, 4097, 11, 1}}) {
    Tensor oc = b.cpu->empty(DType::kF32, {c.rows, c.cols});
    Tensor og = b.gpu->empty(DType::kBF16, {c.rows, c.cols}), og32 = b.gpu->empty(DType::kF32, {c.rows, c.cols});
    b.cpu->fill_hashed_uniform(oc, h, c.base, c.row_stride);
    b.gpu->fill_hashed_uniform(og, h, c.base, c.row_stride);
    b.gpu->fill_hashed_uniform(og32, h, c.base, c.row_stride);
    const std::vector<float> want = download(*b.cpu, oc);
    expect_close(download(*b.gpu, og32), want, 0.0, 0.0, "fill f32 rows " + std::to_string(c.rows));
    std::vector<float> rounded(want.size());
    for (size_t i = 0; i < want.size(); ++i) rounded[i] = bf16_to_f32(f32_to_bf16(want[i]));
    expect_close(download(*b.gpu, og), rounded, 0.0, 0.0, "fill bf16 rows " + std::to_string(c.rows));
  }
}

TEST(CudaOps, RmsNormAndFusedAdd) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(2);
  // 4104 = 513 chunks of 8 over 256 threads: thread 0 takes three chunks, the others two (the
  // first in registers across the reduction, the rest reloaded).
  for (int64_t n : {576, 1024, 2048, 4104}) {
    Tensor w = random_values({n}, rng, 0.2f, 1.0f);
    Tensor wc = upload(*b.cpu, w), wg = upload(*b.gpu, w), wg32 = upload_f32(*b.gpu, w);
    for (int64_t tokens : kTokenCounts) {
      const std::string tag = " n=" + std::to_string(n) + " T=" + std::to_string(tokens);
      Tensor x = random_values({tokens, n}, rng, 2.0f);
      Tensor r = random_values({tokens, n}, rng, 2.0f);
      // rms_norm into a separate output (bf16 weight) and in place (fp32 weight).
      Tensor xc = upload(*b.cpu, x), xg = upload(*b.gpu, x);
      Tensor oc = b.cpu->empty(DType::kF32, {tokens, n}), og = b.gpu->empty(DType::kBF16, {tokens, n});
      b.gpu->fill_bytes(og, 0xFF);
      b.cpu->rms_norm(xc, wc, 1e-6f, oc);
      b.gpu->rms_norm(xg, wg, 1e-6f, og);
      expect_close(download(*b.gpu, og), download(*b.cpu, oc), 1e-4, 0.08, "rms_norm" + tag);
      b.gpu->rms_norm(xg, wg32, 1e-6f, xg);
      expect_close(download(*b.gpu, xg), download(*b.cpu, oc), 1e-4, 0.08, "rms_norm in place" + tag);
      // add_rms_norm: both the residual and the normed x.
      xc = upload(*b.cpu, x), xg = upload(*b.gpu, x);
      Tensor rc = upload(*b.cpu, r), rg = upload(*b.gpu, r);
      b.cpu->add_rms_norm(xc, rc, wc, 1e-6f);
      b.gpu->add_rms_norm(xg, rg, wg, 1e-6f);
      expect_close(download(*b.gpu, rg), download(*b.cpu, rc), 1e-4, 0.1, "add_rms_norm residual" + tag);
      expect_close(download(*b.gpu, xg), download(*b.cpu, xc), 1e-4, 0.08, "add_rms_norm x" + tag);
      // add_rms_norm with an fp32 residual stream: the residual is exact, no bf16 rounding.
      xc = upload(*b.cpu, x), xg = upload(*b.gpu, x);
      rc = upload(*b.cpu, r);
      Tensor rg32 = upload_f32(*b.gpu, r);
      b.cpu->add_rms_norm(xc, rc, wc, 1e-6f);
      b.gpu->add_rms_norm(xg, rg32, wg, 1e-6f);
      expect_close(download(*b.gpu, rg32), download(*b.cpu, rc), 1e-10, 1e-5, "add_rms_norm f32 residual" + tag);
      expect_close(download(*b.gpu, xg), download(*b.cpu, xc), 1e-4, 0.08, "add_rms_norm f32 x" + tag);
    }
  }
}

TEST(CudaOps, ActMul) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(3);
  const int64_t inter = 1536;
  for (Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
    for (int64_t tokens : kTokenCounts) {
      Tensor gu = random_values({tokens, 2 * inter}, rng, 2.0f);
      Tensor oc = b.cpu->empty(DType::kF32, {tokens, inter}), og = b.gpu->empty(DType::kBF16, {tokens, inter});
      b.gpu->fill_bytes(og, 0xFF);
      b.cpu->act_mul(upload(*b.cpu, gu), oc, act);
      b.gpu->act_mul(upload(*b.gpu, gu), og, act);
      // Outputs reach ~50, where half a bf16 step is 0.125.
      expect_close(download(*b.gpu, og), download(*b.cpu, oc), 1e-4, 0.3,
                   std::string("act_mul ") + activation_name(act) + " " + std::to_string(tokens));
    }
  }
}

TEST(CudaOps, GatherRowsAndToF32) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(4);
  for (int64_t tokens : kTokenCounts) {
    Tensor x = random_values({tokens, 1000}, rng);
    std::vector<int32_t> idx = {static_cast<int32_t>(tokens - 1), 0, static_cast<int32_t>(tokens / 2)};
    Tensor xg = upload(*b.gpu, x), xc = upload(*b.cpu, x);
    Tensor og = b.gpu->empty(DType::kBF16, {3, 1000}), oc = b.cpu->empty(DType::kF32, {3, 1000});
    b.gpu->fill_bytes(og, 0xFF);
    b.gpu->gather_rows(xg, upload_i32(*b.gpu, idx), og);
    b.cpu->gather_rows(xc, upload_i32(*b.cpu, idx), oc);
    expect_close(download(*b.gpu, og), download(*b.cpu, oc), 0.0, 0.0, "gather_rows");
    Tensor fg = b.gpu->empty(DType::kF32, {3, 1000});
    b.gpu->fill_bytes(fg, 0xFF);
    b.gpu->to_f32(og, fg);
    expect_close(download(*b.gpu, fg), download(*b.cpu, oc), 0.0, 0.0, "to_f32");
    // Odd row bytes (f32 rows of 3 values) take the byte-wise path.
    Tensor s = random_values({tokens, 3}, rng);
    Tensor sg = upload_f32(*b.gpu, s), so = b.gpu->empty(DType::kF32, {3, 3});
    b.gpu->fill_bytes(so, 0xFF);
    b.gpu->gather_rows(sg, upload_i32(*b.gpu, idx), so);
    std::vector<float> got = download(*b.gpu, so), ref;
    for (int32_t i : idx) ref.insert(ref.end(), s.ptr<float>() + i * 3, s.ptr<float>() + i * 3 + 3);
    expect_close(got, ref, 0.0, 0.0, "gather_rows f32");
  }
}

// OLMo 2's q/k norms over all heads: the sums of squares, then the scaling by sums over wider widths
// (as tensor parallelism's all-reduced sums are), against the CPU; v untouched. And to_activation,
// the f32 stream rounded to bf16 once (a sublayer with no input norm reads it).
TEST(CudaOps, QkNormFullWidthAndToActivationMatchCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(9);
  struct Case {
    int nq, nkv, hd;
  };
  for (const Case& c : {Case{4, 2, 16}, Case{5, 1, 64}, Case{32, 8, 128}, Case{40, 40, 128}}) {
    const int64_t q = int64_t{c.nq} * c.hd, k = int64_t{c.nkv} * c.hd, stride = q + 2 * k;
    for (int64_t tokens : {int64_t{1}, int64_t{7}, int64_t{129}}) {
      const std::string tag = " heads " + std::to_string(c.nq) + "/" + std::to_string(c.nkv) + "x" +
                              std::to_string(c.hd) + " T=" + std::to_string(tokens);
      Tensor x = random_values({tokens, stride}, rng, 3.0f);
      Tensor qw = random_values({q}, rng, 0.2f, 1.0f), kw = random_values({k}, rng, 0.2f, 1.0f);
      Tensor xc = upload(*b.cpu, x), xg = upload(*b.gpu, x);
      Tensor sc = b.cpu->empty(DType::kF32, {tokens, 2}), sg = b.gpu->empty(DType::kF32, {tokens, 2});
      b.gpu->fill_bytes(sg, 0xFF);
      b.cpu->qk_sum_squares(xc, c.nq, c.nkv, c.hd, sc);
      b.gpu->qk_sum_squares(xg, c.nq, c.nkv, c.hd, sg);
      // Sums of up to 10,240 squares of ~9 each, in different orders: fp32 parts at ~1e-6 of the sum.
      const std::vector<float> want_sums = download(*b.cpu, sc);
      const float sum_max = *std::max_element(want_sums.begin(), want_sums.end());
      expect_close(download(*b.gpu, sg), want_sums, 1e-10, 1e-5 * sum_max, "qk_sum_squares" + tag);
      // The widths of two ranks (sums doubled): each rank's scaling of its own heads.
      for (int ranks : {1, 2}) {
        Tensor x2c = upload(*b.cpu, x), x2g = upload(*b.gpu, x);
        std::vector<float> sums = download(*b.cpu, sc);
        for (float& v : sums) v *= static_cast<float>(ranks);
        Tensor s_host = host_tensor(DType::kF32, {tokens, 2});
        std::copy(sums.begin(), sums.end(), s_host.ptr<float>());
        b.cpu->qk_norm_full_width(x2c, c.nq, c.nkv, c.hd, upload_f32(*b.cpu, s_host), q * ranks, k * ranks,
                                  upload_f32(*b.cpu, qw), upload_f32(*b.cpu, kw), 1e-6f);
        b.gpu->qk_norm_full_width(x2g, c.nq, c.nkv, c.hd, upload_f32(*b.gpu, s_host), q * ranks, k * ranks,
                                  upload_f32(*b.gpu, qw), upload_f32(*b.gpu, kw), 1e-6f);
        const std::vector<float> got = download(*b.gpu, x2g), want = download(*b.cpu, x2c);
        expect_close(got, want, 1e-5, 0.05, "qk_norm_full_width ranks " + std::to_string(ranks) + tag);
        for (int64_t t = 0; t < tokens; ++t) {  // v: the input's bits
          for (int64_t i = q + k; i < stride; ++i) ASSERT_EQ(got[t * stride + i], x.ptr<float>()[t * stride + i]) << tag;
        }
      }
    }
  }
  // One rank: undefined sums, the kernel sums each row itself.
  for (const Case& c : {Case{4, 2, 16}, Case{40, 40, 128}}) {
    const int64_t q = int64_t{c.nq} * c.hd, k = int64_t{c.nkv} * c.hd, stride = q + 2 * k;
    Tensor x = random_values({7, stride}, rng, 3.0f);
    Tensor qw = random_values({q}, rng, 0.2f, 1.0f), kw = random_values({k}, rng, 0.2f, 1.0f);
    Tensor xc = upload(*b.cpu, x), xg = upload(*b.gpu, x);
    b.cpu->qk_norm_full_width(xc, c.nq, c.nkv, c.hd, Tensor(), q, k, upload_f32(*b.cpu, qw), upload_f32(*b.cpu, kw),
                              1e-6f);
    b.gpu->qk_norm_full_width(xg, c.nq, c.nkv, c.hd, Tensor(), q, k, upload_f32(*b.gpu, qw), upload_f32(*b.gpu, kw),
                              1e-6f);
    expect_close(download(*b.gpu, xg), download(*b.cpu, xc), 1e-5, 0.05,
                 "qk_norm_full_width, own sums, heads " + std::to_string(c.nq));
  }
  for (int64_t n : {int64_t{8}, int64_t{576}, int64_t{4104} * 129}) {
    Tensor r = host_tensor(DType::kF32, {n});
    std::normal_distribution<float> d(0.0f, 3.0f);
    for (int64_t i = 0; i < n; ++i) r.ptr<float>()[i] = d(rng);  // not bf16 values: the rounding shows
    Tensor og = b.gpu->empty(DType::kBF16, {n});
    b.gpu->to_activation(upload_f32(*b.gpu, r), og);
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = bf16_to_f32(f32_to_bf16(r.ptr<float>()[i]));
    expect_close(download(*b.gpu, og), want, 0.0, 0.0, "to_activation " + std::to_string(n));
  }
}

// A sandwich norm's join (Backend::norm_add_norm, one kernel on CUDA) against the CPU's ops one by
// one: with a next norm (Gemma, GLM-4; bf16 and f32 weights) and without (OLMo 2: the stream copied).
TEST(CudaOps, NormAddNormMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(10);
  for (int64_t n : {576, 2048, 4104}) {
    Tensor wo = random_values({n}, rng, 0.2f, 1.0f), wn = random_values({n}, rng, 0.2f, 1.0f);
    for (int64_t tokens : kTokenCounts) {
      for (int next : {0, 1, 2}) {  // none, bf16, f32
        const std::string tag = " n=" + std::to_string(n) + " T=" + std::to_string(tokens) + " next " +
                                std::to_string(next);
        Tensor x = random_values({tokens, n}, rng, 2.0f), r = random_values({tokens, n}, rng, 2.0f);
        Tensor xc = upload(*b.cpu, x), rc = upload(*b.cpu, r);
        Tensor xg = upload(*b.gpu, x), rg = upload_f32(*b.gpu, r);
        const Tensor nc = next == 0 ? Tensor() : upload(*b.cpu, wn);
        const Tensor ng = next == 0 ? Tensor() : next == 1 ? upload(*b.gpu, wn) : upload_f32(*b.gpu, wn);
        b.cpu->norm_add_norm(xc, upload(*b.cpu, wo), 1e-6f, rc, nc, 1e-5f);
        b.gpu->norm_add_norm(xg, upload(*b.gpu, wo), 1e-6f, rg, ng, 1e-5f);
        // The GPU adds the output norm rounded to bf16 (as its unfused ops do), the CPU in fp32.
        expect_close(download(*b.gpu, rg), download(*b.cpu, rc), 1e-5, 0.05, "residual" + tag);
        expect_close(download(*b.gpu, xg), download(*b.cpu, xc), 1e-4, next == 0 ? 0.1 : 0.08, "x" + tag);
      }
    }
  }
}

// Qwen2-MoE's shared expert gate (Backend::sigmoid_gate_rows): each row of out scaled by sigmoid of its
// x row's dot with the gate, against the CPU; gates whose logits are 0 (s = 1/2, exact) and far past
// either side (s = 0 and 1) beside random ones, widths that are not powers of two.
TEST(CudaOps, SigmoidGateRowsMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(11);
  for (int64_t hidden : {64, 2048, 4104}) {
    for (int64_t n : {8, 48, 1416}) {
      for (int64_t tokens : kTokenCounts) {
        if (tokens > 129 && hidden > 64) continue;  // many rows: one grid past a wave is enough
        for (float gate_scale : {0.0f, 1.0f, 100.0f}) {
          const std::string tag = " H=" + std::to_string(hidden) + " N=" + std::to_string(n) +
                                  " T=" + std::to_string(tokens) + " gate scale " + std::to_string(gate_scale);
          Tensor x = random_values({tokens, hidden}, rng), out = random_values({tokens, n}, rng, 2.0f);
          Tensor g = random_values({hidden}, rng, gate_scale / std::sqrt(static_cast<float>(hidden)));
          Tensor oc = upload(*b.cpu, out), og = upload(*b.gpu, out);
          b.cpu->sigmoid_gate_rows(upload(*b.cpu, x), upload_f32(*b.cpu, g), oc);
          b.gpu->sigmoid_gate_rows(upload(*b.gpu, x), upload_f32(*b.gpu, g), og);
          expect_close(download(*b.gpu, og), download(*b.cpu, oc), 1e-5, 0.04, "sigmoid_gate_rows" + tag);
          if (gate_scale == 0.0f) {  // sigmoid(0) = 1/2: every value halved, exactly
            std::vector<float> half = download(*b.cpu, upload(*b.cpu, out));
            for (float& v : half) v *= 0.5f;
            expect_close(download(*b.gpu, og), half, 0.0, 0.0, "half" + tag);
          }
        }
      }
    }
  }
}

TEST(CudaOps, LinearWithAndWithoutBias) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(5);
  const int64_t k = 1024, n = 776;
  Tensor w = random_values({n, k}, rng, 1.0f / 32.0f);
  Tensor bias = random_values({n}, rng);
  Tensor wc = upload(*b.cpu, w), wg = upload(*b.gpu, w);
  Tensor bc = upload(*b.cpu, bias), bg = upload(*b.gpu, bias), bg32 = upload_f32(*b.gpu, bias);
  for (int64_t tokens : kTokenCounts) {
    Tensor x = random_values({tokens, k}, rng);
    Tensor xc = upload(*b.cpu, x), xg = upload(*b.gpu, x);
    Tensor oc = b.cpu->empty(DType::kF32, {tokens, n}), og = b.gpu->empty(DType::kBF16, {tokens, n});
    const std::string tag = " T=" + std::to_string(tokens);
    for (int variant = 0; variant < 3; ++variant) {
      b.gpu->fill_bytes(og, 0xFF);
      const Tensor* gb = variant == 0 ? nullptr : (variant == 1 ? &bg : &bg32);
      b.cpu->linear(xc, wc, variant == 0 ? nullptr : &bc, oc);
      b.gpu->linear(xg, wg, gb, og);
      expect_close(download(*b.gpu, og), download(*b.cpu, oc), 1e-4, 0.05,
                   "linear bias variant " + std::to_string(variant) + tag);
    }
  }
}

}  // namespace
}  // namespace minivllm::cuda_test
