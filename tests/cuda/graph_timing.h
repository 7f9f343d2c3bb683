// Timing of the linear benches: a bf16 weight in enough copies that L2 cannot serve them, and the
// median over graph replays of a captured body on a raw stream.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace minivllm::cuda_test {

// n x k bf16 weights in copies() copies of >= 256 MB together (L2 is 50 MB), each 256-byte
// aligned, filled with bf16 ~0.0115 (finite sums).
class RotatedWeights {
 public:
  RotatedWeights(int64_t n, int64_t k)
      : bytes_(static_cast<size_t>(n * k) * 2),
        stride_((bytes_ + 255) / 256 * 256),
        copies_(static_cast<int>(std::max<size_t>(2, ((size_t{256} << 20) + bytes_ - 1) / bytes_))) {
    CUDA_CHECK(cudaMalloc(&base_, stride_ * copies_));
    CUDA_CHECK(cudaMemset(base_, 0x3C, stride_ * copies_));
  }
  ~RotatedWeights() { cudaFree(base_); }
  RotatedWeights(const RotatedWeights&) = delete;
  RotatedWeights& operator=(const RotatedWeights&) = delete;

  size_t bytes() const { return bytes_; }
  int copies() const { return copies_; }
  // Call c's copy: consecutive calls stream different copies.
  const void* at(int c) const { return base_ + stride_ * static_cast<size_t>(c % copies_); }

 private:
  size_t bytes_, stride_;
  int copies_;
  char* base_ = nullptr;
};

// The median over `reps` replays of a graph of `body`, per call of its `calls`. One warm-up call
// first, outside the capture, so that cuBLASLt plans its algorithm there.
inline double graph_median_us_per_call(cudaStream_t s, int calls, const std::function<void()>& body, int reps = 9) {
  body();
  CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  body();
  CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t t0, t1;
  CUDA_CHECK(cudaEventCreate(&t0));
  CUDA_CHECK(cudaEventCreate(&t1));
  CUDA_CHECK(cudaGraphLaunch(exec, s));
  std::vector<float> ms;
  for (int rep = 0; rep < reps; ++rep) {
    CUDA_CHECK(cudaEventRecord(t0, s));
    CUDA_CHECK(cudaGraphLaunch(exec, s));
    CUDA_CHECK(cudaEventRecord(t1, s));
    CUDA_CHECK(cudaEventSynchronize(t1));
    float m = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&m, t0, t1));
    ms.push_back(m);
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e3 / calls;
}

}  // namespace minivllm::cuda_test
