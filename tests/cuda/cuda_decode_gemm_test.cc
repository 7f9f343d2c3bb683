// decode_gemm.cu (the wgmma decode-batch GEMM) against the CPU backend's unfused linear: every
// epilogue (store with and without a bias, fp32 or bf16 out; add into an fp32 residual; the gate/up
// silu product), token counts in every token box and across its edges (3 .. 256), K not a multiple
// of the 64-wide chunk, N not a multiple of the 128-row tile, and split-K clusters of 1 .. 8 CTAs,
// whose partial tiles are summed through distributed shared memory. Outputs are poisoned first and
// a guard past them must stay poisoned. Then the backend's routing, in a replayed graph.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "cuda_test_util.h"

namespace minivllm::cuda_test {
namespace {

using cuda::DecodeGemmEpilogue;

constexpr int64_t kGuard = 64;

#define SKIP_OFF_HOPPER() \
  if (!on_hopper()) GTEST_SKIP() << "decode_gemm needs an sm_90 GPU"

struct Case {
  int64_t tokens, n, k;
  int splits;  // 0: the launcher's choice
};

// variant: kStore 0 bf16 out, 1 fp32 out + bf16 bias, 2 bf16 out + fp32 bias.
void run_case(Backends& b, DecodeGemmEpilogue e, const Case& c, int variant, std::mt19937& rng,
              Activation act = Activation::kSilu) {
  const bool gated = e == DecodeGemmEpilogue::kActMul;
  const bool add = e == DecodeGemmEpilogue::kAddF32;
  const bool out_f32 = add || (!gated && variant == 1);
  const bool has_bias = !gated && !add && variant > 0;
  const bool bias_f32 = variant == 2;
  const int64_t rows = gated ? 2 * c.n : c.n;
  const std::string tag = std::string(gated ? activation_name(act) : add ? "add" : "store") + " v" + std::to_string(variant) +
                          " T=" + std::to_string(c.tokens) + " N=" + std::to_string(c.n) + " K=" +
                          std::to_string(c.k) + " splits=" + std::to_string(c.splits);
  Tensor w = random_values({rows, c.k}, rng, 1.0f / std::sqrt(static_cast<float>(c.k)));
  Tensor x = random_values({c.tokens, c.k}, rng);
  Tensor bias = random_values({c.n}, rng);
  Tensor r0 = random_values({c.tokens, c.n}, rng);

  // The reference: x w^T in fp32 on the CPU, then the epilogue on the host.
  Tensor full = b.cpu->empty(DType::kF32, {c.tokens, rows});
  b.cpu->linear(upload(*b.cpu, x), upload(*b.cpu, w), nullptr, full);
  const std::vector<float> xw = download(*b.cpu, full);
  // The gated epilogue's reference is the CPU backend's act_mul on the same product.
  std::vector<float> gated_ref;
  if (gated) {
    Tensor ref = b.cpu->empty(DType::kF32, {c.tokens, c.n});
    b.cpu->act_mul(full, ref, act);
    gated_ref = download(*b.cpu, ref);
  }
  std::vector<float> want(static_cast<size_t>(c.tokens * c.n));
  const std::vector<float> bias_v(bias.ptr<float>(), bias.ptr<float>() + c.n);
  const std::vector<float> r0_v(r0.ptr<float>(), r0.ptr<float>() + c.tokens * c.n);
  for (int64_t t = 0; t < c.tokens; ++t) {
    for (int64_t j = 0; j < c.n; ++j) {
      float v = xw[t * rows + j];
      if (gated) {
        v = gated_ref[t * c.n + j];
      } else if (add) {
        v += r0_v[t * c.n + j];
      } else if (has_bias) {
        v += bias_v[j];
      }
      want[t * c.n + j] = v;
    }
  }

  Tensor xg = upload(*b.gpu, x), wg = upload(*b.gpu, w);
  Tensor bg = bias_f32 ? upload_f32(*b.gpu, bias) : upload(*b.gpu, bias);
  Tensor guarded = b.gpu->empty(out_f32 ? DType::kF32 : DType::kBF16, {c.tokens * c.n + kGuard});
  b.gpu->fill_bytes(guarded, 0xFF);  // NaN in fp32 and in bf16
  Tensor out = guarded.rows(0, c.tokens * c.n).view({c.tokens, c.n});
  if (add) {
    const Tensor r0g = upload_f32(*b.gpu, r0);
    CUDA_CHECK(cudaMemcpy(out.data(), r0g.data(), c.tokens * c.n * sizeof(float), cudaMemcpyDeviceToDevice));
  }
  b.gpu->synchronize();
  cuda::launch_decode_gemm(cuda::DecodeGemmArgs{xg.data(), wg.data(), has_bias ? bg.data() : nullptr, bias_f32,
                                                out.data(), out_f32, c.tokens, c.n, c.k, e, c.splits, act},
                           nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> all = download(*b.gpu, guarded);
  const std::vector<float> got(all.begin(), all.begin() + c.tokens * c.n);
  // bf16 outputs round once (~0.4% relative); fp32 ones differ only by the summation order.
  if (out_f32) {
    expect_close(got, want, 1e-6, 2e-3, tag);
  } else {
    expect_close(got, want, 3e-5, 0.05, tag);
  }
  int64_t tail_written = 0;
  for (int64_t i = c.tokens * c.n; i < static_cast<int64_t>(all.size()); ++i) tail_written += !std::isnan(all[i]);
  EXPECT_EQ(tail_written, 0) << tag << ": writes past the output";
}

TEST(CudaDecodeGemm, StoreMatchesCpu) {
  SKIP_OFF_HOPPER();
  Backends b;
  std::mt19937 rng(91);
  int variant = 0;
  for (const Case& c : {Case{3, 1032, 200, 0}, Case{16, 72, 2048, 0}, Case{17, 4096, 1024, 0},
                        Case{100, 1032, 200, 3}, Case{129, 256, 520, 8}, Case{256, 1024, 2048, 0},
                        Case{250, 136, 64, 1}, Case{61, 3072, 2048, 5}}) {
    run_case(b, DecodeGemmEpilogue::kStore, c, variant, rng);
    variant = (variant + 1) % 3;
  }
}

TEST(CudaDecodeGemm, AddIntoResidualMatchesCpu) {
  SKIP_OFF_HOPPER();
  Backends b;
  std::mt19937 rng(92);
  for (const Case& c : {Case{4, 1024, 2048, 0}, Case{33, 1024, 3072, 0}, Case{96, 200, 1000, 2},
                        Case{191, 2048, 8192, 0}, Case{256, 1024, 2048, 7}, Case{8, 8, 8, 1}}) {
    run_case(b, DecodeGemmEpilogue::kAddF32, c, 0, rng);
  }
}

TEST(CudaDecodeGemm, ActMulMatchesCpu) {
  SKIP_OFF_HOPPER();
  Backends b;
  std::mt19937 rng(93);
  for (const Case& c : {Case{8, 3072, 1024, 0}, Case{48, 1032, 2056, 0}, Case{160, 136, 200, 3},
                        Case{225, 8192, 2048, 0}, Case{64, 72, 1024, 8}}) {
    run_case(b, DecodeGemmEpilogue::kActMul, c, 0, rng);
  }
  // GeGLU (Gemma) through the same epilogue, odd shapes.
  for (const Case& c : {Case{3, 1032, 2056, 0}, Case{160, 136, 200, 3}}) {
    run_case(b, DecodeGemmEpilogue::kActMul, c, 0, rng, Activation::kGeluTanh);
  }
}

TEST(DecodeGemmSplits, AsManyAsStayResident) {
  // Clusters of s CTAs resident at once on a 132-SM GPU of uneven GPCs (one CTA per SM).
  const int cap[9] = {0, 132, 66, 40, 32, 24, 16, 16, 14};
  EXPECT_EQ(cuda::decode_gemm_splits(8, 32, cap), 8);    // Qwen3-0.6B's o: 8 tiles of 32 chunks
  EXPECT_EQ(cuda::decode_gemm_splits(16, 32, cap), 7);   // 16 clusters of 8 would not fit
  EXPECT_EQ(cuda::decode_gemm_splits(128, 32, cap), 1);  // Llama's gate/up fills the GPU alone
  EXPECT_EQ(cuda::decode_gemm_splits(32, 16, cap), 4);
  EXPECT_EQ(cuda::decode_gemm_splits(24, 32, cap), 5);
  EXPECT_EQ(cuda::decode_gemm_splits(8, 3, cap), 3);     // never more splits than chunks
  EXPECT_EQ(cuda::decode_gemm_splits(200, 16, cap), 1);  // more tiles than clusters: no split
}

// The backend routes a 48-token MLP step here (gate/up with silu, down into the residual, then the
// norm that feeds the next step's gate/up); replayed in a graph it must match the CPU step by step:
// each kernel starts early (programmatic dependent launch) and must still see its predecessor's
// output and not overwrite what the predecessor reads.
TEST(CudaDecodeGemm, MlpChainReplaysInAGraph) {
  SKIP_OFF_HOPPER();
  Backends b;
  std::mt19937 rng(94);
  const int64_t tokens = 48, hidden = 1024, inter = 3072;
  Tensor wgu = random_values({2 * inter, hidden}, rng, 1.0f / std::sqrt(static_cast<float>(hidden)));
  Tensor wd = random_values({hidden, inter}, rng, 1.0f / std::sqrt(static_cast<float>(inter)));
  Tensor norm = random_values({hidden}, rng, 0.1f, 1.0f);
  Tensor x0 = random_values({tokens, hidden}, rng), r0 = random_values({tokens, hidden}, rng);
  Tensor gu_c = upload(*b.cpu, wgu), d_c = upload(*b.cpu, wd), n_c = upload(*b.cpu, norm);
  Tensor gu_g = upload(*b.gpu, wgu), d_g = upload(*b.gpu, wd), n_g = upload(*b.gpu, norm);
  Tensor xc = upload(*b.cpu, x0), rc = upload_f32(*b.cpu, r0), xg = upload(*b.gpu, x0), rg = upload_f32(*b.gpu, r0);
  Tensor ac = b.cpu->empty(DType::kF32, {tokens, inter}), sc = b.cpu->empty(DType::kF32, {tokens, 2 * inter});
  Tensor ag = b.gpu->empty(DType::kBF16, {tokens, inter}), sg = b.gpu->empty(DType::kBF16, {tokens, 2 * inter});
  Tensor dc = b.cpu->empty(DType::kF32, {tokens, hidden}), dg = b.gpu->empty(DType::kBF16, {tokens, hidden});
  auto step = [](Backend& be, const Tensor& x, const Tensor& r, const Tensor& n, const Tensor& gu, const Tensor& d,
                 const Tensor& s, const Tensor& a, const Tensor& scratch) {
    be.linear_act_mul(x, gu, s, a, Activation::kSilu);
    be.linear_add_residual(a, d, scratch, r);
    be.add_rms_norm(x, r, n, 1e-6f);  // r += x; x = rms_norm(r)
  };
  ASSERT_TRUE(b.gpu->supports_graphs());
  step(*b.gpu, xg, rg, n_g, gu_g, d_g, sg, ag, dg);  // warm-up outside the capture
  step(*b.cpu, xc, rc, n_c, gu_c, d_c, sc, ac, dc);
  b.gpu->synchronize();
  const int graph = b.gpu->capture_graph([&] { step(*b.gpu, xg, rg, n_g, gu_g, d_g, sg, ag, dg); });
  for (int i = 0; i < 3; ++i) {
    b.gpu->replay_graph(graph);
    step(*b.cpu, xc, rc, n_c, gu_c, d_c, sc, ac, dc);
  }
  b.gpu->synchronize();
  expect_close(download(*b.gpu, xg), download(*b.cpu, xc), 2e-4, 0.1, "x after 4 MLP steps");
  expect_close(download(*b.gpu, rg), download(*b.cpu, rc), 2e-4, 0.1, "residual after 4 MLP steps");
}

}  // namespace
}  // namespace minivllm::cuda_test
