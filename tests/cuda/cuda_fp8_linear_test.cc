// Linear layers on FP8 weights (gemv_fp8.cu, fp8_gemm.cc through CudaBackend::linear and its fused
// variants) against the CPU backend computing in fp32 on the dequantized weights: 128 x 128 blocks
// (a bf16 copy past 8 tokens, else the e4m3 decode GEMM), per-row scales (cuBLASLt's FP8 GEMM),
// and 32 x 32 blocks and odd N, on odd shapes. The gemv reads bf16 x as it is,
// so it matches to bf16 rounding; the FP8 GEMM quantizes x to e4m3 per token, so it carries FP8's
// activation error as well. Also: the device's online quantization gives the
// host's bytes.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <tuple>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/fp8_gemm.h"
#include "common/fp8.h"
#include "common/fp8_weight.h"
#include "cuda_test_util.h"
#include "graph_timing.h"

namespace minivllm::cuda_test {
namespace {

// w quantized in blocks of br x bc with scale amax / 448 per block (Qwen's and DeepSeek's layout).
Tensor quantize_blocks(const Tensor& w, int64_t br, int64_t bc) {
  const int64_t rows = w.size(0), cols = w.size(1);
  const int64_t gr = (rows + br - 1) / br, gc = (cols + bc - 1) / bc;
  Tensor codes = host_tensor(DType::kF8E4M3, {rows, cols});
  Tensor grid = host_tensor(DType::kF32, {gr, gc});
  for (int64_t i = 0; i < gr; ++i) {
    for (int64_t j = 0; j < gc; ++j) {
      float amax = 0.0f;
      for (int64_t r = i * br; r < std::min(rows, (i + 1) * br); ++r) {
        for (int64_t c = j * bc; c < std::min(cols, (j + 1) * bc); ++c) amax = std::max(amax, std::abs(w.ptr<float>()[r * cols + c]));
      }
      const float mul = e4m3_quant_multiplier(amax);
      grid.ptr<float>()[i * gc + j] = e4m3_row_scale(amax);
      for (int64_t r = i * br; r < std::min(rows, (i + 1) * br); ++r) {
        for (int64_t c = j * bc; c < std::min(cols, (j + 1) * bc); ++c) {
          static_cast<uint8_t*>(codes.data())[r * cols + c] = f32_to_e4m3(w.ptr<float>()[r * cols + c] * mul);
        }
      }
    }
  }
  return make_fp8_weight(codes, grid, br, bc);
}

enum class Grid { kBlock128, kPerRow, kBlock32 };

struct Fp8Case {
  Tensor wc, wg;  // the CPU's dequantized fp32 weight, the GPU's FP8 weight
  int64_t n = 0, k = 0;
  std::string name;
};

Fp8Case make_case(Backends& b, int64_t n, int64_t k, Grid g, std::mt19937& rng) {
  Fp8Case c;
  c.n = n;
  c.k = k;
  Tensor w = random_values({n, k}, rng, 1.0f / std::sqrt(static_cast<float>(k)));
  const Tensor w8 = g == Grid::kBlock128 ? quantize_blocks(w, 128, 128)
                    : g == Grid::kBlock32 ? quantize_blocks(w, 32, 32)
                                          : quantize_fp8_rows(w, 0, k);
  c.wc = upload(*b.cpu, dequantize_fp8_weight(w8));
  c.wg = b.gpu->upload_stored_weight(w8);
  c.name = std::string(g == Grid::kBlock128 ? "block128" : g == Grid::kBlock32 ? "block32" : "per-row") + " N=" +
           std::to_string(n) + " K=" + std::to_string(k);
  return c;
}

struct Shape32 {
  int64_t n, k;
  Grid g;
};

// The gemv paths are exact but for bf16 rounding; the GEMMs quantize x to e4m3.
void expect_fp8_close(const std::vector<float>& got, const std::vector<float>& ref, int64_t tokens,
                      const std::string& what) {
  if (tokens <= 8) {
    expect_close(got, ref, 2e-5, 0.05, what);
  } else {
    expect_close(got, ref, 3e-3, 0.35, what);
  }
}

// x's rows as the W8A8 gemv multiplies them: each row's e4m3 codes (the device quantizer's bytes,
// common/fp8.h) times its scale, in fp32. x is bf16-exact (random_values), so the GPU, given x in
// bf16, quantizes the same values. group (dividing the row): a scale per that many columns instead.
Tensor e4m3_rows_values(Tensor x, int64_t group = 0) {
  const int64_t k = x.size(-1), rows = x.numel() / k, g = group > 0 ? group : k;
  std::vector<uint8_t> q(static_cast<size_t>(g));
  float* p = x.ptr<float>();
  for (int64_t c = 0; c < rows * k; c += g) {
    float scale = 0.0f;
    quantize_e4m3_row(p + c, g, q.data(), &scale);
    dequantize_e4m3_row(q.data(), g, scale, p + c);
  }
  return x;
}

// x's rows through e4m3 per token and back, then bf16 (as the GPU receives them). Past the gemv the
// GPU multiplies x's per-token e4m3 codes (W8A8); fed values that are already such codes, the CPU's
// fp32 reference leaves out the format's own rounding (PERFORMANCE.md: on random weights it moves
// outputs by a few percent of their range) and the comparison sees only the kernels'. group: as
// e4m3_rows_values's.
Tensor through_e4m3_rows(Tensor x, int64_t group = 0) {
  x = e4m3_rows_values(x, group);
  float* p = x.ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) p[i] = bf16_to_f32(f32_to_bf16(p[i]));
  return x;
}

// Past the gemv on W8A8 inputs (through_e4m3_rows): what is left is the bf16 product before the
// scales, fast FP8 accumulation and the bf16 output.
void expect_w8a8_close(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  expect_close(got, ref, 1e-4, 0.12, what);
}

void check_linear(Backends& b, const Fp8Case& c, int64_t tokens, bool bias, std::mt19937& rng, bool w8a8 = false,
                  float x_scale = 1.0f) {
  const std::string tag = c.name + " M=" + std::to_string(tokens) + (bias ? " bias" : "") +
                          (x_scale != 1.0f ? " |x| to " + std::to_string(x_scale) : "");
  Tensor x = random_values({tokens, c.k}, rng, x_scale);
  if (w8a8) x = through_e4m3_rows(x);
  Tensor bh = random_values({c.n}, rng);
  Tensor bc = upload(*b.cpu, bh), bg = upload(*b.gpu, bh);
  Tensor oc = b.cpu->empty(DType::kF32, {tokens, c.n});
  Tensor og = b.gpu->empty(DType::kBF16, {tokens, c.n});
  b.gpu->fill_bytes(og, 0xFF);
  b.cpu->linear(upload(*b.cpu, x), c.wc, bias ? &bc : nullptr, oc);
  b.gpu->linear(upload(*b.gpu, x), c.wg, bias ? &bg : nullptr, og);
  if (w8a8) {
    expect_w8a8_close(download(*b.gpu, og), download(*b.cpu, oc), "w8a8 " + tag);
  } else if (x_scale != 1.0f) {  // outputs to ~1e6: bf16's rounding is ~1e3 absolute, so the nmse decides
    expect_close(download(*b.gpu, og), download(*b.cpu, oc), 2e-5, 0.01 * x_scale, tag);
  } else {
    expect_fp8_close(download(*b.gpu, og), download(*b.cpu, oc), tokens, tag);
  }
}

TEST(CudaFp8Linear, MatchesCpuOnEveryGrid) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b = backends_with("MINIVLLM_FP8_GEMV_W8A8", "0");  // the bf16-x gemv (W8A8: the test below)
  std::mt19937 rng(81);
  struct Shape {
    int64_t n, k;
    Grid g;
  };
  for (const Shape& s : {Shape{384, 512, Grid::kBlock128}, Shape{4224, 1024, Grid::kBlock128},
                         Shape{384, 512, Grid::kPerRow}, Shape{200, 256, Grid::kPerRow},
                         Shape{96, 160, Grid::kBlock32}, Shape{1, 2048, Grid::kPerRow},
                         // rows longer than a staged tile (1,024 codes) and not a multiple of it
                         Shape{264, 2240, Grid::kPerRow}, Shape{200, 1152, Grid::kBlock128},
                         // more CTAs than a GPU holds at once, and a last CTA with 11 of its 16 rows
                         Shape{17003, 512, Grid::kPerRow}}) {
    const Fp8Case c = make_case(b, s.n, s.k, s.g, rng);
    for (int64_t tokens : {1, 2, 3, 8, 9, 37, 300}) check_linear(b, c, tokens, tokens % 2 == 1, rng);
  }
}

// The bf16-x tensor-core gemv on x past f16's range (|x| up to 200,000; such activations come out
// of the MLPs of large trained models): x goes into f16 times 2^-4, so it stays finite and matches the
// CPU, per-row and 128 x 128 block scales, 2 and 8 tokens (one token takes the one-token kernel).
TEST(CudaFp8Linear, Bf16xGemvTakesXPastF16Range) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b = backends_with("MINIVLLM_FP8_GEMV_W8A8", "0");
  std::mt19937 rng(82);
  for (const auto& [n, k, g] : {std::tuple{384, 512, Grid::kPerRow}, std::tuple{200, 1152, Grid::kBlock128}}) {
    const Fp8Case c = make_case(b, n, k, g, rng);
    for (int64_t tokens : {2, 8}) check_linear(b, c, tokens, false, rng, false, 2.0e5f);
  }
}

// Block-scaled weights keep a bf16 copy of their values for the batches past the gemv
// (CudaBackend::decoded_fp8_copy), equal to the CPU's dequantized values rounded to bf16, unless
// cuBLASLt's block-scaled GEMM takes them (MINIVLLM_FP8_BLOCK_CUBLAS, 65 by default: K of 512s).
// Per-row weights (cuBLASLt's FP8 GEMM) and MINIVLLM_FP8_BLOCK_BF16_FREE_PCT=100 keep none, and the
// linear then takes the e4m3 decode GEMM up to 256 tokens: every case matches the CPU past the
// gemv's 8 tokens, on both sides of the knob's 65.
TEST(CudaFp8Linear, BlockScaledWeightsKeepADecodedCopy) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(84);
  for (const char* knob : {"0", "65"}) {
    for (const char* pct : {"35", "100"}) {
      std::optional<test::ScopedEnv> env(
          std::in_place, test::EnvVars{{"MINIVLLM_FP8_BLOCK_BF16_FREE_PCT", pct}, {"MINIVLLM_FP8_BLOCK_CUBLAS", knob}});
      Backends b;
      const Fp8Case block = make_case(b, 4224, 1024, Grid::kBlock128, rng);
      const Fp8Case odd_k = make_case(b, 200, 1152, Grid::kBlock128, rng);  // K not of 512s: no cuBLASLt grid
      const Fp8Case row = make_case(b, 384, 512, Grid::kPerRow, rng);
      env.reset();  // the weights are made: what follows runs at the caller's settings
      const bool room = std::string(pct) == "35", cublas = std::string(knob) != "0";
      ASSERT_EQ(block.wg.scales()->decoded.defined(), room && !cublas) << "knob " << knob << ", pct " << pct;
      ASSERT_EQ(odd_k.wg.scales()->decoded.defined(), room) << "knob " << knob << ", pct " << pct;
      EXPECT_FALSE(row.wg.scales()->decoded.defined());
      if (room) {
        const Tensor& d = odd_k.wg.scales()->decoded;
        ASSERT_EQ(d.dtype(), DType::kBF16);
        ASSERT_EQ(d.shape(), (std::vector<int64_t>{200, 1152}));
        std::vector<uint16_t> raw(static_cast<size_t>(d.numel()));
        CUDA_CHECK(cudaMemcpy(raw.data(), d.data(), raw.size() * 2, cudaMemcpyDeviceToHost));
        const std::vector<float> ref = download(*b.cpu, odd_k.wc);
        for (size_t i = 0; i < raw.size(); ++i) {
          const uint32_t bits = static_cast<uint32_t>(raw[i]) << 16;
          float v;
          std::memcpy(&v, &bits, 4);
          ASSERT_NEAR(v, ref[i], std::fabs(ref[i]) / 256.0f + 1e-30f) << i;
        }
      }
      for (int64_t tokens : {9, 64, 65}) {
        check_linear(b, block, tokens, tokens % 2 == 1, rng);
        check_linear(b, odd_k, tokens, tokens % 2 == 1, rng);
      }
    }
  }
}

// linear_act_mul on gu ([W_gate; W_up], 2I x K) and linear_add_residual on down (K x I), GPU against
// CPU, T tokens; the GPU's out starts as NaNs, so a row left unwritten fails.
void check_gated_and_residual(Backends& b, const Fp8Case& gu, const Fp8Case& down, int64_t tokens,
                              std::mt19937& rng, const std::string& prefix, bool w8a8 = false) {
  const int64_t inter = gu.n / 2, k = gu.k;
  const std::string tag = gu.name + " M=" + std::to_string(tokens);
  const auto expect = [&](const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
    if (w8a8) {
      expect_w8a8_close(got, ref, "w8a8 " + what);
    } else {
      expect_fp8_close(got, ref, tokens, what);
    }
  };
  Tensor x = random_values({tokens, k}, rng);
  if (w8a8) x = through_e4m3_rows(x);
  Tensor sc = b.cpu->empty(DType::kF32, {tokens, 2 * inter});
  Tensor sg = b.gpu->empty(DType::kBF16, {tokens, 2 * inter});
  Tensor oc = b.cpu->empty(DType::kF32, {tokens, inter}), og = b.gpu->empty(DType::kBF16, {tokens, inter});
  b.gpu->fill_bytes(og, 0xFF);
  b.cpu->linear_act_mul(upload(*b.cpu, x), gu.wc, sc, oc, Activation::kSilu);
  b.gpu->linear_act_mul(upload(*b.gpu, x), gu.wg, sg, og, Activation::kSilu);
  expect(download(*b.gpu, og), download(*b.cpu, oc), prefix + "act_mul " + tag);

  Tensor h = random_values({tokens, inter}, rng);
  if (w8a8) h = through_e4m3_rows(h);
  Tensor res = random_values({tokens, k}, rng);
  Tensor rc = upload_f32(*b.cpu, res), rg = upload_f32(*b.gpu, res);
  Tensor dc = b.cpu->empty(DType::kF32, {tokens, k}), dg = b.gpu->empty(DType::kBF16, {tokens, k});
  b.cpu->linear_add_residual(upload(*b.cpu, h), down.wc, dc, rc);
  b.gpu->linear_add_residual(upload(*b.gpu, h), down.wg, dg, rg);
  expect(download(*b.gpu, rg), download(*b.cpu, rc), prefix + "add_residual " + down.name);
}

TEST(CudaFp8Linear, GatedAndResidualVariantsMatchCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b = backends_with("MINIVLLM_FP8_GEMV_W8A8", "0");
  std::mt19937 rng(82);
  struct Dims {
    int64_t inter, k;
  };
  // 1536 x 1024: several chunks a warp on the tensor-core kernel for both linears (K = 1024, 1536).
  for (const Dims d : {Dims{256, 384}, Dims{1536, 1024}}) {
    for (Grid g : {Grid::kBlock128, Grid::kPerRow, Grid::kBlock32}) {
      const int64_t inter = d.inter, k = d.k;
      const Fp8Case gu = make_case(b, 2 * inter, k, g, rng);
      const Fp8Case down = make_case(b, k, inter, g, rng);
      for (int64_t tokens : {1, 5, 40}) check_gated_and_residual(b, gu, down, tokens, rng, "");
    }
  }
}

// One W8A8 case: gate/up's rows stored with a bias, then act(gate) * up, then a down projection of
// K down_k into the fp32 residual, each against the CPU fed the same codes' values.
struct W8a8Dims {
  int64_t inter, k;
  Grid g;
  int64_t down_k;  // the residual case's K: one not of 64s (208) is declined (the bf16-x gemv)
};

// raw_x: the GPU multiplies x as it is (W8A16), so the CPU gets x unquantized too; x_scale: x's
// and h's spread.
void check_w8a8_case(Backends& b, const W8a8Dims& d, std::initializer_list<int64_t> token_counts,
                     const std::string& setting, std::mt19937& rng, bool raw_x = false, float x_scale = 1.0f) {
  const Fp8Case gu = make_case(b, 2 * d.inter, d.k, d.g, rng);
  const Fp8Case down = make_case(b, d.k, d.down_k, d.g, rng);
  const auto as_gpu_multiplies = [&](Tensor t) { return raw_x ? t : e4m3_rows_values(t); };
  // The absolute bound scales with the outputs (act_mul's with the square); nmse is relative already.
  const auto close = [&](const std::vector<float>& got, const std::vector<float>& ref, int64_t tokens, double scale,
                         const std::string& what) {
    if (scale <= 1.0) return expect_fp8_close(got, ref, tokens, what);
    expect_close(got, ref, 2e-5, 0.05 * scale, what);
  };
  for (int64_t tokens : token_counts) {
    const std::string tag = gu.name + " M=" + std::to_string(tokens) + " " + setting;
    Tensor x = random_values({tokens, d.k}, rng, x_scale);
    const Tensor xq = upload(*b.cpu, as_gpu_multiplies(x));
    const Tensor xg = upload(*b.gpu, x);
    // store, with a bias (gate/up's rows as one plain weight)
    Tensor bias = random_values({gu.n}, rng);
    const Tensor bc = upload(*b.cpu, bias), bg = upload(*b.gpu, bias);
    Tensor oc = b.cpu->empty(DType::kF32, {tokens, gu.n}), og = b.gpu->empty(DType::kBF16, {tokens, gu.n});
    b.gpu->fill_bytes(og, 0xFF);
    b.cpu->linear(xq, gu.wc, &bc, oc);
    b.gpu->linear(xg, gu.wg, &bg, og);
    close(download(*b.gpu, og), download(*b.cpu, oc), tokens, x_scale, "store " + tag);
    // act(gate) * up
    Tensor sc = b.cpu->empty(DType::kF32, {tokens, gu.n}), sg = b.gpu->empty(DType::kBF16, {tokens, gu.n});
    Tensor hc = b.cpu->empty(DType::kF32, {tokens, d.inter}), hg = b.gpu->empty(DType::kBF16, {tokens, d.inter});
    b.gpu->fill_bytes(hg, 0xFF);
    b.cpu->linear_act_mul(xq, gu.wc, sc, hc, Activation::kSilu);
    b.gpu->linear_act_mul(xg, gu.wg, sg, hg, Activation::kSilu);
    close(download(*b.gpu, hg), download(*b.cpu, hc), tokens, double{x_scale} * x_scale, "act_mul " + tag);
    // into the fp32 residual
    Tensor h = random_values({tokens, d.down_k}, rng, x_scale);
    Tensor res = random_values({tokens, d.k}, rng);
    Tensor rc = upload_f32(*b.cpu, res), rg = upload_f32(*b.gpu, res);
    Tensor dc = b.cpu->empty(DType::kF32, {tokens, d.k}), dg = b.gpu->empty(DType::kBF16, {tokens, d.k});
    const bool takes = d.down_k % 64 == 0;
    b.cpu->linear_add_residual(upload(*b.cpu, takes ? as_gpu_multiplies(h) : h), down.wc, dc, rc);
    b.gpu->linear_add_residual(upload(*b.gpu, h), down.wg, dg, rg);
    close(download(*b.gpu, rg), download(*b.cpu, rc), tokens, x_scale, "add_residual " + down.name + " " + tag);
  }
}

// The W8A8 gemv (MINIVLLM_FP8_GEMV_W8A8, on by default: x quantized per token, e4m3 x e4m3 on the
// tensor cores) against the CPU fed the same codes' values: what is left is the order of the fp32 sums
// and the bf16 output. Every epilogue, 1-8 tokens, per-row and 128 x 128 grids, odd row counts (a last
// CTA part full), K of 64s long and short (one chunk a warp or many); a grid of 32-column blocks and a
// K of 16s that it declines fall back to the bf16-x gemv. Outputs start as NaNs.
TEST(CudaFp8Linear, W8A8GemvMatchesCpuOnTheSameCodes) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  for (const char* bytes : {"by the grid", "32", "64", "256"}) {
    // (one token: the 16-row kernel here too, not gemv_fp8_one.cu's, which the next tests check)
    Backends b = backends_with({{"MINIVLLM_FP8_W8A8_LANE_BYTES", bytes[0] == 'b' ? "" : bytes},
                                {"MINIVLLM_FP8_GEMV_ONE", "0"},
                                {"MINIVLLM_FP8_GEMV_ONE_X16", "0"}});
    std::mt19937 rng(91);
    for (const W8a8Dims d : {W8a8Dims{204, 384, Grid::kPerRow, 208}, W8a8Dims{1544, 1024, Grid::kBlock128, 1600},
                             W8a8Dims{1000, 4096, Grid::kPerRow, 14336}, W8a8Dims{264, 192, Grid::kBlock128, 256}}) {
      check_w8a8_case(b, d, {1, 2, 5, 8}, std::string("lane bytes ") + bytes, rng);
    }
    // Declined: 32 x 32 blocks and K = 160 take the bf16-x gemv (exact but for bf16 rounding on raw x).
    for (const Shape32 s : {Shape32{96, 160, Grid::kBlock32}, Shape32{96, 256, Grid::kBlock32}}) {
      const Fp8Case c = make_case(b, s.n, s.k, s.g, rng);
      for (int64_t tokens : {1, 3}) check_linear(b, c, tokens, true, rng);
    }
  }
}

// The one-token W8A8 gemv whose mma rows are 2 weight rows x 8 slices of K (MINIVLLM_FP8_GEMV_ONE,
// gemv_fp8_one.cu) at each CTA size, against the CPU as above: odd row counts (a last pair or CTA part
// full), K of 32 chunks and of 37 and 71 (a last step where some of a warp's slices are past the end),
// 224 chunks (two steps of 4); two tokens, 128 x 128 grids and K = 1,024 take the 16-row kernel.
TEST(CudaFp8Linear, OneTokenW8A8GemvMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  for (const char* pairs : {"1", "2", "4"}) {
    Backends b = backends_with(
        {{"MINIVLLM_FP8_GEMV_ONE", pairs}, {"MINIVLLM_FP8_GEMV_ONE_MIN_MB", "0"}, {"MINIVLLM_FP8_GEMV_ONE_X16", "0"}});
    std::mt19937 rng(92);
    for (const W8a8Dims d : {W8a8Dims{1001, 2368, Grid::kPerRow, 4544}, W8a8Dims{203, 4096, Grid::kBlock128, 2368},
                             W8a8Dims{99, 2048, Grid::kPerRow, 14336}, W8a8Dims{77, 1024, Grid::kBlock128, 2048}}) {
      check_w8a8_case(b, d, {1, 2}, std::string("pairs ") + pairs, rng);
    }
  }
}

// The one-token W8A8 kernel on 128 x 128 scale blocks (MINIVLLM_FP8_GEMV_ONE_BLOCKS), called directly
// so that a decline fails the test: the store and act_mul at 1, 2 and 4 pairs, K of whole blocks and of
// a half block at the end (2,368), rows ending inside a CTA and a block; against the CPU on the same
// codes' values (those Ks one loop step of two chunks, kOneStep), K = 5,120 (one step of four:
// Qwen3-32B's width) and K = 12,352 (four steps, the last partial). Then the shapes it must decline (the
// residual's add, gate rows not of whole blocks).
TEST(CudaFp8Linear, OneTokenW8A8GemvTakesScaleBlocks) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(94);
  struct S {
    int64_t rows, k;  // W's rows (act_mul: gate and up)
    cuda::Fp8GemvOut e;
  };
  const auto codes_of = [&](const Tensor& x, Tensor& codes, Tensor& scale) {
    const int64_t k = x.size(-1);
    std::vector<uint8_t> q(static_cast<size_t>(k));
    float sc = 0.0f;
    quantize_e4m3_row(x.ptr<float>(), k, q.data(), &sc);
    codes = b.gpu->empty(DType::kF8E4M3, {1, k});
    scale = b.gpu->empty(DType::kF32, {1});
    b.gpu->copy_from_host(codes, q.data());
    b.gpu->copy_from_host(scale, &sc);
  };
  for (const int pairs : {1, 2, 4}) {
    for (const S s : {S{1001, 2368, cuda::Fp8GemvOut::kStore}, S{6144, 4096, cuda::Fp8GemvOut::kStore},
                      S{2304, 2368, cuda::Fp8GemvOut::kActMul}, S{512, 4096, cuda::Fp8GemvOut::kActMul},
                      S{1001, 5120, cuda::Fp8GemvOut::kStore}, S{512, 5120, cuda::Fp8GemvOut::kActMul},
                      S{1001, 12352, cuda::Fp8GemvOut::kStore}, S{512, 12352, cuda::Fp8GemvOut::kActMul}}) {
      const bool gated = s.e == cuda::Fp8GemvOut::kActMul;
      const Fp8Case c = make_case(b, s.rows, s.k, Grid::kBlock128, rng);
      const int64_t n = gated ? s.rows / 2 : s.rows;
      const std::string tag = c.name + (gated ? " act_mul" : " store") + " pairs " + std::to_string(pairs);
      const Tensor x = random_values({1, s.k}, rng);
      Tensor codes, scale;
      codes_of(x, codes, scale);
      Tensor og = b.gpu->empty(DType::kBF16, {1, n});
      b.gpu->fill_bytes(og, 0xFF);
      CUDA_CHECK(cudaDeviceSynchronize());
      ASSERT_TRUE(cuda::launch_gemv_fp8_one(codes.ptr<uint8_t>(), scale.ptr<float>(), cuda::fp8_weight_view(c.wg),
                                            nullptr, false, og.data(), false, s.e, Activation::kSilu, 1, n, s.k,
                                            pairs, nullptr, /*blocks=*/true))
          << tag;
      CUDA_CHECK(cudaDeviceSynchronize());
      const Tensor xc = upload(*b.cpu, e4m3_rows_values(x));
      Tensor oc = b.cpu->empty(DType::kF32, {1, n});
      if (gated) {
        Tensor sc = b.cpu->empty(DType::kF32, {1, s.rows});
        b.cpu->linear_act_mul(xc, c.wc, sc, oc, Activation::kSilu);
      } else {
        b.cpu->linear(xc, c.wc, nullptr, oc);
      }
      expect_w8a8_close(download(*b.gpu, og), download(*b.cpu, oc), tag);
    }
  }
  const Fp8Case add = make_case(b, 512, 2048, Grid::kBlock128, rng);
  const Fp8Case ragged = make_case(b, 2 * 1000, 2048, Grid::kBlock128, rng);  // up rows start inside a block
  const cuda::Fp8Weight aw = cuda::fp8_weight_view(add.wg), rw = cuda::fp8_weight_view(ragged.wg);
  EXPECT_FALSE(cuda::launch_gemv_fp8_one(nullptr, nullptr, aw, nullptr, false, nullptr, true, cuda::Fp8GemvOut::kAddF32,
                                         Activation::kSilu, 1, 512, 2048, 2, nullptr, true));
  EXPECT_FALSE(cuda::launch_gemv_fp8_one(nullptr, nullptr, rw, nullptr, false, nullptr, false, cuda::Fp8GemvOut::kActMul,
                                         Activation::kSilu, 1, 1000, 2048, 2, nullptr, true));
  EXPECT_FALSE(cuda::launch_gemv_fp8_one(nullptr, nullptr, aw, nullptr, false, nullptr, false, cuda::Fp8GemvOut::kStore,
                                         Activation::kSilu, 1, 512, 2048, 2, nullptr, false));
  // Through the backend (MINIVLLM_FP8_GEMV_ONE_BLOCKS=1; the W8A16 kernel off, which would take the
  // one-token store on x unquantized): gate/up's store and act_mul take it.
  Backends bb = backends_with({{"MINIVLLM_FP8_GEMV_ONE_BLOCKS", "1"},
                               {"MINIVLLM_FP8_GEMV_ONE_MIN_MB", "0"},
                               {"MINIVLLM_FP8_GEMV_ONE_X16_BLOCKS", "0"}});
  check_w8a8_case(bb, W8a8Dims{1152, 2368, Grid::kBlock128, 2048}, {1, 2}, "one-token blocks", rng);
}

// The same kernel on bf16 x as it is (MINIVLLM_FP8_GEMV_ONE_X16: f16 mmas, x times 2^-4 into f16, 4
// row pairs a CTA), where a one-token linear takes bf16 x (store, act_mul and the residual's add here;
// the engine's o and down projections), against the CPU on the same unquantized x: the shapes above,
// and x and h of spread 1,000 and 1 / 1,000 (f16's range and its subnormals after the 2^-4); then
// with scale blocks.
TEST(CudaFp8Linear, OneTokenW8A16GemvMatchesCpu) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(93);
  for (const W8a8Dims d : {W8a8Dims{1001, 2368, Grid::kPerRow, 4544}, W8a8Dims{99, 2048, Grid::kPerRow, 14336}}) {
    for (float spread : {1.0f, 1000.0f, 0.001f}) {
      check_w8a8_case(b, d, {1}, "w8a16 spread " + std::to_string(spread), rng, true, spread);
    }
  }
  // 128 x 128 scale blocks (MINIVLLM_FP8_GEMV_ONE_X16_BLOCKS, on; Qwen3-*-FP8's o and down): the store with
  // a bias and the residual's add, K of whole blocks and of a half block at the end (2,368), rows
  // ending inside a block. Against the CPU on x unquantized: the W8A8 gemv it replaces (x in e4m3)
  // would miss the bound, so passing shows the W8A16 kernel ran.
  // And the add with the residual copied early (MINIVLLM_FP8_BLOCK_EARLY_RESIDUAL).
  for (const char* early : {"0", "1"}) {
    Backends bb =
        backends_with({{"MINIVLLM_FP8_GEMV_ONE_X16_BLOCKS", "1"}, {"MINIVLLM_FP8_BLOCK_EARLY_RESIDUAL", early}});
    for (const auto& [n, k] : {std::pair<int64_t, int64_t>{1001, 2368}, std::pair<int64_t, int64_t>{4096, 12288},
                               std::pair<int64_t, int64_t>{200, 2048}}) {
      const Fp8Case c = make_case(bb, n, k, Grid::kBlock128, rng);
      check_linear(bb, c, 1, /*bias=*/true, rng);
      Tensor x = random_values({1, k}, rng), res = random_values({1, n}, rng);
      Tensor rc = upload_f32(*bb.cpu, res), rg = upload_f32(*bb.gpu, res);
      Tensor dc = bb.cpu->empty(DType::kF32, {1, n}), dg = bb.gpu->empty(DType::kBF16, {1, n});
      bb.cpu->linear_add_residual(upload(*bb.cpu, x), c.wc, dc, rc);
      bb.gpu->linear_add_residual(upload(*bb.gpu, x), c.wg, dg, rg);
      expect_fp8_close(download(*bb.gpu, rg), download(*bb.cpu, rc), 1,
                       "add_residual, blocks " + c.name + " early " + early);
    }
  }
}

// The per-token quantizer that reads x once gives the bytes and scales of the general one (whose
// formula is the host's, above), at odd row counts and widths up to its 16,384 limit, including
// rows of large values; and it declines widths it does not take.
TEST(CudaFp8Linear, RowQuantizerGivesTheGroupQuantizersBytes) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(85);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 8}, {37, 1032}, {9, 4096}, {300, 1024}, {5, 14336}, {7, 6000},
                            {3, 16384}}) {
    Tensor x = random_values({rows, cols}, rng, cols == 1032 ? 300.0f : 1.0f);
    std::vector<uint16_t> xb(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < xb.size(); ++i) xb[i] = f32_to_bf16(x.ptr<float>()[i]);
    void *dx = nullptr, *codes = nullptr, *ref = nullptr, *sc = nullptr, *sref = nullptr;
    CUDA_CHECK(cudaMalloc(&dx, xb.size() * 2));
    CUDA_CHECK(cudaMalloc(&codes, xb.size()));
    CUDA_CHECK(cudaMalloc(&ref, xb.size()));
    CUDA_CHECK(cudaMalloc(&sc, static_cast<size_t>(rows) * 4));
    CUDA_CHECK(cudaMalloc(&sref, static_cast<size_t>(rows) * 4));
    CUDA_CHECK(cudaMemcpy(dx, xb.data(), xb.size() * 2, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(codes, 0xFF, xb.size()));
    cuda::launch_quantize_e4m3_groups(dx, false, rows, cols, cols, 0, cols, static_cast<uint8_t*>(ref),
                                      static_cast<float*>(sref), nullptr);
    ASSERT_TRUE(cuda::launch_quantize_e4m3_rows(dx, rows, cols, static_cast<uint8_t*>(codes), static_cast<float*>(sc),
                                                nullptr));
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<uint8_t> got(xb.size()), want(xb.size());
    std::vector<float> gs(static_cast<size_t>(rows)), ws(static_cast<size_t>(rows));
    CUDA_CHECK(cudaMemcpy(got.data(), codes, got.size(), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(want.data(), ref, want.size(), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(gs.data(), sc, gs.size() * 4, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(ws.data(), sref, ws.size() * 4, cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, want) << rows << " x " << cols;
    EXPECT_EQ(gs, ws) << rows << " x " << cols;
    for (void* p : {dx, codes, ref, sc, sref}) cudaFree(p);
  }
  EXPECT_FALSE(cuda::launch_quantize_e4m3_rows(nullptr, 4, 1028, nullptr, nullptr, nullptr)) << "a width not of 8s";
  EXPECT_FALSE(cuda::launch_quantize_e4m3_rows(nullptr, 4, 16392, nullptr, nullptr, nullptr)) << "past 16,384";
}

// The RMSNorm straight into e4m3 codes gives the bytes of the norm (launch_rms_norm_f32_in, bf16 rows)
// then the row quantizer, for fp32 and bf16 norm weights, at odd widths, a row of zeros among them;
// and declines what the row quantizer declines.
TEST(CudaFp8Linear, NormedRowQuantizerGivesNormThenQuantizerBytes) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(86);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 8}, {37, 1032}, {9, 4096}, {300, 1024}, {5, 14336}, {7, 6000},
                            {3, 16384}, {4, 2056}}) {
    for (bool w_f32 : {false, true}) {
      Tensor x = random_values({rows, cols}, rng, cols == 1032 ? 30.0f : 1.0f);
      std::fill(x.ptr<float>() + (rows / 2) * cols, x.ptr<float>() + (rows / 2 + 1) * cols, 0.0f);
      Tensor w = random_values({cols}, rng, 0.5f, 1.0f);
      std::vector<uint16_t> wb(static_cast<size_t>(cols));
      for (size_t i = 0; i < wb.size(); ++i) wb[i] = f32_to_bf16(w.ptr<float>()[i]);
      const size_t n = static_cast<size_t>(rows * cols);
      void *dx = nullptr, *dw = nullptr, *normed = nullptr, *codes = nullptr, *ref = nullptr, *sc = nullptr,
           *sref = nullptr;
      CUDA_CHECK(cudaMalloc(&dx, n * 4));
      CUDA_CHECK(cudaMalloc(&dw, static_cast<size_t>(cols) * 4));
      CUDA_CHECK(cudaMalloc(&normed, n * 2));
      CUDA_CHECK(cudaMalloc(&codes, n));
      CUDA_CHECK(cudaMalloc(&ref, n));
      CUDA_CHECK(cudaMalloc(&sc, static_cast<size_t>(rows) * 4));
      CUDA_CHECK(cudaMalloc(&sref, static_cast<size_t>(rows) * 4));
      CUDA_CHECK(cudaMemcpy(dx, x.ptr<float>(), n * 4, cudaMemcpyHostToDevice));
      if (w_f32) {
        CUDA_CHECK(cudaMemcpy(dw, w.ptr<float>(), static_cast<size_t>(cols) * 4, cudaMemcpyHostToDevice));
      } else {
        CUDA_CHECK(cudaMemcpy(dw, wb.data(), wb.size() * 2, cudaMemcpyHostToDevice));
      }
      CUDA_CHECK(cudaMemset(codes, 0xFF, n));
      const float eps = 1e-6f;
      cuda::launch_rms_norm_f32_in(static_cast<const float*>(dx), dw, w_f32, eps, rows, cols, normed, nullptr);
      ASSERT_TRUE(cuda::launch_quantize_e4m3_rows(normed, rows, cols, static_cast<uint8_t*>(ref),
                                                  static_cast<float*>(sref), nullptr));
      ASSERT_TRUE(cuda::launch_rms_norm_e4m3_rows(static_cast<const float*>(dx), dw, w_f32, eps, rows, cols,
                                                  static_cast<uint8_t*>(codes), static_cast<float*>(sc), nullptr));
      CUDA_CHECK(cudaDeviceSynchronize());
      std::vector<uint8_t> got(n), want(n);
      std::vector<float> gs(static_cast<size_t>(rows)), ws(static_cast<size_t>(rows));
      CUDA_CHECK(cudaMemcpy(got.data(), codes, n, cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(want.data(), ref, n, cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(gs.data(), sc, gs.size() * 4, cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(ws.data(), sref, ws.size() * 4, cudaMemcpyDeviceToHost));
      EXPECT_EQ(got, want) << rows << " x " << cols << (w_f32 ? " f32" : " bf16") << " norm weight";
      EXPECT_EQ(gs, ws) << rows << " x " << cols << (w_f32 ? " f32" : " bf16") << " norm weight";
      for (void* p : {dx, dw, normed, codes, ref, sc, sref}) cudaFree(p);
    }
  }
  EXPECT_FALSE(cuda::launch_rms_norm_e4m3_rows(nullptr, nullptr, false, 1e-6f, 4, 1028, nullptr, nullptr, nullptr))
      << "a width not of 8s";
  EXPECT_FALSE(cuda::launch_rms_norm_e4m3_rows(nullptr, nullptr, false, 1e-6f, 4, 16392, nullptr, nullptr, nullptr))
      << "past 16,384";
}

// MINIVLLM_FP8_NORMED_X16 (on here; off by default since stop 74): one token's rms_norm_linear on a
// 128 x 128 block-scaled weight below 32 MB (Qwen3-*-FP8's qkv) writes the bf16 normed row and runs
// the one-token W8A16 kernel on it: bit for bit rms_norm then linear (which at one token takes that
// kernel on bf16 x), with a bias, K of whole blocks and of a half block; near the CPU (its normed row
// is not rounded to bf16).
TEST(CudaFp8Linear, NormedX16EqualsNormThenLinear) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b = backends_with("MINIVLLM_FP8_NORMED_X16", "1");
  std::mt19937 rng(88);
  for (const int64_t k : {4096, 2112}) {
    const Grid g = Grid::kBlock128;
    const Fp8Case qkv = make_case(b, 1080, k, g, rng);
    Tensor res = random_values({1, k}, rng, 3.0f), nw = random_values({k}, rng, 0.2f, 1.0f);
    Tensor bias = random_values({qkv.n}, rng);
    const Tensor rg = upload_f32(*b.gpu, res), nwg = upload(*b.gpu, nw), bg = upload(*b.gpu, bias);
    const Tensor rc = upload_f32(*b.cpu, res), nwc = upload(*b.cpu, nw), bc = upload(*b.cpu, bias);
    Tensor normed = b.gpu->empty(DType::kBF16, {1, k}), normed_c = b.cpu->empty(DType::kF32, {1, k});
    Tensor fused = b.gpu->empty(DType::kBF16, {1, qkv.n}), plain = b.gpu->empty(DType::kBF16, {1, qkv.n});
    Tensor cpu = b.cpu->empty(DType::kF32, {1, qkv.n});
    b.gpu->fill_bytes(fused, 0xFF);
    b.gpu->rms_norm_linear({rg, nwg, 1e-6f, normed}, qkv.wg, &bg, fused);
    b.gpu->rms_norm(rg, nwg, 1e-6f, normed);
    b.gpu->linear(normed, qkv.wg, &bg, plain);
    b.cpu->rms_norm_linear({rc, nwc, 1e-6f, normed_c}, qkv.wc, &bc, cpu);
    EXPECT_EQ(download(*b.gpu, fused), download(*b.gpu, plain)) << qkv.name;
    expect_close(download(*b.gpu, fused), download(*b.cpu, cpu), 1e-4, 0.1, "normed x16 vs CPU " + qkv.name);
  }
}

// Past the gemv, rms_norm_linear and rms_norm_linear_act_mul on per-row FP8 weights make x's codes
// from the residual (CudaBackend::fp8_normed) instead of writing the normed rows: the outputs are
// the unfused calls' (rms_norm, then linear or linear_act_mul) bit for bit, and near the CPU's. (One
// token's unfused linear would take bf16 x as it is, MINIVLLM_FP8_GEMV_ONE_X16: off here.)
TEST(CudaFp8Linear, NormedLinearsEqualNormThenLinear) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b = backends_with("MINIVLLM_FP8_GEMV_ONE_X16", "0");
  std::mt19937 rng(87);
  for (auto [inter, k] : {std::pair<int64_t, int64_t>{264, 384}, {1536, 1024}, {520, 4096}}) {
    const Fp8Case qkv = make_case(b, 2 * inter + 48, k, Grid::kPerRow, rng);
    const Fp8Case gu = make_case(b, 2 * inter, k, Grid::kPerRow, rng);
    for (int64_t tokens : {1, 5, 40, 300}) {  // 1 and 5: W8A8 at gemv batches
      if (k > 1024 && tokens > 8) continue;
      const std::string tag = "K=" + std::to_string(k) + " M=" + std::to_string(tokens);
      Tensor res = random_values({tokens, k}, rng, 3.0f);
      Tensor nw = random_values({k}, rng, 0.2f, 1.0f);
      Tensor bias = random_values({qkv.n}, rng);
      const Tensor rg = upload_f32(*b.gpu, res), nwg = upload(*b.gpu, nw), bg = upload(*b.gpu, bias);
      const Tensor rc = upload_f32(*b.cpu, res), nwc = upload(*b.cpu, nw), bc = upload(*b.cpu, bias);
      Tensor normed = b.gpu->empty(DType::kBF16, {tokens, k}), normed_c = b.cpu->empty(DType::kF32, {tokens, k});
      const float eps = 1e-6f;

      Tensor fused = b.gpu->empty(DType::kBF16, {tokens, qkv.n}), plain = b.gpu->empty(DType::kBF16, {tokens, qkv.n});
      Tensor cpu = b.cpu->empty(DType::kF32, {tokens, qkv.n});
      b.gpu->fill_bytes(fused, 0xFF);
      b.gpu->rms_norm_linear({rg, nwg, eps, normed}, qkv.wg, &bg, fused);
      b.gpu->rms_norm(rg, nwg, eps, normed);
      b.gpu->linear(normed, qkv.wg, &bg, plain);
      b.cpu->rms_norm_linear({rc, nwc, eps, normed_c}, qkv.wc, &bc, cpu);
      EXPECT_EQ(download(*b.gpu, fused), download(*b.gpu, plain)) << "rms_norm_linear " << tag;
      // Against the CPU's unquantized x: the W8A8 format's own error (a few percent of the range at most;
      // the exact comparison above is the kernels').
      expect_close(download(*b.gpu, fused), download(*b.cpu, cpu), 3e-3, 1.0, "rms_norm_linear vs CPU " + tag);

      Tensor scratch = b.gpu->empty(DType::kBF16, {tokens, gu.n}), scratch_c = b.cpu->empty(DType::kF32, {tokens, gu.n});
      Tensor hf = b.gpu->empty(DType::kBF16, {tokens, inter}), hp = b.gpu->empty(DType::kBF16, {tokens, inter});
      Tensor hc = b.cpu->empty(DType::kF32, {tokens, inter});
      b.gpu->fill_bytes(hf, 0xFF);
      b.gpu->rms_norm_linear_act_mul({rg, nwg, eps, normed}, gu.wg, scratch, hf, Activation::kSilu);
      b.gpu->rms_norm(rg, nwg, eps, normed);
      b.gpu->linear_act_mul(normed, gu.wg, scratch, hp, Activation::kSilu);
      b.cpu->rms_norm_linear_act_mul({rc, nwc, eps, normed_c}, gu.wc, scratch_c, hc, Activation::kSilu);
      EXPECT_EQ(download(*b.gpu, hf), download(*b.gpu, hp)) << "rms_norm_linear_act_mul " << tag;
      expect_close(download(*b.gpu, hf), download(*b.cpu, hc), 3e-3, 1.0, "rms_norm_linear_act_mul vs CPU " + tag);
    }
  }
}

// Block-scaled FP8 weights past the gemv (MINIVLLM_FP8_BLOCK_GEMM: decode_gemm.cu's e4m3 kernel, a
// fresh accumulator a 128-wide scale block), against the CPU fed the same codes' values: store with a
// bias on N = 1,000 (a last tile past N), act_mul with the up rows starting inside a block (I = 704)
// and on whole blocks (I = 640), the residual add on K = 640 (one token tile) and 704 (declined: K
// not of 128s; the bf16 copy's GEMM); 9 to 256 tokens (130 and 256: two token tiles). Then the normed
// quantizer ahead of it equals rms_norm then the linear bit for bit.
TEST(CudaFp8Linear, BlockScaledGemmMatchesCpuOnTheSameCodes) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  // TOKENS 256: past the default 64, copied weights would take the bf16 copy's GEMM instead.
  Backends b = backends_with({{"MINIVLLM_FP8_BLOCK_GEMM", "all"}, {"MINIVLLM_FP8_BLOCK_GEMM_TOKENS", "256"}});
  std::mt19937 rng(95);
  const Fp8Case store = make_case(b, 1000, 1152, Grid::kBlock128, rng);
  for (int64_t tokens : {9, 37, 130, 256}) check_linear(b, store, tokens, /*bias=*/true, rng, /*w8a8=*/true);
  for (const int64_t inter : {704, 640}) {
    const Fp8Case gu = make_case(b, 2 * inter, 1152, Grid::kBlock128, rng);
    const Fp8Case down = make_case(b, 1152, inter, Grid::kBlock128, rng);
    for (int64_t tokens : {9, 128, 200}) check_gated_and_residual(b, gu, down, tokens, rng, "block gemm ", true);
  }
  const int64_t k = 1152;
  const Fp8Case gu = make_case(b, 2 * 640, k, Grid::kBlock128, rng);
  for (int64_t tokens : {40, 256}) {
    const std::string tag = "M=" + std::to_string(tokens);
    Tensor res = random_values({tokens, k}, rng, 3.0f);
    Tensor nw = random_values({k}, rng, 0.2f, 1.0f);
    const Tensor rg = upload_f32(*b.gpu, res), nwg = upload(*b.gpu, nw);
    Tensor normed = b.gpu->empty(DType::kBF16, {tokens, k});
    Tensor fused = b.gpu->empty(DType::kBF16, {tokens, gu.n}), plain = b.gpu->empty(DType::kBF16, {tokens, gu.n});
    b.gpu->fill_bytes(fused, 0xFF);
    b.gpu->rms_norm_linear({rg, nwg, 1e-6f, normed}, gu.wg, nullptr, fused);
    b.gpu->rms_norm(rg, nwg, 1e-6f, normed);
    b.gpu->linear(normed, gu.wg, nullptr, plain);
    EXPECT_EQ(download(*b.gpu, fused), download(*b.gpu, plain)) << "rms_norm_linear " << tag;
    Tensor scratch = b.gpu->empty(DType::kBF16, {tokens, gu.n});
    Tensor hf = b.gpu->empty(DType::kBF16, {tokens, 640}), hp = b.gpu->empty(DType::kBF16, {tokens, 640});
    b.gpu->fill_bytes(hf, 0xFF);
    b.gpu->rms_norm_linear_act_mul({rg, nwg, 1e-6f, normed}, gu.wg, scratch, hf, Activation::kSilu);
    b.gpu->rms_norm(rg, nwg, 1e-6f, normed);
    b.gpu->linear_act_mul(normed, gu.wg, scratch, hp, Activation::kSilu);
    EXPECT_EQ(download(*b.gpu, hf), download(*b.gpu, hp)) << "rms_norm_linear_act_mul " << tag;
  }
}

struct BlockWeights {
  Tensor store, gate_up, down;  // FP8 [n, k], [2 * inter, k], [k, inter] (host)
};

// Random weights of unit-variance outputs, quantized in 128 x 128 blocks.
BlockWeights block_weights(int64_t n, int64_t k, int64_t inter, std::mt19937& rng) {
  const auto q = [&](int64_t rows, int64_t cols) {
    return quantize_blocks(random_values({rows, cols}, rng, 1.0f / std::sqrt(static_cast<float>(cols))), 128, 128);
  };
  BlockWeights w;
  w.store = q(n, k);
  w.gate_up = q(2 * inter, k);
  w.down = q(k, inter);
  return w;
}

// On b's GPU and CPU (the CPU on the dequantized weights): the store of x with a bias, the residual
// add of h's product (the product alone: the residual's own values would hide its error) and
// act_mul of x. Their differences, in that order.
std::vector<Diff> block_linear_diffs(Backends& b, const BlockWeights& w, const Tensor& x, const Tensor& h,
                                     const Tensor& bias, const Tensor& res) {
  const int64_t tokens = x.size(0), k = x.size(1), n = w.store.size(0), inter = w.down.size(1);
  const Tensor sg = b.gpu->upload_stored_weight(w.store), gug = b.gpu->upload_stored_weight(w.gate_up),
               dg = b.gpu->upload_stored_weight(w.down);
  const Tensor sc = upload(*b.cpu, dequantize_fp8_weight(w.store));
  const Tensor guc = upload(*b.cpu, dequantize_fp8_weight(w.gate_up)), dc = upload(*b.cpu, dequantize_fp8_weight(w.down));
  const Tensor xg = upload(*b.gpu, x), xc = upload(*b.cpu, x), hg = upload(*b.gpu, h), hc = upload(*b.cpu, h);
  const Tensor bg = upload(*b.gpu, bias), bc = upload(*b.cpu, bias);
  Tensor og = b.gpu->empty(DType::kBF16, {tokens, n}), oc = b.cpu->empty(DType::kF32, {tokens, n});
  b.gpu->fill_bytes(og, 0xFF);
  b.gpu->linear(xg, sg, &bg, og);
  b.cpu->linear(xc, sc, &bc, oc);
  Tensor rg = upload_f32(*b.gpu, res), rc = upload_f32(*b.cpu, res);
  Tensor scratch_g = b.gpu->empty(DType::kBF16, {tokens, k}), scratch_c = b.cpu->empty(DType::kF32, {tokens, k});
  b.gpu->linear_add_residual(hg, dg, scratch_g, rg);
  b.cpu->linear_add_residual(hc, dc, scratch_c, rc);
  Tensor ug = b.gpu->empty(DType::kBF16, {tokens, 2 * inter}), uc = b.cpu->empty(DType::kF32, {tokens, 2 * inter});
  Tensor ag = b.gpu->empty(DType::kBF16, {tokens, inter}), ac = b.cpu->empty(DType::kF32, {tokens, inter});
  b.gpu->fill_bytes(ag, 0xFF);
  b.gpu->linear_act_mul(xg, gug, ug, ag, Activation::kSilu);
  b.cpu->linear_act_mul(xc, guc, uc, ac, Activation::kSilu);
  std::vector<float> add_g = download(*b.gpu, rg), add_c = download(*b.cpu, rc);
  const std::vector<float> r0 = download(*b.cpu, upload_f32(*b.cpu, res));
  for (size_t i = 0; i < add_g.size(); ++i) {
    add_g[i] -= r0[i];
    add_c[i] -= r0[i];
  }
  return {diff(download(*b.gpu, og), download(*b.cpu, oc)), diff(add_g, add_c),
          diff(download(*b.gpu, ag), download(*b.cpu, ac))};
}

// The e4m3 block GEMM's two-term activations (MINIVLLM_FP8_BLOCK_GEMM_X=two, the default): x ~ scale
// * (code + lo), so against the CPU on x unquantized the outputs are within bf16-level error, where
// one term (W8A8) carries e4m3's 3-bit mantissa: two terms must come 10x closer than one, and within
// the gemv's bf16 tolerance. Store with a bias (N = 1,000, 9 and 130 tokens: one and two token
// tiles), the residual add and act_mul, on the same weights and inputs for both settings.
TEST(CudaFp8Linear, BlockScaledGemmTwoTermsMatchUnquantizedX) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(96);
  const int64_t k = 1152, n = 1000, inter = 640;
  const BlockWeights w = block_weights(n, k, inter, rng);
  for (int64_t tokens : {9, 130}) {
    const Tensor x = random_values({tokens, k}, rng), h = random_values({tokens, inter}, rng);
    const Tensor bias = random_values({n}, rng), res = random_values({tokens, k}, rng);
    std::map<std::string, std::vector<Diff>> diffs;  // by setting: store, add, act_mul
    for (const char* terms : {"two", "one"}) {
      // (TOKENS 256: the default, 64, would give the 130-token calls to the bf16 copy's GEMM.)
      Backends b = backends_with({{"MINIVLLM_FP8_BLOCK_GEMM", "all"},
                                  {"MINIVLLM_FP8_BLOCK_GEMM_TOKENS", "256"},
                                  {"MINIVLLM_FP8_BLOCK_GEMM_X", terms}});
      diffs[terms] = block_linear_diffs(b, w, x, h, bias, res);
    }
    for (size_t i = 0; i < 3; ++i) {
      const char* what[] = {"store", "add", "act_mul"};
      const Diff& two = diffs["two"][i];
      const Diff& one = diffs["one"][i];
      EXPECT_EQ(two.nonfinite, 0) << what[i] << " M=" << tokens;
      EXPECT_LE(two.nmse, 2e-5) << what[i] << " M=" << tokens << " (one term: " << one.nmse << ")";
      EXPECT_LE(two.nmse * 10, one.nmse) << what[i] << " M=" << tokens;
    }
  }
}

// x's rows through e4m3 in groups of 128 columns (a scale each, as launch_quantize_e4m3_vec128 makes
// them) and back, then bf16: values the block-scaled cuBLASLt GEMM's quantizer gives back unchanged.
// A new tensor (Tensor is a handle: writing through `in` would change the caller's raw x).
Tensor through_e4m3_groups(const Tensor& in) {
  const int64_t k = in.size(-1), rows = in.numel() / k;
  Tensor x = host_tensor(DType::kF32, {rows, k});
  std::memcpy(x.data(), in.data(), static_cast<size_t>(rows * k) * sizeof(float));
  return through_e4m3_rows(x, 128);
}

// cuBLASLt's block-scaled FP8 GEMM (MINIVLLM_FP8_BLOCK_CUBLAS: x as e4m3 per 128 values, W's 128 x
// 128 grid) for the linears past fp8_block_gemm: store with a bias (N = 1,040: a last scale block
// of 16 rows), act_mul (the generic linear then act_mul) and the residual add (beta = 1 into the
// fp32 residual), at 128, 200 and 333 tokens (the last 5 in a padded GEMM of their own), K of 512s
// (cuBLASLt's grid rows: fp8_gemm.cc). On x
// made of such codes the CPU in fp32 is the reference (W8A8 tolerance); on raw x the path must show
// e4m3's error, which the bf16 copy's GEMM (the knob off) does not: so the test fails if the knob's
// path never ran.
TEST(CudaFp8Linear, BlockScaledCublasLtMatchesCpuOnTheSameCodes) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  std::mt19937 rng(97);
  const int64_t k = 1024, n = 1040, inter = 512;
  const BlockWeights w = block_weights(n, k, inter, rng);
  for (int64_t tokens : {128, 200, 333}) {
    const Tensor x_raw = random_values({tokens, k}, rng), h_raw = random_values({tokens, inter}, rng);
    const Tensor bias = random_values({n}, rng), res = random_values({tokens, k}, rng);
    std::map<std::string, std::vector<Diff>> diffs;  // by setting and input: store, add, act_mul
    for (const char* knob : {"65", "0"}) {
      Backends b = backends_with("MINIVLLM_FP8_BLOCK_CUBLAS", knob);  // (65: past fp8_block_gemm's 64)
      for (const bool codes : {true, false}) {
        const Tensor x = codes ? through_e4m3_groups(x_raw) : x_raw, h = codes ? through_e4m3_groups(h_raw) : h_raw;
        diffs[std::string(knob) + (codes ? " codes" : " raw")] =
            block_linear_diffs(b, w, x, h, bias, res);
      }
    }
    for (size_t i = 0; i < 3; ++i) {
      const char* what[] = {"store", "add", "act_mul"};
      const Diff& on_codes = diffs["65 codes"][i];
      const Diff& on_raw = diffs["65 raw"][i];
      const Diff& off_raw = diffs["0 raw"][i];
      EXPECT_EQ(on_codes.nonfinite + on_raw.nonfinite, 0) << what[i] << " M=" << tokens;
      EXPECT_LE(on_codes.nmse, 1e-4) << what[i] << " M=" << tokens << " (on raw x: " << on_raw.nmse << ")";
      EXPECT_LE(on_codes.max_abs, 0.12) << what[i] << " M=" << tokens;
      // e4m3's rounding of raw x shows (the path ran), and the bf16 copy's GEMM is far closer.
      EXPECT_GE(on_raw.nmse, 10 * off_raw.nmse) << what[i] << " M=" << tokens << " (knob off: " << off_raw.nmse << ")";
      EXPECT_LE(off_raw.nmse, 2e-5) << what[i] << " M=" << tokens;
    }
  }
}

// rms_norm_linear_rope_store's inputs for the two rope tests below, and what it writes.
struct QkvRopeCase {
  int nq, nkv, hd;
  bool norms, with_bias;
  Tensor res, nw, qn, kn, bias, table;
  std::vector<int32_t> pos, slots;
};
struct QkvRopeOut {
  std::vector<float> qkv, k, v;
};

// Runs the case on g with weight c (caches of 16-row blocks, filled with 0x11 first).
QkvRopeOut run_qkv_rope(Backend& g, const Fp8Case& c, const QkvRopeCase& q) {
  const int64_t tokens = static_cast<int64_t>(q.pos.size()), k = c.k, n = c.n;
  const Tensor rg = upload_f32(g, q.res), nwg = upload(g, q.nw), qng = upload(g, q.qn), kng = upload(g, q.kn),
               bg = upload(g, q.bias), tg = upload_f32(g, q.table), pg = upload_i32(g, q.pos);
  Tensor normed = g.empty(DType::kBF16, {tokens, k}), qkv = g.empty(DType::kBF16, {tokens, n});
  KVCache cache = g.allocate_kv_cache(static_cast<int>((tokens + 15) / 16), 16, q.nkv, q.hd);
  g.fill_bytes(cache.k, 0x11);
  g.fill_bytes(cache.v, 0x11);
  AttentionMetadata meta;
  meta.slot_mapping = upload_i32(g, q.slots);
  g.rms_norm_linear_rope_store({rg, nwg, 1e-6f, normed}, c.wg, q.with_bias ? &bg : nullptr, qkv,
                               {q.nq, q.nkv, q.hd, q.norms ? &qng : nullptr, q.norms ? &kng : nullptr, 1e-6f, pg, tg,
                                cache, meta});
  return QkvRopeOut{download(g, qkv), download(g, cache.k), download(g, cache.v)};
}

// MINIVLLM_FP8_ROPE_SCALES (on by default): past the gemv, rms_norm_linear_rope_store on a per-row
// FP8 qkv weight writes the GEMM's bare product and the rope kernel applies the store epilogue's
// scales (and bias) as it reads it. qkv and both caches equal the knob off's (epilogue, then rope)
// bit for bit, v and unrotated dims included, with and without q/k norms and a bias, a padding slot
// and a partial rotary; near the CPU's unquantized path.
TEST(CudaFp8Linear, RopeAppliesTheQkvScalesAsTheEpilogueWould) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends on, off = backends_with("MINIVLLM_FP8_ROPE_SCALES", "0");
  struct Shape {
    int nq, nkv, hd, rd;
  };
  for (const Shape sh : {Shape{16, 4, 128, 128}, Shape{8, 2, 64, 32}}) {
    for (const bool norms : {true, false}) {
      for (const bool with_bias : {false, true}) {
        const int64_t k = 512, n = static_cast<int64_t>(sh.nq + 2 * sh.nkv) * sh.hd;
        std::mt19937 rng(97), rng_off(97);
        const Fp8Case w = make_case(on, n, k, Grid::kPerRow, rng), w_off = make_case(off, n, k, Grid::kPerRow, rng_off);
        for (const int64_t tokens : {40, 300}) {
          const std::string tag = "hd=" + std::to_string(sh.hd) + " rotary=" + std::to_string(sh.rd) +
                                  (norms ? " norms" : "") + (with_bias ? " bias" : "") + " T=" + std::to_string(tokens);
          Tensor res = random_values({tokens, k}, rng, 3.0f);
          Tensor nw = random_values({k}, rng, 0.2f, 1.0f);
          Tensor qn = random_values({sh.hd}, rng, 0.2f, 1.0f), kn = random_values({sh.hd}, rng, 0.2f, 1.0f);
          Tensor bias = random_values({n}, rng);
          Tensor table = rope_table(4096, sh.rd);
          std::vector<int32_t> pos(tokens), slot(tokens);
          for (int64_t t = 0; t < tokens; ++t) {
            pos[t] = static_cast<int32_t>((t * 37) % 4096);
            slot[t] = t == 5 ? -1 : static_cast<int32_t>(tokens - 1 - t);  // one padding token
          }
          const QkvRopeCase q{sh.nq, sh.nkv, sh.hd, norms, with_bias, res, nw, qn, kn, bias, table, pos, slot};
          const QkvRopeOut a = run_qkv_rope(*on.gpu, w, q), b = run_qkv_rope(*off.gpu, w_off, q);
          EXPECT_EQ(a.qkv, b.qkv) << "qkv " << tag;
          EXPECT_EQ(a.k, b.k) << "k cache " << tag;
          EXPECT_EQ(a.v, b.v) << "v cache " << tag;
          // Against the CPU (fp32 x): the format's own error.
          Tensor qc = on.cpu->empty(DType::kF32, {tokens, n}), nc = on.cpu->empty(DType::kF32, {tokens, k});
          const Tensor bc = upload(*on.cpu, bias), qnc = upload(*on.cpu, qn), knc = upload(*on.cpu, kn);
          on.cpu->rms_norm_linear({upload_f32(*on.cpu, res), upload(*on.cpu, nw), 1e-6f, nc}, w.wc,
                                  with_bias ? &bc : nullptr, qc);
          on.cpu->qk_norm_rope(qc, sh.nq, sh.nkv, sh.hd, norms ? &qnc : nullptr, norms ? &knc : nullptr, 1e-6f,
                               upload_i32(*on.cpu, pos), upload_f32(*on.cpu, table));
          expect_close(a.qkv, download(*on.cpu, qc), 3e-3, 1.0, "qkv vs CPU " + tag);
        }
      }
    }
  }
}

// MINIVLLM_FP8_ADD_NORM (on by default): past the gemv, an FP8 linear_add_residual after
// note_next_norm adds into the residual and makes that norm's codes in one kernel, and the next FP8
// linear with that norm as its prologue multiplies them. The residual and every output equal the
// knob off's (the add epilogue, then the normed quantizer) bit for bit: the o projection then the
// gate/up product, the down projection then a plain normed linear, and a note whose norm is not the
// next prologue's (its codes must go unused).
TEST(CudaFp8Linear, AddNormCodesEqualTheAddThenTheNormedQuantizer) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends on, off = backends_with("MINIVLLM_FP8_ADD_NORM", "0");
  for (const int64_t hidden : {512, 2048}) {
    const int64_t kx = 384, inter = 264;
    struct Weights {
      Fp8Case o, gu, down, q;
    };
    const auto make = [&](Backends& b) {
      std::mt19937 r(99);
      Weights w;
      w.o = make_case(b, hidden, kx, Grid::kPerRow, r);
      w.gu = make_case(b, 2 * inter, hidden, Grid::kPerRow, r);
      w.down = make_case(b, hidden, inter, Grid::kPerRow, r);
      w.q = make_case(b, 3 * 64, hidden, Grid::kPerRow, r);
      return w;
    };
    const Weights won = make(on), woff = make(off);
    for (const int64_t tokens : {40, 300}) {
      std::mt19937 rng(101);
      Tensor res = random_values({tokens, hidden}, rng, 3.0f), x = random_values({tokens, kx}, rng);
      Tensor nw = random_values({hidden}, rng, 0.2f, 1.0f), nw2 = random_values({hidden}, rng, 0.2f, 1.0f);
      struct Out {
        std::vector<float> res1, h, res2, q, q2;
      };
      const auto run = [&](Backend& g, const Weights& w) {
        const Tensor rg = upload_f32(g, res), xg = upload(g, x), n1 = upload(g, nw), n2 = upload(g, nw2);
        Tensor scratch = g.empty(DType::kBF16, {tokens, std::max<int64_t>(hidden, 2 * inter)});
        Tensor normed = g.empty(DType::kBF16, {tokens, hidden}), h = g.empty(DType::kBF16, {tokens, inter});
        Tensor gu = g.empty(DType::kBF16, {tokens, 2 * inter}), q = g.empty(DType::kBF16, {tokens, 3 * 64});
        Tensor q2 = g.empty(DType::kBF16, {tokens, 3 * 64});
        Out o;
        g.note_next_norm(rg, n1, 1e-6f);
        g.linear_add_residual(xg, w.o.wg, scratch, rg);
        o.res1 = download(g, rg);
        g.rms_norm_linear_act_mul({rg, n1, 1e-6f, normed}, w.gu.wg, gu, h, Activation::kSilu);
        o.h = download(g, h);
        g.note_next_norm(rg, n2, 1e-6f);
        g.linear_add_residual(h, w.down.wg, scratch, rg);
        o.res2 = download(g, rg);
        g.rms_norm_linear({rg, n2, 1e-6f, normed}, w.q.wg, nullptr, q);
        o.q = download(g, q);
        g.note_next_norm(rg, n2, 1e-6f);  // then a prologue with the other norm: the staged codes are not its
        g.linear_add_residual(h, w.down.wg, scratch, rg);
        g.rms_norm_linear({rg, n1, 1e-6f, normed}, w.q.wg, nullptr, q2);
        o.q2 = download(g, q2);
        return o;
      };
      const Out a = run(*on.gpu, won), b = run(*off.gpu, woff);
      const std::string tag = "hidden=" + std::to_string(hidden) + " T=" + std::to_string(tokens);
      EXPECT_EQ(a.res1, b.res1) << "residual after o " << tag;
      EXPECT_EQ(a.h, b.h) << "act(gate) * up " << tag;
      EXPECT_EQ(a.res2, b.res2) << "residual after down " << tag;
      EXPECT_EQ(a.q, b.q) << "normed linear " << tag;
      EXPECT_EQ(a.q2, b.q2) << "normed linear of another norm " << tag;
      bool moved = false;
      for (size_t i = 0; i < a.res1.size() && !moved; ++i) moved = a.res1[i] != a.res2[i];
      EXPECT_TRUE(moved) << tag;
    }
  }
}

// MINIVLLM_FP8_FUSED_EPILOGUE (read when the backend is made; on by default): past the gemv, per-row
// FP8 linears scale their GEMM's bare product in one pass, fused with the bias, the residual add and
// act_mul; off, they run the quantizer, scale_outer and the add or act_mul apart. Both against the
// CPU on inputs that are already per-token e4m3 values (through_e4m3_rows), so the bound is the
// kernels' and not the format's.
TEST(CudaFp8Linear, EpiloguesMatchCpuFusedAndNot) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  for (const char* fused : {"1", "0"}) {
    Backends b = backends_with("MINIVLLM_FP8_FUSED_EPILOGUE", fused);
    std::mt19937 rng(83);
    struct Dims {
      int64_t inter, k;
    };
    const std::string prefix = std::string("fused=") + fused + " ";
    for (const Dims d : {Dims{264, 384}, Dims{1536, 1024}}) {
      const int64_t inter = d.inter, k = d.k;
      const Fp8Case gu = make_case(b, 2 * inter, k, Grid::kPerRow, rng);
      const Fp8Case down = make_case(b, k, inter, Grid::kPerRow, rng);
      // 2,500 tokens: past the epilogue's 1,024 grid rows (MINIVLLM_FP8_EPILOGUE_ROWS), so threads take
      // tokens two at a time and then one.
      for (int64_t tokens : {int64_t{9}, int64_t{40}, int64_t{300}, k == 384 ? int64_t{2500} : int64_t{0}}) {
        if (tokens == 0) continue;
        SCOPED_TRACE(prefix);
        check_linear(b, gu, tokens, /*bias=*/tokens != 40, rng, /*w8a8=*/true);
        check_gated_and_residual(b, gu, down, tokens, rng, prefix, /*w8a8=*/true);
      }
    }
  }
}

// cuBLASLt's FP8 GEMM takes per-row scales (run() says whether it launched, so a fallback cannot
// hide behind the comparisons above); block scales are decoded to bf16 instead.
TEST(CudaFp8Linear, CublasLtTakesPerRowScales) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(85);
  cuda::Fp8Gemm gemm;
  const Fp8Case c = make_case(b, 1024, 4096, Grid::kPerRow, rng);
  const Fp8Case blocks = make_case(b, 1024, 4096, Grid::kBlock128, rng);
  EXPECT_TRUE(cuda::fp8_gemm_takes(*c.wg.scales(), c.n, c.k));
  EXPECT_FALSE(cuda::fp8_gemm_takes(*blocks.wg.scales(), blocks.n, blocks.k));
  for (int64_t tokens : {16, 256, 2048}) {
    Tensor x = random_values({tokens, c.k}, rng);
    Tensor xg = upload(*b.gpu, x);
    Tensor oc = b.cpu->empty(DType::kF32, {tokens, c.n}), og = b.gpu->empty(DType::kBF16, {tokens, c.n});
    b.cpu->linear(upload(*b.cpu, x), c.wc, nullptr, oc);
    EXPECT_TRUE(gemm.run(xg, c.wg, nullptr, false, og.data(), false, nullptr)) << c.name << " M=" << tokens;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // run() took the legacy stream
    expect_fp8_close(download(*b.gpu, og), download(*b.cpu, oc), tokens, c.name + " direct M=" + std::to_string(tokens));
  }
}

TEST(CudaFp8Linear, GemmReplaysInsideAGraph) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  // The bf16 copy's GEMM (uncopied), and the e4m3 block GEMM with two terms (all): the replay writes
  // the eager call's bytes, near the CPU's.
  for (const char* block_gemm : {"uncopied", "all"}) {
    Backends b = backends_with("MINIVLLM_FP8_BLOCK_GEMM", block_gemm);
    std::mt19937 rng(83);
    const Fp8Case c = make_case(b, 384, 512, Grid::kBlock128, rng);
    Tensor x = random_values({64, c.k}, rng);
    Tensor xg = upload(*b.gpu, x);
    Tensor oc = b.cpu->empty(DType::kF32, {64, c.n}), og = b.gpu->empty(DType::kBF16, {64, c.n});
    b.cpu->linear(upload(*b.cpu, x), c.wc, nullptr, oc);
    b.gpu->linear(xg, c.wg, nullptr, og);  // warm-up outside the capture: the scratch and the plan
    b.gpu->synchronize();
    const std::vector<float> eager = download(*b.gpu, og);
    const int graph = b.gpu->capture_graph([&] { b.gpu->linear(xg, c.wg, nullptr, og); });
    b.gpu->fill_bytes(og, 0xFF);
    b.gpu->replay_graph(graph);
    b.gpu->synchronize();
    EXPECT_EQ(download(*b.gpu, og), eager) << block_gemm;
    expect_fp8_close(download(*b.gpu, og), download(*b.cpu, oc), 64, std::string("graph replay ") + block_gemm);
  }
}

TEST(CudaFp8Linear, OnlineQuantizationGivesTheHostBytes) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  Backends b;
  std::mt19937 rng(84);
  const int64_t rows = 37, cols = 3000;
  Tensor w = random_values({rows, cols}, rng, 0.02f);  // bf16-exact values: both sides quantize the same
  for (auto [c0, c1] : {std::pair<int64_t, int64_t>{0, cols}, {1000, 2000}}) {
    const Tensor ref = quantize_fp8_rows(w, c0, c1);
    const Tensor got = b.gpu->quantize_weight_fp8(upload(*b.gpu, w), c0, c1);
    ASSERT_EQ(got.dtype(), DType::kF8E4M3);
    ASSERT_TRUE(got.scales() != nullptr);
    std::vector<uint8_t> codes(static_cast<size_t>(rows * (c1 - c0)));
    b.gpu->copy_to_host(codes.data(), got);
    EXPECT_EQ(std::memcmp(codes.data(), ref.data(), codes.size()), 0) << "codes of columns [" << c0 << ", " << c1 << ")";
    std::vector<float> scales(static_cast<size_t>(rows));
    b.gpu->copy_to_host(scales.data(), got.scales()->grid);
    for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(scales[r], ref.scales()->grid.ptr<float>()[r]) << "row " << r;
  }
}

// Batch-1 decode bandwidth of the FP8 gemv against the bf16 gemv on Llama-3.1-8B's projections
// (prints, never asserts speed): weights in enough copies that L2 cannot serve them. Starred rows: the
// gated and residual epilogues of the FP8 gemv (the bf16 column stays the plain store).
TEST(CudaFp8LinearBench, GemvBandwidth) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int num_sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, 0));
  struct Shape {
    const char* name;
    int64_t n, k;
    cuda::Fp8GemvOut e = cuda::Fp8GemvOut::kStore;  // kActMul: n counts W's rows, gate and up
    bool block = false;                              // 128 x 128 scale blocks (Qwen3-*-FP8), one token only
  };
  for (const Shape& sh : {Shape{"qkv", 6144, 4096}, Shape{"o", 4096, 4096}, Shape{"gate_up", 28672, 4096},
                          Shape{"gate_up*", 28672, 4096, cuda::Fp8GemvOut::kActMul}, Shape{"down", 4096, 14336},
                          Shape{"down*", 4096, 14336, cuda::Fp8GemvOut::kAddF32},
                          Shape{"qkv b128", 6144, 4096, cuda::Fp8GemvOut::kStore, true},
                          Shape{"o b128", 4096, 4096, cuda::Fp8GemvOut::kAddF32, true},
                          Shape{"gu* b128", 24576, 4096, cuda::Fp8GemvOut::kActMul, true},
                          Shape{"down*b128", 4096, 12288, cuda::Fp8GemvOut::kAddF32, true}}) {
    for (int64_t tokens : {1, 4}) {
      if (sh.block && tokens > 1) continue;
      const RotatedWeights weights(sh.n, sh.k);  // bf16 bytes; the FP8 gemv reads the first half of each as codes
      const int copies = weights.copies();
      const int calls = copies * std::max(1, (40 + copies - 1) / copies);
      void *x = nullptr, *out = nullptr, *grid = nullptr;
      CUDA_CHECK(cudaMalloc(&x, static_cast<size_t>(tokens * sh.k) * 2));
      CUDA_CHECK(cudaMalloc(&out, static_cast<size_t>(tokens * sh.n) * 4));  // fp32 for kAddF32
      CUDA_CHECK(cudaMalloc(&grid, static_cast<size_t>(sh.n) * 4));  // (>= the 128 x 128 grid's (n / 128) (k / 128))
      CUDA_CHECK(cudaMemset(x, 0x3C, static_cast<size_t>(tokens * sh.k) * 2));
      CUDA_CHECK(cudaMemset(grid, 0, static_cast<size_t>(sh.n) * 4));
      const double bf16_us = graph_median_us_per_call(s, calls, [&] {
        for (int c = 0; c < calls; ++c) cuda::launch_gemv(x, weights.at(c), nullptr, false, out, false, tokens, sh.n, sh.k, s);
      });
      const double fp8_us = graph_median_us_per_call(s, calls, [&] {
        for (int c = 0; c < calls; ++c) {
          const cuda::Fp8Weight w{static_cast<const uint8_t*>(weights.at(c)), static_cast<const float*>(grid), 1, sh.k, 1};
          const bool gated = sh.e == cuda::Fp8GemvOut::kActMul;
          cuda::launch_gemv_fp8(x, w, nullptr, false, out, sh.e == cuda::Fp8GemvOut::kAddF32, sh.e, Activation::kSilu,
                                tokens, gated ? sh.n / 2 : sh.n, sh.k, s);
        }
      });
      // W8A8: x's codes (0x38, 1.0) made once; each call as the decode step runs it, quantizer and gemv.
      void* xc = nullptr;
      CUDA_CHECK(cudaMalloc(&xc, static_cast<size_t>(tokens * sh.k) + 64));
      CUDA_CHECK(cudaMemset(xc, 0x38, static_cast<size_t>(tokens * sh.k)));
      float* xs = reinterpret_cast<float*>(static_cast<uint8_t*>(xc) + tokens * sh.k);
      const auto w8a8 = [&](bool quantize, int lane_bytes, int one_pairs = 0) {
        return graph_median_us_per_call(s, calls, [&] {
          for (int c = 0; c < calls; ++c) {
            const cuda::Fp8Weight w = sh.block ? cuda::Fp8Weight{static_cast<const uint8_t*>(weights.at(c)),
                                                                 static_cast<const float*>(grid), 128, 128, sh.k / 128}
                                               : cuda::Fp8Weight{static_cast<const uint8_t*>(weights.at(c)),
                                                                 static_cast<const float*>(grid), 1, sh.k, 1};
            const bool gated = sh.e == cuda::Fp8GemvOut::kActMul;
            if (quantize) cuda::launch_quantize_e4m3_rows(x, tokens, sh.k, static_cast<uint8_t*>(xc), xs, s);
            cuda::launch_gemv_fp8_codes(static_cast<const uint8_t*>(xc), xs, w, nullptr, false, out,
                                        sh.e == cuda::Fp8GemvOut::kAddF32, sh.e, Activation::kSilu, tokens,
                                        gated ? sh.n / 2 : sh.n, sh.k, num_sms, lane_bytes, one_pairs, s,
                                        /*one_blocks=*/sh.block);
          }
        });
      };
      const double bytes = static_cast<double>(sh.n * sh.k);
      std::printf("gemv %-8s M=%ld  bf16 %7.2f us %5.0f GB/s   fp8 %7.2f us %5.0f GB/s   w8a8 (lane bytes: GB/s)",
                  sh.name, static_cast<long>(tokens), bf16_us, 2 * bytes / bf16_us / 1e3, fp8_us, bytes / fp8_us / 1e3);
      for (int lb : {0, 64, 128, 256}) std::printf(" %d: %5.0f", lb, bytes / w8a8(false, lb) / 1e3);
      // One token: gemv_fp8_one.cu's kernel (K's slices as the mma's rows), by row pairs a CTA.
      if (tokens == 1) {
        std::printf("   one (pairs: GB/s)");
        for (int p : {1, 2, 4}) std::printf(" %d: %5.0f", p, bytes / w8a8(false, 0, p) / 1e3);
        std::printf("   x16 (pairs: GB/s)");
        for (int p : {2, 4}) {
          const double us = graph_median_us_per_call(s, calls, [&] {
            for (int c = 0; c < calls; ++c) {
              const cuda::Fp8Weight w = sh.block ? cuda::Fp8Weight{static_cast<const uint8_t*>(weights.at(c)),
                                                                   static_cast<const float*>(grid), 128, 128, sh.k / 128}
                                                 : cuda::Fp8Weight{static_cast<const uint8_t*>(weights.at(c)),
                                                                   static_cast<const float*>(grid), 1, sh.k, 1};
              const bool gated = sh.e == cuda::Fp8GemvOut::kActMul;
              // (on scale blocks it declines all but four pairs' store and add: those print inf)
              cuda::launch_gemv_fp8_one_x16(x, w, nullptr, false, out, sh.e == cuda::Fp8GemvOut::kAddF32, sh.e,
                                            Activation::kSilu, tokens, gated ? sh.n / 2 : sh.n, sh.k, p, s, sh.block);
            }
          });
          std::printf(" %d: %5.0f", p, bytes / us / 1e3);
        }
      }
      std::printf("   quantizer + w8a8 (chosen) %7.2f us\n", w8a8(true, 0));
      cudaFree(xc);
      cudaFree(x);
      cudaFree(out);
      cudaFree(grid);
    }
  }
  cudaStreamDestroy(s);
}

// The FP8 prefill's element-wise kernels on one 8,192-token step of Qwen3-8B's shapes (prints, never
// asserts speed): the epilogues (store, add into the residual, act_mul), the row quantizer (the
// attention's output and h) and the normed quantizer, GB/s of the bytes each reads and writes. In the
// prefill they run at 1.2-1.95 TB/s (PERFORMANCE.md, "Stop 64"); this measures a change to them alone.
TEST(CudaFp8LinearBench, PrefillElementwiseBandwidth) {
  MINIVLLM_SKIP_WITHOUT_CUDA();
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int64_t tokens = 8192, hidden = 4096, inter = 12288, qkv_n = 6144;
  const int64_t big = tokens * 2 * inter;  // the largest buffer, [T, 2I] bf16
  void *y = nullptr, *out = nullptr, *res = nullptr, *codes = nullptr, *scales = nullptr, *cols = nullptr,
       *w = nullptr;
  CUDA_CHECK(cudaMalloc(&y, static_cast<size_t>(big) * 2));
  CUDA_CHECK(cudaMalloc(&out, static_cast<size_t>(tokens * inter) * 2));
  CUDA_CHECK(cudaMalloc(&res, static_cast<size_t>(tokens * hidden) * 4));
  CUDA_CHECK(cudaMalloc(&codes, static_cast<size_t>(tokens * inter)));
  CUDA_CHECK(cudaMalloc(&scales, static_cast<size_t>(tokens) * 4));
  CUDA_CHECK(cudaMalloc(&cols, static_cast<size_t>(2 * inter) * 4));
  CUDA_CHECK(cudaMalloc(&w, static_cast<size_t>(hidden) * 4));
  CUDA_CHECK(cudaMemset(y, 0x3C, static_cast<size_t>(big) * 2));
  CUDA_CHECK(cudaMemset(res, 0, static_cast<size_t>(tokens * hidden) * 4));
  CUDA_CHECK(cudaMemset(scales, 0, static_cast<size_t>(tokens) * 4));
  CUDA_CHECK(cudaMemset(cols, 0, static_cast<size_t>(2 * inter) * 4));
  CUDA_CHECK(cudaMemset(w, 0, static_cast<size_t>(hidden) * 4));
  const auto* sc = static_cast<const float*>(scales);
  const auto report = [&](const char* what, double bytes, const std::function<void()>& call) {
    const double us = graph_median_us_per_call(s, 4, [&] {
      for (int i = 0; i < 4; ++i) call();
    });
    std::printf("prefill %-32s %8.1f us %6.0f GB/s\n", what, us, bytes / us / 1e3);
  };
  const double t = static_cast<double>(tokens);
  report("epilogue store (qkv)", t * qkv_n * 4, [&] {
    cuda::launch_fp8_epilogue(y, qkv_n, sc, static_cast<const float*>(cols), 1, nullptr, false,
                              cuda::Fp8Epilogue::kStore, Activation::kSilu, y, tokens, qkv_n, s);
  });
  report("epilogue add into residual (o)", t * hidden * (2 + 8), [&] {
    cuda::launch_fp8_epilogue(y, hidden, sc, static_cast<const float*>(cols), 1, nullptr, false,
                              cuda::Fp8Epilogue::kAddF32, Activation::kSilu, res, tokens, hidden, s);
  });
  report("epilogue act_mul (gate/up)", t * inter * 6, [&] {
    cuda::launch_fp8_epilogue(y, 2 * inter, sc, static_cast<const float*>(cols), 1, nullptr, false,
                              cuda::Fp8Epilogue::kActMul, Activation::kSilu, out, tokens, inter, s);
  });
  report("row quantizer (attention output)", t * hidden * 3, [&] {
    cuda::launch_quantize_e4m3_rows(y, tokens, hidden, static_cast<uint8_t*>(codes), static_cast<float*>(scales), s);
  });
  report("row quantizer (h)", t * inter * 3, [&] {
    cuda::launch_quantize_e4m3_rows(y, tokens, inter, static_cast<uint8_t*>(codes), static_cast<float*>(scales), s);
  });
  report("normed quantizer (residual)", t * hidden * 5, [&] {
    cuda::launch_rms_norm_e4m3_rows(static_cast<const float*>(res), w, true, 1e-6f, tokens, hidden,
                                    static_cast<uint8_t*>(codes), static_cast<float*>(scales), s);
  });
  for (void* p : {y, out, res, codes, scales, cols, w}) cudaFree(p);
  cudaStreamDestroy(s);
}

}  // namespace
}  // namespace minivllm::cuda_test
