// The folded RMSNorm between two bf16 decode GEMMs (MINIVLLM_DECODE_GEMM_NORM_FOLD): the residual add
// of linear_add_residual, with note_next_norm's norm pending, writes that norm's input and partial
// sums of squares, and the rms_norm_linear / rms_norm_linear_act_mul after it takes them instead of a
// norm kernel. Against the CPU backend's unfused ops; the normed rows (pro.normed) stay poisoned
// exactly when the fold ran, so each case also shows which path it took.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cuda_test_util.h"

namespace minivllm::cuda_test {
namespace {

bool all_nan(const std::vector<float>& v) {
  for (float x : v) {
    if (!std::isnan(x)) return false;
  }
  return true;
}

// residual += x W_o^T, then out = rms_norm(residual; g) W^T (+ bias), or act(gate) * up. `same_norm`
// false notes another norm than the one that follows: nothing may be folded then.
// fold_from: the backend's MINIVLLM_DECODE_GEMM_NORM_FOLD (adds the gemv takes by shape fold from
// that tokens x N on).
// gemv_fold: the backend's MINIVLLM_GEMV_NORM_FOLD (1-2 tokens), which the backends here are made with.
void check_fold(Backends& b, int64_t fold_from, int64_t tokens, int64_t hidden, int64_t k, int64_t n, bool gated,
                bool norm_f32, bool same_norm, std::mt19937& rng, int gemv_fold = 1) {
  const std::string tag = std::string(gated ? "act_mul" : "store") + " T=" + std::to_string(tokens) +
                          " H=" + std::to_string(hidden) + " K=" + std::to_string(k) + " N=" + std::to_string(n) +
                          (norm_f32 ? " f32 norm" : "") + (same_norm ? "" : " other norm noted");
  const int64_t rows_w = gated ? 2 * n : n;
  const float eps = 1e-6f;
  Tensor x = random_values({tokens, k}, rng);
  Tensor wo = random_values({hidden, k}, rng, 1.0f / std::sqrt(static_cast<float>(k)));
  Tensor res = random_values({tokens, hidden}, rng, 3.0f);
  Tensor g = random_values({hidden}, rng, 0.3f, 1.0f);
  Tensor other = random_values({hidden}, rng, 0.3f, 1.0f);
  Tensor w = random_values({rows_w, hidden}, rng, 1.0f / std::sqrt(static_cast<float>(hidden)));
  Tensor bias = random_values({n}, rng);

  auto run = [&](Backend& be, bool gpu, Tensor* normed_out) {
    const Tensor rb = upload_f32(be, res);
    const Tensor gb = norm_f32 ? upload_f32(be, g) : upload(be, g);
    const Tensor ob = norm_f32 ? upload_f32(be, other) : upload(be, other);
    const Tensor bb = upload(be, bias);
    const DType act_t = gpu ? DType::kBF16 : DType::kF32;
    Tensor add_scratch = be.empty(act_t, {tokens, hidden});
    Tensor scratch = be.empty(act_t, {tokens, rows_w});
    Tensor normed = be.empty(act_t, {tokens, hidden});
    if (gpu) be.fill_bytes(normed, 0xFF);  // NaN: the fold leaves it unwritten
    Tensor out = be.empty(act_t, {tokens, n});
    be.note_next_norm(rb, same_norm ? gb : ob, eps);
    be.linear_add_residual(upload(be, x), upload(be, wo), add_scratch, rb);
    if (gated) {
      be.rms_norm_linear_act_mul({rb, gb, eps, normed}, upload(be, w), scratch, out, Activation::kSilu);
    } else {
      be.rms_norm_linear({rb, gb, eps, normed}, upload(be, w), &bb, out);
    }
    *normed_out = normed;
    return std::make_pair(download(be, rb), download(be, out));
  };
  Tensor normed_c, normed_g;
  const auto [res_c, out_c] = run(*b.cpu, false, &normed_c);
  const auto [res_g, out_g] = run(*b.gpu, true, &normed_g);
  expect_close(res_g, res_c, 2e-5, 0.03, tag + " residual");
  expect_close(out_g, out_c, 3e-5, gated ? 0.15 : 0.08, tag + " out");
  // CudaBackend::use_gemv's shapes for 3-8 tokens.
  const bool gemv_add = tokens <= 8 && k > 1024 && k <= 4096 && tokens * hidden <= 8192;
  bool folded = same_norm && tokens >= 3 && tokens <= 64 && (!gemv_add || tokens * hidden >= fold_from);
  // 1-2 tokens: the late norm on rows of at most 1,024, or at one token the gemv's fold; neither writes
  // the normed rows.
  if (tokens <= 2) folded = hidden <= 1024 || (gemv_fold > 0 && same_norm && tokens == 1);
  EXPECT_EQ(all_nan(download(*b.gpu, normed_g)), folded) << tag << (folded ? ": the norm kernel ran" : ": no norm ran");
}

TEST(CudaNormFold, AddThenNormedLinearMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  if (!on_hopper()) GTEST_SKIP() << "the decode GEMM needs an sm_90 GPU";
  std::mt19937 rng(82);
  {
    Backends b = backends_with({{"MINIVLLM_DECODE_GEMM_NORM_FOLD", "1"}, {"MINIVLLM_GEMV_NORM_FOLD", "1"}});
    // Widths past one 128-column tile and not a multiple of it; token boxes of 16, 32 and 64; 2
    // tokens take the gemv (its own fold, MINIVLLM_GEMV_NORM_FOLD) and 65 cuBLASLt.
    for (int64_t tokens : {3, 8, 17, 64, 2, 65}) {
      check_fold(b, 1, tokens, 1032, 1040, 520, false, tokens == 8, true, rng);
      check_fold(b, 1, tokens, 2048, 2048, 264, true, false, true, rng);
    }
    check_fold(b, 1, 8, 1032, 1040, 520, false, false, false, rng);
    check_fold(b, 1, 8, 2048, 2048, 264, true, true, false, rng);
  }
  // The default (8,192): an add the gemv takes by shape stays there below tokens x N = 8,192, its
  // norm unfolded (3 x 1,032); at 8 x 1,024 it folds; K past the gemv's (8,192) folds at 3 tokens.
  Backends b = backends_with({{"MINIVLLM_DECODE_GEMM_NORM_FOLD", ""}, {"MINIVLLM_GEMV_NORM_FOLD", "1"}});
  check_fold(b, 8192, 3, 1032, 1040, 520, false, false, true, rng);
  check_fold(b, 8192, 3, 1032, 8192, 520, false, false, true, rng);
  check_fold(b, 8192, 8, 1024, 2048, 264, true, false, true, rng);
}

// The folded norm at one token (MINIVLLM_GEMV_NORM_FOLD; two tokens do not fold): the gemv's add writes
// the next norm's input and a sum of squares a CTA, and the normed gemv after it takes them. 1: rows
// past MINIVLLM_GEMV_NORM_MAX_K (1,024) fold, shorter ones keep the late norm; 2: every row. Neither
// writes the normed rows, so they show whether the norm kernel ran.
// Widths of 520 (two rows a CTA), 1,032 (258 CTAs of four rows) and 2,048; bf16 and fp32 norm weights;
// the other norm noted folds nothing (the norm kernel runs).
TEST(CudaNormFold, OneTokenAddThenNormedGemvMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(108);
  for (const char* mode : {"0", "1", "2"}) {
    Backends b = backends_with({{"MINIVLLM_GEMV_NORM_FOLD", mode}, {"MINIVLLM_DECODE_GEMM_NORM_FOLD", "0"}});
    for (int64_t tokens : {1, 2}) {
      for (int64_t hidden : {520, 1032, 2048}) {
        for (bool gated : {false, true}) {
          const std::string tag = std::string("fold ") + mode + " T=" + std::to_string(tokens) + " H=" +
                                  std::to_string(hidden) + (gated ? " act_mul" : " store");
          SCOPED_TRACE(tag);
          check_fold(b, 1, tokens, hidden, 2048, 520, gated, hidden == 2048, true, rng, *mode - '0');
        }
      }
      check_fold(b, 1, tokens, 2048, 1040, 264, true, false, false, rng, *mode - '0');
    }
  }
}

}  // namespace
}  // namespace minivllm::cuda_test
