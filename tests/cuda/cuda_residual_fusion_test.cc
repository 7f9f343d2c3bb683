// The residual-stream fusions of the CUDA backend against the CPU backend's unfused ops:
// rms_norm_linear and rms_norm_linear_act_mul (the RMSNorm of the fp32 residual computed inside
// the gemv's CTAs: late, or with MINIVLLM_GEMV_NORM_LATE=0 in a prologue), linear_add_residual (the gemv adding into the fp32 residual), the fp32-input
// rms_norm and add_to_residual (their unfused halves, taken where CudaBackend::use_gemv says
// cuBLASLt: beyond 8 tokens, and from 3 tokens for the norm-fused shapes with N % 8 == 0), and decode
// attention's in-kernel merge of splits, called repeatedly on one backend. Outputs are poisoned
// before every call, so unwritten values show as NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "attention_case.h"
#include "cuda_test_util.h"

namespace minivllm::cuda_test {
namespace {

constexpr int64_t kGuard = 64;  // poisoned values after an output that must stay poisoned

std::string shape_tag(const char* op, int64_t tokens, int64_t n, int64_t k) {
  return std::string(op) + " M=" + std::to_string(tokens) + " N=" + std::to_string(n) + " K=" + std::to_string(k);
}

// A poisoned GPU buffer of `count` values plus a guard; returns the output view.
Tensor poisoned(Backend& gpu, DType dtype, int64_t rows, int64_t cols, Tensor* whole) {
  *whole = gpu.empty(dtype, {rows * cols + kGuard});
  gpu.fill_bytes(*whole, 0xFF);  // NaN in bf16 and fp32
  return whole->rows(0, rows * cols).view({rows, cols});
}

int64_t guard_writes(const std::vector<float>& all, int64_t used) {
  int64_t n = 0;
  for (int64_t i = used; i < static_cast<int64_t>(all.size()); ++i) n += !std::isnan(all[i]);
  return n;
}

// Residual values of a mid-network stream: mean 0, std 3, so the norm's scale matters.
Tensor residual_values(int64_t tokens, int64_t k, std::mt19937& rng) { return random_values({tokens, k}, rng, 3.0f); }

// Returns whether the GPU wrote the normed row (the norm kernel ran: neither the gemv's prologue nor
// its late norm writes it).
bool check_norm_linear(Backends& b, int64_t tokens, int64_t n, int64_t k, bool bias_on, bool norm_f32, bool silu,
                       std::mt19937& rng, Activation act = Activation::kSilu) {
  const std::string tag = shape_tag(silu ? "rms_norm_linear_act_mul" : "rms_norm_linear", tokens, n, k) +
                          (bias_on ? " bias" : "") + (norm_f32 ? " f32 norm" : "") +
                          (silu ? std::string(" ") + activation_name(act) : "");
  const int64_t rows_w = silu ? 2 * n : n;
  Tensor res = residual_values(tokens, k, rng);
  Tensor nw = random_values({k}, rng, 0.3f, 1.0f);
  Tensor w = random_values({rows_w, k}, rng, 1.0f / std::sqrt(static_cast<float>(k)));
  Tensor bias = random_values({n}, rng);
  Tensor bc = upload(*b.cpu, bias), bg = upload(*b.gpu, bias);

  Tensor oc = b.cpu->empty(DType::kF32, {tokens, n});
  Tensor normed_c = b.cpu->empty(DType::kF32, {tokens, k});
  Tensor scratch_c = b.cpu->empty(DType::kF32, {tokens, rows_w});
  Tensor whole, normed_whole, scratch_whole;
  Tensor og = poisoned(*b.gpu, DType::kBF16, tokens, n, &whole);
  Tensor normed_g = poisoned(*b.gpu, DType::kBF16, tokens, k, &normed_whole);
  Tensor scratch_g = poisoned(*b.gpu, DType::kBF16, tokens, rows_w, &scratch_whole);
  Tensor res_g = upload_f32(*b.gpu, res);
  const Tensor nwg = norm_f32 ? upload_f32(*b.gpu, nw) : upload(*b.gpu, nw);
  const float eps = 1e-6f;
  if (silu) {
    b.cpu->rms_norm_linear_act_mul({upload_f32(*b.cpu, res), upload(*b.cpu, nw), eps, normed_c}, upload(*b.cpu, w),
                                   scratch_c, oc, act);
    b.gpu->rms_norm_linear_act_mul({res_g, nwg, eps, normed_g}, upload(*b.gpu, w), scratch_g, og, act);
  } else {
    b.cpu->rms_norm_linear({upload_f32(*b.cpu, res), upload(*b.cpu, nw), eps, normed_c}, upload(*b.cpu, w),
                           bias_on ? &bc : nullptr, oc);
    b.gpu->rms_norm_linear({res_g, nwg, eps, normed_g}, upload(*b.gpu, w), bias_on ? &bg : nullptr, og);
  }
  const std::vector<float> all = download(*b.gpu, whole);
  const std::vector<float> got(all.begin(), all.begin() + tokens * n);
  // The normed x is rounded to bf16 on the GPU (as the unfused norm's output is), and so is out.
  expect_close(got, download(*b.cpu, oc), 3e-5, silu ? 0.15 : 0.08, tag);
  EXPECT_EQ(guard_writes(all, tokens * n), 0) << tag << ": writes past the output";
  // The residual is read, never written.
  EXPECT_EQ(download(*b.gpu, res_g), download(*b.cpu, upload_f32(*b.cpu, res))) << tag << ": residual changed";
  const std::vector<float> normed = download(*b.gpu, normed_whole);
  return guard_writes(normed, 0) > 0;
}

TEST(CudaResidualFusion, RmsNormLinearMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(91);
  // 1-2 tokens: the gemv's late norm for K <= 1024 (use_gemv_norm), which never writes the normed
  // row; past it the norm kernel + the plain gemv.
  // 3 and 8 tokens: the norm kernel + the plain gemv where N % 8 != 0, else + decode_gemm (Hopper)
  // or cuBLASLt. 129 tokens: the norm kernel + cuBLASLt (N a multiple of 8).
  for (int64_t tokens : {1, 2, 3, 8, 129}) {
    for (int64_t k : {1024, 2048, 1032, 1000}) {
      for (int64_t n : {7, 129, 4096}) {
        if (tokens > 8 || (tokens > 2 && k <= 1024)) n = (n + 7) / 8 * 8;
        // fp32 norm weights at K = 2048 and, so that the fused norms still read them, at one token
        // of K = 1024 too.
        const bool norm_f32 = k == 2048 || (tokens == 1 && k == 1024 && n == 129);
        const bool normed = check_norm_linear(b, tokens, n, k, n % 8 != 0 || n == 136, norm_f32, false, rng);
        if (tokens <= 2) {
          EXPECT_EQ(normed, k > 1024) << "M=" << tokens << " K=" << k << ": the norm kernel ran only past 1,024";
        }
      }
    }
  }
}

// MINIVLLM_GEMV_NORM_LATE=0: at 1-2 tokens the gemv's prologue normalises rows of up to 1,024 into
// shared memory (longer rows take the norm kernel and the plain gemv, as with the late norm).
TEST(CudaResidualFusion, RmsNormLinearWithoutTheLateNormMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b = backends_with("MINIVLLM_GEMV_NORM_LATE", "0");
  std::mt19937 rng(94);
  for (int64_t tokens : {1, 2}) {
    for (int64_t k : {1024, 2048}) {
      for (int64_t n : {129, 4096}) {
        const bool normed = check_norm_linear(b, tokens, n, k, n == 129, k == 2048, false, rng);
        EXPECT_EQ(normed, k > 1024) << "M=" << tokens << " K=" << k << ": the norm kernel ran only past 1,024";
        check_norm_linear(b, tokens, n, k, false, tokens == 1, true, rng);
      }
    }
  }
}

// MINIVLLM_GEMV_NORM_MAX_K=4096: at 1-2 tokens the late norm folds into rows past 1,024 too (the
// bound's probe, PERFORMANCE.md "Stop 103"); the norm kernel runs only past the bound.
TEST(CudaResidualFusion, LateNormPastTheDefaultBoundMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b = backends_with("MINIVLLM_GEMV_NORM_MAX_K", "4096");
  std::mt19937 rng(95);
  for (int64_t tokens : {1, 2}) {
    for (int64_t k : {2048, 1032, 4096, 5120}) {
      for (int64_t n : {129, 3072}) {
        const bool f32 = k != 1032;
        EXPECT_EQ(check_norm_linear(b, tokens, n, k, n == 129, f32, false, rng), k > 4096)
            << "M=" << tokens << " K=" << k << ": the norm kernel ran only past 4,096";
        EXPECT_EQ(check_norm_linear(b, tokens, n, k, false, f32, true, rng), k > 4096)
            << "M=" << tokens << " K=" << k << " act_mul: the norm kernel ran only past 4,096";
      }
    }
  }
}

TEST(CudaResidualFusion, RmsNormLinearActMulMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(92);
  for (int64_t tokens : {1, 2, 3, 8, 129}) {
    for (int64_t k : {1024, 2048}) {
      for (int64_t inter : {129, 3072}) {
        if (tokens > 8 || (tokens > 2 && k <= 1024)) inter = (inter + 7) / 8 * 8;
        const bool normed = check_norm_linear(b, tokens, inter, k, false, tokens == 1, true, rng);
        if (tokens <= 2) {
          EXPECT_EQ(normed, k > 1024) << "M=" << tokens << " K=" << k << ": the norm kernel ran only past 1,024";
        }
        check_norm_linear(b, tokens, inter, k, false, tokens == 1, true, rng, Activation::kGeluTanh);
      }
    }
  }
}

void check_linear_add_residual(Backends& b, int64_t tokens, int64_t n, int64_t k, std::mt19937& rng) {
  const std::string tag = shape_tag("linear_add_residual", tokens, n, k);
  Tensor x = random_values({tokens, k}, rng);
  Tensor w = random_values({n, k}, rng, 1.0f / std::sqrt(static_cast<float>(k)));
  Tensor res = residual_values(tokens, n, rng);
  Tensor rc = upload_f32(*b.cpu, res);
  Tensor scratch_c = b.cpu->empty(DType::kF32, {tokens, n});
  b.cpu->linear_add_residual(upload(*b.cpu, x), upload(*b.cpu, w), scratch_c, rc);
  // The GPU residual sits in a guarded buffer: the guard stays NaN, the residual starts as `res`.
  Tensor whole = b.gpu->empty(DType::kF32, {tokens * n + kGuard});
  b.gpu->fill_bytes(whole, 0xFF);
  Tensor rg = whole.rows(0, tokens * n).view({tokens, n});
  b.gpu->copy_from_host(rg, res.data());
  Tensor scratch_whole;
  Tensor scratch_g = poisoned(*b.gpu, DType::kBF16, tokens, n, &scratch_whole);
  b.gpu->linear_add_residual(upload(*b.gpu, x), upload(*b.gpu, w), scratch_g, rg);
  const std::vector<float> all = download(*b.gpu, whole);
  const std::vector<float> got(all.begin(), all.begin() + tokens * n);
  // The gemv adds its fp32 sum; the unfused path rounds the product to bf16 first.
  expect_close(got, download(*b.cpu, rc), 2e-5, 0.03, tag);
  EXPECT_EQ(guard_writes(all, tokens * n), 0) << tag << ": writes past the residual";
}

TEST(CudaResidualFusion, LinearAddResidualMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(93);
  for (int64_t tokens : {1, 3, 8, 129}) {
    for (int64_t k : {2048, 3072, 1024}) {
      for (int64_t n : {8, 1024, 4104}) check_linear_add_residual(b, tokens, n, k, rng);
    }
  }
  check_linear_add_residual(b, 1, 7, 1032, rng);  // N not a multiple of 8: gemv only
}

// MINIVLLM_GEMV_STAGE=1 (off by default): at one token the gemvs after a gemv (the late norm's
// rms_norm_linear and rms_norm_linear_act_mul at K <= 1,024, every linear_add_residual) bulk-copy
// their first wave's rows of W into shared memory before the PDL wait. Each site's output must be the
// loaded rows' bit for bit (the same sums in the same order) and the CPU's. N = 16,384 at K = 1,024
// is a grid of several waves, whose later CTAs load their rows as before.
enum class StageSite { kNormLinear, kNormActMul, kAddResidual };

std::vector<float> run_stage_site(Backend& gpu, StageSite site, const Tensor& res, const Tensor& nw,
                                  const Tensor& w, int64_t n, int64_t k) {
  const float eps = 1e-6f;
  Tensor og = gpu.empty(site == StageSite::kAddResidual ? DType::kF32 : DType::kBF16, {1, n});
  Tensor normed = gpu.empty(DType::kBF16, {1, k});
  Tensor scratch = gpu.empty(DType::kBF16, {1, site == StageSite::kNormActMul ? 2 * n : n});
  switch (site) {
    case StageSite::kNormLinear:
      gpu.rms_norm_linear({upload_f32(gpu, res), upload(gpu, nw), eps, normed}, upload(gpu, w), nullptr, og);
      break;
    case StageSite::kNormActMul:
      gpu.rms_norm_linear_act_mul({upload_f32(gpu, res), upload(gpu, nw), eps, normed}, upload(gpu, w), scratch, og,
                                  Activation::kSilu);
      break;
    case StageSite::kAddResidual:  // res is x here ([1, k]); nw is the residual ([1, n])
      og = upload_f32(gpu, nw);
      gpu.linear_add_residual(upload(gpu, res), upload(gpu, w), scratch, og);
      break;
  }
  return download(gpu, og);
}

TEST(CudaResidualFusion, StagedRowsMatchLoadedRowsAtEverySite) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends staged = backends_with("MINIVLLM_GEMV_STAGE", "1");
  Backends loaded = backends_with("MINIVLLM_GEMV_STAGE", "0");
  std::mt19937 rng(95);
  const float eps = 1e-6f;
  for (StageSite site : {StageSite::kNormLinear, StageSite::kNormActMul, StageSite::kAddResidual}) {
    const bool add = site == StageSite::kAddResidual;
    for (int64_t k : add ? std::vector<int64_t>{1024, 2048, 3072} : std::vector<int64_t>{1024, 1000}) {
      for (int64_t n : {7, 1031, 16384}) {
        const std::string tag =
            shape_tag(add ? "linear_add_residual" : site == StageSite::kNormLinear ? "rms_norm_linear"
                                                                                      : "rms_norm_linear_act_mul",
                      1, n, k);
        const int64_t rows_w = site == StageSite::kNormActMul ? 2 * n : n;
        Tensor res = add ? random_values({1, k}, rng) : residual_values(1, k, rng);
        Tensor nw = add ? residual_values(1, n, rng) : random_values({k}, rng, 0.3f, 1.0f);
        Tensor w = random_values({rows_w, k}, rng, 1.0f / std::sqrt(static_cast<float>(k)));
        Backend& cpu = *staged.cpu;
        Tensor want = cpu.empty(DType::kF32, {1, n});
        Tensor normed_c = cpu.empty(DType::kF32, {1, k});
        Tensor scratch_c = cpu.empty(DType::kF32, {1, rows_w});
        if (site == StageSite::kNormLinear) {
          cpu.rms_norm_linear({upload_f32(cpu, res), upload(cpu, nw), eps, normed_c}, upload(cpu, w), nullptr, want);
        } else if (site == StageSite::kNormActMul) {
          cpu.rms_norm_linear_act_mul({upload_f32(cpu, res), upload(cpu, nw), eps, normed_c}, upload(cpu, w), scratch_c,
                                      want, Activation::kSilu);
        } else {
          want = upload_f32(cpu, nw);
          cpu.linear_add_residual(upload(cpu, res), upload(cpu, w), scratch_c, want);
        }
        const std::vector<float> got = run_stage_site(*staged.gpu, site, res, nw, w, n, k);
        const std::vector<float> base = run_stage_site(*loaded.gpu, site, res, nw, w, n, k);
        expect_close(got, download(cpu, want), 3e-5, site == StageSite::kNormActMul ? 0.15 : 0.08, tag + " staged");
        EXPECT_EQ(got, base) << tag << ": staged and loaded rows gave different outputs";
      }
    }
  }
}

TEST(CudaResidualFusion, RmsNormOfFp32ResidualMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(94);
  for (int64_t tokens : {1, 7, 129, 4097}) {
    for (int64_t k : {1024, 2056}) {
      const std::string tag = shape_tag("rms_norm f32 in", tokens, k, k);
      Tensor res = residual_values(tokens, k, rng);
      Tensor nw = random_values({k}, rng, 0.3f, 1.0f);
      Tensor oc = b.cpu->empty(DType::kF32, {tokens, k});
      b.cpu->rms_norm(upload_f32(*b.cpu, res), upload(*b.cpu, nw), 1e-6f, oc);
      Tensor whole;
      Tensor og = poisoned(*b.gpu, DType::kBF16, tokens, k, &whole);
      b.gpu->rms_norm(upload_f32(*b.gpu, res), upload(*b.gpu, nw), 1e-6f, og);
      const std::vector<float> all = download(*b.gpu, whole);
      expect_close(std::vector<float>(all.begin(), all.begin() + tokens * k), download(*b.cpu, oc), 2e-5, 0.05, tag);
      EXPECT_EQ(guard_writes(all, tokens * k), 0) << tag << ": writes past the output";
    }
  }
}

TEST(CudaResidualFusion, AddToResidualMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(95);
  for (int64_t count : {8, 1024 * 7, 4097 * 8}) {
    Tensor x = random_values({count}, rng);
    Tensor res = residual_values(1, count, rng).view({count});
    Tensor rc = upload_f32(*b.cpu, res);
    b.cpu->add_to_residual(upload(*b.cpu, x), rc);
    Tensor rg = upload_f32(*b.gpu, res);
    b.gpu->add_to_residual(upload(*b.gpu, x), rg);  // bf16 x: exact in fp32
    EXPECT_EQ(download(*b.gpu, rg), download(*b.cpu, rc)) << "add_to_residual of " << count;
  }
}

// Small splits (the batch-1 policy) over a capacity of 4096 keys, called repeatedly on one
// backend: each (sequence, kv head) counter must be back at zero after every merge, including
// between the first calls and the ones after a different batch shape.
TEST(CudaResidualFusion, DecodeSplitMergeRepeats) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  for (const char* min_partition : {"32", "64", "256"}) {
    Backends b = backends_with({{"MINIVLLM_DECODE_MIN_PARTITION", min_partition}});
    for (int rep = 0; rep < 3; ++rep) {
      AttentionCase one{16, 8, 128, 256, {}, {300 + 37 * rep}};
      one.decode = true;
      one.extra_table_cols = 14;  // 4096 keys of capacity, as the engine's batch-1 graph
      const AttentionOutputs o1 = run_attention_case(b, one, 100 + rep);
      expect_close(o1.gpu, o1.cpu, 2e-4, 2e-2, std::string("batch 1, min partition ") + min_partition);
      AttentionCase four{32, 8, 64, 16, {}, {1, 63, 64, 2000}};
      four.decode = true;
      four.extra_table_cols = 3;
      const AttentionOutputs o4 = run_attention_case(b, four, 200 + rep);
      expect_close(o4.gpu, o4.cpu, 2e-4, 2e-2, std::string("batch 4, min partition ") + min_partition);
    }
  }
}

}  // namespace
}  // namespace minivllm::cuda_test
