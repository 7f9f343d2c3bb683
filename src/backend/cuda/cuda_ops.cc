// The ops of CudaBackend: argument checks that name the tensor at fault, then one launch on the
// backend's stream. No op allocates or synchronises, so a decode step can be captured.
#include <algorithm>
#include <cmath>
#include <utility>

#include "backend/cuda/attention_shapes.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/decode_policy.h"
#include "backend/cuda/device_scratch.h"
#include "common/fp8.h"

namespace minivllm::cuda {
namespace {

void check_gpu(const Tensor& t, DType dtype, const char* op, const char* what) {
  MINIVLLM_CHECK(t.defined() && !t.empty()) << op << ": " << what << " is undefined";
  MINIVLLM_CHECK(t.device() == DeviceKind::kCuda) << op << ": " << what << " " << t.describe() << " is not on the GPU";
  MINIVLLM_CHECK(t.dtype() == dtype) << op << ": " << what << " " << t.describe() << " must be " << dtype_name(dtype);
}

// The normed gemv's GemvNorm on a one-token add's fold (GemvFoldOut): x and the sums in the fold
// buffers, nparts sums a token.
GemvNorm folded_gemv_norm(const void* x, const float* parts, int64_t nparts, float eps) {
  GemvNorm norm{nullptr, nullptr, false, eps};
  norm.folded_x = x;
  norm.parts = parts;
  norm.nparts = nparts;
  return norm;
}

// Vector kernels move 16 bytes at a time.
bool aligned16(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data()) % 16 == 0; }
void check_aligned16(const Tensor& t, const char* op, const char* what) {
  MINIVLLM_CHECK(aligned16(t)) << op << ": " << what << " " << t.describe() << " is not 16-byte aligned";
}

int64_t rows_with_cols(const Tensor& t, int64_t cols, const char* op, const char* what) {
  MINIVLLM_CHECK(t.size(-1) == cols) << op << ": " << what << " " << t.describe() << " must have " << cols
                                     << " columns";
  return cols == 0 ? 0 : t.numel() / cols;
}

// A norm or bias weight: bf16 (upload_weight's default) or fp32 (keep_f32). Returns true for fp32.
bool check_weight(const Tensor& w, int64_t n, const char* op, const char* what) {
  MINIVLLM_CHECK(w.defined() && !w.empty() && w.device() == DeviceKind::kCuda)
      << op << ": " << what << " " << w.describe() << " must be on the GPU";
  MINIVLLM_CHECK(w.dtype() == DType::kBF16 || w.dtype() == DType::kF32)
      << op << ": " << what << " " << w.describe() << " must be bf16 or f32";
  MINIVLLM_CHECK_EQ(w.numel(), n) << op << ": " << what << " " << w.describe();
  check_aligned16(w, op, what);
  return w.dtype() == DType::kF32;
}

int log2_exact(int v) {
  int l = 0;
  while ((1 << l) < v) ++l;
  return l;
}

}  // namespace

void CudaBackend::embedding(const Tensor& ids, const Tensor& weight, int64_t vocab_start, const Tensor& out) {
  check_gpu(ids, DType::kI32, "embedding", "ids");
  // A GGUF table kept as stored (quant_gemv.h) has its rows decoded as they are read.
  const bool quant = quant_gemv_supports(weight.dtype());
  if (quant) {
    MINIVLLM_CHECK(weight.device() == DeviceKind::kCuda)
        << "embedding: weight " << weight.describe() << " must be a CUDA tensor";
  } else {
    check_gpu(weight, DType::kBF16, "embedding", "weight");
  }
  MINIVLLM_CHECK(out.defined() && out.device() == DeviceKind::kCuda &&
                 (out.dtype() == DType::kBF16 || out.dtype() == DType::kF32))
      << "embedding: out " << out.describe() << " must be a bf16 or f32 CUDA tensor";
  MINIVLLM_CHECK(weight.ndim() == 2 && weight.size(1) % 8 == 0)
      << "embedding: weight " << weight.describe() << " must be [vocab, hidden], hidden a multiple of 8";
  const int64_t hidden = weight.size(1);
  MINIVLLM_CHECK_EQ(rows_with_cols(out, hidden, "embedding", "out"), ids.numel())
      << "embedding: out " << out.describe() << " for ids " << ids.describe();
  if (quant) {
    launch_quant_embedding(weight.dtype(), weight.data(), dtype_nbytes(weight.dtype(), hidden), weight.size(0),
                           ids.ptr<int32_t>(), ids.numel(), vocab_start, hidden, out.data(),
                           out.dtype() == DType::kF32, stream_);
    return;
  }
  check_aligned16(weight, "embedding", "weight");
  check_aligned16(out, "embedding", "out");
  launch_embedding(ids.ptr<int32_t>(), ids.numel(), weight.data(), weight.size(0), hidden, vocab_start, out.data(),
                   out.dtype() == DType::kF32, stream_);
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  folded_ = PendingNorm{};
  MINIVLLM_CHECK(x.defined() && x.device() == DeviceKind::kCuda && (x.dtype() == DType::kBF16 || x.dtype() == DType::kF32))
      << "rms_norm: x " << x.describe() << " must be a bf16 or f32 CUDA tensor";
  check_gpu(out, DType::kBF16, "rms_norm", "out");
  const int64_t n = weight.numel();
  MINIVLLM_CHECK(n % 8 == 0) << "rms_norm: width " << n << " must be a multiple of 8";
  const bool f32 = check_weight(weight, n, "rms_norm", "weight");
  const int64_t rows = rows_with_cols(x, n, "rms_norm", "x");
  MINIVLLM_CHECK_EQ(out.numel(), x.numel()) << "rms_norm: out " << out.describe() << " vs x " << x.describe();
  check_aligned16(x, "rms_norm", "x");
  check_aligned16(out, "rms_norm", "out");
  if (x.dtype() == DType::kF32) {
    launch_rms_norm_f32_in(x.ptr<float>(), weight.data(), f32, eps, rows, n, out.data(), stream_);
  } else {
    launch_rms_norm(x.data(), nullptr, false, weight.data(), f32, eps, rows, n, out.data(), stream_);
  }
}

void CudaBackend::add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, float eps) {
  check_gpu(x, DType::kBF16, "add_rms_norm", "x");
  MINIVLLM_CHECK(residual.device() == DeviceKind::kCuda &&
                 (residual.dtype() == DType::kBF16 || residual.dtype() == DType::kF32))
      << "add_rms_norm: residual must be a bf16 or f32 CUDA tensor, got " << residual.describe();
  const int64_t n = weight.numel();
  MINIVLLM_CHECK(n % 8 == 0) << "add_rms_norm: width " << n << " must be a multiple of 8";
  const bool f32 = check_weight(weight, n, "add_rms_norm", "weight");
  const int64_t rows = rows_with_cols(x, n, "add_rms_norm", "x");
  MINIVLLM_CHECK_EQ(residual.numel(), x.numel())
      << "add_rms_norm: residual " << residual.describe() << " vs x " << x.describe();
  check_aligned16(x, "add_rms_norm", "x");
  check_aligned16(residual, "add_rms_norm", "residual");
  launch_rms_norm(x.data(), residual.data(), residual.dtype() == DType::kF32, weight.data(), f32, eps, rows, n, x.data(), stream_);
}

namespace {

bool is_fp8(const Tensor& w) { return w.dtype() == DType::kF8E4M3; }
bool is_block_quant(const Tensor& w) { return quant_gemv_supports(w.dtype()); }
// A weight the fused kernels (bf16 only) do not take: the op composes its plain parts.
bool stored_as_codes(const Tensor& w) { return is_fp8(w) || is_block_quant(w); }

// The FP8 gemv takes 1..kGemvMaxTokens tokens of x against W's [rows_per_out * n, k] codes when K
// and the scale blocks are whole 16-code chunks.
bool fp8_gemv_shape(const Tensor& x, const Tensor& w) {
  const int64_t k = w.size(1);
  return w.scales() != nullptr && k % 16 == 0 && w.scales()->block_cols % 16 == 0 && aligned16(x) && aligned16(w);
}

}  // namespace

bool CudaBackend::fp8_gemv_takes(const Tensor& x, const Tensor& w) const {
  if (w.ndim() != 2 || w.size(1) == 0 || x.numel() % w.size(1) != 0) return false;
  const int64_t tokens = x.numel() / w.size(1);
  return tokens >= 1 && tokens <= kGemvMaxTokens && fp8_gemv_shape(x, w);
}

Fp8GemvOut CudaBackend::gemv_out(Fp8Out e) {
  return e == Fp8Out::kStore ? Fp8GemvOut::kStore : e == Fp8Out::kActMul ? Fp8GemvOut::kActMul : Fp8GemvOut::kAddF32;
}

DecodeGemmEpilogue CudaBackend::gemm_out(Fp8Out e) {
  return e == Fp8Out::kStore    ? DecodeGemmEpilogue::kStore
         : e == Fp8Out::kActMul ? DecodeGemmEpilogue::kActMul
                                : DecodeGemmEpilogue::kAddF32;
}

bool CudaBackend::fp8_w8a8_takes(const Tensor& w, int64_t tokens) const {
  if (!fp8_w8a8_ || !is_fp8(w) || w.ndim() != 2 || w.scales() == nullptr || !aligned16(w)) return false;
  const int64_t k = w.size(1);
  return tokens >= 1 && tokens <= kGemvMaxTokens && k <= kE4m3RowMaxCols && k % 8 == 0 &&
         gemv_fp8_codes_takes(fp8_weight_view(w), k);
}

// MINIVLLM_FP8_NORMED_X16 takes block-scaled weights below this many codes (Qwen3-*-FP8's qkv, 25 MB;
// measured there: PERFORMANCE.md, "Stop 71").
constexpr int64_t kNormedX16MaxCodes = int64_t{32} << 20;

// Behind an RMSNorm at gemv batches: the normed quantizer writes x's codes (the bytes rms_norm then
// the row quantizer give), then the W8A8 gemv; the normed rows never go to memory.
bool CudaBackend::fp8_w8a8_normed(const char* op, const NormPrologue& pro, const Tensor& weight, const Tensor* bias,
                                  const Tensor& out, Fp8Out e, Activation act) {
  if (!is_fp8(weight) || weight.ndim() != 2 || !pro.residual.defined() || pro.residual.dtype() != DType::kF32 ||
      pro.residual.device() != DeviceKind::kCuda || !aligned16(pro.residual)) {
    return false;
  }
  const int64_t k = weight.size(1);
  if (k == 0 || pro.residual.size(-1) != k) return false;
  const int64_t tokens = pro.residual.numel() / k;
  if (!fp8_w8a8_takes(weight, tokens)) return false;
  const int64_t n = e == Fp8Out::kActMul ? weight.size(0) / 2 : weight.size(0);
  const bool out_f32 = out.dtype() == DType::kF32;
  MINIVLLM_CHECK(out.device() == DeviceKind::kCuda && (out_f32 ? e == Fp8Out::kStore : out.dtype() == DType::kBF16) &&
                 rows_with_cols(out, n, op, "out") == tokens)
      << op << ": out " << out.describe() << " for residual " << pro.residual.describe() << " and weight "
      << weight.describe();
  bool bias_f32 = false;
  if (bias != nullptr) bias_f32 = check_weight(*bias, n, op, "bias");
  // One token's store on scale blocks below 32 MB of codes (Qwen3-*-FP8's qkv projection),
  // MINIVLLM_FP8_NORMED_X16 (off): the bf16 norm into pro.normed, then the W8A16 kernel on it, instead
  // of the normed quantizer and the W8A8 gemv (it beat the 16-row kernel, PERFORMANCE.md "Stop 71";
  // the one-token kernel on blocks, "Stop 74", is as fast or faster).
  if (tokens == 1 && fp8_normed_x16_ && fp8_gemv_one_x16_ && fp8_gemv_one_x16_blocks_ && e == Fp8Out::kStore &&
      weight.scales()->block_cols < k && weight.numel() < kNormedX16MaxCodes && pro.normed.defined() &&
      pro.normed.device() == DeviceKind::kCuda && pro.normed.dtype() == DType::kBF16 && pro.normed.numel() == k &&
      aligned16(pro.normed)) {
    rms_norm(pro.residual, pro.weight, pro.eps, pro.normed);
    if (launch_gemv_fp8_one_x16(pro.normed.data(), fp8_weight_view(weight), bias == nullptr ? nullptr : bias->data(),
                                bias_f32, out.data(), out_f32, Fp8GemvOut::kStore, act, 1, n, k, 4, stream_,
                                /*blocks=*/true)) {
      return true;
    }
  }
  const bool norm_f32 = check_weight(pro.weight, k, op, "norm_weight");
  MINIVLLM_CHECK(launch_rms_norm_e4m3_rows(pro.residual.ptr<float>(), pro.weight.data(), norm_f32, pro.eps, tokens, k,
                                           fp8_x_codes_, fp8_x_scales_, stream_))
      << op << ": the normed row quantizer declined K = " << k;
  w8a8_gemv(weight, bias == nullptr ? nullptr : bias->data(), bias_f32, out.data(), out_f32, gemv_out(e), act, tokens,
            n);
  return true;
}

void CudaBackend::w8a8_gemv(const Tensor& w, const void* bias, bool bias_f32, void* out, bool out_f32, Fp8GemvOut e,
                            Activation act, int64_t tokens, int64_t n) {
  const int one_pairs = w.numel() >= fp8_gemv_one_min_codes_ ? fp8_gemv_one_pairs_ : 0;
  launch_gemv_fp8_codes(fp8_x_codes_, fp8_x_scales_, fp8_weight_view(w), bias, bias_f32, out, out_f32, e, act, tokens,
                        n, w.size(1), num_sms_, fp8_w8a8_lane_bytes_, one_pairs, stream_, fp8_gemv_one_blocks_);
}

// Block-scaled FP8 weights past the gemv, up to kDecodeGemmMaxTokens tokens: e4m3 x e4m3 on the codes,
// where otherwise the weight would be decoded to bf16 on every call (no copy kept: a write and a read
// of twice its bytes each time; cuBLASLt's block-scaled GEMM is W8A8 only: Fp8Gemm::run_blocks). x
// goes as two e4m3 terms (MINIVLLM_FP8_BLOCK_GEMM_X), since one (W8A8) costs random-weight models
// teacher-forced agreement. With a bf16 copy kept, cuBLASLt's bf16 GEMM stays the default: twice the
// FP8 tensor work is bf16's, so the kernel wins only where the weights' bytes dominate
// (PERFORMANCE.md, "Stop 77"). Weights cuBLASLt's block-scaled GEMM takes (Fp8Gemm::takes_blocks) keep
// no copy and leave this kernel at its MINIVLLM_FP8_BLOCK_CUBLAS tokens.
bool CudaBackend::fp8_block_gemm(const NormPrologue* pro, const Tensor& x, const Tensor& w, const Tensor* bias,
                                 const Tensor& out, DecodeGemmEpilogue e, Activation act) {
  if (fp8_block_gemm_ == Fp8BlockGemm::kOff || !decode_gemm_ || !is_fp8(w) || w.ndim() != 2 || w.scales() == nullptr ||
      (fp8_block_gemm_ == Fp8BlockGemm::kUncopied && w.scales()->decoded.defined())) {
    return false;
  }
  const int64_t k = w.size(1);
  const bool gated = e == DecodeGemmEpilogue::kActMul;
  const int64_t n = gated ? w.size(0) / 2 : w.size(0);
  if (k == 0 || fp8_gemm_takes(*w.scales(), w.size(0), k)) return false;
  const Tensor& src = pro != nullptr ? pro->residual : x;
  if (!src.defined() || src.device() != DeviceKind::kCuda || src.size(-1) != k || !aligned16(src) ||
      src.dtype() != (pro != nullptr ? DType::kF32 : DType::kBF16)) {
    return false;
  }
  const int64_t tokens = src.numel() / k;
  // (all mode) Past MINIVLLM_FP8_BLOCK_GEMM_TOKENS the copy's GEMM wins; from MINIVLLM_FP8_BLOCK_CUBLAS
  // tokens cuBLASLt's block-scaled GEMM, where it takes w (which then has no copy).
  if (w.scales()->decoded.defined() ? tokens > fp8_block_gemm_copied_tokens_
                                    : fp8_gemm_->takes_blocks(w) && tokens >= fp8_gemm_->block_tokens()) {
    return false;
  }
  const Fp8Weight fw = fp8_weight_view(w);
  if (!decode_gemm_fp8_takes(fw, tokens, n, k, gated) || static_cast<size_t>(2 * tokens * k) > fp8_block_x_codes_bytes_ ||
      !out.defined() || out.device() != DeviceKind::kCuda || !aligned16(out)) {
    return false;
  }
  const bool out_f32 = out.dtype() == DType::kF32;
  if (e == DecodeGemmEpilogue::kAddF32 ? !out_f32 : (gated && out_f32) || (!out_f32 && out.dtype() != DType::kBF16)) {
    return false;
  }
  if (rows_with_cols(out, n, "fp8_block_gemm", "out") != tokens) return false;
  bool bias_f32 = false;
  if (bias != nullptr) bias_f32 = check_weight(*bias, n, "fp8_block_gemm", "bias");
  auto* codes = static_cast<uint8_t*>(fp8_block_x_codes_);
  auto* scales = static_cast<float*>(fp8_block_x_scales_);
  // Two terms: the second's codes right after the first's (decode_gemm reads them as rows T..2T-1).
  uint8_t* lo = fp8_block_gemm_two_terms_ ? codes + tokens * k : nullptr;
  if (pro != nullptr) {
    const bool norm_f32 = check_weight(pro->weight, k, "fp8_block_gemm", "norm_weight");
    if (!launch_rms_norm_e4m3_rows(pro->residual.ptr<float>(), pro->weight.data(), norm_f32, pro->eps, tokens, k, codes,
                                   scales, stream_, lo)) {
      return false;
    }
  } else if (!launch_quantize_e4m3_rows(x.data(), tokens, k, codes, scales, stream_, lo)) {
    lo = nullptr;  // rows past 16,384: the group quantizer's one term
    launch_quantize_e4m3_groups(x.data(), false, tokens, k, k, 0, k, codes, scales, stream_);
  }
  DecodeGemmArgs a{codes, nullptr, bias == nullptr ? nullptr : bias->data(), bias_f32, out.data(), out_f32, tokens, n, k,
                   e, 0, act};
  a.x_scales = scales;
  a.w_fp8 = fw;
  a.x_two_terms = lo != nullptr;
  launch_decode_gemm(a, stream_);
  return true;
}

// FP8 weights: decode-sized batches stream the codes through the FP8 gemv; larger ones go to
// cuBLASLt's FP8 GEMM (x quantized per token on the fly; per-row weight scales), or, for block
// scales, to fp8_block_gemm or the weight decoded to bf16 and cuBLASLt's bf16 GEMM; shapes none
// takes run the gemv 8 tokens at a time.
void CudaBackend::linear_fp8(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out,
                             Fp8Out e, Activation act) {
  check_gpu(x, DType::kBF16, op, "x");
  MINIVLLM_CHECK(w.device() == DeviceKind::kCuda && w.ndim() == 2 && w.scales() != nullptr &&
                 w.scales()->grid.device() == DeviceKind::kCuda && w.scales()->grid.dtype() == DType::kF32)
      << op << ": weight " << w.describe() << " must be an FP8 [out, in] weight with its scale grid on the GPU";
  const int64_t k = w.size(1), n = e == Fp8Out::kActMul ? w.size(0) / 2 : w.size(0);
  const int64_t tokens = rows_with_cols(x, k, op, "x");
  MINIVLLM_CHECK_EQ(rows_with_cols(out, n, op, "out"), tokens) << op << ": out " << out.describe() << " for x "
                                                               << x.describe();
  const bool out_f32 = out.dtype() == DType::kF32;
  MINIVLLM_CHECK(out.device() == DeviceKind::kCuda && (e == Fp8Out::kAddF32 ? out_f32 : true) &&
                 (e == Fp8Out::kActMul ? !out_f32 : true) && (out_f32 || out.dtype() == DType::kBF16))
      << op << ": out " << out.describe() << " must be a bf16 CUDA tensor (f32 for the residual, or the logits)";
  bool bias_f32 = false;
  if (bias != nullptr) bias_f32 = check_weight(*bias, n, op, "bias");
  const WeightScales& s = *w.scales();
  const Fp8Weight fw = fp8_weight_view(w);
  const Fp8GemvOut ge = gemv_out(e);
  const void* b = bias == nullptr ? nullptr : bias->data();
  // One token on the one-token kernel: x in bf16 as it is, no quantizer kernel before it (W8A16; four
  // row pairs a CTA: with bf16 x two chunks a step, and two pairs ran slower on the down projection).
  if (tokens == 1 && fp8_gemv_one_x16_ && aligned16(x) &&
      launch_gemv_fp8_one_x16(x.data(), fw, b, bias_f32, out.data(), out_f32, ge, act, tokens, n, k, 4, stream_,
                              fp8_gemv_one_x16_blocks_, fp8_block_early_residual_)) {
    return;
  }
  if (fp8_w8a8_takes(w, tokens) && aligned16(x)) {  // x's codes, then the e4m3 x e4m3 gemv
    MINIVLLM_CHECK(launch_quantize_e4m3_rows(x.data(), tokens, k, fp8_x_codes_, fp8_x_scales_, stream_))
        << op << ": the row quantizer declined K = " << k;
    w8a8_gemv(w, b, bias_f32, out.data(), out_f32, ge, act, tokens, n);
    return;
  }
  if (tokens <= kGemvMaxTokens && fp8_gemv_shape(x, w)) {
    launch_gemv_fp8(x.data(), fw, b, bias_f32, out.data(), out_f32, ge, act, tokens, n, k, stream_);
    return;
  }
  if (fp8_block_gemm(nullptr, x, w, bias, out, gemm_out(e), act)) return;
  MINIVLLM_CHECK(e == Fp8Out::kStore) << op << ": " << tokens << " tokens take the unfused path";
  staged_norm_ = PendingNorm{};  // the GEMM overwrites the activation scratch
  if (fp8_gemm_->run(x, w, b, bias_f32, out.data(), out_f32, stream_)) return;
  if (fp8_gemm_->run_blocks(x, w, out.data(), out_f32, /*accumulate=*/false, stream_)) {
    if (bias != nullptr) launch_bias_add(out.data(), out_f32, b, bias_f32, tokens, n, stream_);
    return;
  }
  if (k % 8 == 0 && n % 8 == 0) {  // block scales: the weight decoded to bf16, then cuBLASLt's bf16 GEMM
    const void* wb = fp8_gemm_->dequantized(w, stream_);
    const bool fuse_bias = bias != nullptr && !bias_f32 && !out_f32;
    gemm_->run(x.data(), wb, fuse_bias ? b : nullptr, out.data(), out_f32, tokens, n, k, stream_);
    if (bias != nullptr && !fuse_bias) launch_bias_add(out.data(), out_f32, b, bias_f32, tokens, n, stream_);
    return;
  }
  MINIVLLM_CHECK(fp8_gemv_shape(x, w)) << op << ": FP8 weight " << w.describe() << " with scale blocks of "
                                       << s.block_rows << "x" << s.block_cols
                                       << " fits none of the FP8 paths (K and N multiples of 8, or K and the "
                                          "blocks' columns multiples of 16)";
  const size_t out_elem = out_f32 ? 4 : 2;
  for (int64_t t0 = 0; t0 < tokens; t0 += kGemvMaxTokens) {
    const int64_t t = std::min<int64_t>(kGemvMaxTokens, tokens - t0);
    launch_gemv_fp8(static_cast<const char*>(x.data()) + t0 * k * 2, fw, b, bias_f32,
                    static_cast<char*>(out.data()) + t0 * n * out_elem, out_f32, ge, act, t, n, k, stream_);
  }
}

// Block-quantized weights. The gemv reads the weight once per 8 tokens; decoding it for cuBLASLt
// costs a bf16 write and read of it, about 7x a Q4_K read: so the gemv up to kQuantChunkTokens
// tokens (8 passes), and past that the decoded weight where cuBLASLt takes the shape. A weight of
// parts (WeightParts: Q4_K q, k beside a Q6_K v) runs each part into its rows of the output, from
// the same quantized x, or is decoded part by part into one bf16 weight.
void CudaBackend::linear_quant(const char* op, const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor& out,
                               bool add, const QuantSource& src) {
  MINIVLLM_CHECK(w.device() == DeviceKind::kCuda && w.ndim() == 2)
      << op << ": weight " << w.describe() << " must be a CUDA [out, in] tensor";
  const int64_t n = w.size(0), k = w.size(1);
  const bool from_x = src.norm == nullptr && src.gate_up == nullptr;
  int64_t tokens = 0;
  if (src.norm != nullptr) {
    check_gpu(src.norm->residual, DType::kF32, op, "residual");
    tokens = rows_with_cols(src.norm->residual, k, op, "residual");
  } else if (src.gate_up != nullptr) {
    check_gpu(*src.gate_up, DType::kBF16, op, "gate_up");
    tokens = rows_with_cols(*src.gate_up, 2 * k, op, "gate_up");
  } else {
    check_gpu(x, DType::kBF16, op, "x");
    tokens = rows_with_cols(x, k, op, "x");
  }
  MINIVLLM_CHECK(from_x || tokens <= kQuantChunkTokens) << op << ": " << tokens << " tokens from a fused source";
  MINIVLLM_CHECK_EQ(rows_with_cols(out, n, op, "out"), tokens) << op << ": out " << out.describe() << " for "
                                                               << tokens << " tokens";
  const bool out_f32 = out.dtype() == DType::kF32;
  MINIVLLM_CHECK(out.device() == DeviceKind::kCuda && (out_f32 || out.dtype() == DType::kBF16) && (!add || out_f32))
      << op << ": out " << out.describe() << " must be a bf16 or f32 CUDA tensor (f32 for the residual)";
  MINIVLLM_CHECK(!add || bias == nullptr) << op << ": no bias with the residual add";
  bool bias_f32 = false;
  if (bias != nullptr) bias_f32 = check_weight(*bias, n, op, "bias");
  const std::vector<Tensor> pieces = w.parts() ? w.parts()->parts : std::vector<Tensor>{w};
  int64_t stacked = 0;
  for (const Tensor& p : pieces) {
    MINIVLLM_CHECK(p.ndim() == 2 && p.size(1) == k && quant_gemv_supports(p.dtype()) && p.device() == DeviceKind::kCuda)
        << op << ": part " << p.describe() << " of weight " << w.describe();
    stacked += p.size(0);
  }
  MINIVLLM_CHECK_EQ(stacked, n) << op << ": the parts of " << w.describe() << " hold " << stacked << " rows";
  if (tokens == 0) return;
  const void* b = bias == nullptr ? nullptr : bias->data();
  const size_t out_elem = out_f32 ? 4 : 2, bias_elem = bias_f32 ? 4 : 2;
  if (tokens > kQuantChunkTokens && n % 8 == 0 && k % 8 == 0) {
    grow_device_scratch(&quant_w_bf16_, &quant_w_bf16_bytes_, static_cast<size_t>(n * k) * 2, stream_, op,
                        "decoded-weight");
    int64_t row0 = 0;
    for (const Tensor& p : pieces) {
      launch_quant_dequantize_bf16(p.dtype(), p.data(), dtype_nbytes(p.dtype(), k), p.size(0), k,
                                   static_cast<char*>(quant_w_bf16_) + row0 * k * 2, stream_);
      row0 += p.size(0);
    }
    if (add) {
      gemm_->run(x.data(), quant_w_bf16_, nullptr, out.data(), true, tokens, n, k, stream_, /*accumulate=*/true);
      return;
    }
    const bool fuse_bias = bias != nullptr && !bias_f32 && !out_f32;
    gemm_->run(x.data(), quant_w_bf16_, fuse_bias ? b : nullptr, out.data(), out_f32, tokens, n, k, stream_);
    if (bias != nullptr && !fuse_bias) launch_bias_add(out.data(), out_f32, b, bias_f32, tokens, n, stream_);
    return;
  }
  MINIVLLM_CHECK(quant_x_codes_ != nullptr && k <= kQuantMaxK)
      << op << ": rows of " << k << " values (the quantized gemv's x scratch holds " << kQuantMaxK << ")";
  const QuantX codes{quant_x_codes_, quant_x_scales_, quant_x_sums_};
  for (int64_t c0 = 0; c0 < tokens; c0 += kQuantChunkTokens) {
    const int64_t chunk = std::min(kQuantChunkTokens, tokens - c0);
    if (src.norm != nullptr) {
      const bool norm_f32 = check_weight(src.norm->weight, k, op, "norm_weight");
      MINIVLLM_CHECK(launch_rms_norm_quantize_x_q8(src.norm->residual.ptr<float>() + c0 * k, src.norm->weight.data(),
                                                   norm_f32, src.norm->eps, chunk, k, codes, stream_))
          << op << ": the normed quantizer declined K = " << k;
    } else if (src.gate_up != nullptr) {
      MINIVLLM_CHECK(launch_act_mul_quantize_x_q8(static_cast<const char*>(src.gate_up->data()) + c0 * 2 * k * 2, chunk,
                                                  k, src.act, codes, stream_))
          << op << ": the act_mul quantizer declined I = " << k;
    } else {
      launch_quantize_x_q8(static_cast<const char*>(x.data()) + c0 * k * 2, chunk, k, codes, stream_);
    }
    for (int64_t t0 = 0; t0 < chunk; t0 += kQuantGemvMaxTokens) {
      const int64_t t = std::min<int64_t>(kQuantGemvMaxTokens, chunk - t0);
      const QuantX q{quant_x_codes_ + t0 * k, quant_x_scales_ + t0 * (k / 32), quant_x_sums_ + t0 * (k / 32)};
      int64_t row0 = 0;
      for (const Tensor& p : pieces) {
        const void* pb = b == nullptr ? nullptr : static_cast<const char*>(b) + row0 * bias_elem;
        const size_t row_bytes = dtype_nbytes(p.dtype(), k);
        launch_quant_gemv(p.dtype(), p.data(), row_bytes, q, pb, bias_f32,
                          static_cast<char*>(out.data()) + ((c0 + t0) * n + row0) * out_elem, out_f32,
                          add ? QuantGemvOut::kAddF32 : QuantGemvOut::kStore, t, p.size(0), k, n, stream_,
                          quant_gemv_plan(p.dtype(), t, p.size(0), k, p.data(), row_bytes));
        row0 += p.size(0);
      }
    }
  }
}

// The streamed gemv where it takes the call (MINIVLLM_QUANT_GEMV_STREAM), else the plain or
// pipelined one by quant_gemv_piped (or MINIVLLM_QUANT_GEMV_PIPELINE).
cuda::QuantGemvPlan CudaBackend::quant_gemv_plan(DType wtype, int64_t tokens, int64_t n, int64_t k, const void* w,
                                                 size_t row_bytes) const {
  QuantGemvPlan plan;
  plan.num_sms = num_sms_;
  plan.ctas_per_sm = quant_stream_ctas_;
  plan.stages = quant_stream_stages_;
  plan.spread = quant_stream_spread_;
  if (quant_gemv_stream_ && quant_gemv_streams(wtype, tokens, k, w, row_bytes)) {
    plan.kernel = QuantGemvKernel::kStreamed;
  } else if (quant_gemv_pipeline_ >= 0 ? quant_gemv_pipeline_ == 1 : quant_gemv_piped(tokens, n, num_sms_)) {
    plan.kernel = QuantGemvKernel::kPiped;
  }
  return plan;
}

// Decode: cuBLASLt's kernels for a handful of tokens leave bandwidth unused, but the gemv's cost
// grows with the tokens: every CTA rereads x (M x K) and, with the norm prologue, normalises all M
// rows of the fp32 residual itself, so at 4 and 8 tokens that L2 traffic is 2-4x the weights'.
// Measured (PERFORMANCE.md, "Small decode batches: gemv or cuBLASLt by tokens"): gemv wins everywhere
// at 1 and 2 tokens; at 4 and 8 only without the norm prologue, for K in (1024, 4096] and
// tokens x N <= 8192 (Qwen3's o / down at 8 tokens, Llama's o at 4; Llama's K = 8192 down
// projection, the qkv / gate_up projections and the LM heads go to cuBLASLt).
// N % 8 != 0 is never cuBLASLt's.
bool CudaBackend::use_gemv(const Tensor& x, const Tensor& weight, int64_t tokens, int64_t n, int64_t k,
                           bool norm_prologue) const {
  const bool gemv_wins =
      tokens <= 2 || n % 8 != 0 || (!norm_prologue && k > 1024 && k <= 4096 && tokens * n <= 8192);
  return tokens >= 1 && tokens <= kGemvMaxTokens && gemv_wins && k % 8 == 0 && aligned16(x) && aligned16(weight);
}

// Decode batches past the gemv's, on Hopper: decode_gemm.cu up to 64 tokens, where its weight tiles
// stream at up to twice the bandwidth of cuBLASLt's kernels (measured: PERFORMANCE.md, "A decode-batch
// GEMM on wgmma and TMA"). Past that every CTA rereads x once per 128 weight rows and cuBLASLt's
// larger tiles win, except on the gate/up product whose tiles fill the GPU without a K split (its
// gated epilogue also saves a launch and the [T, 2I] round trip). MINIVLLM_DECODE_GEMM_TOKENS moves
// the 64.
bool CudaBackend::use_decode_gemm(const Tensor& x, const Tensor& weight, const Tensor& out, int64_t tokens, int64_t n,
                                  int64_t k, bool gated) const {
  if (!decode_gemm_ || tokens < 1 || tokens > kDecodeGemmMaxTokens || n % 8 != 0 || k % 8 != 0 || !aligned16(x) ||
      !aligned16(weight) || !aligned16(out)) {
    return false;
  }
  return tokens <= decode_gemm_tokens_ || (gated && n / 64 >= num_sms_ / 2);
}

void CudaBackend::linear(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& out) {
  after_attention_ = false;
  if (is_fp8(weight)) return linear_fp8("linear", x, weight, bias, out, Fp8Out::kStore);
  if (is_block_quant(weight)) return linear_quant("linear", x, weight, bias, out, /*add=*/false);
  check_gpu(x, DType::kBF16, "linear", "x");
  check_gpu(weight, DType::kBF16, "linear", "weight");
  MINIVLLM_CHECK(out.defined() && out.device() == DeviceKind::kCuda &&
                 (out.dtype() == DType::kBF16 || out.dtype() == DType::kF32))
      << "linear: out " << out.describe() << " must be a bf16 or f32 CUDA tensor";
  const bool out_f32 = out.dtype() == DType::kF32;
  MINIVLLM_CHECK(weight.ndim() == 2) << "linear: weight " << weight.describe() << " must be [out, in]";
  const int64_t n = weight.size(0), k = weight.size(1);
  const int64_t tokens = rows_with_cols(x, k, "linear", "x");
  MINIVLLM_CHECK_EQ(rows_with_cols(out, n, "linear", "out"), tokens)
      << "linear: out " << out.describe() << " for x " << x.describe();
  bool bias_f32 = false;
  if (bias != nullptr) bias_f32 = check_weight(*bias, n, "linear", "bias");
  if (use_gemv(x, weight, tokens, n, k)) {
    launch_gemv(x.data(), weight.data(), bias == nullptr ? nullptr : bias->data(), bias_f32, out.data(), out_f32,
                tokens, n, k, stream_);
    return;
  }
  if (use_decode_gemm(x, weight, out, tokens, n, k)) {
    launch_decode_gemm(DecodeGemmArgs{x.data(), weight.data(), bias == nullptr ? nullptr : bias->data(), bias_f32,
                                      out.data(), out_f32, tokens, n, k, DecodeGemmEpilogue::kStore, 0},
                       stream_);
    return;
  }
  MINIVLLM_CHECK(k % 8 == 0 && n % 8 == 0) << "linear: weight " << weight.describe()
                                           << " needs both dimensions multiples of 8";
  // The epilogue takes a bf16 bias into a bf16 out; any other pairing adds the bias afterwards.
  const bool fuse_bias = bias != nullptr && !bias_f32 && !out_f32;
  gemm_->run(x.data(), weight.data(), fuse_bias ? bias->data() : nullptr, out.data(), out_f32, tokens, n, k, stream_);
  if (bias != nullptr && !fuse_bias) launch_bias_add(out.data(), out_f32, bias->data(), bias_f32, tokens, n, stream_);
}

// The RMSNorm folded into the gemv pays only for short rows: every CTA reads the whole fp32
// residual row and the norm weight, so its cost grows with K while a CTA's weight rows do not
// shorten. Past gemv_norm_max_k_ (MINIVLLM_GEMV_NORM_MAX_K) the norm kernel writes the bf16 row once
// and the plain gemv reads it. At 1-2 tokens the norm is applied late (MINIVLLM_GEMV_NORM_LATE): its
// reduction rides on the products' pass and is needed only at the end, so no CTA waits on it before
// its first product (PERFORMANCE.md, "Stop 83"). Longer rows late-normed (and staged) still lose on
// the H200 ("Stop 103").
bool CudaBackend::use_gemv_norm(const Tensor& residual, const Tensor& weight, int64_t n, int64_t k) const {
  if (residual.dtype() != DType::kF32 || residual.device() != DeviceKind::kCuda || residual.size(-1) != k) return false;
  if (k > gemv_norm_max_k_) return false;
  const int64_t tokens = residual.numel() / k;
  return use_gemv(residual, weight, tokens, n, k, /*norm_prologue=*/true) &&
         (gemv_norm_late(tokens) || gemv_norm_fits(tokens, k));
}

bool CudaBackend::gemv_norm_late(int64_t tokens) const {
  return gemv_norm_late_ && tokens >= 1 && tokens <= kGemvNormLateMaxTokens;
}

GemvNorm CudaBackend::gemv_norm(const NormPrologue& pro, bool norm_f32, int64_t tokens) const {
  return GemvNorm{pro.residual.ptr<float>(), pro.weight.data(), norm_f32, pro.eps, gemv_norm_late(tokens), gemv_stage_};
}

void CudaBackend::rms_norm_linear(const NormPrologue& pro, const Tensor& weight, const Tensor* bias,
                                  const Tensor& out) {
  if (stored_as_codes(weight)) {
    if (fp8_w8a8_normed("rms_norm_linear", pro, weight, bias, out, Fp8Out::kStore, Activation::kSilu)) return;
    if (fp8_normed("rms_norm_linear", pro, weight, bias, out, out, Fp8Epilogue::kStore, Activation::kSilu)) return;
    if (fp8_block_gemm(&pro, Tensor(), weight, bias, out, DecodeGemmEpilogue::kStore, Activation::kSilu)) return;
    if (quant_norm_takes(pro, weight)) return linear_quant("rms_norm_linear", Tensor(), weight, bias, out, false, {&pro});
    return Backend::rms_norm_linear(pro, weight, bias, out);
  }
  if (folded_linear(pro, weight, bias, out, DecodeGemmEpilogue::kStore, Activation::kSilu)) return;
  check_gpu(weight, DType::kBF16, "rms_norm_linear", "weight");
  MINIVLLM_CHECK(weight.ndim() == 2) << "rms_norm_linear: weight " << weight.describe() << " must be [out, in]";
  const int64_t n = weight.size(0), k = weight.size(1);
  if (!use_gemv_norm(pro.residual, weight, n, k)) {
    Backend::rms_norm_linear(pro, weight, bias, out);
    return;
  }
  const int64_t tokens = pro.residual.numel() / k;
  MINIVLLM_CHECK(out.defined() && out.device() == DeviceKind::kCuda &&
                 (out.dtype() == DType::kBF16 || out.dtype() == DType::kF32))
      << "rms_norm_linear: out " << out.describe() << " must be a bf16 or f32 CUDA tensor";
  MINIVLLM_CHECK_EQ(rows_with_cols(out, n, "rms_norm_linear", "out"), tokens)
      << "rms_norm_linear: out " << out.describe() << " for residual " << pro.residual.describe();
  const bool norm_f32 = check_weight(pro.weight, k, "rms_norm_linear", "norm_weight");
  bool bias_f32 = false;
  if (bias != nullptr) bias_f32 = check_weight(*bias, n, "rms_norm_linear", "bias");
  launch_gemv_norm(gemv_norm(pro, norm_f32, tokens), weight.data(), bias == nullptr ? nullptr : bias->data(), bias_f32,
                   out.data(), out.dtype() == DType::kF32, tokens, n, k, stream_);
}

void CudaBackend::rms_norm_linear_act_mul(const NormPrologue& pro, const Tensor& gate_up_weight, const Tensor& scratch,
                                          const Tensor& out, Activation act) {
  if (stored_as_codes(gate_up_weight)) {
    if (fp8_w8a8_normed("rms_norm_linear_act_mul", pro, gate_up_weight, nullptr, out, Fp8Out::kActMul, act)) return;
    if (fp8_normed("rms_norm_linear_act_mul", pro, gate_up_weight, nullptr, scratch, out, Fp8Epilogue::kActMul, act)) {
      return;
    }
    if (fp8_block_gemm(&pro, Tensor(), gate_up_weight, nullptr, out, DecodeGemmEpilogue::kActMul, act)) return;
    if (quant_norm_takes(pro, gate_up_weight)) {
      linear_quant("rms_norm_linear_act_mul", Tensor(), gate_up_weight, nullptr, scratch, false, {&pro});
      return act_mul(scratch, out, act);
    }
    return Backend::rms_norm_linear_act_mul(pro, gate_up_weight, scratch, out, act);
  }
  if (folded_linear(pro, gate_up_weight, nullptr, out, DecodeGemmEpilogue::kActMul, act)) return;
  check_gpu(gate_up_weight, DType::kBF16, "rms_norm_linear_act_mul", "gate_up_weight");
  MINIVLLM_CHECK(gate_up_weight.ndim() == 2 && gate_up_weight.size(0) % 2 == 0)
      << "rms_norm_linear_act_mul: gate_up_weight " << gate_up_weight.describe() << " must be [2 * inter, in]";
  const int64_t inter = gate_up_weight.size(0) / 2, k = gate_up_weight.size(1);
  if (!use_gemv_norm(pro.residual, gate_up_weight, 2 * inter, k)) {
    Backend::rms_norm_linear_act_mul(pro, gate_up_weight, scratch, out, act);
    return;
  }
  const int64_t tokens = pro.residual.numel() / k;
  check_gpu(out, DType::kBF16, "rms_norm_linear_act_mul", "out");
  MINIVLLM_CHECK_EQ(rows_with_cols(out, inter, "rms_norm_linear_act_mul", "out"), tokens)
      << "rms_norm_linear_act_mul: out " << out.describe() << " for residual " << pro.residual.describe();
  const bool norm_f32 = check_weight(pro.weight, k, "rms_norm_linear_act_mul", "norm_weight");
  launch_gemv_norm_act_mul(gemv_norm(pro, norm_f32, tokens), gate_up_weight.data(), out.data(), tokens, inter, k, act,
                           stream_);
}

// Past the gemv, a per-row FP8 weight's bare codes' product into scratch (bf16 [T, N]), then one pass
// that scales it and adds it into the fp32 residual (kAddF32) or forms act(gate) * up (kActMul; N =
// 2I): the unfused path scales in place, then adds or multiplies in a second pass. False where the
// FP8 GEMM does not take the weight.
bool CudaBackend::fp8_fused(const char* op, const Tensor& x, const Tensor& weight, const Tensor& scratch,
                            const Tensor& out, Fp8Epilogue e, Activation act) {
  const int64_t n = weight.size(0), k = weight.size(1);
  if (weight.scales() == nullptr || !fp8_gemm_takes(*weight.scales(), n, k)) return false;
  check_gpu(x, DType::kBF16, op, "x");
  check_gpu(scratch, DType::kBF16, op, "scratch");
  const int64_t tokens = rows_with_cols(x, k, op, "x");
  const int64_t out_n = e == Fp8Epilogue::kActMul ? n / 2 : n;
  check_gpu(out, e == Fp8Epilogue::kAddF32 ? DType::kF32 : DType::kBF16, op, "out");
  MINIVLLM_CHECK(scratch.numel() >= tokens * n && rows_with_cols(out, out_n, op, "out") == tokens)
      << op << ": scratch " << scratch.describe() << " and out " << out.describe() << " for x " << x.describe()
      << " and weight " << weight.describe();
  staged_norm_ = PendingNorm{};  // the GEMM overwrites the activation scratch
  const float* row_scales = fp8_gemm_->run_unscaled(x, weight, scratch.data(), stream_);
  if (row_scales == nullptr) return false;
  launch_fp8_weight_epilogue(weight, scratch.data(), row_scales, nullptr, false, e, act, out.data(), tokens, stream_);
  return true;
}

// The dense MLP with block-quantized weights at decode batches: x's codes from the norm, the gate/up
// gemv, h's codes from act(gate) * up, the down gemv into the residual; neither the normed rows nor
// h is written in bf16, two kernels fewer than its parts (the same codes, bit for bit). Elsewhere the
// two calls it stands for.
void CudaBackend::rms_norm_mlp_add_residual(const NormPrologue& pro, const Tensor& gate_up_weight,
                                            const Tensor& down_weight, const Tensor& gate_up, const Tensor& act,
                                            const Tensor& down_scratch, const Tensor& residual, Activation a) {
  constexpr const char* kOp = "rms_norm_mlp_add_residual";
  if (!quant_norm_takes(pro, gate_up_weight) || !is_block_quant(down_weight) || down_weight.ndim() != 2 ||
      down_weight.size(1) % 32 != 0) {
    return Backend::rms_norm_mlp_add_residual(pro, gate_up_weight, down_weight, gate_up, act, down_scratch, residual, a);
  }
  linear_quant(kOp, Tensor(), gate_up_weight, nullptr, gate_up, false, {&pro});
  QuantSource h;
  h.gate_up = &gate_up;
  h.act = a;
  linear_quant(kOp, Tensor(), down_weight, nullptr, residual, /*add=*/true, h);
}

bool CudaBackend::quant_norm_takes(const NormPrologue& pro, const Tensor& weight) const {
  if (!quant_fused_codes_ || !is_block_quant(weight) || weight.ndim() != 2 || quant_x_codes_ == nullptr) return false;
  const int64_t k = weight.size(1);
  if (k % 32 != 0 || k > kQuantNormMaxK || !pro.residual.defined() || pro.residual.dtype() != DType::kF32 ||
      pro.residual.device() != DeviceKind::kCuda || pro.residual.size(-1) != k) {
    return false;
  }
  const int64_t tokens = pro.residual.numel() / k;
  return tokens >= 1 && tokens <= kQuantChunkTokens;
}

bool CudaBackend::fp8_norm_takes(const NormPrologue& pro, const Tensor& weight) const {
  if (!is_fp8(weight) || !fp8_gemm_->normed_codes() || weight.ndim() != 2 || weight.scales() == nullptr) return false;
  const int64_t n = weight.size(0), k = weight.size(1);
  return fp8_gemm_takes(*weight.scales(), n, k) && k % 8 == 0 && k <= kE4m3RowMaxCols &&
         pro.residual.dtype() == DType::kF32 && pro.residual.device() == DeviceKind::kCuda &&
         pro.residual.size(-1) == k && aligned16(pro.residual) && !fp8_gemv_takes(pro.normed, weight);
}

bool CudaBackend::fp8_normed(const char* op, const NormPrologue& pro, const Tensor& weight, const Tensor* bias,
                             const Tensor& scratch, const Tensor& out, Fp8Epilogue e, Activation act) {
  if (!fp8_norm_takes(pro, weight)) return false;
  if (out.dtype() != DType::kBF16 || scratch.dtype() != DType::kBF16) return false;  // e.g. fp32 logits
  const int64_t n = weight.size(0), k = weight.size(1);
  const int64_t tokens = pro.residual.numel() / k;
  const int64_t out_n = e == Fp8Epilogue::kActMul ? n / 2 : n;
  check_gpu(out, DType::kBF16, op, "out");
  check_gpu(scratch, DType::kBF16, op, "scratch");
  MINIVLLM_CHECK(scratch.numel() >= tokens * n && rows_with_cols(out, out_n, op, "out") == tokens)
      << op << ": scratch " << scratch.describe() << " and out " << out.describe() << " for residual "
      << pro.residual.describe() << " and weight " << weight.describe();
  const bool norm_f32 = check_weight(pro.weight, k, op, "norm_weight");
  bool bias_f32 = false;
  if (bias != nullptr) bias_f32 = check_weight(*bias, n, op, "bias");
  const float* row_scales = fp8_normed_product(pro, tokens, weight, norm_f32, scratch.data());
  if (row_scales == nullptr) return false;
  launch_fp8_weight_epilogue(weight, scratch.data(), row_scales, bias == nullptr ? nullptr : bias->data(), bias_f32, e,
                             act, out.data(), tokens, stream_);
  return true;
}

void CudaBackend::note_next_norm(const Tensor& residual, const Tensor& norm_weight, float eps) {
  next_norm_ = PendingNorm{};
  if (!residual.defined() || !norm_weight.defined() || norm_weight.numel() != residual.size(-1)) return;
  next_norm_.residual = residual.data();
  next_norm_.weight = norm_weight.data();
  next_norm_.weight_f32 = norm_weight.dtype() == DType::kF32;
  next_norm_.eps = eps;
}

// The o and down projections of an FP8 prefill: the bare product, then one kernel adds it into the
// residual and makes the next RMSNorm's codes from the new rows (launch_fp8_add_norm_e4m3), where
// the next FP8 GEMM finds them (fp8_normed_product): the normed quantizer's read of the residual
// is gone. Bit-equal to the add epilogue then the normed quantizer.
bool CudaBackend::fp8_add_norm(const Tensor& x, const Tensor& weight, const Tensor& scratch, const Tensor& residual,
                               const PendingNorm& next) {
  constexpr const char* kOp = "linear_add_residual";
  if (!fp8_add_norm_ || !fp8_gemm_->normed_codes() || next.residual == nullptr || next.residual != residual.data() ||
      weight.scales() == nullptr) {
    return false;
  }
  const int64_t n = weight.size(0), k = weight.size(1);
  // (note_next_norm took a norm as wide as the residual; the add checks the residual is n wide.)
  if (!fp8_gemm_takes(*weight.scales(), n, k) || n % 8 != 0 || n > kE4m3RowMaxCols) return false;
  check_gpu(x, DType::kBF16, kOp, "x");
  check_gpu(scratch, DType::kBF16, kOp, "scratch");
  check_gpu(residual, DType::kF32, kOp, "residual");
  const int64_t tokens = rows_with_cols(x, k, kOp, "x");
  if (rows_with_cols(residual, n, kOp, "residual") != tokens || scratch.numel() < tokens * n || !aligned16(residual) ||
      !aligned16(scratch)) {
    return false;
  }
  // The scratch grown first for both x's codes and the new ones, so the GEMM's codes and scales are
  // never reallocated under it; the kernel then overwrites them (each CTA reads its row's scale
  // before it writes the new one).
  const auto [codes, scales] = fp8_gemm_->activation_codes(tokens, std::max(n, k), stream_);
  staged_norm_ = PendingNorm{};
  const float* row_scales = fp8_gemm_->run_unscaled(x, weight, scratch.data(), stream_);
  if (row_scales == nullptr) return false;
  const WeightScales& s = *weight.scales();
  // n is of 8s and at most kE4m3RowMaxCols (above), so the kernel takes it.
  MINIVLLM_CHECK(row_scales == scales &&
                 launch_fp8_add_norm_e4m3(scratch.data(), n, row_scales, s.grid.ptr<float>(), s.grid.size(1),
                                          residual.ptr<float>(), next.weight, next.weight_f32, next.eps, tokens, n,
                                          codes, scales, stream_))
      << kOp << ": the add and norm codes kernel declined " << tokens << " x " << n;
  staged_norm_ = next;
  staged_norm_.tokens = tokens;
  return true;
}

bool CudaBackend::gemv_fold_out(const PendingNorm& next, const Tensor& residual, int64_t tokens, int64_t n,
                                GemvFoldOut* fold) const {
  if (gemv_norm_fold_ == 0 || fold_x_ == nullptr || next.residual == nullptr || next.residual != residual.data() ||
      tokens < 1 || tokens > kGemvFoldMaxTokens || n > kFoldMaxCols ||
      (gemv_norm_fold_ == 1 && n <= gemv_norm_max_k_)) {
    return false;
  }
  // A CTA of the add takes two rows at least: ceil(n / 2) sums a token at most, in fold_parts_.
  if (tokens * ((n + 1) / 2) > kFoldMaxCols / 128 * kFoldMaxTokens) return false;
  *fold = GemvFoldOut{next.weight, next.weight_f32, fold_x_, fold_parts_};
  return true;
}

bool CudaBackend::take_gemv_fold(const NormPrologue& pro, int64_t tokens, GemvNorm* norm) {
  const PendingNorm f = folded_;
  folded_ = PendingNorm{};
  if (f.parts == 0 || !f.matches(pro, tokens)) return false;
  *norm = folded_gemv_norm(fold_x_, fold_parts_, f.parts, pro.eps);
  return true;
}

bool CudaBackend::folded_linear(const NormPrologue& pro, const Tensor& weight, const Tensor* bias, const Tensor& out,
                                DecodeGemmEpilogue e, Activation act) {
  const PendingNorm f = folded_;
  folded_ = PendingNorm{};
  if (f.residual == nullptr || weight.dtype() != DType::kBF16 || weight.device() != DeviceKind::kCuda ||
      weight.ndim() != 2 || !pro.residual.defined() || pro.residual.size(-1) != weight.size(1)) {
    return false;
  }
  const bool gated = e == DecodeGemmEpilogue::kActMul;
  const int64_t k = weight.size(1), n = gated ? weight.size(0) / 2 : weight.size(0);
  const int64_t tokens = pro.residual.numel() / k;
  if (!f.matches(pro, tokens) || !out.defined() || out.device() != DeviceKind::kCuda ||
      (gated ? out.dtype() != DType::kBF16 : out.dtype() != DType::kBF16 && out.dtype() != DType::kF32) ||
      out.numel() != tokens * n) {
    return false;
  }
  // The gemv's fold (one token) takes the normed gemv on its input, the decode GEMM's fold the GEMM.
  const bool gemv_fold = f.parts > 0;
  if (gemv_fold ? !use_gemv(pro.residual, weight, tokens, gated ? 2 * n : n, k, /*norm_prologue=*/true)
                : !use_decode_gemm(pro.residual, weight, out, tokens, n, k, gated)) {
    return false;
  }
  const bool bias_f32 = bias != nullptr && check_weight(*bias, n, "folded_linear", "bias");
  if (gemv_fold) {
    const GemvNorm norm = folded_gemv_norm(fold_x_, fold_parts_, f.parts, pro.eps);
    if (gated) {
      launch_gemv_norm_act_mul(norm, weight.data(), out.data(), tokens, n, k, act, stream_);
    } else {
      launch_gemv_norm(norm, weight.data(), bias == nullptr ? nullptr : bias->data(), bias_f32, out.data(),
                       out.dtype() == DType::kF32, tokens, n, k, stream_);
    }
    return true;
  }
  DecodeGemmArgs g{fold_x_, weight.data(), bias == nullptr ? nullptr : bias->data(), bias_f32, out.data(),
                   out.dtype() == DType::kF32, tokens, n, k, e, 0};
  g.act = act;
  g.fold_stride = kFoldMaxTokens;
  g.norm_parts = fold_parts_;
  g.norm_eps = pro.eps;
  launch_decode_gemm(g, stream_);
  return true;
}

const float* CudaBackend::fp8_normed_product(const NormPrologue& pro, int64_t tokens, const Tensor& weight,
                                             bool norm_f32, void* out) {
  const bool staged = staged_norm_.matches(pro, tokens);  // (the callers' weights are as wide as pro.residual)
  staged_norm_ = PendingNorm{};  // used now, or overwritten by the normed quantizer
  if (staged) return fp8_gemm_->run_unscaled_staged(tokens, weight, out, stream_);
  return fp8_gemm_->run_unscaled_normed(pro.residual.ptr<float>(), pro.weight.data(), norm_f32, pro.eps, tokens, weight,
                                        out, stream_);
}

void CudaBackend::linear_add_residual(const Tensor& x, const Tensor& weight, const Tensor& scratch,
                                      const Tensor& residual) {
  const PendingNorm next = next_norm_;  // note_next_norm's hint holds for this call only
  next_norm_ = PendingNorm{};
  folded_ = PendingNorm{};
  // After the attention, which reads little, the o projection's gemv prefetches its whole rows
  // (PERFORMANCE.md, "Stop 100"); after a gemv, only their first step.
  const bool after_attention = std::exchange(after_attention_, false);
  const int prefetch_u = after_attention ? prefetch_after_attention_ : -1;
  if (is_block_quant(weight)) return linear_quant("linear_add_residual", x, weight, nullptr, residual, /*add=*/true);
  if (is_fp8(weight)) {
    if (fp8_gemv_takes(x, weight)) return linear_fp8("linear_add_residual", x, weight, nullptr, residual, Fp8Out::kAddF32);
    if (fp8_add_norm(x, weight, scratch, residual, next)) return;
    if (fp8_block_gemm(nullptr, x, weight, nullptr, residual, DecodeGemmEpilogue::kAddF32, Activation::kSilu)) return;
    check_gpu(residual, DType::kF32, "linear_add_residual", "residual");
    const int64_t n = weight.size(0), k = weight.size(1);
    if (weight.scales() != nullptr && !fp8_gemm_takes(*weight.scales(), n, k) && k % 8 == 0 && n % 8 == 0) {
      // Block scales: the decoded weight's cuBLASLt GEMM adds into the fp32 residual with beta = 1,
      // as the bf16 path does (no bf16 rounding of the product first).
      const int64_t tokens = rows_with_cols(x, k, "linear_add_residual", "x");
      if (fp8_gemm_->run_blocks(x, weight, residual.data(), /*out_f32=*/true, /*accumulate=*/true, stream_)) {
        staged_norm_ = PendingNorm{};  // it overwrote the activation scratch
        return;
      }
      gemm_->run(x.data(), fp8_gemm_->dequantized(weight, stream_), nullptr, residual.data(), /*out_f32=*/true, tokens,
                 n, k, stream_, /*accumulate=*/true);
      return;
    }
    if (fp8_gemm_->fused_epilogues() && fp8_fused("linear_add_residual", x, weight, scratch, residual,
                                                  Fp8Epilogue::kAddF32, Activation::kSilu)) {
      return;
    }
    return Backend::linear_add_residual(x, weight, scratch, residual);
  }
  check_gpu(x, DType::kBF16, "linear_add_residual", "x");
  check_gpu(weight, DType::kBF16, "linear_add_residual", "weight");
  check_gpu(residual, DType::kF32, "linear_add_residual", "residual");
  MINIVLLM_CHECK(weight.ndim() == 2) << "linear_add_residual: weight " << weight.describe() << " must be [out, in]";
  const int64_t n = weight.size(0), k = weight.size(1);
  const int64_t tokens = rows_with_cols(x, k, "linear_add_residual", "x");
  MINIVLLM_CHECK_EQ(rows_with_cols(residual, n, "linear_add_residual", "residual"), tokens)
      << "linear_add_residual: residual " << residual.describe() << " for x " << x.describe();
  // The folded norm: past the gemv's 1-2 tokens, the add also makes the next norm's input. An add the
  // gemv takes by shape moves to the decode GEMM for it where tokens x N >= norm_fold_: Llama-3.2-1B's
  // o at 4 tokens and Qwen3-0.6B's o and down at 8 gained so, Qwen3's at 4 lost (PERFORMANCE.md,
  // "Stop 82").
  const bool gemv = use_gemv(x, weight, tokens, n, k);
  const bool decode_gemm = use_decode_gemm(x, weight, residual, tokens, n, k);
  const bool fold = decode_gemm && norm_fold_ > 0 && next.residual == residual.data() && tokens > 2 &&
                    tokens <= kFoldMaxTokens && n <= kFoldMaxCols && (!gemv || tokens * n >= norm_fold_);
  if (!fold && gemv) {
    GemvFoldOut fo{};
    const bool gemv_fold = gemv_fold_out(next, residual, tokens, n, &fo);
    const int64_t parts = launch_gemv_add_f32(x.data(), weight.data(), residual.ptr<float>(), tokens, n, k, stream_,
                                              prefetch_u, gemv_stage_, gemv_fold ? &fo : nullptr);
    if (gemv_fold) {
      folded_ = next;
      folded_.tokens = tokens;
      folded_.parts = parts;
    }
    return;
  }
  if (decode_gemm) {
    DecodeGemmArgs g{x.data(), weight.data(), nullptr, false, residual.data(), true, tokens, n, k,
                     DecodeGemmEpilogue::kAddF32, 0};
    if (fold) {
      g.fold_w = next.weight;
      g.fold_w_f32 = next.weight_f32;
      g.fold_out = fold_x_;
      g.fold_parts = fold_parts_;
      g.fold_stride = kFoldMaxTokens;
    }
    launch_decode_gemm(g, stream_);
    if (fold) {
      folded_ = next;
      folded_.tokens = tokens;
    }
    return;
  }
  if (k % 8 == 0 && n % 8 == 0) {  // cuBLASLt with beta = 1 into the fp32 residual: no add kernel
    gemm_->run(x.data(), weight.data(), nullptr, residual.data(), /*out_f32=*/true, tokens, n, k, stream_,
               /*accumulate=*/true);
    return;
  }
  Backend::linear_add_residual(x, weight, scratch, residual);
}

void CudaBackend::add_to_residual(const Tensor& x, const Tensor& residual) {
  folded_ = PendingNorm{};  // the residual moves: a folded norm's input is stale
  check_gpu(residual, DType::kF32, "add_to_residual", "residual");
  MINIVLLM_CHECK(x.defined() && x.device() == DeviceKind::kCuda && (x.dtype() == DType::kBF16 || x.dtype() == DType::kF32))
      << "add_to_residual: x " << x.describe() << " must be a bf16 or f32 CUDA tensor";
  MINIVLLM_CHECK_EQ(x.numel(), residual.numel())
      << "add_to_residual: x " << x.describe() << " vs residual " << residual.describe();
  MINIVLLM_CHECK(x.numel() % 8 == 0) << "add_to_residual: " << x.numel() << " values, must be a multiple of 8";
  check_aligned16(x, "add_to_residual", "x");
  check_aligned16(residual, "add_to_residual", "residual");
  launch_add_to_f32(x.data(), x.dtype() == DType::kF32, x.numel(), residual.ptr<float>(), stream_);
}

void CudaBackend::norm_add_norm(const Tensor& x, const Tensor& out_norm, float out_eps, const Tensor& residual,
                                const Tensor& next_norm, float next_eps) {
  folded_ = PendingNorm{};  // the residual moves: a folded norm's input is stale
  const char* op = "norm_add_norm";
  check_gpu(x, DType::kBF16, op, "x");
  check_gpu(residual, DType::kF32, op, "residual");
  const int64_t n = out_norm.numel();
  MINIVLLM_CHECK(n % 8 == 0) << op << ": width " << n << " must be a multiple of 8";
  const bool out_f32 = check_weight(out_norm, n, op, "out_norm");
  const bool next_f32 = !next_norm.empty() && check_weight(next_norm, n, op, "next_norm");
  const int64_t rows = rows_with_cols(x, n, op, "x");
  MINIVLLM_CHECK_EQ(residual.numel(), x.numel()) << op << ": residual " << residual.describe() << " vs x " << x.describe();
  check_aligned16(x, op, "x");
  check_aligned16(residual, op, "residual");
  launch_norm_add_norm(x.data(), residual.ptr<float>(), out_norm.data(), out_f32, out_eps,
                       next_norm.empty() ? nullptr : next_norm.data(), next_f32, next_eps, rows, n, stream_);
}

void CudaBackend::to_activation(const Tensor& x, const Tensor& out) {
  check_gpu(x, DType::kF32, "to_activation", "x");
  check_gpu(out, DType::kBF16, "to_activation", "out");
  MINIVLLM_CHECK(x.numel() == out.numel() && x.numel() % 8 == 0)
      << "to_activation: x " << x.describe() << " out " << out.describe() << " (same size, a multiple of 8)";
  check_aligned16(x, "to_activation", "x");
  check_aligned16(out, "to_activation", "out");
  launch_f32_to_bf16(x.ptr<float>(), x.numel(), out.data(), stream_);
}

namespace {

// qkv's row width for OLMo 2's norms; throws unless qkv is bf16 [T, (nq + 2 nkv) hd] with 8-value
// chunks and sums (where defined) f32 [T, 2].
int64_t check_qk_full(const Tensor& qkv, int nq, int nkv, int hd, const Tensor& sums, const char* op) {
  check_gpu(qkv, DType::kBF16, op, "qkv");
  if (sums.defined()) check_gpu(sums, DType::kF32, op, "sums");
  const int64_t stride = static_cast<int64_t>(nq + 2 * nkv) * hd;
  MINIVLLM_CHECK(nq > 0 && nkv > 0 && hd > 0 && hd % 8 == 0 && qkv.ndim() == 2 && qkv.size(1) == stride &&
                 (!sums.defined() || sums.numel() == 2 * qkv.size(0)))
      << op << ": qkv " << qkv.describe() << ", sums " << sums.describe() << " for " << nq << " / " << nkv
      << " heads of " << hd << " (head_dim a multiple of 8)";
  check_aligned16(qkv, op, "qkv");
  return stride;
}

}  // namespace

void CudaBackend::qk_sum_squares(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim,
                                 const Tensor& sums) {
  const int64_t stride = check_qk_full(qkv, num_q_heads, num_kv_heads, head_dim, sums, "qk_sum_squares");
  launch_qk_sum_squares(qkv.data(), qkv.size(0), int64_t{num_q_heads} * head_dim, int64_t{num_kv_heads} * head_dim,
                        stride, sums.ptr<float>(), stream_);
}

void CudaBackend::qk_norm_full_width(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim,
                                     const Tensor& sums, int64_t q_width, int64_t k_width, const Tensor& q_norm,
                                     const Tensor& k_norm, float eps) {
  const char* op = "qk_norm_full_width";
  // Undefined sums (one rank): the kernel sums each row itself.
  const int64_t stride = check_qk_full(qkv, num_q_heads, num_kv_heads, head_dim, sums.defined() ? sums : Tensor(), op);
  const int64_t q = int64_t{num_q_heads} * head_dim, k = int64_t{num_kv_heads} * head_dim;
  check_gpu(q_norm, DType::kF32, op, "q_norm");
  check_gpu(k_norm, DType::kF32, op, "k_norm");
  MINIVLLM_CHECK(q_norm.numel() == q && k_norm.numel() == k && q_width >= q && k_width >= k)
      << op << ": q_norm " << q_norm.describe() << ", k_norm " << k_norm.describe() << " for " << num_q_heads << " / "
      << num_kv_heads << " heads of " << head_dim << " (widths " << q_width << " / " << k_width << ")";
  launch_qk_norm_full_width(qkv.data(), qkv.size(0), q, k, stride, sums.defined() ? sums.ptr<float>() : nullptr,
                            q_width, k_width, q_norm.ptr<float>(), k_norm.ptr<float>(), eps, stream_);
}

void CudaBackend::linear_act_mul(const Tensor& x, const Tensor& gate_up_weight, const Tensor& scratch,
                                 const Tensor& out, Activation act) {
  if (is_block_quant(gate_up_weight)) return Backend::linear_act_mul(x, gate_up_weight, scratch, out, act);
  if (is_fp8(gate_up_weight)) {
    if (fp8_gemv_takes(x, gate_up_weight)) {
      return linear_fp8("linear_act_mul", x, gate_up_weight, nullptr, out, Fp8Out::kActMul, act);
    }
    if (fp8_block_gemm(nullptr, x, gate_up_weight, nullptr, out, DecodeGemmEpilogue::kActMul, act)) return;
    if (fp8_gemm_->fused_epilogues() &&
        fp8_fused("linear_act_mul", x, gate_up_weight, scratch, out, Fp8Epilogue::kActMul, act)) {
      return;
    }
    return Backend::linear_act_mul(x, gate_up_weight, scratch, out, act);
  }
  check_gpu(x, DType::kBF16, "linear_act_mul", "x");
  check_gpu(gate_up_weight, DType::kBF16, "linear_act_mul", "gate_up_weight");
  check_gpu(out, DType::kBF16, "linear_act_mul", "out");
  MINIVLLM_CHECK(gate_up_weight.ndim() == 2 && gate_up_weight.size(0) % 2 == 0)
      << "linear_act_mul: gate_up_weight " << gate_up_weight.describe() << " must be [2 * inter, in]";
  const int64_t inter = gate_up_weight.size(0) / 2, k = gate_up_weight.size(1);
  const int64_t tokens = rows_with_cols(x, k, "linear_act_mul", "x");
  MINIVLLM_CHECK_EQ(rows_with_cols(out, inter, "linear_act_mul", "out"), tokens)
      << "linear_act_mul: out " << out.describe() << " for x " << x.describe();
  // Where linear would take the gemv, the fused gemv: no [T, 2I] round trip, one launch fewer.
  if (use_gemv(x, gate_up_weight, tokens, 2 * inter, k)) {
    launch_gemv_act_mul(x.data(), gate_up_weight.data(), out.data(), tokens, inter, k, act, stream_);
    return;
  }
  if (use_decode_gemm(x, gate_up_weight, out, tokens, inter, k, /*gated=*/true)) {  // the same fusion for larger batches
    launch_decode_gemm(DecodeGemmArgs{x.data(), gate_up_weight.data(), nullptr, false, out.data(), false, tokens, inter,
                                      k, DecodeGemmEpilogue::kActMul, 0, act},
                       stream_);
    return;
  }
  Backend::linear_act_mul(x, gate_up_weight, scratch, out, act);
}

namespace {

RopeArgs rope_args(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim, const Tensor* q_norm,
                   const Tensor* k_norm, float eps, const Tensor& positions, const Tensor& cos_sin,
                   const char* op = "qk_norm_rope") {
  check_gpu(qkv, DType::kBF16, op, "qkv");
  check_gpu(positions, DType::kI32, op, "positions");
  check_gpu(cos_sin, DType::kF32, op, "cos_sin");
  MINIVLLM_CHECK(num_q_heads > 0 && num_kv_heads > 0 && head_dim % 8 == 0 && head_dim > 0 && head_dim <= 256)
      << op << ": heads " << num_q_heads << "/" << num_kv_heads << " head_dim " << head_dim
      << " (head_dim must be a multiple of 8, at most 256)";
  RopeArgs a{};
  a.qkv = qkv.data();
  a.tokens = rows_with_cols(qkv, static_cast<int64_t>(num_q_heads + 2 * num_kv_heads) * head_dim, op, "qkv");
  MINIVLLM_CHECK_EQ(positions.numel(), a.tokens) << op << ": positions " << positions.describe();
  a.num_q_heads = num_q_heads;
  a.num_kv_heads = num_kv_heads;
  a.head_dim = head_dim;
  if (q_norm != nullptr) {
    a.q_norm_f32 = check_weight(*q_norm, head_dim, op, "q_norm");
    a.q_norm = q_norm->data();
  }
  if (k_norm != nullptr) {
    a.k_norm_f32 = check_weight(*k_norm, head_dim, op, "k_norm");
    a.k_norm = k_norm->data();
  }
  a.eps = eps;
  a.positions = positions.ptr<int32_t>();
  // cos_sin is as wide as the rotary dims (partial_rotary_factor: the first rotary_dim of each head).
  MINIVLLM_CHECK(cos_sin.ndim() == 2 && rope_rotary_dim_supported(head_dim, static_cast<int>(cos_sin.size(1))))
      << op << ": cos_sin " << cos_sin.describe() << " must be [max_pos, rotary dims], the rotary dims even and at "
      << "most head_dim " << head_dim;
  a.rotary_dim = static_cast<int>(cos_sin.size(1));
  a.cos_sin = cos_sin.ptr<float>();
  a.max_pos = rows_with_cols(cos_sin, a.rotary_dim, op, "cos_sin");
  return a;
}

// An fp8 cache's scales: one f32 per cache row of k and of v.
void check_cache_scales(const KVCache& cache, const char* op) {
  check_gpu(cache.k_scale, DType::kF32, op, "cache.k_scale");
  check_gpu(cache.v_scale, DType::kF32, op, "cache.v_scale");
  const int64_t rows = static_cast<int64_t>(cache.num_blocks) * cache.num_kv_heads * cache.block_size;
  MINIVLLM_CHECK(cache.k_scale.numel() == rows && cache.v_scale.numel() == rows)
      << op << ": cache scales " << cache.k_scale.describe() << " / " << cache.v_scale.describe() << " for " << rows
      << " rows";
}

// Checks a cache write of `tokens` rows of qkv; returns the number of slots.
int64_t check_cache_store(const Tensor& qkv, const KVCache& cache, const AttentionMetadata& meta, int64_t tokens,
                          const char* op) {
  const bool fp8 = cache.dtype() == DType::kF8E4M3;
  check_gpu(cache.k, fp8 ? DType::kF8E4M3 : DType::kBF16, op, "cache.k");
  check_gpu(cache.v, fp8 ? DType::kF8E4M3 : DType::kBF16, op, "cache.v");
  if (fp8) check_cache_scales(cache, op);
  check_gpu(meta.slot_mapping, DType::kI32, op, "slot_mapping");
  check_aligned16(qkv, op, "qkv");
  MINIVLLM_CHECK(meta.slot_mapping.numel() >= tokens)
      << op << ": slot_mapping " << meta.slot_mapping.describe() << " for " << tokens << " tokens";
  const int64_t num_slots = static_cast<int64_t>(cache.num_blocks) * cache.block_size;
  MINIVLLM_CHECK_EQ(cache.k.numel(), num_slots * cache.num_kv_heads * cache.head_dim)
      << op << ": cache.k " << cache.k.describe();
  MINIVLLM_CHECK_EQ(cache.v.numel(), cache.k.numel()) << op << ": cache.v " << cache.v.describe();
  return num_slots;
}

}  // namespace

void CudaBackend::qk_norm_rope(const Tensor& qkv, int num_q_heads, int num_kv_heads, int head_dim,
                               const Tensor* q_norm, const Tensor* k_norm, float eps, const Tensor& positions,
                               const Tensor& cos_sin) {
  launch_qk_norm_rope(rope_args(qkv, num_q_heads, num_kv_heads, head_dim, q_norm, k_norm, eps, positions, cos_sin),
                      stream_);
}

// The cache half of RopeArgs: where rope's k and v go (nothing before the cache exists: warm-up).
void CudaBackend::rope_cache_args(RopeArgs& a, const Tensor& qkv, const KVCache& cache, const AttentionMetadata& meta,
                                  const char* op) const {
  if (!cache.k.defined() || cache.k.empty()) return;
  MINIVLLM_CHECK(cache.num_kv_heads == a.num_kv_heads && cache.head_dim == a.head_dim)
      << op << ": cache has " << cache.num_kv_heads << " kv heads of " << cache.head_dim << ", qkv "
      << a.num_kv_heads << " of " << a.head_dim;
  a.num_slots = check_cache_store(qkv, cache, meta, a.tokens, op);
  a.k_cache = cache.k.data();
  a.v_cache = cache.v.data();
  a.slot_mapping = meta.slot_mapping.ptr<int32_t>();
  a.block_size = cache.block_size;
  if (cache.dtype() == DType::kF8E4M3) {
    a.kv_fp8 = true;
    a.k_scale = cache.k_scale.data();
    a.v_scale = cache.v_scale.data();
    if (fp8_kv_rotate_) a.kv_rotate_norm = kv_rotation_norm(a.head_dim);
  }
}

void CudaBackend::qk_norm_rope_store(const Tensor& qkv, const RopeStoreEpilogue& e) {
  RopeArgs a = rope_args(qkv, e.num_q_heads, e.num_kv_heads, e.head_dim, e.q_norm, e.k_norm, e.eps, e.positions,
                         e.cos_sin);
  rope_cache_args(a, qkv, e.cache, e.meta);
  launch_qk_norm_rope(a, stream_);
}

// Where the qkv projection takes the gemv (decode at 1-2 tokens), its CTAs own rotary pairs of rows
// and rotate and store them in the epilogue: the rope kernel's launch, wait and round trip through
// qkv are gone. Only without q/k norms (a per-head norm needs the whole head: a cluster of CTAs a
// head was measured slower, docs/PERFORMANCE.md) and over a bf16 cache (an fp8 row's scale needs
// the whole row).
bool CudaBackend::gemv_rope_takes(int64_t n, const RopeStoreEpilogue& epi) const {
  const bool qk_norms = epi.q_norm != nullptr || epi.k_norm != nullptr;
  const KVCache& cache = epi.cache;
  const bool cache_bf16 = !cache.k.defined() || cache.k.empty() || cache.dtype() == DType::kBF16;
  const bool shape = gemv_rope_fits(n, epi.head_dim) &&
                     n == static_cast<int64_t>(epi.num_q_heads + 2 * epi.num_kv_heads) * epi.head_dim;
  return gemv_rope_ && !qk_norms && cache_bf16 && shape;
}

void CudaBackend::gemv_rope_store(const char* op, const GemvNorm* norm, const Tensor* x, const Tensor& weight,
                                  const Tensor* bias, const Tensor& qkv, const RopeStoreEpilogue& epi, int64_t tokens) {
  const int64_t n = weight.size(0), k = weight.size(1);
  RopeArgs a = rope_args(qkv, epi.num_q_heads, epi.num_kv_heads, epi.head_dim, nullptr, nullptr, 0.0f, epi.positions,
                         epi.cos_sin, op);
  MINIVLLM_CHECK_EQ(a.tokens, tokens) << op << ": qkv " << qkv.describe() << " for " << tokens << " tokens";
  rope_cache_args(a, qkv, epi.cache, epi.meta, op);
  bool bias_f32 = false;
  if (bias != nullptr) bias_f32 = check_weight(*bias, n, op, "bias");
  const void* b = bias == nullptr ? nullptr : bias->data();
  launch_gemv_rope(norm, x == nullptr ? nullptr : x->data(), weight.data(), b, bias_f32, a, tokens, n, k, stream_);
}

// FP8 qkv past the gemv's batches: the GEMM's bare product goes into qkv and the rope kernel makes
// each value what the store epilogue would have (RopeArgs::row_scale) as it reads it, so the
// epilogue's pass over qkv is gone (MINIVLLM_FP8_ROPE_SCALES). The prefill runs at the power cap,
// where bytes not moved are clock gained (PERFORMANCE.md, "Stop 65").
bool CudaBackend::fp8_rope_scales(const char* op, const NormPrologue& pro, const Tensor& weight, const Tensor* bias,
                                  const Tensor& qkv, const RopeStoreEpilogue& epi) {
  if (!fp8_rope_scales_ || !fp8_norm_takes(pro, weight)) return false;  // (normed codes: the fused epilogues)
  const int64_t n = weight.size(0), k = weight.size(1);
  if (n != static_cast<int64_t>(epi.num_q_heads + 2 * epi.num_kv_heads) * epi.head_dim) return false;
  RopeArgs a = rope_args(qkv, epi.num_q_heads, epi.num_kv_heads, epi.head_dim, epi.q_norm, epi.k_norm, epi.eps,
                         epi.positions, epi.cos_sin, op);
  rope_cache_args(a, qkv, epi.cache, epi.meta, op);
  const int64_t tokens = pro.residual.numel() / k;
  if (a.tokens != tokens || !qk_norm_rope_takes_scales(a)) return false;
  const bool norm_f32 = check_weight(pro.weight, k, op, "norm_weight");
  bool bias_f32 = false;
  if (bias != nullptr) bias_f32 = check_weight(*bias, n, op, "bias");
  const float* row_scales = fp8_normed_product(pro, tokens, weight, norm_f32, qkv.data());
  if (row_scales == nullptr) return false;
  const WeightScales& s = *weight.scales();
  a.row_scale = row_scales;
  a.col_scale = s.grid.ptr<float>();
  a.col_stride = s.grid.size(1);
  a.bias = bias == nullptr ? nullptr : bias->data();
  a.bias_f32 = bias_f32;
  launch_qk_norm_rope(a, stream_);
  return true;
}

void CudaBackend::rms_norm_linear_rope_store(const NormPrologue& pro, const Tensor& weight, const Tensor* bias,
                                             const Tensor& qkv, const RopeStoreEpilogue& epi) {
  constexpr const char* kOp = "rms_norm_linear_rope_store";
  if (stored_as_codes(weight)) {
    if (fp8_rope_scales(kOp, pro, weight, bias, qkv, epi)) return;
    return Backend::rms_norm_linear_rope_store(pro, weight, bias, qkv, epi);
  }
  check_gpu(weight, DType::kBF16, kOp, "weight");
  MINIVLLM_CHECK(weight.ndim() == 2) << kOp << ": weight " << weight.describe() << " must be [out, in]";
  const int64_t n = weight.size(0), k = weight.size(1);
  const Tensor& residual = pro.residual;
  const bool residual_ok = residual.defined() && residual.device() == DeviceKind::kCuda &&
                           residual.dtype() == DType::kF32 && residual.size(-1) == k;
  const int64_t tokens = residual_ok ? residual.numel() / k : 0;
  // The add before folded this norm (MINIVLLM_GEMV_NORM_FOLD): the rope gemv on its input. Where the
  // rope gemv does not take the shape (q/k norms), the fold is left for rms_norm_linear (the fallback's).
  GemvNorm folded{};
  if (residual_ok && gemv_rope_takes(n, epi) && use_gemv(residual, weight, tokens, n, k, true) &&
      take_gemv_fold(pro, tokens, &folded)) {
    gemv_rope_store(kOp, &folded, nullptr, weight, bias, qkv, epi, tokens);
    return;
  }
  const bool prologue = residual_ok && use_gemv_norm(residual, weight, n, k);
  const bool plain = residual_ok && !prologue && pro.normed.defined() && pro.normed.dtype() == DType::kBF16 &&
                     pro.normed.numel() == tokens * k && use_gemv(pro.normed, weight, tokens, n, k);
  if (!(prologue || plain) || !gemv_rope_takes(n, epi)) {
    Backend::rms_norm_linear_rope_store(pro, weight, bias, qkv, epi);
    return;
  }
  if (prologue) {
    const bool norm_f32 = check_weight(pro.weight, k, kOp, "norm_weight");
    const GemvNorm norm = gemv_norm(pro, norm_f32, tokens);
    gemv_rope_store(kOp, &norm, nullptr, weight, bias, qkv, epi, tokens);
  } else {
    rms_norm(residual, pro.weight, pro.eps, pro.normed);
    gemv_rope_store(kOp, nullptr, &pro.normed, weight, bias, qkv, epi, tokens);
  }
}

void CudaBackend::linear_rope_store(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& qkv,
                                    const RopeStoreEpilogue& epi) {
  constexpr const char* kOp = "linear_rope_store";
  if (stored_as_codes(weight)) return Backend::linear_rope_store(x, weight, bias, qkv, epi);
  check_gpu(x, DType::kBF16, kOp, "x");
  check_gpu(weight, DType::kBF16, kOp, "weight");
  MINIVLLM_CHECK(weight.ndim() == 2) << kOp << ": weight " << weight.describe() << " must be [out, in]";
  const int64_t n = weight.size(0), k = weight.size(1);
  const int64_t tokens = rows_with_cols(x, k, kOp, "x");
  if (!use_gemv(x, weight, tokens, n, k) || !gemv_rope_takes(n, epi)) {
    Backend::linear_rope_store(x, weight, bias, qkv, epi);
    return;
  }
  gemv_rope_store(kOp, nullptr, &x, weight, bias, qkv, epi, tokens);
}

void CudaBackend::store_kvcache(const Tensor& qkv, int num_q_heads, const KVCache& cache,
                                const AttentionMetadata& meta) {
  if (!cache.k.defined() || cache.k.empty()) return;  // warm-up before the cache exists
  check_gpu(qkv, DType::kBF16, "store_kvcache", "qkv");
  const int64_t stride = static_cast<int64_t>(num_q_heads + 2 * cache.num_kv_heads) * cache.head_dim;
  const int64_t tokens = rows_with_cols(qkv, stride, "store_kvcache", "qkv");
  const int64_t num_slots = check_cache_store(qkv, cache, meta, tokens, "store_kvcache");
  if (cache.dtype() == DType::kF8E4M3) {
    MINIVLLM_CHECK(attention_head_dim_supported(cache.head_dim))  // a warp quantises a row of at most 256
        << "store_kvcache: head_dim " << cache.head_dim << "; " << supported_attention_shapes();
    launch_store_kvcache_fp8(qkv.data(), tokens, num_q_heads, cache.num_kv_heads, cache.head_dim,
                             meta.slot_mapping.ptr<int32_t>(), num_slots, cache.block_size, cache.k.data(),
                             cache.v.data(), cache.k_scale.ptr<float>(), cache.v_scale.ptr<float>(),
                             fp8_kv_rotate_ ? kv_rotation_norm(cache.head_dim) : 0.0f, stream_);
    return;
  }
  launch_store_kvcache(qkv.data(), tokens, num_q_heads, cache.num_kv_heads, cache.head_dim,
                       meta.slot_mapping.ptr<int32_t>(), num_slots, cache.block_size, cache.k.data(), cache.v.data(),
                       stream_);
}

void CudaBackend::attention(const Tensor& qkv, int num_q_heads, const KVCache& cache, const AttentionMetadata& meta,
                            float scale, int window, const Tensor& out, const Tensor* sinks) {
  // The Transformer refuses a model with sinks on this backend at start-up (supports_attention_sinks).
  MINIVLLM_CHECK(sinks == nullptr) << "attention: the CUDA kernels take no attention sinks";
  check_gpu(qkv, DType::kBF16, "attention", "qkv");
  check_gpu(out, DType::kBF16, "attention", "out");
  check_aligned16(qkv, "attention", "qkv");
  check_aligned16(out, "attention", "out");
  const int nkv = cache.num_kv_heads, hd = cache.head_dim;
  MINIVLLM_CHECK(num_q_heads > 0 && attention_shape_supported(num_q_heads, nkv, hd))
      << "attention: " << describe_unsupported_attention(num_q_heads, nkv, hd);
  const int64_t tokens = rows_with_cols(qkv, static_cast<int64_t>(num_q_heads + 2 * nkv) * hd, "attention", "qkv");
  MINIVLLM_CHECK_EQ(rows_with_cols(out, static_cast<int64_t>(num_q_heads) * hd, "attention", "out"), tokens)
      << "attention: out " << out.describe() << " vs qkv " << qkv.describe();
  if (meta.num_seqs == 0) return;
  after_attention_ = true;  // the o projection's gemv may prefetch more (linear_add_residual)

  AttentionArgs a{};
  a.qkv = qkv.data();
  a.out = out.data();
  a.num_seqs = meta.num_seqs;
  a.num_q_heads = num_q_heads;
  a.num_kv_heads = nkv;
  a.head_dim = hd;
  a.scale = scale;
  a.softcap = attention_softcap_;
  MINIVLLM_CHECK_GE(window, 0) << "attention: sliding window";
  a.window = window;
  const bool paged = cache.k.defined() && !cache.k.empty() && meta.block_tables.defined() && !meta.block_tables.empty();
  if (paged) {
    const bool fp8 = cache.dtype() == DType::kF8E4M3;
    check_gpu(cache.k, fp8 ? DType::kF8E4M3 : DType::kBF16, "attention", "cache.k");
    check_gpu(cache.v, fp8 ? DType::kF8E4M3 : DType::kBF16, "attention", "cache.v");
    if (fp8) {
      check_cache_scales(cache, "attention");
      a.kv_fp8 = true;
      a.k_scale = cache.k_scale.ptr<float>();
      a.v_scale = cache.v_scale.ptr<float>();
    }
    check_gpu(meta.block_tables, DType::kI32, "attention", "block_tables");
    MINIVLLM_CHECK(meta.block_size == 0 || meta.block_size == cache.block_size)
        << "attention: meta.block_size " << meta.block_size << " vs cache " << cache.block_size;
    a.k_cache = cache.k.data();
    a.v_cache = cache.v.data();
    a.block_tables = meta.block_tables.ptr<int32_t>();
    a.table_cols = static_cast<int>(meta.block_tables.ndim() == 2 ? meta.block_tables.size(1)
                                                                   : meta.block_tables.numel() / meta.num_seqs);
    MINIVLLM_CHECK(meta.block_tables.numel() >= static_cast<int64_t>(a.table_cols) * meta.num_seqs)
        << "attention: block_tables " << meta.block_tables.describe() << " for " << meta.num_seqs << " sequences";
    a.block_size_log2 = log2_exact(cache.block_size);
    MINIVLLM_CHECK(cache.block_size > 0 && (1 << a.block_size_log2) == cache.block_size)
        << "attention: cache block_size " << cache.block_size << " is not a power of two";
    a.num_blocks = cache.num_blocks;
  }
  if (meta.is_prefill) {
    check_gpu(meta.cu_seqlens_q, DType::kI32, "attention", "cu_seqlens_q");
    check_gpu(meta.cu_seqlens_k, DType::kI32, "attention", "cu_seqlens_k");
    MINIVLLM_CHECK(meta.cu_seqlens_q.numel() > meta.num_seqs && meta.cu_seqlens_k.numel() > meta.num_seqs)
        << "attention: cu_seqlens " << meta.cu_seqlens_q.describe() << " for " << meta.num_seqs << " sequences";
    MINIVLLM_CHECK(meta.max_seqlen_q > 0 && meta.max_seqlen_q <= tokens)
        << "attention: max_seqlen_q " << meta.max_seqlen_q << " for " << tokens << " tokens";
    a.cu_seqlens_q = meta.cu_seqlens_q.ptr<int32_t>();
    a.cu_seqlens_k = meta.cu_seqlens_k.ptr<int32_t>();
    a.max_seqlen_q = meta.max_seqlen_q;
    a.num_tokens = tokens;
    launch_prefill_attention(a, stream_);
    return;
  }
  MINIVLLM_CHECK(paged) << "attention: decode needs the KV cache and block_tables";
  check_gpu(meta.context_lens, DType::kI32, "attention", "context_lens");
  MINIVLLM_CHECK(meta.context_lens.numel() >= meta.num_seqs && tokens >= meta.num_seqs)
      << "attention: context_lens " << meta.context_lens.describe() << " and qkv " << qkv.describe() << " for "
      << meta.num_seqs << " sequences";
  a.context_lens = meta.context_lens.ptr<int32_t>();
  // CTA order only: results are the same either way (decode_policy.h: decode_use_seq_order).
  if (meta.seq_order.defined() && decode_seq_order_) {
    check_gpu(meta.seq_order, DType::kI32, "attention", "seq_order");
    MINIVLLM_CHECK(meta.seq_order.numel() >= meta.num_seqs)
        << "attention: seq_order " << meta.seq_order.describe() << " for " << meta.num_seqs << " sequences";
    a.seq_order = meta.seq_order.ptr<int32_t>();
  }
  // Graph-constant capacity: the block table's columns (and max_num_blocks, when given).
  const int64_t max_blocks = std::max<int64_t>(a.table_cols, meta.max_num_blocks);
  // Groups without an exact kernel take several CTAs per kv head (decode_head_tiles): the split
  // policy counts CTAs and the q heads each one writes.
  const int group = num_q_heads / nkv;
  // Soft-capped scores (Gemma 2) take the tiled kernels, the only ones with a capped instance.
  const bool capped = a.softcap > 0.0f;
  DecodeHeadTiles tiles = decode_head_tiles(hd, group, decode_max_tile_heads_, /*exact=*/!capped);
  // Small batches take wide CTAs (decode_policy.h: decode_use_wide); groups too large for one wide
  // CTA, wide CTAs of two heads each where MINIVLLM_DECODE_WIDE_PAIRS (decode_wide_head_pairs).
  const auto wide_at = [&](const DecodeHeadTiles& t) {
    return !capped && decode_wide_ && decode_wide_fits(hd, t) &&
           (decode_wide_always_ || decode_use_wide(meta.num_seqs, nkv * t.tiles, num_sms_));
  };
  const DecodeHeadTiles pairs = decode_wide_head_pairs(hd, group);
  if (decode_wide_pairs_ > 0 && (decode_wide_always_ || meta.num_seqs <= decode_wide_pairs_) &&
      !decode_wide_fits(hd, tiles) && wide_at(pairs)) {
    tiles = pairs;
  }
  const bool wide = wide_at(tiles);
  // A sliding window's splits cover its keys and the few before them up to decode_key_origin.
  int64_t max_context = max_blocks * cache.block_size;
  if (window > 0) max_context = std::min<int64_t>(max_context, window + kDecodeKeyAlign - 1);
  // The tensor-core kernel where it fits and pays (decode_policy.h: decode_use_mma), never for the
  // wide CTAs of small batches.
  const bool mma = !wide && !capped && decode_mma_ != 0 && decode_mma_fits(hd, group, cache.block_size) &&
                   (decode_mma_ == 1 || decode_use_mma(a.kv_fp8, group));
  const DecodeScratch scratch{decode_partial_o_, decode_partial_lse_, decode_counters_};
  // The wide CTAs' small batches on the tensor cores, each split staged in shared memory before the
  // wait (decode_policy.h: kDecodeWideMmaMaxSeqs, decode_wide_mma_heads; bf16 caches of the
  // tensor-core shapes): 8-warp CTAs of a few q heads and a split, splits of at most what they stage.
  const int wide_mma_heads = decode_wide_mma_heads_ > 0 ? decode_wide_mma_heads_ : decode_wide_mma_heads(hd, group);
  if (wide && meta.num_seqs <= decode_wide_mma_ && wide_mma_heads > 0 && !a.kv_fp8 &&
      decode_mma_fits(hd, group, cache.block_size)) {
    int cap = decode_mma_staged_keys(hd);
    if (decode_max_partition_ > 0) {
      cap = std::min(cap, std::max(kDecodeMmaStagedGranule,
                                   decode_max_partition_ / kDecodeMmaStagedGranule * kDecodeMmaStagedGranule));
    }
    const int heads = decode_mma_staged_heads(group, wide_mma_heads);
    const DecodeSplit split =
        plan_wide_decode_split(meta.num_seqs, nkv * (group / heads), heads, max_context, kDecodeMmaStagedGranule,
                               num_sms_, decode_partial_rows(hd), std::min(decode_min_partition_, cap), cap);
    a.wide_wave_ctas = num_sms_;  // past a wave: CTAs of twice the heads, then splits of staged rounds
    launch_decode_attention_mma_staged(a, heads, split.num_splits, split.partition, scratch, stream_);
    return;
  }
  if (mma) {
    const DecodeSplit split = plan_decode_split(meta.num_seqs, nkv, group, max_context, kDecodeMmaGranule, num_sms_,
                                                decode_partial_rows(hd), decode_min_partition_,
                                                decode_mma_max_partition_);
    const bool ring =
        decode_mma_ring_ >= 0 ? decode_mma_ring_ == 1 : decode_mma_ring(a.kv_fp8, group, meta.num_seqs, nkv, num_sms_);
    DecodeMmaLoads loads;
    loads.tiles = decode_mma_tiles_;
    loads.pipe = decode_mma_pipe_;  // tuning only: no shape gained from it (decode_attention_mma.cu)
    a.held_splits = decode_held_splits_;
    a.one_split_keys = meta.num_seqs == 1 ? decode_one_split_keys_ : 0;
    a.prefetch_split = meta.num_seqs == 1 && decode_prefetch_split_;
    launch_decode_attention_mma(a, split.num_splits, split.partition, ring, loads, scratch, stream_);
    return;
  }
  const int wide_granule = wide ? decode_wide_granule(hd, tiles.heads_per_cta) : 0;
  int wide_max_partition = decode_max_partition_;
  // The head pairs' splits no longer than staged (decode_wide_staged_partition; the exact wide
  // kernels keep the plan's).
  if (wide && !tiles.exact && decode_wide_staged_splits_ && decode_staged_ && !a.kv_fp8) {
    const int staged = decode_wide_staged_partition(hd, wide_granule);
    if (staged > 0 && (wide_max_partition <= 0 || staged < wide_max_partition)) {
      wide_max_partition = staged;
      a.wide_wave_ctas = num_sms_;  // past a wave of staged CTAs, twice the length unstaged
    }
  }
  const DecodeSplit split =
      wide ? plan_wide_decode_split(meta.num_seqs, nkv * tiles.tiles, tiles.heads_per_cta, max_context, wide_granule,
                                    num_sms_, decode_partial_rows(hd), decode_min_partition_, wide_max_partition)
           : plan_decode_split(meta.num_seqs, nkv * tiles.tiles, tiles.heads_per_cta, max_context,
                               decode_partition_granule(hd), num_sms_, decode_partial_rows(hd), decode_min_partition_,
                               decode_max_partition_);
  DecodeVariant v;
  v.wide = wide;
  // bf16 caches of the exact kernels may take 16 key elements a lane (decode_policy.h).
  v.lane16 = !wide && !a.kv_fp8 && tiles.exact &&
             (decode_lane_elems_ == 0 ? decode_use_lane16(tiles.heads_per_cta, meta.num_seqs, nkv, num_sms_)
                                      : decode_lane_elems_ == 16);
  v.staged = decode_staged_;
  // The 4-warp CTAs may stream their keys through a ring of bulk copies (decode_policy.h).
  v.ring = !wide && decode_ring_ != 0 && decode_use_ring(a.kv_fp8, hd, tiles.heads_per_cta, tiles.exact);
  launch_decode_attention(a, tiles, split.num_splits, split.partition, v, scratch, stream_);
}

void CudaBackend::scale(const Tensor& x, float factor) {
  check_gpu(x, DType::kF32, "scale", "x");
  launch_scale_f32(x.ptr<float>(), x.numel(), factor, stream_);
}

void CudaBackend::set_attention_softcap(float cap) {
  MINIVLLM_CHECK(cap >= 0.0f && std::isfinite(cap)) << "attention soft-cap must be finite and >= 0, got " << cap;
  attention_softcap_ = cap;
}

void CudaBackend::softcap(const Tensor& x, float cap) {
  MINIVLLM_CHECK(cap > 0.0f && std::isfinite(cap)) << "softcap: the cap must be finite and > 0, got " << cap;
  check_gpu(x, DType::kF32, "softcap", "x");
  launch_softcap_f32(x.ptr<float>(), x.numel(), cap, stream_);
}

void CudaBackend::act_mul(const Tensor& gate_up, const Tensor& out, Activation act) {
  check_gpu(gate_up, DType::kBF16, "act_mul", "gate_up");
  check_gpu(out, DType::kBF16, "act_mul", "out");
  const int64_t inter = out.size(-1);
  MINIVLLM_CHECK(inter % 8 == 0) << "act_mul: out " << out.describe() << " width must be a multiple of 8";
  const int64_t tokens = rows_with_cols(gate_up, 2 * inter, "act_mul", "gate_up");
  MINIVLLM_CHECK_EQ(rows_with_cols(out, inter, "act_mul", "out"), tokens)
      << "act_mul: out " << out.describe() << " vs gate_up " << gate_up.describe();
  check_aligned16(gate_up, "act_mul", "gate_up");
  check_aligned16(out, "act_mul", "out");
  launch_act_mul(gate_up.data(), tokens, inter, act, out.data(), stream_);
}

void CudaBackend::gather_rows(const Tensor& x, const Tensor& indices, const Tensor& out) {
  check_gpu(indices, DType::kI32, "gather_rows", "indices");
  MINIVLLM_CHECK(x.device() == DeviceKind::kCuda && out.device() == DeviceKind::kCuda && x.dtype() == out.dtype())
      << "gather_rows: x " << x.describe() << " out " << out.describe();
  const int64_t rows = x.size(0);
  const int64_t n = indices.numel();
  const int64_t row_elems = rows == 0 ? 0 : x.numel() / rows;
  MINIVLLM_CHECK(out.size(0) == n && out.numel() == n * row_elems)
      << "gather_rows: out " << out.describe() << " for " << n << " rows of " << x.describe();
  launch_gather_rows(x.data(), row_elems * static_cast<int64_t>(dtype_size(x.dtype())), indices.ptr<int32_t>(), n,
                     out.data(), stream_);
}

void CudaBackend::to_f32(const Tensor& x, const Tensor& out) {
  check_gpu(out, DType::kF32, "to_f32", "out");
  MINIVLLM_CHECK(x.device() == DeviceKind::kCuda && x.numel() == out.numel())
      << "to_f32: x " << x.describe() << " out " << out.describe();
  if (x.dtype() == DType::kF32) {
    copy(out, x);
    return;
  }
  MINIVLLM_CHECK(x.dtype() == DType::kBF16) << "to_f32: x " << x.describe() << " must be bf16 or f32";
  launch_bf16_to_f32(x.data(), x.numel(), out.ptr<float>(), stream_);
}

}  // namespace minivllm::cuda
