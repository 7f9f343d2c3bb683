// GGUF block-quantized weights kept as stored on the GPU (backend/cuda/quant_gemv.h, through
// CudaBackend's linear, linear_add_residual and embedding) against the CPU backend on the same
// blocks: Q4_K, Q6_K, Q5_0 and Q8_0, odd row counts, K of 1 to 16 blocks, 1 to 80 tokens (the gemv
// 8 tokens a launch up to 64, then the weight decoded to bf16 for cuBLASLt where N allows), the
// outputs poisoned first. Weights are random bytes with sane f16 scales (every code is valid); x is
// bf16-rounded, so both backends see the same values.
//
// Tolerances, each a bound rather than a guess: the gemv rounds x to int8 per 32 values, an error
// of at most amax / 254 a value, so a row errs by at most sum over units of amax_u / 254 x sum |w|
// (plus fp32 slop); the decoded path rounds W to bf16, at most 2^-9 of sum |w x|. The CPU (int16 x)
// errs by 1e-4 of sum |w x|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/quant_gemv.h"
#include "common/quant_blocks.h"
#include "cuda_test_util.h"
#include "graph_timing.h"

namespace minivllm::cuda_test {
namespace {

// n x k random blocks of `t`: random code bytes, f16 scales of a size that keeps the weights near 1.
Tensor random_blocks(DType t, int64_t n, int64_t k, uint32_t seed) {
  Tensor w = host_tensor(t, {n, k});
  std::mt19937 gen(seed);
  auto* bytes = static_cast<uint8_t*>(w.data());
  const size_t total = dtype_nbytes(t, n * k), block = dtype_size(t);
  for (size_t i = 0; i < total; ++i) bytes[i] = static_cast<uint8_t>(gen());
  const std::vector<size_t> at = t == DType::kQ4_K   ? std::vector<size_t>{0, 2}
                                 : t == DType::kQ6_K ? std::vector<size_t>{208}
                                                     : std::vector<size_t>{0};
  const float scale = t == DType::kQ4_K ? 0.005f : t == DType::kQ6_K ? 0.0005f : t == DType::kQ8_0 ? 0.01f : 0.06f;
  std::uniform_real_distribution<float> dist(0.2f, 1.0f);
  for (size_t b = 0; b < total / block; ++b) {
    for (size_t off : at) {
      const uint16_t h = f32_to_f16((gen() & 1 ? -1.0f : 1.0f) * dist(gen) * scale);
      std::memcpy(bytes + b * block + off, &h, 2);
    }
  }
  return w;
}

// Per output row: the int8-activation bound and sum |w x| (see the top of the file).
struct Bounds {
  std::vector<double> int8, mag;
};

Bounds bounds(const std::vector<float>& decoded, const float* x, int64_t tokens, int64_t n, int64_t k) {
  Bounds b{std::vector<double>(static_cast<size_t>(tokens * n)), std::vector<double>(static_cast<size_t>(tokens * n))};
  for (int64_t t = 0; t < tokens; ++t) {
    const float* xt = x + t * k;
    for (int64_t j = 0; j < n; ++j) {
      double q = 0, m = 0;
      for (int64_t u = 0; u < k / 32; ++u) {
        double amax = 0, wsum = 0;
        for (int64_t l = 32 * u; l < 32 * u + 32; ++l) {
          amax = std::max(amax, std::abs(static_cast<double>(xt[l])));
          wsum += std::abs(static_cast<double>(decoded[j * k + l]));
          m += std::abs(static_cast<double>(decoded[j * k + l]) * xt[l]);
        }
        q += amax / 254.0 * wsum;
      }
      b.int8[t * n + j] = q;
      b.mag[t * n + j] = m;
    }
  }
  return b;
}

const std::vector<DType> kTypes = {DType::kQ4_K, DType::kQ6_K, DType::kQ5_0, DType::kQ8_0};

// The backends with the GPU keeping block types (MINIVLLM_QUANT_WEIGHTS, on by default; set here so
// that a 0 in the caller's environment does not turn these tests into the bf16 path's).
struct QuantBackends {
  test::ScopedEnv env{"MINIVLLM_QUANT_WEIGHTS", "1"};
};

// Each gemv kernel: the streamed one (MINIVLLM_QUANT_GEMV_STREAM, one token of Q4_K and planar
// Q6_K rows of 2,048s; also at 3 stages and one CTA an SM, where a warp's ring wraps at an odd
// count), and with it off, a lane's next unit loaded before this one is decoded
// (MINIVLLM_QUANT_GEMV_PIPELINE 1: at one token; more tokens take the plain kernel), not (0), and
// the choice by rows (unset).
struct KernelKnobs {
  const char* label;
  const char* stream;    // MINIVLLM_QUANT_GEMV_STREAM
  const char* pipeline;  // MINIVLLM_QUANT_GEMV_PIPELINE, "" unset
  const char* stages;    // MINIVLLM_QUANT_STREAM_STAGES, "" unset
  const char* ctas;      // MINIVLLM_QUANT_STREAM_CTAS, "" unset
};

void PrintTo(const KernelKnobs& k, std::ostream* os) { *os << k.label; }

class CudaQuantLinearKernels : public ::testing::TestWithParam<KernelKnobs> {};

TEST_P(CudaQuantLinearKernels, MatchesCpuBackend) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  QuantBackends on;
  const KernelKnobs& k = GetParam();
  Backends be = backends_with({{"MINIVLLM_QUANT_GEMV_STREAM", k.stream},
                               {"MINIVLLM_QUANT_GEMV_PIPELINE", k.pipeline},
                               {"MINIVLLM_QUANT_STREAM_STAGES", k.stages},
                               {"MINIVLLM_QUANT_STREAM_CTAS", k.ctas}});
  ASSERT_TRUE(be.gpu->keeps_weight_dtype(DType::kQ4_K));
  for (DType t : kTypes) {
    const int64_t blk = dtype_block(t);
    // 16 and 56 K-quant blocks: Q6_K's planar rows (quant_gemv.h); 9: its ggml rows. 8, 16 and 56:
    // rows of 1, 2 and 7 of the streamed kernel's segments; 5,000 rows of 8: 2 or 3 rows a warp.
    for (const auto& [n, blocks] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {37, 3}, {129, 9}, {304, 16}, {37, 56}, {5000, 8}, {3, 8}}) {
      const int64_t k = blocks * blk;
      const Tensor w = random_blocks(t, n, k, static_cast<uint32_t>(n + k));
      std::vector<float> decoded(static_cast<size_t>(n * k));
      dequantize_to_f32(t, w.data(), decoded.data(), n * k);
      const Tensor wc = be.cpu->upload_stored_weight(w), wg = be.gpu->upload_stored_weight(w);
      ASSERT_EQ(wg.dtype(), t) << "the GPU kept no blocks";
      for (int64_t tokens : {1, 3, 8, 17, 80}) {
        if (n * tokens > 40000) continue;  // the wide shape is the streamed kernel's, at one token
        SCOPED_TRACE(std::string(dtype_name(t)) + " n " + std::to_string(n) + " k " + std::to_string(k) + " tokens " +
                     std::to_string(tokens));
        std::mt19937 rng(static_cast<uint32_t>(tokens * 7 + k));
        const Tensor x = random_values({tokens, k}, rng);
        const Tensor bias = random_values({n}, rng, 0.1f);
        const bool with_bias = tokens == 3;
        Tensor xc = upload(*be.cpu, x), yc = be.cpu->empty(DType::kF32, {tokens, n});
        const Tensor bc = upload_f32(*be.cpu, bias);
        be.cpu->linear(xc, wc, with_bias ? &bc : nullptr, yc);
        const std::vector<float> want = download(*be.cpu, yc);
        Tensor xg = upload(*be.gpu, x), yg = be.gpu->empty(DType::kF32, {tokens, n});
        const Tensor bg = upload_f32(*be.gpu, bias);
        be.gpu->fill_bytes(yg, 0xff);
        be.gpu->linear(xg, wg, with_bias ? &bg : nullptr, yg);
        const std::vector<float> got = download(*be.gpu, yg);
        const Bounds bd = bounds(decoded, x.ptr<float>(), tokens, n, k);
        const bool decoded_path = tokens > 64 && n % 8 == 0;
        for (int64_t i = 0; i < tokens * n; ++i) {
          const double tol = (decoded_path ? bd.mag[i] / 512.0 : bd.int8[i]) + 2e-4 * bd.mag[i] + 1e-5;
          ASSERT_NEAR(got[i], want[i], tol) << "output " << i;
        }
        // The residual add: the same product into an fp32 residual.
        const Tensor r = random_values({tokens, n}, rng);
        Tensor rg = upload_f32(*be.gpu, r);
        Tensor scratch = be.gpu->empty(DType::kBF16, {tokens, n});
        be.gpu->linear_add_residual(xg, wg, scratch, rg);
        const std::vector<float> added = download(*be.gpu, rg);
        std::vector<float> want_add(want.size());
        for (size_t i = 0; i < want.size(); ++i) {
          want_add[i] = r.ptr<float>()[i] + want[i] - (with_bias ? bias.ptr<float>()[i % n] : 0.0f);
        }
        for (int64_t i = 0; i < tokens * n; ++i) {
          const double tol = (decoded_path ? bd.mag[i] / 512.0 : bd.int8[i]) + 2e-4 * bd.mag[i] + 1e-5;
          ASSERT_NEAR(added[i], want_add[i], tol) << "residual " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, CudaQuantLinearKernels,
                         ::testing::Values(KernelKnobs{"streamed", "1", "", "", ""},
                                           KernelKnobs{"streamed_3_stages_1_cta", "1", "", "3", "1"},
                                           KernelKnobs{"by_rows", "0", "", "", ""},
                                           KernelKnobs{"plain", "0", "0", "", ""},
                                           KernelKnobs{"piped", "0", "1", "", ""}),
                         [](const auto& info) { return std::string(info.param.label); });

// A weight of parts of different types (WeightParts: llama-quantize's Q4_K q, k beside a Q6_K v),
// as ShardContext::upload_rows stacks it, against the CPU backend on the parts decoded and stacked:
// each part's gemv writes its rows of the output (bias included), and past 64 tokens the parts are
// decoded into one bf16 weight.
TEST(CudaQuantLinear, WeightOfMixedPartsMatchesCpuBackend) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  QuantBackends on;
  Backends be;
  ASSERT_TRUE(be.gpu->keeps_weight_parts());
  for (int64_t k : {768, 2048}) {  // Q6_K in ggml's rows, then planar
    const std::vector<std::pair<DType, int64_t>> shape = {{DType::kQ4_K, 64}, {DType::kQ4_K, 24}, {DType::kQ6_K, 24}};
    auto parts = std::make_shared<WeightParts>();
    int64_t n = 0;
    std::vector<float> decoded;
    for (const auto& [t, rows] : shape) {
      const Tensor p = random_blocks(t, rows, k, static_cast<uint32_t>(rows + k + n));
      std::vector<float> d(static_cast<size_t>(rows * k));
      dequantize_to_f32(t, p.data(), d.data(), rows * k);
      decoded.insert(decoded.end(), d.begin(), d.end());
      parts->parts.push_back(be.gpu->upload_stored_weight(p));
      n += rows;
    }
    const Tensor& first = parts->parts.front();
    const Tensor wg = Tensor(first.data(), first.dtype(), {n, k}, DeviceKind::kCuda).with_parts(parts);
    Tensor whole = host_tensor(DType::kF32, {n, k});
    std::memcpy(whole.data(), decoded.data(), decoded.size() * sizeof(float));
    const Tensor wc = be.cpu->upload_weight(whole, /*keep_f32=*/true);
    for (int64_t tokens : {1, 5, 80}) {
      SCOPED_TRACE("k " + std::to_string(k) + " tokens " + std::to_string(tokens));
      std::mt19937 rng(static_cast<uint32_t>(tokens + k));
      const Tensor x = random_values({tokens, k}, rng);
      const Tensor bias = random_values({n}, rng, 0.1f);
      Tensor xc = upload(*be.cpu, x), yc = be.cpu->empty(DType::kF32, {tokens, n});
      const Tensor bc = upload_f32(*be.cpu, bias);
      be.cpu->linear(xc, wc, &bc, yc);
      const std::vector<float> want = download(*be.cpu, yc);
      Tensor xg = upload(*be.gpu, x), yg = be.gpu->empty(DType::kF32, {tokens, n});
      const Tensor bg = upload_f32(*be.gpu, bias);
      be.gpu->fill_bytes(yg, 0xff);
      be.gpu->linear(xg, wg, &bg, yg);
      const std::vector<float> got = download(*be.gpu, yg);
      const Bounds bd = bounds(decoded, x.ptr<float>(), tokens, n, k);
      for (int64_t i = 0; i < tokens * n; ++i) {
        const double tol = (tokens > 64 ? bd.mag[i] / 512.0 : bd.int8[i]) + 2e-4 * bd.mag[i] + 1e-5;
        ASSERT_NEAR(got[i], want[i], tol) << "output " << i << " (row " << i % n << ")";
      }
    }
  }
}

// Block-quantized linears behind an RMSNorm at decode batches: x's codes come from the residual in
// the norm's kernel (rms_norm_linear, rms_norm_linear_act_mul) and h's from act(gate) * up
// (rms_norm_mlp_add_residual), the same bytes as the norm, act_mul and quantizer apart: outputs
// equal their parts bit for bit, and the CPU's within the gemv's int8 bound. 17 tokens: gemv
// launches of 8, 8 and 1; K of 2,304: a norm row of 288 chunks (two a thread, the second partial).
// K (and I) of 2,048s at one token take the streamed gemv, which reads the codes' sums too (a Q4_K
// down projection at I 2,048: the act_mul quantizer's sums).
TEST(CudaQuantLinear, NormedAndMlpCodesEqualTheirParts) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  QuantBackends on;
  Backends be;
  for (const auto& [k, inter] :
       std::vector<std::pair<int64_t, int64_t>>{{512, 768}, {2304, 1280}, {4096, 1536}, {2048, 2048}}) {
    const DType down_t = inter % 2048 == 0 ? DType::kQ4_K : DType::kQ6_K;
    const Tensor gu = random_blocks(DType::kQ4_K, 2 * inter, k, 5), down = random_blocks(down_t, k, inter, 6);
    const Tensor gug = be.gpu->upload_stored_weight(gu), downg = be.gpu->upload_stored_weight(down);
    const Tensor guc = be.cpu->upload_stored_weight(gu), downc = be.cpu->upload_stored_weight(down);
    for (int64_t tokens : {1, 3, 17}) {
      const std::string tag = "K " + std::to_string(k) + " I " + std::to_string(inter) + " tokens " + std::to_string(tokens);
      std::mt19937 rng(static_cast<uint32_t>(k + tokens));
      const Tensor res = random_values({tokens, k}, rng, 2.0f), nw = random_values({k}, rng, 0.2f, 1.0f);
      const Tensor nwg = upload(*be.gpu, nw), nwc = upload(*be.cpu, nw);
      const Tensor rg = upload_f32(*be.gpu, res);
      Tensor normed = be.gpu->empty(DType::kBF16, {tokens, k});
      Tensor gate_up = be.gpu->empty(DType::kBF16, {tokens, 2 * inter}), h = be.gpu->empty(DType::kBF16, {tokens, inter});
      const float eps = 1e-6f;
      // rms_norm_linear against the norm, then linear.
      Tensor one = be.gpu->empty(DType::kF32, {tokens, 2 * inter}), parts = be.gpu->empty(DType::kF32, {tokens, 2 * inter});
      be.gpu->rms_norm_linear({rg, nwg, eps, normed}, gug, nullptr, one);
      be.gpu->rms_norm(rg, nwg, eps, normed);
      be.gpu->linear(normed, gug, nullptr, parts);
      EXPECT_EQ(download(*be.gpu, one), download(*be.gpu, parts)) << "rms_norm_linear " << tag;
      // rms_norm_linear_act_mul against the norm, then linear_act_mul.
      Tensor h_parts = be.gpu->empty(DType::kBF16, {tokens, inter});
      be.gpu->rms_norm_linear_act_mul({rg, nwg, eps, normed}, gug, gate_up, h, Activation::kSilu);
      be.gpu->linear_act_mul(normed, gug, gate_up, h_parts, Activation::kSilu);
      EXPECT_EQ(download(*be.gpu, h), download(*be.gpu, h_parts)) << "rms_norm_linear_act_mul " << tag;
      // The MLP in one call against its parts, and near the CPU's.
      const Tensor r_one = upload_f32(*be.gpu, res), r_parts = upload_f32(*be.gpu, res), rc = upload_f32(*be.cpu, res);
      Tensor scratch = be.gpu->empty(DType::kBF16, {tokens, k});
      be.gpu->rms_norm_mlp_add_residual({r_one, nwg, eps, normed}, gug, downg, gate_up, h, scratch, r_one,
                                        Activation::kSilu);
      be.gpu->rms_norm_linear_act_mul({r_parts, nwg, eps, normed}, gug, gate_up, h_parts, Activation::kSilu);
      be.gpu->linear_add_residual(h_parts, downg, scratch, r_parts);
      const std::vector<float> got = download(*be.gpu, r_one);
      EXPECT_EQ(got, download(*be.gpu, r_parts)) << "rms_norm_mlp_add_residual " << tag;
      Tensor normed_c = be.cpu->empty(DType::kF32, {tokens, k}), gate_up_c = be.cpu->empty(DType::kF32, {tokens, 2 * inter});
      Tensor h_c = be.cpu->empty(DType::kF32, {tokens, inter}), scratch_c = be.cpu->empty(DType::kF32, {tokens, k});
      be.cpu->rms_norm_mlp_add_residual({rc, nwc, eps, normed_c}, guc, downc, gate_up_c, h_c, scratch_c, rc,
                                        Activation::kSilu);
      const std::vector<float> want = download(*be.cpu, rc);
      double scale = 0;
      for (float v : want) scale = std::max(scale, static_cast<double>(std::abs(v)));
      for (size_t i = 0; i < want.size(); ++i) {
        // int8 x and h (1/254 of each unit's amax a value) against the CPU's int16: a few parts in a
        // thousand of the output's magnitude.
        ASSERT_NEAR(got[i], want[i], 2e-2 * scale + 1e-3) << "MLP vs CPU " << tag << " value " << i;
      }
    }
  }
}

TEST(CudaQuantLinear, EmbeddingDecodesTheCpuBackendsRows) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  QuantBackends on;
  Backends be;
  for (const auto& [t, hidden] : std::vector<std::pair<DType, int64_t>>{
           {DType::kQ4_K, 512}, {DType::kQ6_K, 512}, {DType::kQ6_K, 2048}, {DType::kQ5_0, 512}, {DType::kQ8_0, 512}}) {
    SCOPED_TRACE(std::string(dtype_name(t)) + " hidden " + std::to_string(hidden));  // Q6_K at 2048: planar rows
    const int64_t vocab = 23;
    const Tensor w = random_blocks(t, vocab, hidden, 11);
    const Tensor wc = be.cpu->upload_stored_weight(w), wg = be.gpu->upload_stored_weight(w);
    // Ids of this shard (vocab_start 100) and of others, which give zero rows.
    const std::vector<int32_t> ids = {100, 122, 105, 99, 123, 111};
    Tensor oc = be.cpu->empty(DType::kF32, {6, hidden}), og = be.gpu->empty(DType::kF32, {6, hidden});
    be.cpu->embedding(upload_i32(*be.cpu, ids), wc, 100, oc);
    be.gpu->fill_bytes(og, 0xff);
    be.gpu->embedding(upload_i32(*be.gpu, ids), wg, 100, og);
    const std::vector<float> want = download(*be.cpu, oc), got = download(*be.gpu, og);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6 * std::abs(want[i]) + 1e-7) << i;
    for (int64_t i = 3 * hidden; i < 5 * hidden; ++i) EXPECT_EQ(got[i], 0.0f) << "another shard's id, value " << i;
    // bf16 out: the same values rounded.
    Tensor ob = be.gpu->empty(DType::kBF16, {6, hidden});
    be.gpu->embedding(upload_i32(*be.gpu, ids), wg, 100, ob);
    const std::vector<float> rounded = download(*be.gpu, ob);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(rounded[i], want[i], 4e-3 * std::abs(want[i]) + 1e-7) << i;
  }
}

TEST(CudaQuantLinear, RefusesOtherTypesByName) {
  EXPECT_FALSE(cuda::quant_gemv_supports(DType::kQ4_1));
  try {
    cuda::launch_quant_gemv(DType::kQ4_1, nullptr, 20, {}, nullptr, false, nullptr, false, cuda::QuantGemvOut::kStore, 1,
                            1, 32, 1, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("q4_1"), std::string::npos) << e.what();
  }
}

// Kernel timings (prints, never asserts speed): the gemv plain, pipelined and streamed (one token;
// sCxS: C CTAs an SM, S stages), on Llama-3.1-8B's projections as llama-quantize's Q4_K_M types
// them, at 1 and 4 tokens. Each graph rotates through enough weight copies (>= 256 MB) that L2
// cannot serve them; GB/s of blocks. x's codes, scales and sums are constant (the values do not
// change the time).
TEST(CudaQuantGemvBench, Kernels) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  struct Shape {
    const char* name;
    DType t;
    int64_t n, k;
  };
  for (const Shape& sh : {Shape{"qk", DType::kQ4_K, 5120, 4096}, Shape{"v", DType::kQ6_K, 1024, 4096},
                          Shape{"o", DType::kQ4_K, 4096, 4096}, Shape{"gate_up", DType::kQ4_K, 28672, 4096},
                          Shape{"down", DType::kQ4_K, 4096, 14336}, Shape{"down", DType::kQ6_K, 4096, 14336},
                          Shape{"lm_head", DType::kQ6_K, 128256, 4096}}) {
    for (int64_t tokens : {1, 4}) {
      const size_t row_bytes = dtype_nbytes(sh.t, sh.k), bytes = row_bytes * static_cast<size_t>(sh.n);
      const RotatedWeights weights(sh.n, (bytes + 2 * sh.n - 1) / (2 * sh.n));  // at least `bytes` a copy
      const int copies = weights.copies();
      const int calls = copies * std::max(1, (40 + copies - 1) / copies);
      int8_t* codes = nullptr;
      float *scales = nullptr, *sums = nullptr, *out = nullptr;
      CUDA_CHECK(cudaMalloc(&codes, static_cast<size_t>(tokens * sh.k)));
      CUDA_CHECK(cudaMalloc(&scales, static_cast<size_t>(tokens * sh.k / 32) * 4));
      CUDA_CHECK(cudaMalloc(&sums, static_cast<size_t>(tokens * sh.k / 32) * 4));
      CUDA_CHECK(cudaMemset(sums, 0, static_cast<size_t>(tokens * sh.k / 32) * 4));
      CUDA_CHECK(cudaMalloc(&out, static_cast<size_t>(tokens * sh.n) * 4));
      CUDA_CHECK(cudaMemset(codes, 0x11, static_cast<size_t>(tokens * sh.k)));
      CUDA_CHECK(cudaMemset(scales, 0, static_cast<size_t>(tokens * sh.k / 32) * 4));
      std::printf("quant_gemv %-7s %s M=%ld", sh.name, dtype_name(sh.t), static_cast<long>(tokens));
      struct Variant {
        const char* name;
        cuda::QuantGemvPlan plan;
      };
      const cuda::QuantGemvKernel kS = cuda::QuantGemvKernel::kStreamed;
      for (const Variant& v : {Variant{"plain", {}}, Variant{"piped", {cuda::QuantGemvKernel::kPiped}},
                               Variant{"s4x2", {kS, sms, 4, 2}}, Variant{"s4x3", {kS, sms, 4, 3}},
                               Variant{"s3x4", {kS, sms, 3, 4}}, Variant{"s2x4", {kS, sms, 2, 4}},
                               Variant{"s4x2sb8", {kS, sms, 4, 2, 8}},
                               Variant{"s4x2spread", {kS, sms, 4, 2, 0, true}}}) {
        if (v.plan.kernel == kS && !cuda::quant_gemv_streams(sh.t, tokens, sh.k, weights.at(0), row_bytes)) continue;
        const double us = graph_median_us_per_call(s, calls, [&] {
          for (int c = 0; c < calls; ++c) {
            cuda::launch_quant_gemv(sh.t, weights.at(c), row_bytes, cuda::QuantX{codes, scales, sums}, nullptr, false, out,
                                    true, cuda::QuantGemvOut::kAddF32, tokens, sh.n, sh.k, sh.n, s, v.plan);
          }
        });
        std::printf("  %s %6.2f us %5.0f GB/s", v.name, us, static_cast<double>(bytes) / us / 1e3);
      }
      std::printf("\n");
      cudaFree(codes);
      cudaFree(scales);
      cudaFree(sums);
      cudaFree(out);
    }
  }
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace minivllm::cuda_test
