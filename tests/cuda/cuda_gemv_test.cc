// The decode-sized linear (gemv.cu, taken by CudaBackend::linear for 1..8 tokens) against the CPU
// backend: odd N and K, every bias kind, outputs poisoned and guarded by a poisoned tail so that
// both unwritten and stray writes show.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "cuda_test_util.h"

namespace minivllm::cuda_test {
namespace {

constexpr int64_t kGuard = 64;  // poisoned elements after the output that must stay poisoned
const int64_t kTokens[] = {1, 2, 3, 7, 8};

struct LinearCase {
  Tensor wc, wg, bc, bg, bg32;
  int64_t n = 0, k = 0;
};

LinearCase make_case(Backends& b, int64_t n, int64_t k, std::mt19937& rng) {
  LinearCase c;
  c.n = n;
  c.k = k;
  // Weights scaled so outputs are ~N(0, 1) at every K: one bf16 rounding is then ~0.01 at most.
  Tensor w = random_values({n, k}, rng, 1.0f / std::sqrt(static_cast<float>(k)));
  Tensor bias = random_values({n}, rng);
  c.wc = upload(*b.cpu, w);
  c.wg = upload(*b.gpu, w);
  c.bc = upload(*b.cpu, bias);
  c.bg = upload(*b.gpu, bias);
  c.bg32 = upload_f32(*b.gpu, bias);
  return c;
}

// variant 0: no bias, 1: bf16 bias, 2: fp32 bias.
void check_linear(Backends& b, const LinearCase& c, int64_t tokens, int variant, std::mt19937& rng) {
  const std::string tag = "M=" + std::to_string(tokens) + " N=" + std::to_string(c.n) + " K=" +
                          std::to_string(c.k) + " bias variant " + std::to_string(variant);
  Tensor x = random_values({tokens, c.k}, rng);
  Tensor xc = upload(*b.cpu, x), xg = upload(*b.gpu, x);
  Tensor oc = b.cpu->empty(DType::kF32, {tokens, c.n});
  Tensor guarded = b.gpu->empty(DType::kBF16, {tokens * c.n + kGuard});
  b.gpu->fill_bytes(guarded, 0xFF);  // bf16 0xFFFF is a NaN
  Tensor og = guarded.rows(0, tokens * c.n).view({tokens, c.n});
  const Tensor* gb = variant == 0 ? nullptr : (variant == 1 ? &c.bg : &c.bg32);
  b.cpu->linear(xc, c.wc, variant == 0 ? nullptr : &c.bc, oc);
  b.gpu->linear(xg, c.wg, gb, og);
  const std::vector<float> all = download(*b.gpu, guarded);
  const std::vector<float> got(all.begin(), all.begin() + tokens * c.n);
  expect_close(got, download(*b.cpu, oc), 2e-5, 0.04, tag);
  int64_t tail_written = 0;
  for (int64_t i = tokens * c.n; i < static_cast<int64_t>(all.size()); ++i) tail_written += std::isfinite(all[i]);
  EXPECT_EQ(tail_written, 0) << tag << ": writes past the output";
}

TEST(CudaGemv, MatchesCpuOnOddShapes) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(71);
  for (int64_t k : {8, 1024, 1544, 2048, 2056, 3072, 5000}) {  // 5000: two rows a CTA (MINIVLLM_GEMV_TWO_ROWS_K)
    for (int64_t n : {1, 7, 129, 1031, 4097}) {  // 1031: four rows a CTA, a partial last CTA (MINIVLLM_GEMV_FOUR_ROWS)
      const LinearCase c = make_case(b, n, k, rng);
      for (int64_t tokens : kTokens) {
        for (int variant = 0; variant < 3; ++variant) check_linear(b, c, tokens, variant, rng);
      }
    }
  }
}

TEST(CudaGemv, MatchesCpuOnTiedLmHead) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(72);
  const LinearCase c = make_case(b, 151936, 1024, rng);
  for (int64_t tokens : {1, 8}) check_linear(b, c, tokens, 0, rng);
  check_linear(b, c, 3, 2, rng);
}

// The residual add's staged rows (launch_gemv_add_f32's stage: the grid's first wave bulk-copies its
// rows of W into shared memory before the PDL wait): the same sums in the same order as the loaded
// rows, so the same bits, and the CPU's linear plus the residual. Shapes where the kernel declines to
// stage (K = 8 is one chunk, rows too long for one step or 48 KB) must give the same answer too.
// 16,384 x 1,024 is a grid of several waves: only its first wave stages.
TEST(CudaGemv, StagedRowsAddWhatLoadedRowsAdd) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(74);
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{
           {2048, 2048}, {1031, 2048}, {7, 1544}, {2048, 4096}, {129, 5000}, {1024, 3072}, {4097, 8192}, {33, 8},
           {100, 16384}, {16384, 1024}}) {
    const std::string tag = "N=" + std::to_string(n) + " K=" + std::to_string(k);
    const LinearCase c = make_case(b, n, k, rng);
    Tensor x = random_values({1, k}, rng);
    Tensor r0 = random_values({1, n}, rng);
    Tensor xc = upload(*b.cpu, x), xg = upload(*b.gpu, x);
    Tensor oc = b.cpu->empty(DType::kF32, {1, n});
    b.cpu->linear(xc, c.wc, nullptr, oc);
    std::vector<float> want = download(*b.cpu, oc);
    const std::vector<float> r0h = download(*b.cpu, upload_f32(*b.cpu, r0));
    for (int64_t i = 0; i < n; ++i) want[i] += r0h[i];
    std::vector<float> got[2];
    for (int stage = 0; stage < 2; ++stage) {
      Tensor residual = upload_f32(*b.gpu, r0);
      b.gpu->synchronize();
      cuda::launch_gemv_add_f32(xg.data(), c.wg.data(), residual.ptr<float>(), 1, n, k, s, /*prefetch_u=*/0,
                                stage == 1);
      CUDA_CHECK(cudaStreamSynchronize(s));
      got[stage] = download(*b.gpu, residual);
      expect_close(got[stage], want, 2e-5, 0.04, tag + (stage ? " staged" : " loaded"));
    }
    EXPECT_EQ(got[0], got[1]) << tag << ": staged and loaded rows gave different sums";
  }
  CUDA_CHECK(cudaStreamDestroy(s));
}

TEST(CudaGemv, ReplaysInsideAGraph) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(73);
  const LinearCase c = make_case(b, 776, 1024, rng);
  Tensor x = random_values({2, c.k}, rng);
  Tensor xc = upload(*b.cpu, x), xg = upload(*b.gpu, x);
  Tensor oc = b.cpu->empty(DType::kF32, {2, c.n}), og = b.gpu->empty(DType::kBF16, {2, c.n});
  b.cpu->linear(xc, c.wc, &c.bc, oc);
  ASSERT_TRUE(b.gpu->supports_graphs());
  b.gpu->linear(xg, c.wg, &c.bg, og);  // warm-up outside the capture
  b.gpu->synchronize();
  const int graph = b.gpu->capture_graph([&] { b.gpu->linear(xg, c.wg, &c.bg, og); });
  b.gpu->fill_bytes(og, 0xFF);
  b.gpu->replay_graph(graph);
  b.gpu->synchronize();
  expect_close(download(*b.gpu, og), download(*b.cpu, oc), 2e-5, 0.04, "graph replay");
}

}  // namespace
}  // namespace minivllm::cuda_test
