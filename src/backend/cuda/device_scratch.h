// Device scratch that grows on demand: a stream-ordered buffer reused by every call of one kind
// (FP8 activations, a decoded weight). It may grow only outside a graph capture, so a captured
// step finds it already as large as eager warm-up made it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "backend/cuda/cuda_check.h"
#include "common/check.h"

namespace minivllm::cuda {

// Grows *buf (of *have bytes) to at least `bytes`: waits for `stream` (the old buffer may still be
// read), frees it and allocates anew. Throws naming `op` and `what` inside a graph capture.
inline void grow_device_scratch(void** buf, size_t* have, size_t bytes, cudaStream_t stream, const char* op,
                                const char* what) {
  if (bytes <= *have) return;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  MINIVLLM_CHECK(capturing == cudaStreamCaptureStatusNone)
      << op << ": the " << what << " scratch must grow to " << bytes
      << " bytes inside a graph capture (a larger batch must run eagerly first)";
  CUDA_CHECK(cudaStreamSynchronize(stream));
  if (*buf != nullptr) CUDA_CHECK(cudaFree(*buf));
  *buf = nullptr;
  *have = 0;
  CUDA_CHECK(cudaMalloc(buf, bytes));
  *have = bytes;
}

}  // namespace minivllm::cuda
