#include "backend/cuda/fp8_gemm.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_kernels.h"
#include "backend/cuda/device_scratch.h"
#include "common/host_profile.h"
#include "common/tuning.h"

namespace minivllm::cuda {
namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;  // what cuBLAS recommends for Hopper

void set_attr(cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attr, const void* v, size_t bytes) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, attr, v, bytes));
}

// An fp32-accumulating descriptor with A transposed: both operands K-major ("TN"), as Hopper's FP8
// GEMMs require.
cublasLtMatmulDesc_t tn_desc() {
  cublasLtMatmulDesc_t op = nullptr;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  set_attr(op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a));
  set_attr(op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b));
  return op;
}

// A's and B's scale modes, with pointers: the heuristic refuses scale modes without them, so any
// valid ones go in here and the calls set their own.
void set_scales(cublasLtMatmulDesc_t op, cublasLtMatmulMatrixScale_t a_mode, cublasLtMatmulMatrixScale_t b_mode,
                const void* a, const void* b) {
  set_attr(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode));
  set_attr(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode));
  set_attr(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a, sizeof(a));
  set_attr(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b, sizeof(b));
}

}  // namespace

Fp8Weight fp8_weight_view(const Tensor& w) {
  const WeightScales& s = *w.scales();
  return Fp8Weight{static_cast<const uint8_t*>(w.data()), s.grid.ptr<float>(), s.block_rows, s.block_cols,
                   s.grid.size(1)};
}

void launch_fp8_weight_epilogue(const Tensor& w, const void* product, const float* row_scales, const void* bias,
                                bool bias_f32, Fp8Epilogue e, Activation act, void* out, int64_t tokens,
                                cudaStream_t stream) {
  const WeightScales& s = *w.scales();
  const int64_t n = w.size(0);
  launch_fp8_epilogue(product, n, row_scales, s.grid.ptr<float>(), s.grid.size(1), bias, bias_f32, e, act, out, tokens,
                      e == Fp8Epilogue::kActMul ? n / 2 : n, stream);
}

bool fp8_gemm_takes(const WeightScales& s, int64_t n, int64_t k) {
  return k % 16 == 0 && n % 16 == 0 && s.block_rows == 1 && s.block_cols >= k;
}

// Fast accumulation (cuBLASLt's FAST_ACCUM: the FP8 tensor cores' own accumulator, without
// promoting partial sums to fp32 along K) is what inference engines run FP8 GEMMs with; measured
// against the promoting kernels in PERFORMANCE.md. MINIVLLM_FP8_FAST_ACCUM=0 turns it off.
Fp8Gemm::Fp8Gemm()
    : fast_accum_(knob_flag("MINIVLLM_FP8_FAST_ACCUM")),
      fused_epilogues_(knob_flag("MINIVLLM_FP8_FUSED_EPILOGUE")),
      normed_codes_(fused_epilogues_ && knob_flag("MINIVLLM_FP8_NORMED_CODES")),
      block_tokens_(knob_number("MINIVLLM_FP8_BLOCK_CUBLAS")) {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
}

Fp8Gemm::~Fp8Gemm() {
  // No throwing from a destructor: errors at teardown are ignored.
  for (auto& [key, p] : plans_) destroy_plan(&p);
  for (auto& [key, p] : block_plans_) destroy_plan(&p);
  for (void* p : {workspace_, x_codes_, x_scales_, w_bf16_, tail_out_}) {
    if (p != nullptr) cudaFree(p);
  }
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

void Fp8Gemm::destroy_plan(Plan* p) {
  if (p->op == nullptr) return;
  cublasLtMatrixLayoutDestroy(p->a);
  cublasLtMatrixLayoutDestroy(p->b);
  cublasLtMatrixLayoutDestroy(p->c);
  cublasLtMatmulDescDestroy(p->op);
  *p = Plan{};
}

bool Fp8Gemm::choose_algo(Plan* p) {
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspaceBytes,
                                                    sizeof(kWorkspaceBytes)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  HostScope search("gemm.heuristic");
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p->op, p->a, p->b, p->c, p->c, pref, 1, &result,
                                                           &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    destroy_plan(p);
    return false;
  }
  p->algo = result.algo;
  return true;
}

// Column-major view, as LtGemm's: C[N, T] = op(A = W as [K, N])^T * B (x as [K, T]), on the codes
// alone: the epilogue applies the scales.
Fp8Gemm::Plan* Fp8Gemm::plan_for(const Key& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.op == nullptr ? nullptr : &it->second;
  const auto [tokens, n, k, out_f32] = key;
  Plan p;
  p.op = tn_desc();
  const int8_t fast = fast_accum_ ? 1 : 0;
  set_attr(p.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, k, n, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, k, tokens, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, out_f32 ? CUDA_R_32F : CUDA_R_16BF, n, tokens, n));
  if (!choose_algo(&p)) {  // remembered as a null plan: the caller falls back
    plans_.emplace(key, Plan{});
    return nullptr;
  }
  return &plans_.emplace(key, p).first->second;
}

bool Fp8Gemm::run(const Tensor& x, const Tensor& w, const void* bias, bool bias_f32, void* out, bool out_f32,
                  cudaStream_t stream) {
  const WeightScales& s = *w.scales();
  const int64_t n = w.size(0), k = w.size(1), tokens = x.numel() / k;
  if (tokens == 0 || n == 0) return true;
  if (!fp8_gemm_takes(s, n, k)) return false;
  Plan* p = plan_for(Key{tokens, n, k, out_f32});
  if (p == nullptr) return false;
  const float* scales = multiply(x, w, p, out, stream);
  if (fused_epilogues_ && !out_f32) {
    launch_fp8_weight_epilogue(w, out, scales, bias, bias_f32, Fp8Epilogue::kStore, Activation::kSilu, out, tokens,
                               stream);
  } else {
    launch_scale_outer(out, out_f32, tokens, n, scales, s.grid.ptr<float>(), s.grid.size(1), bias, bias_f32, stream);
  }
  return true;
}

Fp8Gemm::Plan* Fp8Gemm::plan_unscaled(const Tensor& w, int64_t tokens) {
  const int64_t n = w.size(0), k = w.size(1);
  if (tokens == 0 || n == 0 || !fp8_gemm_takes(*w.scales(), n, k)) return nullptr;
  return plan_for(Key{tokens, n, k, false});
}

const float* Fp8Gemm::run_unscaled(const Tensor& x, const Tensor& w, void* out, cudaStream_t stream) {
  Plan* p = plan_unscaled(w, x.numel() / w.size(1));
  return p == nullptr ? nullptr : multiply(x, w, p, out, stream);
}

const float* Fp8Gemm::run_unscaled_normed(const float* residual, const void* norm, bool norm_f32, float eps,
                                          int64_t tokens, const Tensor& w, void* out, cudaStream_t stream) {
  const int64_t k = w.size(1);
  Plan* p = k > kE4m3RowMaxCols ? nullptr : plan_unscaled(w, tokens);
  if (p == nullptr) return nullptr;
  grow_activations(tokens, k, stream);
  const bool made = launch_rms_norm_e4m3_rows(residual, norm, norm_f32, eps, tokens, k, static_cast<uint8_t*>(x_codes_),
                                              static_cast<float*>(x_scales_), stream);
  MINIVLLM_CHECK(made) << "FP8 linear: the normed row quantizer declined K = " << k;
  multiply_codes(w, p, out, stream);
  return static_cast<const float*>(x_scales_);
}

std::pair<uint8_t*, float*> Fp8Gemm::activation_codes(int64_t tokens, int64_t k, cudaStream_t stream) {
  grow_activations(tokens, k, stream);
  return {static_cast<uint8_t*>(x_codes_), static_cast<float*>(x_scales_)};
}

const float* Fp8Gemm::run_unscaled_staged(int64_t tokens, const Tensor& w, void* out, cudaStream_t stream) {
  Plan* p = plan_unscaled(w, tokens);
  if (p == nullptr) return nullptr;
  grow_activations(tokens, w.size(1), stream);  // (already that size: the staging grew it)
  multiply_codes(w, p, out, stream);
  return static_cast<const float*>(x_scales_);
}

void Fp8Gemm::grow_activations(int64_t tokens, int64_t k, cudaStream_t stream) {
  grow_device_scratch(&workspace_, &workspace_bytes_, kWorkspaceBytes, stream, "FP8 linear",
                      "cuBLASLt workspace");
  grow_device_scratch(&x_codes_, &x_codes_bytes_, static_cast<size_t>(tokens * k), stream, "FP8 linear",
                      "activation codes");
  grow_device_scratch(&x_scales_, &x_scales_bytes_, static_cast<size_t>(tokens) * sizeof(float), stream, "FP8 linear",
                      "activation scales");
}

const float* Fp8Gemm::multiply(const Tensor& x, const Tensor& w, Plan* p, void* out, cudaStream_t stream) {
  const int64_t k = w.size(1), tokens = x.numel() / k;
  grow_activations(tokens, k, stream);
  auto* codes = static_cast<uint8_t*>(x_codes_);
  auto* scales = static_cast<float*>(x_scales_);
  if (!fused_epilogues_ || !launch_quantize_e4m3_rows(x.data(), tokens, k, codes, scales, stream)) {
    launch_quantize_e4m3_groups(x.data(), false, tokens, k, k, 0, k, codes, scales, stream);
  }
  multiply_codes(w, p, out, stream);
  return scales;
}

void Fp8Gemm::multiply_codes(const Tensor& w, Plan* p, void* out, cudaStream_t stream) {
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p->op, &alpha, w.data(), p->a, x_codes_, p->b, &beta, out, p->c, out, p->c,
                              &p->algo, workspace_, kWorkspaceBytes, stream));
}

// Row-ordered view, x as A: D[T, N] (row order) = op(A = x's codes as [K, T])^T * B (W as [K, N]),
// A's scales VEC128 ([K / 128][T]), B's BLK128x128 (W's grid, [N / 128][K / 128]). cuBLASLt 13.1
// takes this pair on sm_90 (and W as A with BLK128x128 x VEC128, measured slower:
// tools/gpu_probes/cublaslt_block_scales.cu, PERFORMANCE.md "Stop 85").
Fp8Gemm::Plan* Fp8Gemm::plan_blocks(const BlockKey& key, const void* a_scales, const void* b_scales) {
  auto it = block_plans_.find(key);
  if (it != block_plans_.end()) return it->second.op == nullptr ? nullptr : &it->second;
  const auto [tokens, n, k, out_f32] = key;
  Plan p;
  p.op = tn_desc();
  set_scales(p.op, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, a_scales,
             b_scales);
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, k, tokens, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, k, n, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, out_f32 ? CUDA_R_32F : CUDA_R_16BF, tokens, n, n));
  const cublasLtOrder_t row = CUBLASLT_ORDER_ROW;
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(p.c, CUBLASLT_MATRIX_LAYOUT_ORDER, &row, sizeof(row)));
  if (!choose_algo(&p)) {  // remembered as a null plan: the caller falls back
    block_plans_.emplace(key, Plan{});
    return nullptr;
  }
  return &block_plans_.emplace(key, p).first->second;
}

// cuBLASLt takes these GEMMs for token counts of 8s (4s at least; odd counts find no algorithm:
// tools/gpu_probes/cublaslt_block_scales.cu). The tokens past the last multiple run as one more GEMM
// of this many rows, zero-padded (codes and scales 0), through tail_out_.
constexpr int64_t kBlockTailRows = 8;

bool Fp8Gemm::takes_blocks(const Tensor& w) const {
  if (block_tokens_ <= 0 || w.scales() == nullptr || w.ndim() != 2) return false;
  const WeightScales& s = *w.scales();
  const int64_t n = w.size(0), k = w.size(1);
  // cuBLASLt reads W's grid with rows of a multiple of 4 scales (16 bytes): K of 512s only (the grid
  // is kept unpadded; tools/gpu_probes/cublaslt_block_scales.cu).
  return k > 0 && s.block_rows == 128 && s.block_cols == 128 && k % 512 == 0 && n % 16 == 0 &&
         s.grid.size(1) == k / 128;
}

bool Fp8Gemm::run_blocks(const Tensor& x, const Tensor& w, void* out, bool out_f32, bool accumulate,
                         cudaStream_t stream) {
  if (!takes_blocks(w)) return false;
  const WeightScales& s = *w.scales();
  const int64_t n = w.size(0), k = w.size(1);
  if (x.numel() % k != 0) return false;
  const int64_t tokens = x.numel() / k;
  if (tokens < block_tokens_ || (accumulate && !out_f32) || x.dtype() != DType::kBF16 ||
      reinterpret_cast<uintptr_t>(x.data()) % 16 != 0) {
    return false;
  }
  const int64_t main = tokens / kBlockTailRows * kBlockTailRows, tail = tokens - main, kb = k / 128;
  const size_t out_elem = out_f32 ? 4 : 2;
  // Every scratch at its full size on every call, tail or not, so that a captured step never grows one.
  grow_activations(main + kBlockTailRows, k, stream);
  grow_device_scratch(&x_scales_, &x_scales_bytes_, static_cast<size_t>((main + kBlockTailRows) * kb) * sizeof(float),
                      stream, "FP8 linear", "activation scales");
  grow_device_scratch(&tail_out_, &tail_out_bytes_, static_cast<size_t>(kBlockTailRows * n) * 4, stream, "FP8 linear",
                      "block GEMM tail");
  Plan* pm = main > 0 ? plan_blocks(BlockKey{main, n, k, out_f32}, x_scales_, s.grid.data()) : nullptr;
  Plan* pt = tail > 0 ? plan_blocks(BlockKey{kBlockTailRows, n, k, out_f32}, x_scales_, s.grid.data()) : nullptr;
  if ((main > 0 && pm == nullptr) || (tail > 0 && pt == nullptr)) return false;
  auto* codes = static_cast<uint8_t*>(x_codes_);
  auto* scales = static_cast<float*>(x_scales_);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  auto gemm = [&](Plan* p, const uint8_t* a, const float* a_scales, void* d) {
    const void* sa = a_scales;
    const void* sb = s.grid.data();
    set_attr(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa));
    set_attr(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb));
    CUBLAS_CHECK(cublasLtMatmul(handle_, p->op, &alpha, a, p->a, w.data(), p->b, &beta, d, p->c, d, p->c, &p->algo,
                                workspace_, kWorkspaceBytes, stream));
  };
  if (main > 0) {
    launch_quantize_e4m3_vec128(x.data(), main, k, codes, scales, main, stream);
    gemm(pm, codes, scales, out);
  }
  if (tail > 0) {
    uint8_t* tail_codes = codes + main * k;
    float* tail_scales = scales + main * kb;
    CUDA_CHECK(cudaMemsetAsync(tail_codes, 0, static_cast<size_t>(kBlockTailRows * k), stream));
    CUDA_CHECK(cudaMemsetAsync(tail_scales, 0, static_cast<size_t>(kBlockTailRows * kb) * sizeof(float), stream));
    launch_quantize_e4m3_vec128(static_cast<const char*>(x.data()) + static_cast<size_t>(main * k) * 2, tail, k,
                                tail_codes, tail_scales, kBlockTailRows, stream);
    char* out_tail = static_cast<char*>(out) + static_cast<size_t>(main * n) * out_elem;
    const size_t tail_bytes = static_cast<size_t>(tail * n) * out_elem;
    if (accumulate) {  // the residual's rows in, beta = 1 adds to them, the sums back out (pad rows: unread)
      CUDA_CHECK(cudaMemcpyAsync(tail_out_, out_tail, tail_bytes, cudaMemcpyDeviceToDevice, stream));
    }
    gemm(pt, tail_codes, tail_scales, tail_out_);
    CUDA_CHECK(cudaMemcpyAsync(out_tail, tail_out_, tail_bytes, cudaMemcpyDeviceToDevice, stream));
  }
  return true;
}

const void* Fp8Gemm::dequantized(const Tensor& w, cudaStream_t stream) {
  if (w.scales() && w.scales()->decoded.defined()) return w.scales()->decoded.data();  // kept at load
  const int64_t n = w.size(0), k = w.size(1);
  grow_device_scratch(&w_bf16_, &w_bf16_bytes_, static_cast<size_t>(n * k) * 2, stream, "FP8 linear", "decoded weight");
  launch_dequantize_fp8(fp8_weight_view(w), n, k, w_bf16_, stream);
  return w_bf16_;
}

}  // namespace minivllm::cuda
