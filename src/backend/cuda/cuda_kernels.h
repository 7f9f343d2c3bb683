// Host-callable launchers of the CUDA kernels (defined in the *.cu files). Plain pointers and a
// stream: the argument checks live in cuda_ops.cc, so this layer only launches. bf16 buffers are
// passed as void*; `*_f32` flags say a weight is fp32 instead of bf16.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "common/activation.h"
#include "common/hashed_uniform.h"

namespace minivllm::cuda {

// ---- elementwise.cu ----
// out: bf16, or fp32 when out_f32 (the engine's residual stream).
void launch_embedding(const int32_t* ids, int64_t tokens, const void* weight, int64_t rows, int64_t hidden,
                      int64_t vocab_start, void* out, bool out_f32, cudaStream_t stream);
// residual == nullptr: out = rms_norm(x) * w. Otherwise residual += x; x = rms_norm(residual) * w.
void launch_rms_norm(void* x, void* residual, bool residual_f32, const void* w, bool w_f32, float eps, int64_t rows, int64_t n,
                     void* out, cudaStream_t stream);
// out (bf16) = rms_norm(x) * w for an fp32 x (the residual stream).
void launch_rms_norm_f32_in(const float* x, const void* w, bool w_f32, float eps, int64_t rows, int64_t n, void* out,
                            cudaStream_t stream);
// residual (f32, n values, n % 8 == 0) += x (bf16, or fp32 when x_f32).
void launch_add_to_f32(const void* x, bool x_f32, int64_t n, float* residual, cudaStream_t stream);
// out[tokens, inter] = act(gate_up[:, :inter]) * gate_up[:, inter:], bf16.
void launch_act_mul(const void* gate_up, int64_t tokens, int64_t inter, Activation act, void* out,
                    cudaStream_t stream);
void launch_gather_rows(const void* x, int64_t row_bytes, const int32_t* indices, int64_t n, void* out,
                        cudaStream_t stream);
void launch_bf16_to_f32(const void* x, int64_t n, float* out, cudaStream_t stream);
// Backend::norm_add_norm on rows of n bf16 values (n % 8 == 0): x = rms_norm(x) * w_out (bf16), residual
// (f32) += x, x = rms_norm(residual) * w_next, or bf16(residual) when w_next is nullptr.
void launch_norm_add_norm(void* x, float* residual, const void* w_out, bool out_f32, float out_eps, const void* w_next,
                          bool next_f32, float next_eps, int64_t rows, int64_t n, cudaStream_t stream);
// out (bf16) = x (fp32), n values, n % 8 == 0.
void launch_f32_to_bf16(const float* x, int64_t n, void* out, cudaStream_t stream);

// ---- qk_norm_full_width.cu: OLMo 2's q/k norms over all heads (Backend::qk_sum_squares) ----
// qkv bf16 [tokens, stride], q in columns [0, q_cols), k in [q_cols, q_cols + k_cols); every count
// a multiple of 8. sums f32 [tokens, 2].
void launch_qk_sum_squares(const void* qkv, int64_t tokens, int64_t q_cols, int64_t k_cols, int64_t stride,
                           float* sums, cudaStream_t stream);
// q = q * rsqrt(sums[t, 0] / q_width + eps) * q_norm (f32 [q_cols]), k likewise, in place; sums nullptr:
// each row's own sums (one rank).
void launch_qk_norm_full_width(void* qkv, int64_t tokens, int64_t q_cols, int64_t k_cols, int64_t stride,
                               const float* sums, int64_t q_width, int64_t k_width, const float* q_norm,
                               const float* k_norm, float eps, cudaStream_t stream);
// x[i] *= factor for n fp32 values.
void launch_scale_f32(float* x, int64_t n, float factor, cudaStream_t stream);
// out[t, :] (bf16 [tokens, n]) *= sigmoid(x[t] . gate), x bf16 [tokens, hidden], gate f32 [hidden]; hidden and
// n multiples of 8 (Backend::sigmoid_gate_rows).
void launch_sigmoid_gate_rows(const void* x, const float* gate, void* out, int64_t tokens, int64_t hidden, int64_t n,
                              cudaStream_t stream);
// x[i] = cap * tanh(x[i] / cap) for n fp32 values (Gemma 2's final-logit soft-capping).
void launch_softcap_f32(float* x, int64_t n, float cap, cudaStream_t stream);
// out[r, c] (bf16, or fp32) = hashed_uniform_value(h, base + r * row_stride + c): dummy weights
// made in place (Backend::fill_hashed_uniform).
// e4m3(value / scale) of the same values, rounded to nearest and saturating (Backend::fill_hashed_e4m3).
void launch_fill_hashed_e4m3(uint8_t* out, int64_t rows, int64_t cols, const HashedUniform& h, float scale,
                             int64_t base, int64_t row_stride, cudaStream_t stream);
void launch_fill_hashed_uniform(void* out, bool bf16, int64_t rows, int64_t cols, const HashedUniform& h, int64_t base,
                                int64_t row_stride, cudaStream_t stream);
// out (bf16, or fp32 when out_f32) += bias per row.
void launch_bias_add(void* out, bool out_f32, const void* bias, bool bias_f32, int64_t rows, int64_t n,
                     cudaStream_t stream);

// ---- gemv_fp8.cu, fp8_quant.cu: FP8 weights ----
// An FP8 weight as the kernels read it: e4m3 codes [n, k] and the f32 scale grid of WeightScales,
// value(r, c) = code(r, c) * grid[(r / block_rows) * grid_cols + c / block_cols].
struct Fp8Weight {
  const uint8_t* codes;
  const float* grid;
  int64_t block_rows, block_cols, grid_cols;
};
enum class Fp8GemvOut { kStore, kActMul, kAddF32 };
// The gemv on FP8 weights for 1..kGemvMaxTokens tokens: kStore: out (bf16, or f32 when out_f32) =
// x W^T (+ bias); kActMul: W = [W_gate; W_up] ([2n, k]), out (bf16) = act(x W_gate^T) * (x W_up^T);
// kAddF32: out (f32) += x W^T. x bf16, k % 16 == 0, block_cols % 16 == 0 (a 16-code load never
// straddles two scales), x and codes 16-byte aligned.
void launch_gemv_fp8(const void* x, const Fp8Weight& w, const void* bias, bool bias_f32, void* out, bool out_f32,
                     Fp8GemvOut e, Activation act, int64_t tokens, int64_t n, int64_t k, cudaStream_t stream);
// The same linears on W8A8 inputs: x as e4m3 codes [tokens, k] with one scale a token (x ~ code *
// x_scales[t]: launch_quantize_e4m3_rows or launch_rms_norm_e4m3_rows), on the tensor cores. Takes K
// a multiple of 64 and scale blocks of whole 64-column chunks (or one scale a row):
// gemv_fp8_codes_takes. lane_bytes: W bytes a lane keeps in flight (32-256), 0: chosen by the grid
// against num_sms (the device's).
bool gemv_fp8_codes_takes(const Fp8Weight& w, int64_t k);
// one_pairs > 0: one token on K >= 2,048 takes gemv_fp8_one.cu's kernel, one_pairs row pairs a CTA
// (one_blocks: also on scale blocks, where it takes them).
void launch_gemv_fp8_codes(const uint8_t* x_codes, const float* x_scales, const Fp8Weight& w, const void* bias,
                           bool bias_f32, void* out, bool out_f32, Fp8GemvOut e, Activation act, int64_t tokens,
                           int64_t n, int64_t k, int num_sms, int lane_bytes, int one_pairs, cudaStream_t stream,
                           bool one_blocks = false);
// gemv_fp8_one.cu: the same at one token, the mma's rows two weight rows x 8 slices of K (pairs:
// row pairs a CTA, 1, 2 or 4). False, launching nothing, where it declines (tokens != 1, K < 2,048
// or not of 64s, or more than one scale a row). blocks: also weights with scale blocks (64 columns
// times a power of two wide; as tall as 2 pairs times a whole number, kActMul pairs, and dividing n),
// for kStore and kActMul.
bool launch_gemv_fp8_one(const uint8_t* x_codes, const float* x_scales, const Fp8Weight& w, const void* bias,
                         bool bias_f32, void* out, bool out_f32, Fp8GemvOut e, Activation act, int64_t tokens,
                         int64_t n, int64_t k, int pairs, cudaStream_t stream, bool blocks = false);
// The same kernel on bf16 x as it is (W8A16: codes and x into f16 mmas), with no quantizer kernel
// before it; x 16-byte aligned. False where it declines, as above. blocks: also weights with scale
// blocks (64 columns times a power of two wide, 8-row multiples tall), for kStore and kAddF32 at four
// pairs; block_early_residual: their add copies the residual before the products, as per-row weights do.
bool launch_gemv_fp8_one_x16(const void* x, const Fp8Weight& w, const void* bias, bool bias_f32, void* out,
                             bool out_f32, Fp8GemvOut e, Activation act, int64_t tokens, int64_t n, int64_t k, int pairs,
                             cudaStream_t stream, bool blocks = false, bool block_early_residual = false);
// Each of `rows` rows of x ([rows, cols], bf16 or f32) in groups of `group` columns (group divides
// cols): codes = e4m3(x * 448 / amax) with scale amax / 448 per (row, group), as common/fp8.h's
// quantize_e4m3_row does for one group; only columns [col_begin, col_end) of the codes are written,
// into codes [rows, col_end - col_begin]; scales [rows, cols / group].
void launch_quantize_e4m3_groups(const void* x, bool x_f32, int64_t rows, int64_t cols, int64_t group,
                                 int64_t col_begin, int64_t col_end, uint8_t* codes, float* scales,
                                 cudaStream_t stream);
// The widest row the per-row e4m3 quantizers below take (a CTA holds its row in registers).
constexpr int64_t kE4m3RowMaxCols = 16384;
// launch_quantize_e4m3_groups for bf16 x with one group a row (the FP8 GEMM's per-token activations),
// the same bytes, each value read once: codes [rows, cols], scales [rows]. False (nothing launched)
// unless cols is a multiple of 8 and at most 16,384. lo_codes (nullptr: none), [rows, cols]: a
// second term at the same scale, e4m3(x / scale - code's value), so that x ~ scale * (code + lo).
bool launch_quantize_e4m3_rows(const void* x, int64_t rows, int64_t cols, uint8_t* codes, float* scales,
                               cudaStream_t stream, uint8_t* lo_codes = nullptr);
// The RMSNorm of fp32 residual rows by w (fp32 or bf16; launch_rms_norm's arithmetic, its bf16 rounding
// included) straight into launch_quantize_e4m3_rows's codes and scales: the bytes rms_norm then the
// row quantizer give, without the normed rows in memory. False (nothing launched) unless cols is a
// multiple of 8 and at most 16,384. lo_codes as launch_quantize_e4m3_rows's.
bool launch_rms_norm_e4m3_rows(const float* residual, const void* w, bool w_f32, float eps, int64_t rows,
                               int64_t cols, uint8_t* codes, float* scales, cudaStream_t stream,
                               uint8_t* lo_codes = nullptr);
// residual [rows, cols] += y * (row_scale[t] * col_scale[c * col_stride]) (the kAddF32 FP8 epilogue
// on a bare product y [rows, ny]), then launch_rms_norm_e4m3_rows's codes and scales of the new rows,
// in one pass: the same bytes as the epilogue then the normed quantizer. row_scale may be `scales`
// (a CTA reads its row's before it writes it). False (nothing launched) where the normed quantizer
// would decline cols.
bool launch_fp8_add_norm_e4m3(const void* y, int64_t ny, const float* row_scale, const float* col_scale,
                              int64_t col_stride, float* residual, const void* w, bool w_f32, float eps, int64_t rows,
                              int64_t cols, uint8_t* codes, float* scales, cudaStream_t stream);
// The FP8 GEMM's epilogue, in place on out [tokens, n] (bf16, or f32 when out_f32):
// out[t, c] = out[t, c] * row_scale[t] * col_scale[c * col_stride] (+ bias[c], bf16 or f32).
void launch_scale_outer(void* out, bool out_f32, int64_t tokens, int64_t n, const float* row_scale,
                        const float* col_scale, int64_t col_stride, const void* bias, bool bias_f32,
                        cudaStream_t stream);
// The FP8 GEMM's epilogues in one pass each (MINIVLLM_FP8_FUSED_EPILOGUE): y (bf16 [tokens, ny]) is the
// bare codes' product; v[t, c] = y[t, c] * row_scale[t] * col_scale[c * col_stride], in fp32.
//   kStore:   out (bf16 [tokens, n], may be y) = v (+ bias[c], bf16 or f32)
//   kAddF32:  out (f32 [tokens, n], the residual stream) += v (+ bias[c])
//   kActMul:  out (bf16 [tokens, n]) = act(v[t, c]) * v[t, n + c]  (y holds [gate | up]: ny = 2n; no bias)
// n a multiple of 8 (the FP8 GEMM's N is a multiple of 16), rows 16-byte aligned.
enum class Fp8Epilogue { kStore, kAddF32, kActMul };
void launch_fp8_epilogue(const void* y, int64_t ny, const float* row_scale, const float* col_scale,
                         int64_t col_stride, const void* bias, bool bias_f32, Fp8Epilogue e, Activation act, void* out,
                         int64_t tokens, int64_t n, cudaStream_t stream);
// out (bf16 [n, k]) = the weight's values, code * scale, rounded to bf16.
void launch_dequantize_fp8(const Fp8Weight& w, int64_t n, int64_t k, void* out_bf16, cudaStream_t stream);

// ---- gemv.cu ----
// Decode-sized linear: out[tokens, n] = x[tokens, k] w[n, k]^T (+ bias, bf16 or fp32), bf16 out
// (fp32 when out_f32), fp32 accumulation, for 1..kGemvMaxTokens tokens. k % 8 == 0; x and w
// 16-byte aligned; n and out need no alignment. Bandwidth-bound where cuBLASLt is not (KERNEL_NOTES.md).
constexpr int64_t kGemvMaxTokens = 8;
void launch_gemv(const void* x, const void* w, const void* bias, bool bias_f32, void* out, bool out_f32,
                 int64_t tokens, int64_t n, int64_t k, cudaStream_t stream);
// out[tokens, inter] = act(x W_gate^T) * (x W_up^T), gate_up_w = [W_gate; W_up] ([2 inter, k]), bf16.
void launch_gemv_act_mul(const void* x, const void* gate_up_w, void* out, int64_t tokens, int64_t inter, int64_t k,
                         Activation act, cudaStream_t stream);
// The folded RMSNorm at one token (MINIVLLM_GEMV_NORM_FOLD): the one-token gemv's add that writes the
// residual r' also writes the next norm's input x[t, c] = bf16(r'[t, c] * w[c]) and one sum of r'^2 over
// each CTA's rows, parts[t * nparts + cta]; the normed gemv after it (GemvNorm::parts) reads x and scales
// token t's products by 1 / sqrt(sum of parts[t] / K + eps). No norm kernel, and no CTA reads the whole
// fp32 row (the late norm's cost past 1,024 columns). Two tokens do not fold, nor does the experts'
// down gemv, whose next qkv streams from when the down's CTAs retire either way: both lost
// (PERFORMANCE.md, "Stop 108").
struct GemvFoldOut {
  const void* w;  // the norm's weight [n], bf16 or fp32
  bool w_f32;
  void* x;        // bf16 [tokens, n]
  float* parts;   // [tokens, nparts]
};
constexpr int64_t kGemvFoldMaxTokens = 1;
// residual[tokens, n] (f32) += x w^T: the o / down projection adds itself into the residual stream.
// prefetch_u >= 0: at one token, the chunk steps of each row pulled into L2 before the PDL wait (0: all)
// instead of MINIVLLM_GEMV_PREFETCH_U's; the o projection's caller knows the attention before it
// reads little (MINIVLLM_GEMV_PREFETCH_U_AFTER_ATTENTION). stage: at one token, where a CTA's rows fit
// one step and 48 KB, the grid's first wave bulk-copies them into shared memory before the PDL wait
// instead (the backend passes MINIVLLM_GEMV_STAGE). The sums are the same either way.
// fold: not null, the add also makes the next RMSNorm's input (GemvFoldOut); returns the sums of squares a
// token it wrote (the grid's CTAs; at most ceil(n / 2)), else 0.
int64_t launch_gemv_add_f32(const void* x, const void* w, float* residual, int64_t tokens, int64_t n, int64_t k,
                            cudaStream_t stream, int prefetch_u = -1, bool stage = false,
                            const GemvFoldOut* fold = nullptr);
// x = rms_norm(residual) * weight (bf16-rounded), computed by every CTA into shared memory, then
// the gemv (or the gate/up silu gemv) of x: the RMSNorm needs no launch of its own. Every CTA
// reduces the whole row, so the backend takes it only for rows of at most 1,024
// (CudaBackend::use_gemv_norm); the kernel itself takes any k that gemv_norm_fits.
struct GemvNorm {
  const float* residual;  // [tokens, k] fp32, 16-byte aligned
  const void* weight;     // [k] bf16 or fp32
  bool weight_f32;
  float eps;
  // The norm applied late (gemv.cu's NormMode::kLate; at most kGemvNormLateMaxTokens tokens): the
  // products take residual * weight as they stream and each output is scaled by 1 / rms at the end,
  // so no reduction or shared-memory row stands before the first product (any k).
  bool late = false;
  // The late norm at one token may stage the first wave's rows of W (GemvArgs::stage; MINIVLLM_GEMV_STAGE).
  bool stage = false;
  // The folded norm (GemvFoldOut): x is folded_x (bf16 [tokens, k]), 1 / rms from parts[t * nparts + i];
  // residual and weight unused. Wins over late.
  const void* folded_x = nullptr;
  const float* parts = nullptr;
  int64_t nparts = 0;
};
constexpr int64_t kGemvNormMaxSmemBytes = 48 * 1024;
constexpr int64_t kGemvNormLateMaxTokens = 2;
bool gemv_norm_fits(int64_t tokens, int64_t k);  // the bf16 x fits the shared memory of one CTA
void launch_gemv_norm(const GemvNorm& norm, const void* w, const void* bias, bool bias_f32, void* out, bool out_f32,
                      int64_t tokens, int64_t n, int64_t k, cudaStream_t stream);
void launch_gemv_norm_act_mul(const GemvNorm& norm, const void* gate_up_w, void* out, int64_t tokens, int64_t inter,
                              int64_t k, Activation act, cudaStream_t stream);

// ---- decode_gemm.cu ----
// The decode-batch GEMM on wgmma and TMA (sm_90a): out[tokens, n] = x[tokens, k] w[rows, k]^T with
// fp32 accumulation, for 1..kDecodeGemmMaxTokens tokens; k and n multiples of 8, x and w
// 16-byte aligned and contiguous, out 16-byte aligned. The epilogue:
//   kStore:   out (bf16, or fp32 when out_f32) = x w^T (+ bias, bf16 or fp32; may be nullptr);
//   kAddF32:  out (fp32, the residual) += x w^T;
//   kActMul:  w = [W_gate; W_up] ([2n, k]), out (bf16) = act(x W_gate^T) * (x W_up^T), act = args.act.
enum class DecodeGemmEpilogue { kStore, kAddF32, kActMul };
constexpr int64_t kDecodeGemmMaxTokens = 256;
struct DecodeGemmArgs {
  const void* x;
  const void* w;
  const void* bias;
  bool bias_f32;
  void* out;
  bool out_f32;
  int64_t tokens, n, k;
  DecodeGemmEpilogue epilogue;
  int splits;  // CTAs sharing a tile's K (a cluster, at most 8); 0: chosen from the shape
  Activation act = Activation::kSilu;  // kActMul's gate activation
  // FP8 when x_scales is set: x is e4m3 codes [tokens, k] with x = code * x_scales[t], and the weight
  // is w_fp8 (w unused), scale blocks of 64-row multiples by 128-column multiples (Qwen3-*-FP8's 128
  // x 128): decode_gemm_fp8_takes.
  const float* x_scales = nullptr;
  Fp8Weight w_fp8{};
  // FP8, optional: x's second term (launch_quantize_e4m3_rows's lo_codes, [tokens, k]) right after
  // x's codes in memory, multiplied as well: x ~ x_scales[t] * (codes + lo), about bf16's precision
  // for twice the tensor work.
  bool x_two_terms = false;
  // A folded RMSNorm between two bf16 decode GEMMs of at most kFoldMaxTokens tokens: the residual
  // add (kAddF32) also writes fold_out[t, c] = bf16(residual'[t, c] * fold_w[c]) and, for each tile
  // of 128 columns i, fold_parts[i * fold_stride + t] = the sum of residual'[t, c]^2 over its columns.
  // The next GEMM (kStore, kActMul) takes x = fold_out with norm_parts = fold_parts (its ceil(K / 128)
  // tiles) and scales token t's products by 1 / sqrt(sum / K + norm_eps): rms_norm(r) W^T
  // with no norm kernel between them (the weight multiplied before the bf16 rounding, the 1 / rms
  // after the product).
  const void* fold_w = nullptr;
  bool fold_w_f32 = false;
  void* fold_out = nullptr;
  float* fold_parts = nullptr;
  int64_t fold_stride = 0;  // both sides: the parts' row stride (tokens at most)
  const float* norm_parts = nullptr;
  float norm_eps = 0.0f;
};
constexpr int kFoldMaxTokens = 64;
constexpr int64_t kFoldMaxCols = 16384;  // the folded norm's widest residual
void launch_decode_gemm(const DecodeGemmArgs& a, cudaStream_t stream);
// Whether launch_decode_gemm takes this FP8 weight and shape: K a multiple of 128, n of 8 (of 64 for
// kActMul, whose n is the gated half), scale blocks of 64-row and 128-column multiples.
bool decode_gemm_fp8_takes(const Fp8Weight& w, int64_t tokens, int64_t n, int64_t k, bool gated);
// The split count launch_decode_gemm picks for `tiles` weight tiles of k_chunks 64-wide K chunks,
// given how many clusters of s CTAs the GPU holds at once (cluster_capacity[s], s = 1..8).
int decode_gemm_splits(int64_t tiles, int64_t k_chunks, const int* cluster_capacity);

// ---- rope_kvcache.cu ----
struct RopeArgs {
  void* qkv;
  int64_t tokens;
  int num_q_heads, num_kv_heads, head_dim;
  // The leading dims of each q / k head that rotate (cos_sin's width; partial_rotary_factor), even,
  // at most head_dim; the rest pass through (rope_math.cuh's rope_slot).
  int rotary_dim;
  const void* q_norm;  // nullptr: no norm
  const void* k_norm;
  bool q_norm_f32, k_norm_f32;
  float eps;
  const int32_t* positions;
  const float* cos_sin;  // [max_pos, rotary_dim] fp32: cos in the first rotary_dim / 2 columns, sin in the rest
  int64_t max_pos;
  // Optional (k_cache == nullptr: rotate only): k after rope and v into the cache at slot_mapping
  // (-1 skips), layout as launch_store_kvcache's.
  void* k_cache;
  void* v_cache;
  const int32_t* slot_mapping;
  int64_t num_slots;
  int block_size;
  // An fp8 cache: k_cache / v_cache are e4m3, with the per-row scales here (launch_store_kvcache_fp8).
  bool kv_fp8;
  void* k_scale;
  void* v_scale;
  // fp8 cache, > 0: q and k rotated after rope (common/fp8.h: kv_rotate_row; this is
  // kv_rotation_norm), k stored rotated (Backend::store_kvcache).
  float kv_rotate_norm;
  // Optional (row_scale == nullptr: qkv is final): qkv holds an FP8 linear's bare product of codes,
  // and every value (v too) is first made what the store epilogue would write (launch_fp8_epilogue
  // kStore: y * (row_scale[t] * col_scale[c * col_stride]) (+ bias[c]), rounded to bf16), then
  // written back with the rotated q and k: one pass over qkv fewer (qk_norm_rope_takes_scales).
  const float* row_scale;
  const float* col_scale;
  int64_t col_stride;
  const void* bias;
  bool bias_f32;
};
// Whether launch_qk_norm_rope takes RopeArgs::row_scale for these arguments (its 16-byte kernel
// over a bf16 cache or none).
bool qk_norm_rope_takes_scales(const RopeArgs& a);
void launch_qk_norm_rope(const RopeArgs& a, cudaStream_t stream);
// The qkv projection by the gemv with the rotary embedding and the cache store in its epilogue:
// rope.qkv [tokens, n] = rope(x w^T (+ bias)), k and v also into rope's bf16 cache (k_cache ==
// nullptr: rotate only). For rope without q/k norms; n = (nq + 2 nkv) * head_dim. x is
// rms_norm(norm->residual) * norm->weight when norm != nullptr (the gemv's prologue), else x.
bool gemv_rope_fits(int64_t n, int head_dim);
void launch_gemv_rope(const GemvNorm* norm, const void* x, const void* w, const void* bias, bool bias_f32,
                      const RopeArgs& rope, int64_t tokens, int64_t n, int64_t k, cudaStream_t stream);
// Cache layout [num_blocks, num_kv_heads, block_size, head_dim] bf16, k and v apart.
void launch_store_kvcache(const void* qkv, int64_t tokens, int num_q_heads, int num_kv_heads, int head_dim,
                          const int32_t* slot_mapping, int64_t num_slots, int block_size, void* k_cache,
                          void* v_cache, cudaStream_t stream);

// The fp8 cache: the same layout in e4m3 bytes, plus f32 scales [num_blocks, num_kv_heads,
// block_size] for k and for v, one per cache row (common/fp8.h: x ~ e4m3 * scale). rotate_norm > 0:
// keys stored rotated, and q and k rotated in qkv (RopeArgs::kv_rotate_norm).
void launch_store_kvcache_fp8(void* qkv, int64_t tokens, int num_q_heads, int num_kv_heads, int head_dim,
                              const int32_t* slot_mapping, int64_t num_slots, int block_size, void* k_cache,
                              void* v_cache, float* k_scale, float* v_scale, float rotate_norm, cudaStream_t stream);

// ---- attention (prefill_attention.cu, decode_attention.cu) ----
// Decode with a sliding window: its splits start at the first key rounded down to this many keys
// (decode_finish.cuh: decode_key_origin), the tensor-core kernel's tile.
constexpr int kDecodeKeyAlign = 16;
struct AttentionArgs {
  const void* qkv;  // bf16 [tokens, (nq + 2 nkv) * head_dim]
  void* out;        // bf16 [tokens, nq * head_dim]
  const void* k_cache;  // nullptr (prefill only): keys and values come from qkv, no cached prefix
  const void* v_cache;
  // kv_fp8: the cache is e4m3 with per-row scales (launch_store_kvcache_fp8's layout); the kernels
  // dequantise on load.
  bool kv_fp8;
  const float* k_scale;
  const float* v_scale;
  const int32_t* block_tables;  // [num_seqs, table_cols]
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  const int32_t* context_lens;
  const int32_t* seq_order;  // decode, may be null: CTA z takes sequence seq_order[z] (AttentionMetadata)
  int num_seqs, num_q_heads, num_kv_heads, head_dim;
  int block_size_log2, table_cols, num_blocks;
  int max_seqlen_q;  // prefill: grid size along the query tiles
  // Sliding window (Backend::attention): the query at position p sees keys p - window < j <= p;
  // 0: every earlier key. The kernels read no cache block wholly before a query's window.
  int window;
  // Decode, tensor-core kernels: 0, or the most splits that hold a sequence's keys. A CTA then
  // lengthens the plan's split (graph-constant, from the table's capacity) to cover its sequence's
  // keys in that many, in whole 64-key granules (decode_attention_mma.cu: mma_prologue).
  int held_splits;
  // Decode, tensor-core kernels: a sequence of at most this many keys is held by one split (0: off):
  // below it one CTA's key loop costs less than the split merge (PERFORMANCE.md, "Stop 65").
  int one_split_keys;
  // Decode, tensor-core kernels, one sequence: each CTA pulls all of its split's keys (up to
  // kDecodePrefetchMaxKeys) into L2 before the PDL wait, not only its first tiles.
  bool prefetch_split;
  // Decode, staged wide CTAs: 0, or the CTAs of one wave (decode_policy.h:
  // decode_wide_staged_partition). A sequence whose staged splits would take more CTAs than that
  // takes splits of twice the plan's length, unstaged, instead.
  int wide_wave_ctas;
  int64_t num_tokens;  // prefill: rows of qkv (the extent of its TMA tensor map)
  float scale;
  // Gemma 2: each scaled score s becomes softcap * tanh(s / softcap) before the softmax (0: none).
  // The mma.sync prefill kernel and decode_attention.cu's kernels apply it; the launches send a
  // capped model there (prefill_policy.h, CudaBackend::attention).
  float softcap;
};
// Picks the kernel by prefill_kernel_choice (prefill_policy.h): the Hopper one
// (launch_prefill_attention_wgmma, prefill_attention_wgmma.cu) or the mma.sync one.
void launch_prefill_attention(const AttentionArgs& a, cudaStream_t stream);
// MINIVLLM_PREFILL_KERNEL: "auto" (unset: prefill_kernel_choice) or "mma" (the mma.sync kernel
// everywhere); any other value is an error naming it.
std::string prefill_kernel_checked();
void launch_prefill_attention_wgmma(const AttentionArgs& a, cudaStream_t stream);
int device_sm_major();  // compute capability (major) of the current device, read once per device

// Split-KV scratch, allocated once: partial_o f32[num_seqs * nq * num_splits * head_dim],
// partial_lse f32[num_seqs * nq * num_splits], counters i32[num_seqs * nkv], zero between launches
// (the merging CTA resets its counter). Unused when num_splits == 1.
struct DecodeScratch {
  float* partial_o;
  float* partial_lse;
  int* counters;
};
// Which CUDA-core decode kernel (decode_attention.cu; decode_policy.h chooses):
// wide: 16-warp CTAs (small batches, where a split's keys would otherwise take several CTAs and
// a merge across them); only where decode_wide_fits. lane16: the exact 4-warp kernels of groups up
// to 4 at head_dim 64 / 128 over a bf16 cache give each lane 16 elements of a key instead of 8
// (decode_use_lane16); elsewhere it is ignored. staged: wide CTAs over a bf16 cache copy their
// keys into shared memory before the PDL wait (decode_use_staged); elsewhere ignored. ring: the
// exact 4-warp kernels of groups up to 4 at head_dim 64 / 128 over a bf16 cache stream their keys
// through a ring of shared-memory stages filled by bulk copies (decode_use_ring); elsewhere ignored.
struct DecodeVariant {
  bool wide = false;
  bool lane16 = false;
  bool staged = false;
  bool ring = false;
};
// Split-KV decode. num_splits and partition come from graph-constant values (see cuda_ops.cc);
// splits past a sequence's length exit at once; the last split of a (sequence, kv head) merges.
struct DecodeHeadTiles;
void launch_decode_attention(const AttentionArgs& a, const DecodeHeadTiles& tiles, int num_splits, int partition,
                             const DecodeVariant& v, const DecodeScratch& scratch, cudaStream_t stream);
// The same on the tensor cores (decode_attention_mma.cu), where decode_mma_fits: the exact shapes
// (groups 1, 2, 4, 8 at head_dim 64 and 128) over caches of blocks of at least 16 keys; partition a
// multiple of 16. Its CTAs are the 4-warp kernels' (same split plan, scratch and merge). ring: the
// kernel that streams tiles through shared memory (decode_policy.h: decode_mma_ring). loads: how
// the other one loads its tiles at groups 2 and 4 (tuning knobs, MINIVLLM_DECODE_MMA_TILES and
// _PIPE; the defaults are decode_attention_mma.cu's mma_tiles, unpipelined).
struct DecodeMmaLoads {
  int tiles = 0;      // 16-key tiles a warp loads per step; 0: the kernel's default for the shape
  bool pipe = false;  // issue the next step's loads before this step's math (two register sets)
};
bool decode_mma_fits(int head_dim, int group, int block_size);
void launch_decode_attention_mma(const AttentionArgs& a, int num_splits, int partition, bool ring,
                                 const DecodeMmaLoads& loads, const DecodeScratch& scratch, cudaStream_t stream);
// Small batches on the tensor cores with the split staged in shared memory before the wait
// (decode_attention_mma.cu, MINIVLLM_DECODE_WIDE_MMA): bf16 caches of decode_mma_fits' shapes, 8-warp
// CTAs of `heads` q heads (decode_mma_staged_heads; grid.x: num_q_heads / heads, grid.y: the
// splits), partition a multiple of kDecodeMmaStagedGranule up to decode_mma_staged_keys(head_dim).
constexpr int kDecodeMmaStagedGranule = 128;  // 8 warps x one 16-key tile
int decode_mma_staged_keys(int head_dim);
int decode_mma_staged_heads(int group, int max_heads);  // q heads a CTA: a power of two, at most both
void launch_decode_attention_mma_staged(const AttentionArgs& a, int heads, int num_splits, int partition,
                                        const DecodeScratch& scratch, cudaStream_t stream);
// Keys handled by one step of a decode CTA: partitions are multiples of it.
int decode_partition_granule(int head_dim);
// The wide kernel: the exact kernels at head_dim 64 / 128 with group x head_dim <= 256, and the
// head pairs of decode_wide_head_pairs; its step.
bool decode_wide_fits(int head_dim, const DecodeHeadTiles& tiles);
int decode_wide_granule(int head_dim, int group);
// How the decode kernel covers the q heads of one kv head: `tiles` CTAs of up to `heads_per_cta`
// heads each (tiles = 1 for the exact kernels: groups 1, 2, 4, 8 at head_dim 64 and 128). Other
// groups take tiles of at most max_tile_heads (4 or 8) heads; so does every group with exact false
// (soft-capped scores: only the tiled kernels cap them).
struct DecodeHeadTiles {
  int heads_per_cta;
  int tiles;
  bool exact;  // the exact kernel of heads_per_cta == group; else the tiled kernel of heads_per_cta
};
DecodeHeadTiles decode_head_tiles(int head_dim, int group, int max_tile_heads, bool exact = true);
// Wide CTAs of two q heads each (group / 2 CTAs a kv head, each reading the kv head's keys) for
// the even groups whose q heads would not fit one wide CTA's registers (group x head_dim > 256 at
// head_dim 64 / 128: the 8B models' group 4, Qwen3-30B-A3B's 8); tiles = 0 for any other shape.
// MINIVLLM_DECODE_WIDE_PAIRS.
DecodeHeadTiles decode_wide_head_pairs(int head_dim, int group);

// ---- sampler.cu ----
struct SampleParamsDevice {
  const float* temperature;
  const int32_t* top_k;
  const float* top_p;
  const float* min_p;
  const float* uniform;
};
void launch_sample(const float* logits, int64_t rows, int64_t vocab, const SampleParamsDevice& p,
                   int32_t* out_tokens, cudaStream_t stream);
// All rows greedy (temperature 0): the argmax over many CTAs per row (sample_kernel's greedy result).
// scratch: device memory of kGreedyScratchBytesPerRow * rows, 8-byte aligned.
constexpr int kGreedyParts = 128;
constexpr size_t kGreedyScratchBytesPerRow = kGreedyParts * 8;
void launch_greedy_sample(const float* logits, int64_t rows, int64_t vocab, void* scratch, int32_t* out_tokens,
                          cudaStream_t stream);
// The vocabulary-parallel sampler's stages (Backend::shard_sample_*): params f32 [rows, 2]
// (temperature, uniform), stats f32 [rows, 4], all_stats f32 [world, rows, 4], picks i32 [rows],
// all_picks i32 [world, per], pieces f32 [rows, kShardPieceFloats] (the stats kernel's zmax and
// warp-piece masses of its temperature rows, which the pick kernel reads back).
constexpr int kShardPieceFloats = 33;  // 1 + the sampler CTA's 32 warps
void launch_shard_sample_stats(const float* logits, int64_t rows, int64_t n, const float* params, int64_t vocab_start,
                               float* stats, float* pieces, cudaStream_t stream);
void launch_shard_sample_pick(const float* logits, int64_t rows, int64_t n, const float* params, int64_t vocab_start,
                              int rank, int world, const float* all_stats, const float* pieces, int32_t* picks,
                              cudaStream_t stream);
void launch_shard_sample_merge(const int32_t* all_picks, int world, int64_t per, int64_t rows, int32_t* tokens,
                               cudaStream_t stream);
// Async scheduling: ids[i] < 0 becomes sampled[-ids[i] - 1] (a token the previous step sampled).
void launch_resolve_pending_ids(int32_t* ids, int64_t n, const int32_t* sampled, int64_t num_sampled,
                                cudaStream_t stream);

}  // namespace minivllm::cuda
