#include "backend/cuda/cuda_gemm.h"

#include "backend/cuda/cuda_check.h"
#include "common/tuning.h"
#include "common/host_profile.h"

namespace minivllm::cuda {

namespace {
constexpr size_t kWorkspaceBytes = 32u << 20;  // what cuBLAS itself recommends for Hopper
}

LtGemm::LtGemm() {
  CUBLAS_CHECK(cublasLtCreate(&handle_));
  // The heuristic is offered no workspace by default: its split-K and cooperative kernels then drop
  // out, and with them the memset each one needs before it (a graph node that also ends the
  // programmatic overlap with the kernel before). Faster on the Llama-3.2-1B workload, Qwen3-0.6B
  // unchanged (measured: PERFORMANCE.md, "H100: the seeds' throughput workload", the 2026-11-26 row
  // "cuBLASLt offered no workspace"). MINIVLLM_LT_WORKSPACE=1 offers the 32 MB again.
  workspace_bytes_ = knob_flag("MINIVLLM_LT_WORKSPACE") ? kWorkspaceBytes : 0;
  if (workspace_bytes_ > 0) CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

LtGemm::~LtGemm() {
  // No throwing from a destructor: errors at teardown are ignored.
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

// Column-major view: C[N, T] = W^T-op(A = w as [K, N]) * B (x as [K, T]); C is out as [N, T].
LtGemm::Plan& LtGemm::plan_for(const Key& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  const auto [tokens, n, k, has_bias, aligned, out_f32] = key;
  Plan p;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  if (has_bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bias_type = CUDA_R_16BF;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type)));
  }
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, n, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, k, tokens, k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, out_f32 ? CUDA_R_32F : CUDA_R_16BF, n, tokens, n));

  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                                    sizeof(workspace_bytes_)));
  if (!aligned) {  // views at odd row offsets: ask for algorithms that need only 16 bytes
    const uint32_t align = 16;
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
    }
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  // A plan per token count: every new prefill length searches again (host time, profiled).
  HostScope search("gemm.heuristic");
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  MINIVLLM_CHECK(st == CUBLAS_STATUS_SUCCESS && found > 0)
      << "linear: cuBLASLt has no algorithm for x[" << tokens << ", " << k << "] w[" << n << ", " << k
      << "]" << (out_f32 ? " f32 out" : "") << " (status " << static_cast<int>(st) << ")";
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void LtGemm::run(const void* x, const void* w, const void* bias, void* out, bool out_f32, int64_t tokens, int64_t n,
                 int64_t k, cudaStream_t stream, bool accumulate) {
  if (tokens == 0 || n == 0) return;
  auto a256 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 256 == 0; };
  const bool aligned = a256(x) && a256(w) && a256(out) && (bias == nullptr || a256(bias));
  Plan& p = plan_for(Key{tokens, n, k, bias != nullptr, aligned, out_f32});
  if (bias != nullptr) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, out, p.c, out, p.c, &p.algo, workspace_,
                              workspace_bytes_, stream));
}

}  // namespace minivllm::cuda
