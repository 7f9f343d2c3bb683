// Timing of a captured body on a raw stream (the linear benches): the median over `reps` graph
// replays, per call of the body's `calls`. One warm-up call first, outside the capture, so that
// cuBLASLt plans its algorithm there.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "backend/cuda/cuda_check.h"

namespace minivllm::cuda_test {

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
