// CUDA_CHECK / CUBLAS_CHECK / CUDA_CHECK_LAUNCH: every CUDA and cuBLAS call goes through one of
// them, so a failure throws minivllm::Error naming the file, line, expression and CUDA's reason.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <sstream>

#include "common/check.h"

namespace minivllm::cuda {

[[noreturn]] inline void throw_cuda_error(const char* file, int line, const char* expr, cudaError_t err) {
  std::ostringstream s;
  s << file << ":" << line << ": CUDA error in " << expr << ": " << cudaGetErrorName(err) << " ("
    << cudaGetErrorString(err) << ")";
  throw Error(s.str());
}

[[noreturn]] inline void throw_cublas_error(const char* file, int line, const char* expr, cublasStatus_t st) {
  std::ostringstream s;
  s << file << ":" << line << ": cuBLAS error in " << expr << ": status " << static_cast<int>(st);
  throw Error(s.str());
}

}  // namespace minivllm::cuda

#define CUDA_CHECK(expr)                                                           \
  do {                                                                             \
    const cudaError_t minivllm_cuda_err_ = (expr);                                 \
    if (minivllm_cuda_err_ != cudaSuccess)                                         \
      ::minivllm::cuda::throw_cuda_error(__FILE__, __LINE__, #expr, minivllm_cuda_err_); \
  } while (0)

#define CUBLAS_CHECK(expr)                                                            \
  do {                                                                                \
    const cublasStatus_t minivllm_cublas_st_ = (expr);                                \
    if (minivllm_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                 \
      ::minivllm::cuda::throw_cublas_error(__FILE__, __LINE__, #expr, minivllm_cublas_st_); \
  } while (0)

// After every kernel launch: a bad configuration shows up here, not at the next sync.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
