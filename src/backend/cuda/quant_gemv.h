// Linears and embeddings on ggml block-quantized weights read as stored (issue 47: no bf16 copy of
// the model): W [n, k] as rows of Q4_K, Q6_K, Q5_0 or Q8_0 blocks, row_bytes apart
// (common/quant_blocks.h has the layouts).
//
// Decode (1..kQuantGemvMaxTokens tokens a launch): x is quantized to int8 per 32 values (scale
// amax / 127, as llama.cpp's q8_1 for its mmvq kernels), one warp takes a row and each lane whole
// 32-value units of it: all of a unit's loads first, then its codes as eight 4-byte words, eight
// dp4a against each token's x codes, the block scales applied in fp32. Every unit is decoded to the same form, value =
// scale[h] * q + offset[h] for its two 16-value halves h, so one loop serves every type. One token
// of Q4_K or planar Q6_K rows of 2,048s takes the streamed kernel instead (QuantGemvKernel): each
// warp streams whole rows through shared memory by bulk copies, and Q4_K's min term comes from x's
// code sums (QuantX::sums). Larger batches decode W to bf16 for cuBLASLt (quant_dequantize_bf16);
// the embedding decodes its rows.
// The formulas are common/quant_blocks*.cc's; tests/cuda/cuda_quant_gemv_test.cc checks each
// kernel against the CPU backend.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "common/activation.h"
#include "common/dtype.h"

namespace minivllm::cuda {

constexpr int kQuantGemvMaxTokens = 8;

// True for the weight dtypes these kernels read.
bool quant_gemv_supports(DType wtype);

// x's int8 codes [tokens, k], each 32-value unit's scale [tokens, k / 32] and, where sums is set,
// each unit's scale times the sum of its codes (as llama.cpp's q8_1 keeps it: a Q4_K unit's min
// term needs only that). The quantizers write sums when it is set; the streamed gemv needs it for
// Q4_K.
struct QuantX {
  int8_t* codes = nullptr;
  float* scales = nullptr;
  float* sums = nullptr;
};

// Q6_K on the GPU, for rows of k values where k / 256 is a multiple of 8: each row's super-blocks
// as planes, ql[nsb][128] qh[nsb][64] scales[nsb][16] d[nsb] (the same bytes; nsb = k / 256), so
// that every 16-byte load is aligned (a 210-byte block leaves its fields 2-byte aligned) and the
// row stays 16-byte aligned. Other widths keep ggml's layout. Every kernel here reads either.
bool q6_k_planar(int64_t k);
// ggml's Q6_K rows [rows, k] -> the planar layout (host; q6_k_planar(k)).
void pack_q6_k_planar(const void* src, void* dst, int64_t rows, int64_t k);

// x bf16 [tokens, k] -> q; k a multiple of 32, the buffers 16-byte aligned.
void launch_quantize_x_q8(const void* x, int64_t tokens, int64_t k, const QuantX& q, cudaStream_t stream);

// The longest row launch_rms_norm_quantize_x_q8 takes: eight chunks of eight values a thread, 256 threads.
constexpr int64_t kQuantNormMaxK = 16384;

// The same codes from the RMSNorm of an fp32 residual [tokens, k] (rms_norm's bf16 values, bit for
// bit; norm: its weight, bf16 or f32) and from h = act(gate) * up of a gate/up product (bf16
// [tokens, 2 inter], act_mul's bf16 values), without the normed row or h in memory. False (nothing
// launched) unless k (inter) is a multiple of 32, and k at most kQuantNormMaxK.
bool launch_rms_norm_quantize_x_q8(const float* residual, const void* norm, bool norm_f32, float eps, int64_t tokens,
                                   int64_t k, const QuantX& q, cudaStream_t stream);
bool launch_act_mul_quantize_x_q8(const void* gate_up, int64_t tokens, int64_t inter, Activation act, const QuantX& q,
                                  cudaStream_t stream);

enum class QuantGemvOut {
  kStore,   // out (bf16, or f32 when out_f32) = x W^T + bias
  kAddF32,  // out (f32) += x W^T
};

// Which gemv kernel a call takes (quant_gemv.cu has each one's loop).
enum class QuantGemvKernel {
  kPlain,     // a warp a row, a lane a unit: its loads, then its decode
  kPiped,     // one token: each lane also loads its next unit before decoding this one
  kStreamed,  // one token, Q4_K or planar Q6_K rows of a multiple of 2,048 values (quant_gemv_streams):
              // each warp streams whole rows through shared memory by bulk copies, `stages` in flight
};
// kStreamed's grid and ring come from the caller (the tuning table's MINIVLLM_QUANT_STREAM_*).
struct QuantGemvPlan {
  QuantGemvKernel kernel = QuantGemvKernel::kPlain;
  int num_sms = 0;      // kStreamed: the grid is ctas_per_sm CTAs of each SM
  int ctas_per_sm = 0;
  int stages = 0;       // kStreamed: segments in flight a warp (1..8)
  int segment_sb = 0;   // kStreamed: super-blocks a segment, 8 or 16; 0: 16 where the row allows
  bool spread = false;  // kStreamed: a grid short of ctas_per_sm an SM spreads its CTAs over the SMs
};

// 1..kQuantGemvMaxTokens tokens of q (launch_quantize_x_q8's) against W; k a multiple of the type's
// block (256 for the K-quants, 32 otherwise). bias: bf16 or f32 [n], or null.
// out row t starts at t * ldo (>= n; a slice of a wider output). Launched with PDL: W's first
// loads (prefetches into L2, or the streamed kernel's copies) go out while the kernel before
// finishes.
void launch_quant_gemv(DType wtype, const void* w, size_t row_bytes, const QuantX& q, const void* bias,
                       bool bias_f32, void* out, bool out_f32, QuantGemvOut mode, int64_t tokens, int64_t n, int64_t k,
                       int64_t ldo, cudaStream_t stream, const QuantGemvPlan& plan = {});

// Whether a call of `tokens` tokens and n rows takes the pipelined gemv on a GPU of num_sms SMs: one
// token and fewer rows than the warps it keeps resident (about 40 an SM at its registers), where
// the GPU's warps are not all busy and each one's chain of loads is the limit. Past that, or with
// more tokens, the plain kernel's occupancy wins (PERFORMANCE.md, "The K-quant gemv: loads before
// decoding").
bool quant_gemv_piped(int64_t tokens, int64_t n, int num_sms);

// Whether the streamed kernel can take a call: one token, Q4_K or Q6_K (planar) rows of a multiple
// of 2,048 values, W and its rows 16-byte aligned (the bulk copies' rule).
bool quant_gemv_streams(DType wtype, int64_t tokens, int64_t k, const void* w, size_t row_bytes);

// W's rows decoded to bf16 [rows, k] (row-major, for cuBLASLt; out may be a row slice of a larger one).
void launch_quant_dequantize_bf16(DType wtype, const void* w, size_t row_bytes, int64_t rows, int64_t k, void* out,
                                  cudaStream_t stream);

// out[t] = row ids[t] - vocab_start of W (rows of it), decoded; zeros where that row is not in W
// (another rank's part of the vocabulary). out bf16, or f32 when out_f32, [tokens, k].
void launch_quant_embedding(DType wtype, const void* w, size_t row_bytes, int64_t rows, const int32_t* ids,
                            int64_t tokens, int64_t vocab_start, int64_t k, void* out, bool out_f32,
                            cudaStream_t stream);

}  // namespace minivllm::cuda
