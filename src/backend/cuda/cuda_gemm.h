// LtGemm: bf16 linear layers through cuBLASLt (fp32 compute), y[T, N] = x[T, K] w[N, K]^T (+ b),
// y bf16 or fp32 (the logits).
// No workspace by default (MINIVLLM_LT_WORKSPACE=1: one preallocated 32 MB); the matmul
// descriptor, layouts and the heuristic's algorithm are cached per shape, so a decode step costs no
// heuristic query and can be captured in a graph.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

namespace minivllm::cuda {

class LtGemm {
 public:
  LtGemm();
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // bias: bf16[N] fused as the epilogue, or nullptr. out_f32: out is fp32, else bf16.
  // accumulate: out += x w^T (beta = 1, out read and written in place), e.g. the fp32 residual.
  void run(const void* x, const void* w, const void* bias, void* out, bool out_f32, int64_t tokens, int64_t n,
           int64_t k, cudaStream_t stream, bool accumulate = false);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool>;  // T, N, K, bias, 256-byte aligned, f32 out
  Plan& plan_for(const Key& key);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, Plan> plans_;
};

}  // namespace minivllm::cuda
