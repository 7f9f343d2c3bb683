// Fp8Gemm: linear layers on FP8 weights through cuBLASLt on Hopper's FP8 tensor cores,
// y[T, N] = x[T, K] (bf16) W[N, K]^T with W e4m3 codes times their scale grid (Tensor::scales()).
// Hopper's FP8 GEMMs take FP8 on both sides, so x is quantized first, on the device, with one
// dynamic scale per token. The GEMM runs on the bare codes and an epilogue kernel applies x's
// per-token and W's per-row scales, as vLLM's W8A8 kernels do; per-channel and per-tensor
// checkpoints and online FP8 have such scales. (cuBLASLt's OUTER_VEC_32F mode, the scales inside the
// GEMM, moved nothing: PERFORMANCE.md, "Stop 86".)
// Block-scaled weights (Qwen3-*-FP8's 128 x 128) cannot factor out of the sum: run() says no, and the
// caller takes decode_gemm.cu's e4m3 kernel (up to 256 tokens, MINIVLLM_FP8_BLOCK_GEMM), cuBLASLt's
// block-scaled GEMM (run_blocks: VEC128 x BLK128x128, which cuBLASLt 13.1 takes on sm_90 with the
// scale pointers set before its heuristic; W8A8, from 65 tokens by default) or decodes the weight to
// bf16 (dequantized()) for cuBLASLt's bf16 GEMM.
// Plans are cached per shape, as LtGemm's; scratch (x's codes and scales, the decoded weight)
// grows outside graph capture only (the runner's warm-up runs the largest batch first), so a
// captured step allocates nothing.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <utility>

#include "backend/cuda/cuda_kernels.h"
#include "common/tensor.h"

namespace minivllm::cuda {

// W's codes and scale grid as the kernels read them (cuda_kernels.h).
Fp8Weight fp8_weight_view(const Tensor& w);

// launch_fp8_epilogue on W's bare product (bf16 [T, N], N = W's rows; kActMul: [gate | up], out
// [T, N / 2]): row_scales the tokens' (run_unscaled's return), W's scale grid the columns'.
void launch_fp8_weight_epilogue(const Tensor& w, const void* product, const float* row_scales, const void* bias,
                                bool bias_f32, Fp8Epilogue e, Activation act, void* out, int64_t tokens,
                                cudaStream_t stream);

// x ([rows, cols] bf16, 8-byte aligned, cols a multiple of 128) as e4m3 codes [rows, cols] with a
// scale per 128 columns, laid out [cols / 128][scales_ld >= rows] as cuBLASLt's VEC128_32F mode
// reads them (fp8_block_quant.cu); each group's bytes are launch_quantize_e4m3_groups's at group 128.
void launch_quantize_e4m3_vec128(const void* x, int64_t rows, int64_t cols, uint8_t* codes, float* scales,
                                 int64_t scales_ld, cudaStream_t stream);

// Whether run() takes W: one scale per row (block_rows 1, block_cols spanning K), K and N multiples
// of 16 (FP8 operands' alignment).
bool fp8_gemm_takes(const WeightScales& s, int64_t n, int64_t k);

class Fp8Gemm {
 public:
  Fp8Gemm();
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // out (bf16 [T, N], or fp32 when out_f32) = x W^T (+ bias, bf16 or fp32 [N], in the epilogue).
  // False (nothing launched) when fp8_gemm_takes is false or cuBLASLt has no algorithm.
  bool run(const Tensor& x, const Tensor& w, const void* bias, bool bias_f32, void* out, bool out_f32,
           cudaStream_t stream);
  // The bare codes' product, out (bf16 [T, N]) = codes(x) codes(W)^T, for the caller to scale with
  // launch_fp8_epilogue: row scales = the returned per-token activation scales (valid until the next
  // call, stream-ordered), column scales = W's grid. nullptr (nothing launched) where run() would
  // return false.
  const float* run_unscaled(const Tensor& x, const Tensor& w, void* out, cudaStream_t stream);
  // run_unscaled of x = rms_norm(residual) by `norm` (fp32 [T, K] residual; fp32 or bf16 norm weight),
  // x's codes made by launch_rms_norm_e4m3_rows straight from the residual (the normed bf16 rows are
  // never written). nullptr (nothing launched) where run_unscaled would say so or K is past 16,384.
  const float* run_unscaled_normed(const float* residual, const void* norm, bool norm_f32, float eps, int64_t tokens,
                                   const Tensor& w, void* out, cudaStream_t stream);
  // The activation scratch for `tokens` rows of K codes and their scales, for a kernel that writes
  // the next x's codes itself (launch_fp8_add_norm_e4m3); run_unscaled_staged then multiplies them.
  // Valid until the next call that quantizes x (stream-ordered).
  std::pair<uint8_t*, float*> activation_codes(int64_t tokens, int64_t k, cudaStream_t stream);
  // run_unscaled on the codes and scales already in the activation scratch; returns those scales.
  const float* run_unscaled_staged(int64_t tokens, const Tensor& w, void* out, cudaStream_t stream);
  // MINIVLLM_FP8_FUSED_EPILOGUE (on by default): x is quantized by launch_quantize_e4m3_rows (one
  // read), run() scales a bf16 out with launch_fp8_epilogue, and the backend fuses the residual add
  // and act_mul into it (run_unscaled). Off: the group quantizer and scale_outer, then the add or
  // act_mul apart.
  bool fused_epilogues() const { return fused_epilogues_; }
  // MINIVLLM_FP8_NORMED_CODES (with the fused epilogues): whether run_unscaled_normed serves the
  // backend's norm-fused linears.
  bool normed_codes() const { return normed_codes_; }
  // MINIVLLM_FP8_BLOCK_CUBLAS (65 by default): W with 128 x 128 scale blocks at `tokens` tokens, on
  // cuBLASLt's block-scaled FP8 GEMM (x quantized in groups of 128 columns, VEC128; W's grid,
  // BLK128x128): out (bf16 or fp32 [T, N]) = x W^T, or out += x W^T with accumulate (fp32 out: the
  // residual). False (nothing launched) where takes_blocks(w) is false, the batch is below the knob's
  // tokens, or cuBLASLt has no algorithm. This is W8A8, as the checkpoints' dynamic activation scheme
  // declares: x carries e4m3's 3-bit mantissa (judged on a trained model: PERFORMANCE.md, "Stop 88").
  bool run_blocks(const Tensor& x, const Tensor& w, void* out, bool out_f32, bool accumulate, cudaStream_t stream);
  // Whether run_blocks takes w at batches of the knob's tokens or more: the knob on, 128 x 128 blocks,
  // K of 512s and N of 16s. Such a weight needs no bf16 copy (CudaBackend::decoded_fp8_copy).
  bool takes_blocks(const Tensor& w) const;
  // The batches run_blocks starts at (MINIVLLM_FP8_BLOCK_CUBLAS; 0: off).
  int64_t block_tokens() const { return block_tokens_; }
  // W's values as bf16 [N, K]: the copy kept at load (WeightScales::decoded) where there is one,
  // else decoded into a scratch valid until the next call (stream-ordered).
  const void* dequantized(const Tensor& w, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, bool>;  // T, N, K, f32 out
  Plan* plan_for(const Key& key);  // null: no algorithm (remembered)
  // cuBLASLt's first algorithm for p (false: none, and p's descriptors destroyed).
  bool choose_algo(Plan* p);
  static void destroy_plan(Plan* p);
  // The bare codes' plan for T tokens of W: null where fp8_gemm_takes is false, T or N is 0, or no algorithm.
  Plan* plan_unscaled(const Tensor& w, int64_t tokens);
  // x quantized per token, then the GEMM of plan p; returns x's scales.
  const float* multiply(const Tensor& x, const Tensor& w, Plan* p, void* out, cudaStream_t stream);
  // The activation scratch for T x K codes and T scales, grown as needed.
  void grow_activations(int64_t tokens, int64_t k, cudaStream_t stream);
  // The GEMM of plan p on x's codes and scales (in the activation scratch).
  void multiply_codes(const Tensor& w, Plan* p, void* out, cudaStream_t stream);

  using BlockKey = std::tuple<int64_t, int64_t, int64_t, bool>;  // T, N, K, f32 out
  // null: no algorithm (remembered); the scale pointers: any valid ones, for the heuristic.
  Plan* plan_blocks(const BlockKey& key, const void* a_scales, const void* b_scales);

  cublasLtHandle_t handle_ = nullptr;
  bool fast_accum_ = true;
  bool fused_epilogues_ = false;
  bool normed_codes_ = false;
  int64_t block_tokens_ = 0;  // MINIVLLM_FP8_BLOCK_CUBLAS (0: off)
  std::map<Key, Plan> plans_;
  std::map<BlockKey, Plan> block_plans_;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  void* x_codes_ = nullptr;
  size_t x_codes_bytes_ = 0;
  void* x_scales_ = nullptr;
  size_t x_scales_bytes_ = 0;
  void* w_bf16_ = nullptr;
  size_t w_bf16_bytes_ = 0;
  void* tail_out_ = nullptr;  // run_blocks: the last tokens' product, in a GEMM of kBlockTailRows
  size_t tail_out_bytes_ = 0;
};

}  // namespace minivllm::cuda
